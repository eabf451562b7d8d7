package planner

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// consolidationCluster is one group "w" (min 0, max 20) of 4-CPU nodes
// w0..w(n-1); cpu[i] is the CPU of the one pod on wi ("" for none). Every
// node has been unneeded for an hour.
func consolidationCluster(cpu ...string) snapshot.Snapshot {
	var names []string
	var nodes []corev1.Node
	var pods []corev1.Pod
	for i, c := range cpu {
		name := fmt.Sprintf("w%d", i)
		names = append(names, name)
		nodes = append(nodes, node(name, "w", "4", "16Gi"))
		if c != "" {
			pods = append(pods, pod("default/p"+name, c, "1Gi", on(name)))
		}
	}
	s := clusterOf([]snapshot.NodeGroup{group("w", 0, 20, len(cpu), "4", "16Gi", names...)}, nodes, pods)
	s.State = snapshot.State{UnneededSince: map[string]time.Time{}}
	for _, n := range names {
		s.State.UnneededSince[n] = t0.Add(-time.Hour)
	}
	return s
}

func consolidate(budgets ...DisruptionBudget) Settings {
	set := DefaultSettings()
	set.ScaleDown.Consolidation = ConsolidationDelete
	set.ScaleDown.DisruptionBudgets = budgets
	return set
}

func removedNodes(p Plan) []string {
	var out []string
	for _, d := range p.ScaleDown {
		out = append(out, d.Node)
	}
	return out
}

func cronIn(t *testing.T, expr, zone string) *schedule.Cron {
	t.Helper()
	loc, err := schedule.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	c, err := schedule.ParseCron(expr, loc)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestConsolidationDelete: several under-used nodes go in one plan when
// their pods together fit on the rest, bounded by the budgets (drains in
// flight count), and each reason says so.
func TestConsolidationDelete(t *testing.T) {
	// Five nodes at 3 + 1 + 1 + 0.5 + 0 CPU of 4, tried emptiest first (ties
	// by name): w4 goes, w3's pod moves to w0, w1's to w2; then w2 holds
	// 2 CPU that fit nowhere.
	base := func() snapshot.Snapshot { return consolidationCluster("3", "1", "1", "500m", "") }
	modify := func(s snapshot.Snapshot, f func(*snapshot.Snapshot)) snapshot.Snapshot { f(&s); return s }
	businessHours := func(t *testing.T) DisruptionBudget {
		return DisruptionBudget{Nodes: 0, Schedule: cronIn(t, "0 9 * * mon-fri", "Europe/Amsterdam"), Duration: 8 * time.Hour}
	}
	tests := []struct {
		name string
		snap snapshot.Snapshot
		set  func(t *testing.T) Settings
		want []string
	}{
		{"off: one at a time", base(), func(*testing.T) Settings { return DefaultSettings() }, []string{"w4"}},
		{"three at once", base(), func(*testing.T) Settings { return consolidate(DisruptionBudget{Nodes: 5}) }, []string{"w1", "w3", "w4"}},
		{"budget of two", base(), func(*testing.T) Settings { return consolidate(DisruptionBudget{Nodes: 2}) }, []string{"w3", "w4"}},
		// 10% of 5 nodes, rounded up.
		{"default budget", base(), func(*testing.T) Settings { return consolidate() }, []string{"w4"}},
		{"percent rounded up", base(), func(*testing.T) Settings { return consolidate(DisruptionBudget{Nodes: 30, Percent: true}) }, []string{"w3", "w4"}},
		{"strictest budget wins", base(), func(*testing.T) Settings {
			return consolidate(DisruptionBudget{Nodes: 5}, DisruptionBudget{Nodes: 1})
		}, []string{"w4"}},
		{"drain in flight counts", modify(base(), func(s *snapshot.Snapshot) {
			s.Nodes = append(s.Nodes, node("w5", "w", "4", "16Gi", draining()))
			s.NodeGroups[0].Instances = append(s.NodeGroups[0].Instances, providerID("w5"))
			s.NodeGroups[0].TargetSize++
		}), func(*testing.T) Settings { return consolidate(DisruptionBudget{Nodes: 3}) }, []string{"w3", "w4"}},
		{"none in business hours", base(), func(t *testing.T) Settings {
			return consolidate(DisruptionBudget{Nodes: 5}, businessHours(t))
		}, nil},
		{"after business hours", modify(base(), func(s *snapshot.Snapshot) { s.CapturedAt = t0.Add(8 * time.Hour) }), func(t *testing.T) Settings {
			return consolidate(DisruptionBudget{Nodes: 5}, businessHours(t))
		}, []string{"w1", "w3", "w4"}},
		// Budgets set but none active now: only min size and PDBs bound it.
		{"no budget active", modify(base(), func(s *snapshot.Snapshot) { s.CapturedAt = t0.Add(8 * time.Hour) }), func(t *testing.T) Settings {
			return consolidate(businessHours(t))
		}, []string{"w1", "w3", "w4"}},
		{"budget of another group", base(), func(*testing.T) Settings {
			return consolidate(DisruptionBudget{Nodes: 5}, DisruptionBudget{Nodes: 0, NodeGroups: []string{"other"}})
		}, []string{"w1", "w3", "w4"}},
		{"budget of this group", base(), func(*testing.T) Settings {
			return consolidate(DisruptionBudget{Nodes: 5}, DisruptionBudget{Nodes: 1, NodeGroups: []string{"w"}})
		}, []string{"w4"}},
		{"min size", modify(base(), func(s *snapshot.Snapshot) { s.NodeGroups[0].MinSize = 3 }), func(*testing.T) Settings {
			return consolidate(DisruptionBudget{Nodes: 5})
		}, []string{"w3", "w4"}},
		{"node opted out", modify(base(), func(s *snapshot.Snapshot) { nodeAnnotation(annotationDoNotDisrupt, "true")(&s.Nodes[3]) }), func(*testing.T) Settings {
			return consolidate(DisruptionBudget{Nodes: 5})
		}, []string{"w1", "w2", "w4"}},
		{"pod not to be disrupted", modify(base(), func(s *snapshot.Snapshot) { annotate(annotationDoNotDisrupt, "true")(&s.Pods[1]) }), func(*testing.T) Settings {
			return consolidate(DisruptionBudget{Nodes: 5})
		}, []string{"w2", "w3", "w4"}},
		// One disruption left for app=web: of w2's and w3's pods only one may go.
		{"PDB shared by the removals", modify(base(), func(s *snapshot.Snapshot) {
			s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, pdb("default/web", 1, "app", "web"))
		}), func(*testing.T) Settings { return consolidate(DisruptionBudget{Nodes: 5}) }, []string{"w3", "w4"}},
		{"pending pod for the group", modify(base(), func(s *snapshot.Snapshot) {
			s.Pods = append(s.Pods, pod("default/waiting", "3500m", "1Gi", pending()))
		}), func(*testing.T) Settings { return consolidate(DisruptionBudget{Nodes: 5}) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := tt.set(t)
			p := Decide(tt.snap, set, tt.snap.CapturedAt)
			if got := removedNodes(p); !slices.Equal(got, tt.want) {
				t.Fatalf("removed %v, want %v\n%+v", got, tt.want, p.ScaleDown)
			}
			for _, d := range p.ScaleDown {
				prefix := fmt.Sprintf("consolidation: %s, pods fit on the rest; utilisation ", plural(len(tt.want), "node"))
				if set.ScaleDown.Consolidation == "" {
					prefix = "utilisation "
				}
				if !strings.HasPrefix(d.Reason, prefix) {
					t.Errorf("reason %q, want it to start %q", d.Reason, prefix)
				}
			}
		})
	}
}

// TestConsolidationChain: the pods of a removed node take room on the
// nodes that stay, so a node that received them is removable only if its
// own pods and those fit elsewhere too.
func TestConsolidationChain(t *testing.T) {
	// w0 and w1 hold 1.5 CPU each, w2 2.5 CPU: either of w0 and w1 fits
	// on the other or on w2, not both.
	s := consolidationCluster("1500m", "1500m", "2500m")
	s.NodeGroups[0].MinSize = 0
	p := Decide(s, consolidate(DisruptionBudget{Nodes: 3}), s.CapturedAt)
	if got := removedNodes(p); !slices.Equal(got, []string{"w0"}) {
		t.Fatalf("removed %v, want only w0 (w1 then holds w0's pod and fits nowhere)", got)
	}
	// Traced, the simulation says where w0's pod goes: onto w1, which stays.
	_, tr := decide(&s, consolidate(DisruptionBudget{Nodes: 3}), s.CapturedAt, true)
	if got := tr.hops["default/pw0"]; !slices.Equal(got, []string{"w1"}) {
		t.Errorf("hops of w0's pod = %v, want [w1]", got)
	}
}

// TestConsolidationYoungNodes: a node created within delayAfterAdd or
// unneededTime is not a candidate, even when no scale-up of its group is
// recorded (a replacement, a node added by hand): it starts no unneeded
// clock and is not removed.
func TestConsolidationYoungNodes(t *testing.T) {
	s := consolidationCluster("3", "")
	s.Nodes[1].CreationTimestamp = metav1.NewTime(t0.Add(-2 * time.Minute))
	delete(s.State.UnneededSince, "w1")
	for _, tt := range []struct {
		name      string
		set       Settings
		unneeded  bool
		removable bool
	}{
		{"off: today's rule", func() Settings { s := DefaultSettings(); s.ScaleDown.UnneededTime = 0; return s }(), true, true},
		{"within delayAfterAdd", func() Settings { s := consolidate(DisruptionBudget{Nodes: 5}); s.ScaleDown.UnneededTime = 0; return s }(), false, false},
		{"within unneededTime", func() Settings {
			s := consolidate(DisruptionBudget{Nodes: 5})
			s.ScaleDown.DelayAfterAdd = 0
			return s
		}(), false, false},
		{"older than both", func() Settings {
			s := consolidate(DisruptionBudget{Nodes: 5})
			s.ScaleDown.DelayAfterAdd, s.ScaleDown.UnneededTime = time.Minute, 0
			return s
		}(), true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(s, tt.set, t0)
			if _, ok := p.State.UnneededSince["w1"]; ok != tt.unneeded {
				t.Errorf("w1 unneeded = %v, want %v", ok, tt.unneeded)
			}
			if got := slices.Contains(removedNodes(p), "w1"); got != tt.removable {
				t.Errorf("w1 removed = %v, want %v (%+v)", got, tt.removable, p.ScaleDown)
			}
		})
	}
}

func TestDisruptionBudgetActive(t *testing.T) {
	b := DisruptionBudget{Schedule: cronIn(t, "0 9 * * mon-fri", "Europe/Amsterdam"), Duration: 8 * time.Hour}
	ams, _ := time.LoadLocation("Europe/Amsterdam")
	for _, tt := range []struct {
		at   time.Time
		want bool
	}{
		{time.Date(2026, 11, 30, 8, 59, 59, 0, ams), false},
		{time.Date(2026, 11, 30, 9, 0, 0, 0, ams), true},
		{time.Date(2026, 11, 30, 9, 0, 0, 500, ams), true},
		{time.Date(2026, 11, 30, 16, 59, 59, 0, ams), true},
		{time.Date(2026, 11, 30, 17, 0, 0, 0, ams), false},
		{time.Date(2026, 12, 5, 10, 0, 0, 0, ams), false}, // Saturday
	} {
		if got := b.activeAt(tt.at.UTC()); got != tt.want {
			t.Errorf("active at %s = %v, want %v", tt.at, got, tt.want)
		}
	}
	if !(DisruptionBudget{}).activeAt(t0) {
		t.Error("a budget without a schedule is always active")
	}
	for _, tt := range []struct {
		b     DisruptionBudget
		nodes int
		want  int
	}{
		{DisruptionBudget{Nodes: 3}, 10, 3},
		{DisruptionBudget{Nodes: 10, Percent: true}, 10, 1},
		{DisruptionBudget{Nodes: 10, Percent: true}, 11, 2},
		{DisruptionBudget{Nodes: 10, Percent: true}, 1, 1},
		{DisruptionBudget{Nodes: 0, Percent: true}, 50, 0},
		{DisruptionBudget{Nodes: 100, Percent: true}, 7, 7},
	} {
		if got := tt.b.limit(tt.nodes); got != tt.want {
			t.Errorf("%s of %d nodes = %d, want %d", tt.b, tt.nodes, got, tt.want)
		}
	}
}
