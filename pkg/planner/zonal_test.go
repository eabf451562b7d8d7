package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// TestZoneSpreadOneGroupPerZone: with one group per zone (one ASG per AZ),
// a zone-spread workload's pending pods are all planned in one plan, each
// zone's group growing in as many rounds as the skew needs, within each
// group's max; what no zone may take stays pending with the rule and the
// max that kept it. Each pending pod takes a node of its own (3 of 4 CPU);
// the groups' registered nodes are cordoned, counting only as the spread's
// domains with the workload's pods already on them.
func TestZoneSpreadOneGroupPerZone(t *testing.T) {
	spreadRule := "topology spread on " + labelZone + " (maxSkew 1)"
	anyway := func(p *corev1.Pod) {
		for i := range p.Spec.TopologySpreadConstraints {
			p.Spec.TopologySpreadConstraints[i].WhenUnsatisfiable = corev1.ScheduleAnyway
		}
	}
	tests := []struct {
		name    string
		balance bool
		zones   []string
		maxOf   map[string]int    // a group's max size (default 10)
		onNodes map[string]int    // the workload's pods already in each zone
		pending []corev1.Pod      // besides those
		want    map[string]int    // new nodes by group
		unsched int               // pods left pending
		reasons []string          // in every unschedulable reason
		codes   map[string]string // each group's code for every pod left pending
		rounds  map[string]int    // a group's rounds, when more than one
	}{
		{
			name: "4 pods over 2 zones: +2/+2", balance: true, zones: []string{"a", "b"},
			pending: pendingPods("web", 4, "3", "1Gi", spreadOpt(labelZone, 1, 0, "web")),
			want:    map[string]int{"za": 2, "zb": 2}, rounds: map[string]int{"za": 2},
		},
		{
			name: "4 pods over 2 zones, balancing off: +2/+2", zones: []string{"a", "b"},
			pending: pendingPods("web", 4, "3", "1Gi", spreadOpt(labelZone, 1, 0, "web")),
			want:    map[string]int{"za": 2, "zb": 2},
		},
		{
			name: "small pods: a later round fills the node an earlier one opened", zones: []string{"a", "b"},
			pending: pendingPods("web", 4, "1", "1Gi", spreadOpt(labelZone, 1, 0, "web")),
			want:    map[string]int{"za": 1, "zb": 1}, rounds: map[string]int{"za": 2},
		},
		{
			name: "3 zones with 3, 1 and 0 pods: 5 more even them out", balance: true, zones: []string{"a", "b", "c"},
			onNodes: map[string]int{"a": 3, "b": 1},
			pending: pendingPods("web", 5, "3", "1Gi", spreadOpt(labelZone, 1, 0, "web")),
			want:    map[string]int{"zb": 2, "zc": 3},
		},
		{
			name: "a zone at max: the others stay within the skew, the rest pending", balance: true, zones: []string{"a", "b", "c"},
			maxOf:   map[string]int{"zc": 1},
			onNodes: map[string]int{"a": 1, "b": 1, "c": 1},
			pending: pendingPods("web", 6, "3", "1Gi", spreadOpt(labelZone, 1, 0, "web")),
			want:    map[string]int{"za": 1, "zb": 1}, unsched: 4,
			reasons: []string{"node group za: " + spreadRule, "node group zb: " + spreadRule, "node group zc at max size 1"},
			codes:   map[string]string{"za": ReasonTopologySpread, "zb": ReasonTopologySpread, "zc": ReasonMaxSizeReached},
		},
		{
			name: "minDomains 3 over 2 zones: the global minimum is 0, one pod a zone", balance: true, zones: []string{"a", "b"},
			pending: pendingPods("web", 4, "3", "1Gi", spreadOpt(labelZone, 1, 3, "web")),
			want:    map[string]int{"za": 1, "zb": 1}, unsched: 2,
			reasons: []string{"node group za: " + spreadRule, "node group zb: " + spreadRule},
			codes:   map[string]string{"za": ReasonTopologySpread, "zb": ReasonTopologySpread},
		},
		{
			name: "whenUnsatisfiable ScheduleAnyway only scores: balanced as any pods", balance: true, zones: []string{"a", "b"},
			onNodes: map[string]int{"a": 3},
			pending: pendingPods("web", 4, "3", "1Gi", spreadOpt(labelZone, 1, 0, "web"), anyway),
			want:    map[string]int{"za": 2, "zb": 2},
		},
		{
			name: "whenUnsatisfiable ScheduleAnyway, balancing off: one group takes all", zones: []string{"a", "b"},
			onNodes: map[string]int{"a": 3},
			pending: pendingPods("web", 4, "3", "1Gi", spreadOpt(labelZone, 1, 0, "web"), anyway),
			want:    map[string]int{"za": 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var groups []snapshot.NodeGroup
			var nodes []corev1.Node
			pods := tt.pending
			for _, z := range tt.zones {
				name := "z" + z
				maxSize := 10
				if m, ok := tt.maxOf[name]; ok {
					maxSize = m
				}
				groups = append(groups, zonal(name, z, 1, maxSize, name+"-0"))
				nodes = append(nodes, zonedNode(name+"-0", name, z, cordoned()))
				for i := range tt.onNodes[z] {
					pods = append(pods, pod(fmt.Sprintf("universe/web-%s-%d", z, i), "100m", "", on(name+"-0"),
						podLabels("app", "web"), spreadOpt(labelZone, 1, 0, "web")))
				}
			}
			set := DefaultSettings()
			set.ScaleUp.BalanceSimilarNodeGroups = tt.balance
			p := Decide(clusterOf(groups, nodes, pods), set, t0)
			got := map[string]int{}
			planned := 0
			for _, su := range p.ScaleUp {
				got[su.NodeGroup] = su.Delta
				planned += len(su.Pods)
				if su.NewTargetSize != 1+su.Delta {
					t.Errorf("%s: new target %d, want %d", su.NodeGroup, su.NewTargetSize, 1+su.Delta)
				}
				wantRounds := fmt.Sprintf("grown in %d rounds", tt.rounds[su.NodeGroup])
				if r := tt.rounds[su.NodeGroup]; r > 1 && !strings.Contains(su.Reason, wantRounds) {
					t.Errorf("%s: reason %q does not say %q", su.NodeGroup, su.Reason, wantRounds)
				}
			}
			if len(got) != len(tt.want) || len(p.ScaleUp) != len(tt.want) {
				t.Fatalf("scale-up %+v, want %v", p.ScaleUp, tt.want)
			}
			for g, n := range tt.want {
				if got[g] != n {
					t.Fatalf("scale-up %+v, want %v", p.ScaleUp, tt.want)
				}
			}
			if planned+len(p.Unschedulable) != len(tt.pending) || len(p.Unschedulable) != tt.unsched {
				t.Fatalf("%d pods planned, %d unschedulable %+v; want %d unschedulable of %d", planned, len(p.Unschedulable), p.Unschedulable, tt.unsched, len(tt.pending))
			}
			for _, u := range p.Unschedulable {
				for _, r := range tt.reasons {
					if !strings.Contains(u.Reason, r) {
						t.Errorf("%s: reason %q does not say %q", u.Pod, u.Reason, r)
					}
				}
				if len(u.NodeGroups) != len(tt.codes) {
					t.Errorf("%s: group reasons %+v, want codes %v", u.Pod, u.NodeGroups, tt.codes)
				}
				for _, gr := range u.NodeGroups {
					if gr.Code != tt.codes[gr.NodeGroup] || gr.Reason == "" {
						t.Errorf("%s: group %s code %q reason %q, want code %q and a reason", u.Pod, gr.NodeGroup, gr.Code, gr.Reason, tt.codes[gr.NodeGroup])
					}
				}
			}
		})
	}
}

// TestDecideTopologyZonalPlansAll: the zonal benchmark's cluster plans
// every one of its 190 pending pods onto new nodes in one plan.
func TestDecideTopologyZonalPlansAll(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a 5,000-node cluster")
	}
	s := zonalTopologyCluster()
	p := Decide(s, zonalSettings(), s.CapturedAt)
	planned := 0
	for _, u := range p.ScaleUp {
		planned += len(u.Pods)
	}
	if planned != 190 || len(p.Unschedulable) != 0 {
		t.Fatalf("%d pods planned, %d unschedulable; want all 190 planned", planned, len(p.Unschedulable))
	}
}

// TestZoneSpreadCountsZonesToCome: zones with no node yet whose group may
// grow count as spread domains from the first round. Groups za (max 4) and
// zb (max 1) start empty; 4 pods spread maxSkew 1 get za 2 and zb 1, as the
// scheduler will once zb's node is up, not za 3 and zb 1 (za's round
// before zb's node existed) or za 4 and then zb 1.
func TestZoneSpreadCountsZonesToCome(t *testing.T) {
	for _, balance := range []bool{false, true} {
		t.Run(fmt.Sprintf("balance=%v", balance), func(t *testing.T) {
			groups := []snapshot.NodeGroup{zonal("za", "a", 0, 4), zonal("zb", "b", 0, 1)}
			set := DefaultSettings()
			set.ScaleUp.BalanceSimilarNodeGroups = balance
			p := Decide(clusterOf(groups, nil, pendingPods("web", 4, "3", "1Gi", spreadOpt(labelZone, 1, 0, "web"))), set, t0)
			got := map[string]int{}
			for _, su := range p.ScaleUp {
				got[su.NodeGroup] = su.Delta
			}
			if got["za"] != 2 || got["zb"] != 1 || len(got) != 2 || len(p.Unschedulable) != 1 {
				t.Fatalf("scale-up %+v, %d unschedulable; want za +2, zb +1, 1 pending", p.ScaleUp, len(p.Unschedulable))
			}
		})
	}
}
