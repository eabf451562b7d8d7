package planner

import "testing"

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
	// Whether one is found (here none is), the search has run over every
	// single and multi-node candidate: its cost is what is measured.
	if len(p.ScaleDown) > 0 {
		b.Fatalf("%d removals: the threshold was meant to leave the search alone", len(p.ScaleDown))
	}
	b.ReportMetric(float64(len(s.Pods)), "pods")
	b.ReportMetric(float64(len(p.ScaleDown)), "removed")
	b.ReportMetric(float64(len(p.Replace)), "replacements")
}
