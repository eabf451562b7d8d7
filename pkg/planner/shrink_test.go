package planner

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

func TestShrink(t *testing.T) {
	earlier := t0.Add(-time.Hour)
	// a: four empty nodes, min 1; b: two empty nodes and room to grow for
	// a pending pod only b's nodes take.
	snap := func() snapshot.Snapshot {
		s := clusterOf(
			[]snapshot.NodeGroup{
				group("a", 1, 5, 4, "4", "16Gi", "a1", "a2", "a3", "a4"),
				group("b", 0, 5, 2, "4", "16Gi", "b1", "b2"),
			},
			[]corev1.Node{
				node("a1", "a", "4", "16Gi"), node("a2", "a", "4", "16Gi"), node("a3", "a", "4", "16Gi"), node("a4", "a", "4", "16Gi"),
				node("b1", "b", "4", "16Gi"), node("b2", "b", "4", "16Gi"),
			},
			[]corev1.Pod{
				pod("a-busy", "3", "1Gi", on("a2")),
				pod("b-wait", "5", "1Gi", pending(), selector("pool", "b")),
			},
		)
		// b2 was unneeded long before: a cycle would remove it.
		s.State = snapshot.State{UnneededSince: map[string]time.Time{"b2": earlier}, LastScaleUp: map[string]time.Time{}}
		return s
	}
	tests := []struct {
		name       string
		sizes      map[string]int
		wantErr    string
		wantDown   []string // group/node
		wantReason string
	}{
		{name: "down to the size, emptiest first", sizes: map[string]int{"a": 2}, wantDown: []string{"a/a1", "a/a3"},
			wantReason: "node group a is above its max size 2 (max set by schedule night)"},
		{name: "below min stops at min", sizes: map[string]int{"a": 0}, wantDown: []string{"a/a1", "a/a3", "a/a4"}},
		{name: "at or above max changes nothing", sizes: map[string]int{"a": 7}},
		{name: "only the named groups", sizes: map[string]int{"b": 1}, wantDown: []string{"b/b1"}},
		{name: "unknown group", sizes: map[string]int{"a": 1, "zz": 1, "yy": 0}, wantErr: `shrink: unknown node group "yy", "zz"`},
		{name: "negative size", sizes: map[string]int{"a": -1}, wantErr: "shrink: node group a: size -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snap()
			before := deepCopySnapshot(s)
			plan, err := Shrink(s, DefaultSettings(), t0, tt.sizes, "schedule night")
			if !equalSnapshots(s, before) {
				t.Error("the snapshot was modified")
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var down []string
			for _, d := range plan.ScaleDown {
				down = append(down, d.NodeGroup+"/"+d.Node)
				if !strings.Contains(d.Reason, tt.wantReason) {
					t.Errorf("reason %q, want it to contain %q", d.Reason, tt.wantReason)
				}
			}
			if !slices.Equal(down, tt.wantDown) {
				t.Errorf("removals %v, want %v", down, tt.wantDown)
			}
			if len(plan.ScaleUp) != 0 || len(plan.Unschedulable) != 0 || len(plan.DecreaseTarget) != 0 {
				t.Errorf("up %+v, unschedulable %+v, decrease %+v: want removals only", plan.ScaleUp, plan.Unschedulable, plan.DecreaseTarget)
			}
			// The next state: the snapshot's, plus the chosen nodes' times
			// (the drains' names); no scale-up or other unneeded node.
			want := map[string]time.Time{"b2": earlier}
			for _, d := range plan.ScaleDown {
				want[d.Node] = t0
			}
			if !maps.EqualFunc(plan.State.UnneededSince, want, time.Time.Equal) {
				t.Errorf("unneededSince %v, want %v", plan.State.UnneededSince, want)
			}
			if len(plan.State.LastScaleUp) != 0 {
				t.Errorf("lastScaleUp %v, want none", plan.State.LastScaleUp)
			}
			if len(plan.NodeGroups) != 2 {
				t.Errorf("node groups %+v, want both", plan.NodeGroups)
			}
		})
	}
}

// TestShrinkGivesBackUnregisteredFirst: capacity asked for and not yet
// registered goes before any node is drained.
func TestShrinkGivesBackUnregisteredFirst(t *testing.T) {
	s := clusterOf([]snapshot.NodeGroup{group("a", 0, 5, 4, "4", "16Gi", "a1", "a2")},
		[]corev1.Node{node("a1", "a", "4", "16Gi"), node("a2", "a", "4", "16Gi")}, nil)
	s.State.LastScaleUp = map[string]time.Time{"a": t0.Add(-time.Minute)}
	plan, err := Shrink(s, DefaultSettings(), t0, map[string]int{"a": 1}, "schedule night")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.DecreaseTarget) != 1 || plan.DecreaseTarget[0].Delta != 2 || len(plan.ScaleDown) != 1 {
		t.Fatalf("decrease %+v, removals %+v; want 2 given back, then one drain", plan.DecreaseTarget, plan.ScaleDown)
	}
	if !plan.State.LastScaleUp["a"].Equal(t0.Add(-time.Minute)) {
		t.Errorf("lastScaleUp %v, want the snapshot's", plan.State.LastScaleUp)
	}
}
