package planner

import (
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// BenchmarkConsolidation: consolidation deciding on a 5,000-node synthetic
// cluster of 150,000 pods (34 a node where they fit) with nothing pending
// (so no group is kept whole for a pending pod), every node due and a
// budget of half of each group: the multi-node simulation runs over every
// under-used node. The goal is 1 s of CPU and 100 MB a decision on one core.
func BenchmarkConsolidation(b *testing.B) {
	s := syntheticCluster(5000, 34, 0, 5000)
	set := consolidate(DisruptionBudget{Nodes: 50, Percent: true})
	set.ScaleDown.UnneededTime, set.ScaleDown.DelayAfterAdd = 0, 0
	p, _ := decideCPU(b, s, set)
	perGroup := map[string]int{}
	for _, d := range p.ScaleDown {
		perGroup[d.NodeGroup]++
	}
	several := false
	for _, n := range perGroup {
		several = several || n > 1
	}
	if !several {
		b.Fatalf("no group lost several nodes at once: %v", perGroup)
	}
	b.ReportMetric(float64(len(s.Pods)), "pods")
	b.ReportMetric(float64(len(p.State.UnneededSince)), "unneeded")
	b.ReportMetric(float64(len(p.ScaleDown)), "removed")
}

// BenchmarkConsolidationReplace is BenchmarkConsolidation with replace:
// every group priced, a cheap small group with no nodes yet, and a
// utilisation threshold no node is under, so no deletion comes first (a
// replacement is only sought in a plan that does nothing else) and the
// replacement search runs at its widest: its 100 least utilised
// candidates alone, and each group's up to 10 together. The goal is the
// same: 1 s of CPU and 100 MB a decision on one core.
func BenchmarkConsolidationReplace(b *testing.B) {
	s := replaceBenchCluster()
	set := consolidate(DisruptionBudget{Nodes: 50, Percent: true})
	set.ScaleDown.Consolidation = ConsolidationReplace
	set.ScaleDown.UtilizationThreshold = 0.01
	set.ScaleDown.UnneededTime, set.ScaleDown.DelayAfterAdd = 0, 0
	p, _ := decideCPU(b, s, set)
	// Whether one is found (here none is: each set's pods fit on the nodes
	// that stay, or select their own pool), the search has run over every
	// single and multi-node candidate: its cost is what is measured, with
	// the plan's reasons for taking none.
	if len(p.ScaleDown) > 0 {
		b.Fatalf("%d removals: the threshold was meant to leave the search alone", len(p.ScaleDown))
	}
	if len(p.Replace) == 0 && len(p.ReplaceNotTaken) == 0 {
		b.Fatal("no replacement and no reason why")
	}
	b.ReportMetric(float64(len(s.Pods)), "pods")
	b.ReportMetric(float64(len(p.ScaleDown)), "removed")
	b.ReportMetric(float64(len(p.Replace)), "replacements")
	b.ReportMetric(float64(len(p.ReplaceNotTaken)), "not-taken")
}

// BenchmarkConsolidationReplaceFound is replace consolidation where a
// replacement is found and started (replaceFoundCluster): the full search,
// single and multi-node, then the best of it, ten nodes of one group by
// fewer of a cheaper one. The goal is the same: 1 s of CPU and 100 MB a
// decision on one core.
func BenchmarkConsolidationReplaceFound(b *testing.B) {
	s := replaceFoundCluster()
	p, _ := decideCPU(b, s, replaceFoundSettings())
	r := checkReplaceFound(b, s, p)
	b.ReportMetric(float64(len(s.Pods)), "pods")
	b.ReportMetric(float64(len(r.Nodes)), "replaced")
	b.ReportMetric(float64(r.Delta), "new")
	b.ReportMetric(r.Saving/r.Before, "saving-share")
}

func replaceFoundSettings() Settings {
	set := consolidate(DisruptionBudget{Nodes: 50, Percent: true})
	set.ScaleDown.Consolidation = ConsolidationReplace
	set.ScaleDown.UtilizationThreshold = 0.01
	set.ScaleDown.UnneededTime, set.ScaleDown.DelayAfterAdd = 0, 0
	return set
}

// checkReplaceFound: the plan of replaceFoundCluster s starts one
// replacement, of several nodes, saving at least the default share.
func checkReplaceFound(tb testing.TB, s snapshot.Snapshot, p Plan) Replace {
	tb.Helper()
	if len(s.Nodes) != 5000 || len(s.Pods) < 150000 {
		tb.Fatalf("%d nodes, %d pods: want 5,000 and at least 150,000", len(s.Nodes), len(s.Pods))
	}
	if len(p.Replace) != 1 {
		tb.Fatalf("replacements %+v, not taken %+v: want one started", p.Replace, p.ReplaceNotTaken)
	}
	r := p.Replace[0]
	if r.Phase != ReplaceRequested || len(r.Nodes) < 2 || r.Saving < DefaultReplaceMinSaving*r.Before {
		tb.Fatalf("replacement %+v: want several nodes replaced, saving at least %v of %v", r, DefaultReplaceMinSaving, r.Before)
	}
	return r
}

// TestReplaceFoundAt5000Nodes is what BenchmarkConsolidationReplaceFound
// measures, checked outside the benchmark run.
func TestReplaceFoundAt5000Nodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 5,000-node cluster")
	}
	s := replaceFoundCluster()
	checkReplaceFound(t, s, Decide(s, replaceFoundSettings(), s.CapturedAt))
}
