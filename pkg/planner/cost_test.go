package planner

import (
	"reflect"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

func TestPlanCost(t *testing.T) {
	usd := func(v float64) *snapshot.Price {
		return &snapshot.Price{PerHour: v, Currency: "USD", Source: snapshot.PriceConfig}
	}
	groups := []snapshot.NodeGroup{
		{Name: "b", TargetSize: 2, Price: usd(0.096)},
		{Name: "a", TargetSize: 1, Price: &snapshot.Price{PerHour: 0.5, Currency: "EUR", Source: snapshot.PriceConfig}},
		{Name: "free", TargetSize: 5},
		{Name: "c", TargetSize: 3, Price: usd(0.2)},
	}
	plan := &Plan{
		ScaleUp:        []ScaleUp{{NodeGroup: "b", Delta: 2, NewTargetSize: 4}},
		DecreaseTarget: []DecreaseTarget{{NodeGroup: "c", Delta: 1, NewTargetSize: 2}},
		ScaleDown:      []ScaleDown{{NodeGroup: "c", Node: "c-1"}, {NodeGroup: "free", Node: "free-1"}},
	}
	got := planCost(groups, plan, map[string]int{})
	want := &Cost{
		NodeGroups: []GroupCost{
			{NodeGroup: "a", NodesNow: 1, Nodes: 1, PerNodeHour: 0.5, Currency: "EUR", Source: "config", PerHour: 0.5, PerMonth: 365},
			{NodeGroup: "b", NodesNow: 2, Nodes: 4, PerNodeHour: 0.096, Currency: "USD", Source: "config", PerHour: 0.384, PerMonth: 280.32},
			// 3, less 1 given back, less 1 removed.
			{NodeGroup: "c", NodesNow: 3, Nodes: 1, PerNodeHour: 0.2, Currency: "USD", Source: "config", PerHour: 0.2, PerMonth: 146},
		},
		Totals: []CostTotal{{Currency: "EUR", PerHour: 0.5, PerMonth: 365}, {Currency: "USD", PerHour: 0.584, PerMonth: 426.32}},
		// b 2 × 0.096 + c 3 × 0.2.
		Now:     []CostTotal{{Currency: "EUR", PerHour: 0.5, PerMonth: 365}, {Currency: "USD", PerHour: 0.792, PerMonth: 578.16}},
		Change:  []CostTotal{{Currency: "EUR", PerHour: 0, PerMonth: 0}, {Currency: "USD", PerHour: -0.208, PerMonth: -151.84}},
		NoPrice: []string{"free"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cost = %+v\nwant %+v", got, want)
	}
	if c := planCost([]snapshot.NodeGroup{{Name: "x", TargetSize: 3}}, &Plan{}, nil); c != nil {
		t.Errorf("cost without prices = %+v, want nil", c)
	}
}

// TestPlanCostCountsReplacedNodes: the old nodes of a replacement requested
// or waiting count as gone after the plan, so the change is the saving.
func TestPlanCostCountsReplacedNodes(t *testing.T) {
	usd := func(v float64) *snapshot.Price {
		return &snapshot.Price{PerHour: v, Currency: "USD", Source: snapshot.PriceConfig}
	}
	groups := []snapshot.NodeGroup{{Name: "large", TargetSize: 2, Price: usd(0.4)}, {Name: "small", Price: usd(0.1)}}
	plan := &Plan{ScaleUp: []ScaleUp{{NodeGroup: "small", Delta: 1, NewTargetSize: 1}}}
	c := planCost(groups, plan, map[string]int{"large": 2})
	if len(c.Change) != 1 || c.Change[0].PerHour != -0.7 || c.NodeGroups[0].Nodes != 0 || c.NodeGroups[0].NodesNow != 2 {
		t.Errorf("cost = %+v, want large 2 → 0 and a change of -0.7/h", c)
	}
}
