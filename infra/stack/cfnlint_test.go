package stack

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// lintRegions runs cfn-lint over the template for every region it knows and
// returns its findings per region (ID and message), skipping the test when
// cfn-lint is absent.
func lintRegions(t *testing.T, f fixture) map[string][]string {
	t.Helper()
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Skip("cfn-lint is not installed (pip install cfn-lint): the template is not checked per region")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: cfn-lint's region list cannot be read")
	}
	out, err := exec.Command(py, "-c", "import cfnlint.helpers as h; print(' '.join(h.REGIONS))").Output()
	if err != nil {
		t.Fatalf("cfn-lint's regions: %v", err)
	}
	regions := strings.Fields(string(out))
	if len(regions) < 30 {
		t.Fatalf("cfn-lint knows %d regions: %v", len(regions), regions)
	}
	tpl := filepath.Join(t.TempDir(), "template.json")
	data, _ := json.Marshal(f.json)
	if err := os.WriteFile(tpl, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// W3005 (a DependsOn that a GetAtt already implies) is how the CDK
	// writes a function's dependency on its role's policy: not a region's.
	args := append([]string{"--format", "parseable", "--ignore-checks", "W3005", "--regions"}, regions...)
	cmd := exec.Command(bin, append(args, "--", tpl)...)
	res, err := cmd.Output()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatalf("cfn-lint: %v", err)
	}
	found := map[string][]string{}
	// parseable: file:line:col:line:col:RULE:message; the region is named in
	// the message of a per-region finding.
	inRegion := regexp.MustCompile(`'([a-z]{2}(-[a-z]+)+-\d)'`)
	for _, line := range strings.Split(strings.TrimSpace(string(res)), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 7)
		if len(parts) < 7 {
			t.Fatalf("cfn-lint: unexpected line %q", line)
		}
		region := "all"
		if m := inRegion.FindStringSubmatch(parts[6]); m != nil {
			region = m[1]
		}
		found[region] = append(found[region], parts[5]+" "+parts[6])
	}
	return found
}

// cfn-lint finds nothing in the template in any region but the missing
// function URL, and exactly in NoFunctionURLRegions (which this keeps true
// to cfn-lint's region data); with -c trigger=false it finds nothing at all.
func TestCfnLintRegions(t *testing.T) {
	found := lintRegions(t, synth(t, options(t, map[string]string{}), false))
	var noURL []string
	for region, msgs := range found {
		for _, m := range msgs {
			if !strings.Contains(m, "AWS::Lambda::Url") {
				t.Errorf("cfn-lint, %s: %s", region, m)
			}
		}
		noURL = append(noURL, region)
	}
	sort.Strings(noURL)
	want := slices.Sorted(slices.Values(NoFunctionURLRegions))
	if !slices.Equal(noURL, want) {
		t.Errorf("cfn-lint finds no AWS::Lambda::Url in %v; NoFunctionURLRegions is %v", noURL, want)
	}

	for region, msgs := range lintRegions(t, synth(t, options(t, map[string]string{CtxTrigger: "false"}), false)) {
		for _, m := range msgs {
			t.Errorf("cfn-lint with %s=false, %s: %s", CtxTrigger, region, m)
		}
	}
}
