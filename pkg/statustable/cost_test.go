package statustable

import (
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/planner"
)

// TestCostInStatus: the cost now and after the plan with the change, the
// groups left uncounted, a PRICE column only when a group has a price, and
// the replacements with their saving (none for one that only holds the
// nodes that received its pods).
func TestCostInStatus(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var d Doc
	d.Cluster, d.CycleAt, d.GroupsAt, d.Duration = "prod", now, now, "1s"
	d.NodeGroups = []evaluate.GroupSummary{
		{Name: "big", Provider: "aws", TargetSize: 2, Health: []string{}, Price: &evaluate.GroupPrice{PerNodeHour: 0.4, Currency: "USD", Source: "config"}},
		{Name: "legacy", Provider: "aws", TargetSize: 1, Health: []string{}},
	}
	d.Cost = &evaluate.StatusCost{
		Now:       []planner.CostTotal{{Currency: "USD", PerHour: 0.8, PerMonth: 584}},
		AfterPlan: []planner.CostTotal{{Currency: "USD", PerHour: 0.45, PerMonth: 328.5}},
		Change:    []planner.CostTotal{{Currency: "USD", PerHour: -0.35, PerMonth: -255.5}},
		NoPrice:   1,
	}
	d.Replacing = []planner.Replace{{ID: "r-0", Phase: planner.ReplaceHolding, NodeGroup: "small", Delta: 1, Nodes: []string{"big-0"},
		Reason: "its old nodes drained at 2026-12-04T09:55:00Z; until 2026-12-04T10:05:00Z ..."}, {ID: "r-1", Phase: planner.ReplaceWaiting, NodeGroup: "small", Delta: 1, Nodes: []string{"big-1"},
		Saving: 0.35, Currency: "USD", Reason: "0 of 1 new node of group small Ready"}}
	d.ReplacingOmitted = 2
	var b strings.Builder
	if err := Write(&b, d, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Cost:         0.8000 USD/h (584.00 USD/month); after the plan 0.4500 USD/h (328.50 USD/month), -0.3500 USD/h (-255.50 USD/month)\n",
		"Cost:         1 node groups have no price and are not counted\n",
		"HEADROOM  PRICE\n",
		"0.4 USD/h (config)\n",
		"no price\n",
		"REPLACE  PHASE    NEW NODES   OLD NODES  SAVING        REASON\n",
		"r-0      Holding  1 of small  big-0      -             its old nodes drained at 2026-12-04T09:55:00Z; until 2026-12-04T10:05:00Z ...\n",
		"r-1      Waiting  1 of small  big-1      0.3500 USD/h  0 of 1 new node of group small Ready\n",
		"... and 2 more replacements, not shown\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}

	// Without prices: no cost line, no PRICE column, no replacements.
	d.Cost, d.Replacing, d.ReplacingOmitted = nil, nil, 0
	d.NodeGroups[0].Price = nil
	b.Reset()
	if err := Write(&b, d, now); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "Cost:") || strings.Contains(out, "PRICE") || strings.Contains(out, "REPLACE") {
		t.Errorf("unpriced status shows cost:\n%s", out)
	}
}
