package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestHelpOfEveryCommand: every command's --help exits 0, shows examples
// that parse as written, and reads as written: no back-quotes (cobra turns a back-quoted word in a flag's usage
// into the value's name), and no flag with two defaults (its own wording
// and cobra's "(default ...)").
func TestHelpOfEveryCommand(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("nodetide %s --%s: usage %q has a back-quote (help would show the quoted word as the value's name)", strings.Join(path, " "), f.Name, f.Usage)
			}
		})
		// Examples show a command at work; each one parses as written.
		var examples []string
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("nodetide %s: no examples in its help (cobra's Example)", strings.Join(path, " "))
		} else {
			examples = strings.Split(c.Example, "\n")
		}
		for _, l := range examples {
			m := nodetideLine.FindStringSubmatch(strings.TrimSpace(l))
			if m == nil {
				t.Errorf("nodetide %s: example %q does not run nodetide", strings.Join(path, " "), l)
			} else if err := checkCommandLine(m[1]); err != nil {
				t.Errorf("nodetide %s: example %q: %v", strings.Join(path, " "), l, err)
			}
		}
		for _, s := range []string{c.Short, c.Long} {
			if strings.Contains(s, "`") {
				t.Errorf("nodetide %s: description %q has a back-quote", strings.Join(path, " "), s)
			}
		}
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newRoot(io.Discard, io.Discard), nil)
	if len(paths) < 15 {
		t.Fatalf("only %d commands found", len(paths))
	}
	if !slices.ContainsFunc(paths, func(p []string) bool { return slices.Equal(p, []string{"version"}) }) {
		t.Error("nodetide version is not in the command tree")
	}
	for _, p := range paths {
		name := strings.Join(append([]string{"nodetide"}, p...), " ")
		out, errOut, code := nodetide(t, append(p, "--help")...)
		if code != 0 || errOut != "" {
			t.Errorf("%s --help: exit %d, stderr %q", name, code, errOut)
			continue
		}
		if strings.Contains(out, "`") {
			t.Errorf("%s --help shows a back-quote:\n%s", name, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Count(line, "default") > 1 {
				t.Errorf("%s --help: two defaults in %q", name, line)
			}
		}
	}
}

// TestExitCodes: what a user types by mistake exits non-zero naming the
// mistake; help and valid offline commands exit 0.
func TestExitCodes(t *testing.T) {
	good := writeFile(t, "good.yaml", "cluster: {name: c}\nstate: {memory: {}}\nnodeGroups: [{name: g, provider: kwok, minSize: 1, maxSize: 2, kwok: {template: {allocatable: {cpu: 2, memory: 1Gi}}}}]\n")
	sched := writeFile(t, "night.json", `{"name": "night", "cron": "0 20 * * 1-5", "nodeGroups": [{"name": "g", "max": 1}]}`)
	for _, tc := range []struct {
		args []string
		code int
		want string // in stderr when the code is not 0, in stdout otherwise
	}{
		{[]string{"--help"}, 0, "Available Commands"},
		{[]string{"version"}, 0, "Version:"},
		{[]string{"--version"}, 0, "nodetide devel"},
		{[]string{"help", "config"}, 0, "validate"},
		{[]string{"config"}, 0, "validate"},
		{[]string{"schedules"}, 0, "validate"},
		{[]string{"config", "validate", "--config", good}, 0, "kwok"},
		{[]string{"schedules", "validate", sched}, 0, "1 schedule(s), valid"},
		{[]string{"schedules", "next", sched, "--from", "2027-03-27T00:00:00Z", "--count", "1"}, 0, "2027-03-29T20:00:00Z"},
		{[]string{"config", "valdate"}, 1, `unknown command "valdate" for "nodetide config"`},
		{[]string{"schedules", "lsit"}, 1, `unknown command "lsit" for "nodetide schedules"`},
		{[]string{"schedules", "lsit", "--config", good}, 1, `unknown command "lsit"`},
		{[]string{"nodez"}, 1, `unknown command "nodez" for "nodetide"`},
		{[]string{"nodes", "extra", "--config", good}, 1, `nodetide nodes takes no arguments, got "extra"`},
		{[]string{"schedules", "list", "a", "b", "--config", good}, 1, `nodetide schedules list takes no arguments, got "a" "b"`},
		{[]string{"config", "validate", "--confg", good}, 1, "unknown flag: --confg"},
		{[]string{"config", "validate", "--config", "/nonexistent/nodetide.yaml"}, 1, "/nonexistent/nodetide.yaml"},
		{[]string{"config", "validate", "--config", good, "-o", "xml"}, 1, `--output "xml"`},
		{[]string{"schedules", "validate", "/nonexistent/daytime.json"}, 1, "/nonexistent/daytime.json"},
		{[]string{"schedules", "next", sched, "--count", "0"}, 1, "--count"},
		{[]string{"run", "--interval", "500ms", "--config", good}, 1, "--interval 500ms: must be at least 1s"},
	} {
		out, errOut, code := nodetide(t, tc.args...)
		where := errOut
		if tc.code == 0 {
			where = out
		}
		if code != tc.code || !strings.Contains(where, tc.want) {
			t.Errorf("nodetide %s: exit %d, stdout %q, stderr %q; want exit %d mentioning %q",
				strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.want)
		}
	}
}

// TestConfigErrorsThroughTheCLI: config validate prints every problem of a
// bad config, each with file, line and path, and exits non-zero.
func TestConfigErrorsThroughTheCLI(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"bad durations", "cluster: {name: c}\nstate: {memory: {}}\nscaleUp: {pendingPodMinAge: 10sec}\ndrain: {timeout: 1x}\n",
			[]string{`nodetide.yaml:3: scaleUp.pendingPodMinAge: invalid duration "10sec"`, `nodetide.yaml:4: drain.timeout: invalid duration "1x"`}},
		{"typos", "cluster: {name: c}\nstate: {memory: {}}\nscaleDown: {unneededTme: 5m}\ndrian: {}\n",
			[]string{"nodetide.yaml:3: scaleDown.unneededTme: unknown field", "nodetide.yaml:4: drian: unknown field"}},
		{"several at once", "cluster: {}\nstate: {memory: {}}\nnodeGroups:\n  - {name: g, provider: kwok, minSize: 3, maxSize: 2, kwok: {template: {allocatable: {cpu: 2, memory: 1Gi}}}}\nscaleUp: {backof: 5m}\nscaleDown: {utilizationThreshold: 0}\n",
			[]string{"nodetide.yaml:1: cluster.name: is required", "nodetide.yaml:4: nodeGroups[0]: minSize 3 is greater than maxSize 2",
				"nodetide.yaml:5: scaleUp.backof: unknown field", "nodetide.yaml:6: scaleDown.utilizationThreshold: must be in (0, 1]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, "nodetide.yaml", tc.doc)
			out, errOut, code := nodetide(t, "config", "validate", "--config", cfg)
			if code == 0 {
				t.Fatalf("exit 0 for a bad config: %s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, errOut)
				}
			}
		})
	}
}
