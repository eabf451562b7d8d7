package evaluate

import (
	"bytes"
	"context"
	"testing"

	"github.com/nodetide/nodetide/internal/metricstest"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestCycleMetricsCarryTheCost: the cost now and after the plan, per
// currency and per priced group; none for a group without a price.
func TestCycleMetricsCarryTheCost(t *testing.T) {
	snap := snapshot.Snapshot{NodeGroups: []snapshot.NodeGroup{
		{Name: "big", TargetSize: 2, Price: &snapshot.Price{PerHour: 0.4, Currency: "USD", Source: snapshot.PriceConfig}},
		{Name: "legacy", TargetSize: 3},
	}}
	// As the planner writes it when one of big's two nodes goes.
	plan := planner.Plan{Cost: &planner.Cost{
		NodeGroups: []planner.GroupCost{{NodeGroup: "big", NodesNow: 2, Nodes: 1, PerNodeHour: 0.4, Currency: "USD", PerHour: 0.4}},
		Now:        []planner.CostTotal{{Currency: "USD", PerHour: 0.8}},
		Totals:     []planner.CostTotal{{Currency: "USD", PerHour: 0.4}},
		NoPrice:    []string{"legacy"},
	}}
	m := metrics.New("prod", nil)
	recordCycle(metrics.NewContext(context.Background(), m), snap, plan, nil, 0, false)
	var out bytes.Buffer
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	published, err := metricstest.Parse(out.Bytes(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	usd := metrics.Dims{metrics.DimCurrency: "USD"}
	big := metrics.Dims{metrics.DimCurrency: "USD", metrics.DimNodeGroup: "big"}
	for _, c := range []struct {
		name string
		dims metrics.Dims
		want float64
	}{
		{metrics.CostPerHour, usd, 0.8},
		{metrics.PlannedCostPerHour, usd, 0.4},
		{metrics.CostPerHour, big, 0.8},
		{metrics.PlannedCostPerHour, big, 0.4},
	} {
		if got := published.Sum(c.name, c.dims); got != c.want {
			t.Errorf("%s %v = %v, want %v", c.name, c.dims, got, c.want)
		}
	}
	if published.Has(metrics.CostPerHour, metrics.Dims{metrics.DimNodeGroup: "legacy"}) ||
		published.Has(metrics.CostPerHour, metrics.Dims{metrics.DimCurrency: "", metrics.DimNodeGroup: "legacy"}) {
		t.Error("a group without a price has a cost metric")
	}
}
