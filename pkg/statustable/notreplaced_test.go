package statustable

import (
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/planner"
)

// TestReplaceNotTakenInStatus: why the cycle started no replacement, after
// the replacements, each row with the old nodes' group and the first of
// them, the new nodes' group, code and reason, then how many more; nothing
// when there is none.
func TestReplaceNotTakenInStatus(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var d Doc
	d.Cluster, d.CycleAt, d.GroupsAt, d.Duration = "prod", now, now, "1s"
	d.Replacing = []planner.Replace{{ID: "r-1", Phase: planner.ReplaceAbandoned, NodeGroup: "small", Delta: 1, Nodes: []string{"big-1"}, Reason: "late"}}
	d.ReplaceNotTaken = []planner.ReplaceNotTaken{
		{Code: planner.NotReplacedAbandoned, Reason: "this plan gives up replacement r-1: none starts in the same plan"},
		{NodeGroup: "big", Nodes: []string{"big-0", "big-2"}, With: "small", Code: planner.NotReplacedSavingTooSmall, Reason: "saves 12%"},
	}
	d.ReplaceNotTakenOmitted = 3
	var b strings.Builder
	if err := Write(&b, d, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := "\nNOT REPLACED  NODES     BY GROUP  CODE                  REASON\n" +
		"-             -         -         ReplacementAbandoned  this plan gives up replacement r-1: none starts in the same plan\n" +
		"big           big-0 +1  small     SavingTooSmall        saves 12%\n" +
		"... and 3 more reasons no replacement was started, not shown\n"
	if i, j := strings.Index(out, want), strings.Index(out, "REPLACE  "); i < 0 || j < 0 || j > i {
		t.Errorf("status does not show, after the replacements:\n%s\nit shows:\n%s", want, out)
	}

	d.ReplaceNotTaken, d.ReplaceNotTakenOmitted = nil, 0
	b.Reset()
	if err := Write(&b, d, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "NOT REPLACED") {
		t.Errorf("status without reasons shows the table:\n%s", b.String())
	}
}
