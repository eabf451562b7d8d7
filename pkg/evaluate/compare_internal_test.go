package evaluate

import (
	"testing"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

type namedGroup struct {
	providers.NodeGroup
	name string
}

func (g namedGroup) Name() string { return g.name }

type asgGroup struct {
	namedGroup
	asg string
}

func (g asgGroup) AutoScalingGroupName() string { return g.asg }

type poolGroup struct {
	namedGroup
	id string
}

func (g poolGroup) PoolID() string { return g.id }

// cluster-autoscaler names an ASG by its name and a Kapsule pool by its ID;
// other groups go by nodetide's name.
func TestCANames(t *testing.T) {
	got := caNames([]providers.NodeGroup{
		asgGroup{namedGroup{name: "workers"}, "prod-workers-asg"},
		poolGroup{namedGroup{name: "gpu"}, "11111111-2222-3333-4444-555555555555"},
		namedGroup{name: "kamatera-a"},
	})
	want := map[string]string{"workers": "prod-workers-asg", "gpu": "11111111-2222-3333-4444-555555555555"}
	if len(got) != len(want) || got["workers"] != want["workers"] || got["gpu"] != want["gpu"] {
		t.Errorf("caNames = %v, want %v", got, want)
	}
}

// The shadow plan per group: the target read, the target the scale-up or
// decrease would set, the nodes it would drain.
func TestPlannedGroups(t *testing.T) {
	snap := snapshot.Snapshot{NodeGroups: []snapshot.NodeGroup{{Name: "a", TargetSize: 1}, {Name: "b", TargetSize: 4}, {Name: "c", TargetSize: 2}}}
	plan := planner.Plan{
		ScaleUp:        []planner.ScaleUp{{NodeGroup: "a", Delta: 2, NewTargetSize: 3}},
		DecreaseTarget: []planner.DecreaseTarget{{NodeGroup: "b", Delta: 1, NewTargetSize: 3}},
		ScaleDown:      []planner.ScaleDown{{NodeGroup: "c", Node: "c-1"}, {NodeGroup: "c", Node: "c-2"}},
	}
	got := plannedGroups(snap, plan, map[string]string{"a": "asg-a"})
	if len(got) != 3 {
		t.Fatalf("%+v", got)
	}
	a, b, c := got[0], got[1], got[2]
	if a.CAName != "asg-a" || a.Target != 1 || a.NewTarget != 3 || len(a.Drains) != 0 {
		t.Errorf("a: %+v", a)
	}
	if b.Target != 4 || b.NewTarget != 3 {
		t.Errorf("b: %+v", b)
	}
	if c.Target != 2 || c.NewTarget != 2 || len(c.Drains) != 2 {
		t.Errorf("c: %+v", c)
	}
}
