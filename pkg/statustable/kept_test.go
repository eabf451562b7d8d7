package statustable

import (
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/planner"
)

// TestKeptTable: the counts per group and code on one line, the first kept
// nodes with why, and how many more; nothing when no node is kept.
func TestKeptTable(t *testing.T) {
	var d Doc
	d.Status = evaluate.Status{
		Kept: []planner.Kept{{Node: "w-1", NodeGroup: "workers", Code: planner.KeptBlockedByPod, Reason: "pod shop/db-0: rule"}},
		KeptCounts: []planner.KeptCount{
			{NodeGroup: "gpu", Code: planner.KeptNotUnderutilized, Nodes: 2},
			{NodeGroup: "workers", Code: planner.KeptBlockedByPod, Nodes: 1},
			{NodeGroup: "workers", Code: planner.KeptNotUnderutilized, Nodes: 4},
		},
		KeptOmitted: 6,
	}
	var b strings.Builder
	if err := writeKeptTable(&b, d, statusClock{now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	want := "\nKept nodes:   gpu: 2 NotUnderutilized; workers: 1 BlockedByPod, 4 NotUnderutilized\n" +
		"KEPT NODE  NODE GROUP  CODE          REASON\n" +
		"w-1        workers     BlockedByPod  pod shop/db-0: rule\n" +
		"... and 6 more kept nodes, not shown\n"
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	b.Reset()
	if err := writeKeptTable(&b, Doc{}, statusClock{}); err != nil || b.Len() != 0 {
		t.Errorf("no kept nodes wrote %q, %v", b.String(), err)
	}
}
