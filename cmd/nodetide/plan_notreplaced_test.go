package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/planner"
)

// TestPlanSaysWhyNotReplaced: the worked example of replace consolidation
// asking a saving of 80%, which its 75% falls short of: the table and the
// JSON say so, with the option found and its money.
func TestPlanSaysWhyNotReplaced(t *testing.T) {
	cfg, err := os.ReadFile("../../examples/consolidation/nodetide.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const was = "replaceMinSaving: 0.3"
	if !strings.Contains(string(cfg), was) {
		t.Fatalf("the example config no longer sets %q", was)
	}
	path := filepath.Join(t.TempDir(), "nodetide.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(cfg), was, "replaceMinSaving: 0.8", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"plan", "--snapshot", "../../examples/consolidation/snapshot.json", "--config", path}
	out, errOut, code := nodetide(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"NOT REPLACED  NODES                                    BY GROUP  CODE            REASON\n",
		"large         ip-10-0-1-17.eu-west-1.compute.internal  small     SavingTooSmall  1 node ($0.428/h) by 1 new node of group small ($0.107/h) saves $0.321/h (75%), under scaleDown.replaceMinSaving 80%\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "REPLACE  ") {
		t.Errorf("a replacement was started:\n%s", out)
	}

	out, errOut, code = nodetide(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var p planner.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	want := planner.ReplaceOption{NewNodes: 1, Before: 0.428, After: 0.107, Saving: 0.321, Currency: "USD"}
	if len(p.ReplaceNotTaken) != 1 || p.ReplaceNotTaken[0].Code != planner.NotReplacedSavingTooSmall ||
		p.ReplaceNotTaken[0].Option == nil || *p.ReplaceNotTaken[0].Option != want {
		t.Errorf("replaceNotTaken %+v, want one SavingTooSmall with %+v", p.ReplaceNotTaken, want)
	}
}

// TestReplaceNotTakenTableCapped: past the plan's bound, the table says
// how many more reasons there were.
func TestReplaceNotTakenTableCapped(t *testing.T) {
	p := planner.Plan{ReplaceNotTaken: []planner.ReplaceNotTaken{
		{NodeGroup: "big", Nodes: []string{"big-0", "big-1", "big-2"}, With: "small", Code: planner.ReasonTaint, Reason: "pod a/b: taint x not tolerated"},
		{Code: planner.NotReplacedPendingPods, Reason: "1 pending pod"},
	}, ReplaceNotTakenOmitted: 4}
	var b strings.Builder
	writeReplaceNotTakenTable(&b, p)
	want := "\nNOT REPLACED\tNODES\tBY GROUP\tCODE\tREASON\n" +
		"big\tbig-0 +2\tsmall\tTaint\tpod a/b: taint x not tolerated\n" +
		"-\t-\t-\tPendingPods\t1 pending pod\n" +
		"... and 4 more, not listed (the plan lists at most 20)\n"
	if got := b.String(); got != want {
		t.Errorf("table:\n%q\nwant:\n%q", got, want)
	}
	b.Reset()
	writeReplaceNotTakenTable(&b, planner.Plan{})
	if b.Len() != 0 {
		t.Errorf("no reasons printed %q", b.String())
	}
}
