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
