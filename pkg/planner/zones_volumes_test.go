package planner

import (
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// A volume's zone is one more rule a multi-zone group must meet in every
// zone it may start a node in.
func TestMultiZoneGroupVolumes(t *testing.T) {
	multi := withZones(group("multi", 0, 10, 0, "4", "16Gi"), "a", "b", "c")
	fixed := group("fixed", 3, 3, 3, "4", "16Gi", "na", "nb", "nc")
	nodes := []corev1.Node{zonedNode("na", "fixed", "a"), zonedNode("nb", "fixed", "b"), zonedNode("nc", "fixed", "c")}
	busy := []corev1.Pod{pod("fill-a", "3900m", "", on("na")), pod("fill-b", "3900m", "", on("nb")), pod("fill-c", "3900m", "", on("nc"))}
	claims := []corev1.PersistentVolumeClaim{boundClaim("data", "pv-1")}
	pending := pod("db-0", "1", "1Gi", pending(), claimVolume("data"))
	tests := []struct {
		name   string
		groups []snapshot.NodeGroup
		pv     corev1.PersistentVolume
		grow   string // the group that grows; "" for none
		reason string // in the unschedulable reason when none grows
	}{
		{name: "volume in one zone: the multi-zone group cannot promise it",
			groups: []snapshot.NodeGroup{multi, fixed}, pv: pvLabelled("pv-1", zoneKey, "a"),
			reason: `group "multi" spans zones a, b, c and the cloud picks a new node's zone; pod needs zone a (volume "data"`},
		{name: "volume in one zone: the group in that zone takes it",
			groups: []snapshot.NodeGroup{multi, fixed, withZones(group("only-a", 0, 10, 0, "4", "16Gi"), "a")},
			pv:     pvAffinity("pv-1", req(labelZone, corev1.NodeSelectorOpIn, "a")), grow: "only-a"},
		{name: "volume in every zone of the group: accepted",
			groups: []snapshot.NodeGroup{multi, fixed}, pv: pvLabelled("pv-1", zoneKey, "a__b__c"), grow: "multi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := withVolumes(clusterOf(tt.groups, nodes, append([]corev1.Pod{pending}, busy...)), claims, []corev1.PersistentVolume{tt.pv})
			p := Decide(snap, DefaultSettings(), t0)
			if tt.grow != "" {
				if len(p.ScaleUp) != 1 || p.ScaleUp[0].NodeGroup != tt.grow || len(p.Unschedulable) != 0 {
					t.Fatalf("scale-up %+v, unschedulable %+v; want %s to grow", p.ScaleUp, p.Unschedulable, tt.grow)
				}
				return
			}
			if len(p.ScaleUp) != 0 || len(p.Unschedulable) != 1 {
				t.Fatalf("scale-up %+v, unschedulable %+v; want the pod unschedulable", p.ScaleUp, p.Unschedulable)
			}
			if !strings.Contains(p.Unschedulable[0].Reason, tt.reason) {
				t.Errorf("reason %q does not say %q", p.Unschedulable[0].Reason, tt.reason)
			}
		})
	}
}
