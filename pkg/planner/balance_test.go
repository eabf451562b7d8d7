package planner

import (
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// zonal is a group in zone z whose template differs from its siblings only
// by the zone and the group label.
func zonal(name, z string, target, maxSize int, nodes ...string) snapshot.NodeGroup {
	g := withZones(group(name, 0, maxSize, target, "4", "16Gi", nodes...), z)
	g.Template.Labels = map[string]string{"pool": "workers", "nodetide.io/node-group": name}
	return g
}

func balanced() Settings {
	s := DefaultSettings()
	s.ScaleUp.BalanceSimilarNodeGroups = true
	return s
}

// TestBalanceSimilarNodeGroups: a scale-up is split across similar groups
// so their targets even out, within each max, and only where the pods the
// expander's choice placed still all fit.
func TestBalanceSimilarNodeGroups(t *testing.T) {
	big := pendingPods("web", 6, "3", "1Gi") // one per node
	var nodes []corev1.Node
	var onNodes []corev1.Pod
	for _, z := range []string{"a", "b", "c"} {
		nodes = append(nodes, zonedNode("n"+z, "old", z, cordoned()))
	}
	// Full nodes for the groups that start above zero.
	nodes = append(nodes, zonedNode("za-0", "za", "a", cordoned()), zonedNode("za-1", "za", "a", cordoned()), zonedNode("zc-0", "zc", "c", cordoned()))
	old := group("old", 3, 3, 3, "4", "16Gi", "na", "nb", "nc")
	// Three pods of the spread workload in each of b and c, none in a.
	for i, n := range []string{"nb", "nb", "nb", "nc", "nc", "nc"} {
		onNodes = append(onNodes, pod("universe/spread-old-"+string(rune('0'+i)), "100m", "", on(n), podLabels("app", "spread"), spreadOpt(labelZone, 1, 1, "spread")))
	}
	tests := []struct {
		name    string
		set     Settings
		groups  []snapshot.NodeGroup
		pods    []corev1.Pod
		want    map[string]int
		balance bool // the reasons say balanced (but own's)
		own     string
	}{
		{"off: the expander's group takes all", DefaultSettings(),
			[]snapshot.NodeGroup{zonal("za", "a", 0, 10), zonal("zb", "b", 0, 10), zonal("zc", "c", 0, 10), old}, big,
			map[string]int{"za": 6}, false, ""},
		{"on: 2/2/2", balanced(),
			[]snapshot.NodeGroup{zonal("za", "a", 0, 10), zonal("zb", "b", 0, 10), zonal("zc", "c", 0, 10), old}, big,
			map[string]int{"za": 2, "zb": 2, "zc": 2}, true, ""},
		{"max respected: 3/1/2", balanced(),
			[]snapshot.NodeGroup{zonal("za", "a", 0, 10), zonal("zb", "b", 0, 1), zonal("zc", "c", 0, 10), old}, big,
			map[string]int{"za": 3, "zb": 1, "zc": 2}, true, ""},
		{"smallest first: targets 2, 0, 1 end at 3, 3, 3", balanced(),
			[]snapshot.NodeGroup{zonal("za", "a", 2, 10, "za-0", "za-1"), zonal("zb", "b", 0, 10), zonal("zc", "c", 1, 10, "zc-0"), old}, big,
			map[string]int{"za": 1, "zb": 3, "zc": 2}, true, ""},
		{"not similar (other labels): unbalanced", balanced(),
			[]snapshot.NodeGroup{zonal("za", "a", 0, 10), withTemplateLabels(zonal("zb", "b", 0, 10), "disk", "ssd"), old}, big,
			map[string]int{"za": 6}, false, ""},
		{"a sibling with zonal pods of its own is left to grow for them", balanced(),
			[]snapshot.NodeGroup{zonal("za", "a", 0, 10), zonal("zb", "b", 0, 10), zonal("zc", "c", 0, 10), old},
			append(pendingPods("web", 4, "3", "1Gi"), pendingPods("only-b", 2, "2500m", "1Gi", selector(labelZone, "b"))...),
			map[string]int{"za": 2, "zb": 2, "zc": 2}, true, "zb"},
		{"pods that fit one zone only: unbalanced", balanced(),
			[]snapshot.NodeGroup{zonal("za", "a", 0, 10), zonal("zb", "b", 0, 10), zonal("zc", "c", 0, 10), old},
			append(pendingPods("spread", 3, "3", "1Gi", spreadOpt(labelZone, 1, 1, "spread")), onNodes...),
			map[string]int{"za": 3}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(clusterOf(tt.groups, nodes, tt.pods), tt.set, t0)
			got := map[string]int{}
			pods := 0
			for _, su := range p.ScaleUp {
				got[su.NodeGroup] += su.Delta
				pods += len(su.Pods)
				if strings.Contains(su.Reason, "balanced") != (tt.balance && su.NodeGroup != tt.own) {
					t.Errorf("%s: reason %q (balanced: want %v)", su.NodeGroup, su.Reason, tt.balance)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("scale-up %+v, want %v", p.ScaleUp, tt.want)
			}
			for g, n := range tt.want {
				if got[g] != n {
					t.Fatalf("scale-up %+v, want %v", p.ScaleUp, tt.want)
				}
			}
			if len(p.Unschedulable) != 0 {
				t.Fatalf("unschedulable: %+v", p.Unschedulable)
			}
		})
	}
}

// TestSimilarGroups states the similarity rule case by case.
func TestSimilarGroups(t *testing.T) {
	base := func() snapshot.NodeGroup { return zonal("a", "za", 0, 10) }
	tests := []struct {
		name    string
		other   func(g snapshot.NodeGroup) snapshot.NodeGroup
		similar bool
	}{
		{"other zone, other group label", func(g snapshot.NodeGroup) snapshot.NodeGroup {
			g.Name, g.Zones = "b", []string{"zb"}
			g.Template.Labels["nodetide.io/node-group"] = "b"
			return g
		}, true},
		{"memory 1% less", func(g snapshot.NodeGroup) snapshot.NodeGroup {
			g.Template.Allocatable[corev1.ResourceMemory] = resource.MustParse("16220Mi")
			return g
		}, true},
		{"memory 2% less", func(g snapshot.NodeGroup) snapshot.NodeGroup {
			g.Template.Allocatable[corev1.ResourceMemory] = resource.MustParse("16056Mi")
			return g
		}, false},
		{"other cpu", func(g snapshot.NodeGroup) snapshot.NodeGroup {
			g.Template.Allocatable[corev1.ResourceCPU] = resource.MustParse("3900m")
			return g
		}, false},
		{"other pods", func(g snapshot.NodeGroup) snapshot.NodeGroup {
			g.Template.Allocatable[corev1.ResourcePods] = resource.MustParse("58")
			return g
		}, false},
		{"a GPU more", func(g snapshot.NodeGroup) snapshot.NodeGroup {
			g.Template.Allocatable[podfacts.ResourceGPU] = resource.MustParse("1")
			return g
		}, false},
		{"other label", func(g snapshot.NodeGroup) snapshot.NodeGroup { return withTemplateLabels(g, "disk", "ssd") }, false},
		{"other taint", func(g snapshot.NodeGroup) snapshot.NodeGroup {
			return withTemplateTaint(g, "dedicated", "x", corev1.TaintEffectNoSchedule)
		}, false},
		{"other provider", func(g snapshot.NodeGroup) snapshot.NodeGroup { g.Provider = "aws"; return g }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), tt.other(base())
			m := newModel(&snapshot.Snapshot{NodeGroups: []snapshot.NodeGroup{a, b}}, DefaultSettings(), t0)
			if got := m.similar(0, 1); got != tt.similar {
				t.Errorf("similar = %v, want %v", got, tt.similar)
			}
		})
	}
}
