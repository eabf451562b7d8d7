package planner

import (
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

func withZones(g snapshot.NodeGroup, zones ...string) snapshot.NodeGroup {
	g.Zones = zones
	return g
}

// zonedNode is a Ready node of group pool in zone z.
func zonedNode(name, pool, z string, opts ...nodeOpt) corev1.Node {
	n := node(name, pool, "4", "16Gi", opts...)
	n.Labels[labelZone] = z
	return n
}

// TestMultiZoneGroups: a group over several zones is promised a pod only
// when the pod fits every zone a new node may land in; a group in one zone
// is matched exactly.
func TestMultiZoneGroups(t *testing.T) {
	multi := withZones(group("multi", 0, 10, 0, "4", "16Gi"), "a", "b", "c")
	// fixed holds the zone's existing nodes and cannot grow.
	fixed := group("fixed", 3, 3, 3, "4", "16Gi", "na", "nb", "nc")
	nodes := []corev1.Node{zonedNode("na", "fixed", "a"), zonedNode("nb", "fixed", "b"), zonedNode("nc", "fixed", "c")}
	full := func(name, n string) corev1.Pod { return pod(name, "3900m", "", on(n)) }
	busy := []corev1.Pod{full("fill-a", "na"), full("fill-b", "nb"), full("fill-c", "nc")}
	tests := []struct {
		name    string
		groups  []snapshot.NodeGroup
		pods    []corev1.Pod
		grow    map[string]int // new nodes by group
		reason  string         // in every unschedulable reason
		code    string         // the multi group's code for them
		upWhy   string         // in the scale-up reason
		pending int
	}{
		{
			name:   "plain pod: any zone will do",
			groups: []snapshot.NodeGroup{multi, fixed},
			pods:   append(pendingPods("web", 2, "1", "1Gi"), busy...),
			grow:   map[string]int{"multi": 1},
		},
		{
			name:   "node affinity on every zone of the group: accepted",
			groups: []snapshot.NodeGroup{multi, fixed},
			pods:   append(pendingPods("web", 2, "1", "1Gi", affinity([]corev1.NodeSelectorRequirement{req(labelZone, corev1.NodeSelectorOpIn, "a", "b", "c")})), busy...),
			grow:   map[string]int{"multi": 1},
		},
		{
			name:    "zonal node selector: refused by the multi-zone group",
			groups:  []snapshot.NodeGroup{multi, fixed},
			pods:    append(pendingPods("web", 2, "1", "1Gi", selector(labelZone, "a")), busy...),
			pending: 2,
			reason:  `group "multi" spans zones a, b, c and the cloud picks a new node's zone; pod needs zone a (node selector topology.kubernetes.io/zone=a)`,
			code:    ReasonNodeSelector,
		},
		{
			name:   "zonal node selector: the group in that zone takes it",
			groups: []snapshot.NodeGroup{multi, fixed, withZones(group("only-a", 0, 10, 0, "4", "16Gi"), "a")},
			pods:   append(pendingPods("web", 2, "1", "1Gi", selector(labelZone, "a")), busy...),
			grow:   map[string]int{"only-a": 1},
			upWhy:  "2 pods need zone a (node selector topology.kubernetes.io/zone=a)",
		},
		{
			name:   "zone spread: refused, and the reason names the zones it needs",
			groups: []snapshot.NodeGroup{multi, fixed},
			pods: append(append(pendingPods("web", 1, "1", "1Gi", spreadOpt(labelZone, 1, 1, "web")),
				pod("universe/web-old", "100m", "", on("na"), podLabels("app", "web"), spreadOpt(labelZone, 1, 1, "web"))), busy...),
			pending: 1,
			reason:  `group "multi" spans zones a, b, c and the cloud picks a new node's zone; pod needs zone b, c (topology spread maxSkew 1 on topology.kubernetes.io/zone)`,
			code:    ReasonOther,
		},
		{
			name:   "zone spread: groups in one zone each take the pods, and say which zone",
			groups: []snapshot.NodeGroup{multi, fixed, withZones(group("only-b", 0, 10, 0, "4", "16Gi"), "b")},
			pods: append(append(pendingPods("web", 1, "1", "1Gi", spreadOpt(labelZone, 1, 1, "web")),
				pod("universe/web-old", "100m", "", on("na"), podLabels("app", "web"), spreadOpt(labelZone, 1, 1, "web"))), busy...),
			grow:  map[string]int{"only-b": 1},
			upWhy: "1 pod needs zone b (topology spread maxSkew 1 on topology.kubernetes.io/zone)",
		},
		{
			name:    "zone anti-affinity: refused, the new node could land next to the other pod",
			groups:  []snapshot.NodeGroup{multi, fixed},
			pods:    append(append(pendingPods("db", 1, "1", "1Gi", podAffinityOpt(true, labelZone, "db")), pod("universe/db-old", "100m", "", on("na"), podLabels("app", "db"))), busy...),
			pending: 1,
			reason:  `pod needs zone b, c (pod anti-affinity on topology.kubernetes.io/zone)`,
			code:    ReasonOther,
		},
		{
			name:   "hostname anti-affinity does not depend on the zone: accepted",
			groups: []snapshot.NodeGroup{multi, fixed},
			pods:   append(pendingPods("db", 2, "1", "1Gi", podAffinityOpt(true, labelHostname, "db")), busy...),
			grow:   map[string]int{"multi": 2},
		},
		{
			name:   "zone label in a multi-zone template is not trusted",
			groups: []snapshot.NodeGroup{withTemplateLabels(withZones(group("multi", 0, 10, 0, "4", "16Gi"), "a", "b"), labelZone, "a"), fixed},
			pods:   append(pendingPods("web", 1, "1", "1Gi", selector(labelZone, "a")), busy...),
			reason: `group "multi" spans zones a, b and the cloud picks a new node's zone; pod needs zone a`,
			code:   ReasonNodeSelector, pending: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(clusterOf(tt.groups, nodes, tt.pods), DefaultSettings(), t0)
			got := map[string]int{}
			for _, su := range p.ScaleUp {
				got[su.NodeGroup] += su.Delta
				if !strings.Contains(su.Reason, tt.upWhy) {
					t.Errorf("scale-up reason %q does not say %q", su.Reason, tt.upWhy)
				}
			}
			if len(got) != len(tt.grow) {
				t.Fatalf("scale-up %+v, want %v", p.ScaleUp, tt.grow)
			}
			for g, n := range tt.grow {
				if got[g] != n {
					t.Fatalf("scale-up %+v, want %v", p.ScaleUp, tt.grow)
				}
			}
			if len(p.Unschedulable) != tt.pending {
				t.Fatalf("unschedulable %+v, want %d", p.Unschedulable, tt.pending)
			}
			for _, u := range p.Unschedulable {
				if !strings.Contains(u.Reason, tt.reason) {
					t.Errorf("%s: reason %q does not say %q", u.Pod, u.Reason, tt.reason)
				}
				for _, gr := range u.NodeGroups {
					if gr.NodeGroup == "multi" && gr.Code != tt.code {
						t.Errorf("%s: multi's code %s, want %s (%s)", u.Pod, gr.Code, tt.code, gr.Reason)
					}
				}
			}
		})
	}
}
