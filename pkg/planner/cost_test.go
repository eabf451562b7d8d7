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
	}
	got := planCost(groups, plan)
	want := &Cost{
		NodeGroups: []GroupCost{
			{NodeGroup: "a", Nodes: 1, PerNodeHour: 0.5, Currency: "EUR", Source: "config", PerHour: 0.5, PerMonth: 365},
			{NodeGroup: "b", Nodes: 4, PerNodeHour: 0.096, Currency: "USD", Source: "config", PerHour: 0.384, PerMonth: 280.32},
			{NodeGroup: "c", Nodes: 2, PerNodeHour: 0.2, Currency: "USD", Source: "config", PerHour: 0.4, PerMonth: 292},
		},
		Totals:  []CostTotal{{Currency: "EUR", PerHour: 0.5, PerMonth: 365}, {Currency: "USD", PerHour: 0.784, PerMonth: 572.32}},
		NoPrice: []string{"free"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cost = %+v\nwant %+v", got, want)
	}
	if c := planCost([]snapshot.NodeGroup{{Name: "x", TargetSize: 3}}, &Plan{}); c != nil {
		t.Errorf("cost without prices = %+v, want nil", c)
	}
}
