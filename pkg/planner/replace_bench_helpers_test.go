package planner

import (
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
)

// replaceBenchCluster is the 5,000-node synthetic cluster, packed (60 pods
// a node where they fit, about 208,000 in all) so that a node's pods do
// not all fit on the others and a replacement is worth seeking, with a price on
// every group (per CPU, so a large node costs what its CPUs do, a spot one
// less), no group still growing, and a small, cheaper-per-node group of
// 2-CPU nodes with none yet.
func replaceBenchCluster() snapshot.Snapshot {
	s := syntheticCluster(5000, 60, 0, 5000)
	for i := range s.NodeGroups {
		g := &s.NodeGroups[i]
		// No nodes still coming: a replacement waits for a quiet cluster.
		g.TargetSize = len(g.Instances)
		perHour := 0.048 * float64(g.Template.Allocatable.Cpu().Value())
		if g.Name == "spot" {
			perHour /= 3
		}
		g.Price = &snapshot.Price{PerHour: perHour, Currency: "USD", Source: snapshot.PriceConfig}
	}
	s.NodeGroups = append(s.NodeGroups, snapshot.NodeGroup{
		Name: "small", Provider: "kwok", MinSize: 0, MaxSize: 1000,
		Template: snapshot.Template{Allocatable: snapshottest.Resources("2", "8Gi", "pods", "110"), Labels: map[string]string{"pool": "small"}},
		Price:    &snapshot.Price{PerHour: 0.03, Currency: "USD", Source: snapshot.PriceConfig},
	})
	return s
}
