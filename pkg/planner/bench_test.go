package planner

import (
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Synthetic clusters are built once per size: building the 5,000-node one
// takes longer than planning it.
var (
	clusterMu    sync.Mutex
	clusterCache = map[int]snapshot.Snapshot{}
)

func benchCluster(nodes int) snapshot.Snapshot {
	clusterMu.Lock()
	defer clusterMu.Unlock()
	s, ok := clusterCache[nodes]
	if !ok {
		s = syntheticCluster(nodes, 30, 0.05, uint64(nodes))
		clusterCache[nodes] = s
	}
	return s
}

func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			s := benchCluster(n)
			set := DefaultSettings()
			b.ReportAllocs()
			var p Plan
			for b.Loop() {
				p = Decide(s, set, s.CapturedAt)
			}
			placed := 0
			for _, u := range p.ScaleUp {
				placed += len(u.Pods)
			}
			b.ReportMetric(float64(len(s.Pods)), "pods")
			b.ReportMetric(float64(placed), "packed")
			b.ReportMetric(float64(len(p.State.UnneededSince)), "unneeded")
		})
	}
}

// yardstickSnapshot is cluster-autoscaler's BenchmarkBinpackingEstimate as
// a snapshot: one empty group whose template has 1000m CPU, 5000 MiB and
// 100 pod slots, room for 3,000 nodes, and 51,000 pending pods (50,000 of
// 50m / 100 bytes, 1,000 of 95m / 190 bytes).
func yardstickSnapshot() snapshot.Snapshot {
	s := snapshot.Snapshot{CapturedAt: t0, NodeGroups: []snapshot.NodeGroup{{
		Name: "template", Provider: "kwok", MaxSize: 3000,
		Template: snapshot.Template{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("1000m"),
			corev1.ResourceMemory: resource.MustParse("5000Mi"),
			corev1.ResourcePods:   resource.MustParse("100"),
		}},
	}}}
	add := func(prefix string, n int, cpu, mem string) {
		requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
		for i := range n {
			p := pod(fmt.Sprintf("bench/%s-%05d", prefix, i), "", "", pending(), ownedBy("ReplicaSet", prefix))
			p.Spec.Containers[0].Resources.Requests = requests
			p.CreationTimestamp = metav1.NewTime(t0.Add(-10 * time.Minute))
			s.Pods = append(s.Pods, p)
		}
	}
	add("small", 50000, "50m", "100")
	add("large", 1000, "95m", "190")
	return s
}

func yardstickSettings() Settings {
	set := DefaultSettings()
	set.ScaleUp.MaxNodesPerStep = 100000
	return set
}

func checkYardstick(tb testing.TB, p Plan) {
	tb.Helper()
	if len(p.ScaleUp) != 1 || p.ScaleUp[0].Delta != 2595 || len(p.ScaleUp[0].Pods) != 51000 || len(p.Unschedulable) != 0 {
		var got []string
		for _, u := range p.ScaleUp {
			got = append(got, fmt.Sprintf("%s +%d (%d pods)", u.NodeGroup, u.Delta, len(u.Pods)))
		}
		tb.Fatalf("scale-up %v, %d unschedulable; want template +2595 holding all 51000 pods", got, len(p.Unschedulable))
	}
}

func TestYardstick(t *testing.T) {
	checkYardstick(t, Decide(yardstickSnapshot(), yardstickSettings(), t0))
}

// BenchmarkYardstick is the comparison with cluster-autoscaler's estimator
// (about 3.9 s and 2.9 GB per run there); the answer must be the same.
func BenchmarkYardstick(b *testing.B) {
	s := yardstickSnapshot()
	set := yardstickSettings()
	b.ReportAllocs()
	var p Plan
	for b.Loop() {
		p = Decide(s, set, t0)
	}
	checkYardstick(b, p)
}

// topologyCluster is the 5,000-node synthetic cluster with every workload
// pod spread over zones (maxSkew 1) and kept one per node by hostname
// anti-affinity on its app, pending pods included.
func topologyCluster() snapshot.Snapshot {
	s := syntheticCluster(5000, 30, 0.05, 5000)
	for i := range s.Pods {
		p := &s.Pods[i]
		if kind, _, ok := controllerOf(p); !ok || kind != "ReplicaSet" {
			continue
		}
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel,
		}}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: sel}},
		}}
	}
	return s
}

// decideCPU plans s b.N times and reports the CPU per plan (not wall time:
// on a shared machine the wall clock measures the neighbours) and the
// pending pods the last plan packed; it returns that plan.
func decideCPU(b *testing.B, s snapshot.Snapshot, set Settings) (Plan, int) {
	b.Helper()
	b.ReportAllocs()
	var p Plan
	start := snapshottest.CPUTime()
	for b.Loop() {
		p = Decide(s, set, s.CapturedAt)
	}
	b.ReportMetric((snapshottest.CPUTime()-start).Seconds()/float64(b.N), "cpu-s/op")
	placed := 0
	for _, u := range p.ScaleUp {
		placed += len(u.Pods)
	}
	b.ReportMetric(float64(placed), "packed")
	b.ReportMetric(float64(len(p.Unschedulable)), "unschedulable")
	return p, placed
}

// BenchmarkDecideTopology: the goal is 0.5 s a decision.
func BenchmarkDecideTopology(b *testing.B) {
	s := topologyCluster()
	p, _ := decideCPU(b, s, DefaultSettings())
	b.ReportMetric(float64(len(s.Pods)), "pods")
	b.ReportMetric(float64(len(p.State.UnneededSince)), "unneeded")
}

// BenchmarkDecideTopologyZones is BenchmarkDecideTopology with every group
// spanning the cluster's three zones and balancing on: the zone-spread pods
// are refused by the multi-zone groups and explained per zone.
func BenchmarkDecideTopologyZones(b *testing.B) {
	s := topologyCluster()
	for i := range s.NodeGroups {
		s.NodeGroups[i].Zones = []string{"z0", "z1", "z2"}
	}
	set := DefaultSettings()
	set.ScaleUp.BalanceSimilarNodeGroups = true
	decideCPU(b, s, set)
}

// zonalTopologyCluster is topologyCluster with each group split into one
// group per zone (as one ASG per AZ), so the zone-spread pending pods have
// templates that can take them and the plan packs them.
func zonalTopologyCluster() snapshot.Snapshot {
	s := topologyCluster()
	zoneOf := make(map[string]string, len(s.Nodes))
	for i := range s.Nodes {
		zoneOf[s.Nodes[i].Spec.ProviderID] = s.Nodes[i].Labels[corev1.LabelTopologyZone]
	}
	var groups []snapshot.NodeGroup
	for _, g := range s.NodeGroups {
		for _, z := range []string{"z0", "z1", "z2"} {
			zg := g
			zg.Name, zg.Zones, zg.MinSize, zg.Instances = g.Name+"-"+z, []string{z}, 0, nil
			zg.Template.Labels = maps.Clone(g.Template.Labels)
			zg.Template.Labels[corev1.LabelTopologyZone] = z
			for _, id := range g.Instances {
				if zoneOf[id] == z {
					zg.Instances = append(zg.Instances, id)
				}
			}
			zg.TargetSize, zg.MaxSize = len(zg.Instances), 2*len(zg.Instances)+10
			groups = append(groups, zg)
		}
	}
	s.NodeGroups = groups
	return s
}

func zonalSettings() Settings {
	set := DefaultSettings()
	set.ScaleUp.BalanceSimilarNodeGroups = true
	// One pod a node (hostname anti-affinity): let the step hold them all.
	set.ScaleUp.MaxNodesPerStep = 1000
	return set
}

// BenchmarkDecideTopologyZonal: the 5,000-node topology cluster in one group
// per zone with balancing on, where the zone-spread, hostname-anti-affine
// pending pods are packed onto new zonal nodes, all 190 in one plan (each
// zone's group in several rounds). The goal is 0.5 s of CPU.
func BenchmarkDecideTopologyZonal(b *testing.B) {
	s := zonalTopologyCluster()
	if p, placed := decideCPU(b, s, zonalSettings()); placed != 190 {
		b.Fatalf("%d pending pods packed, %d unschedulable; want all 190 packed", placed, len(p.Unschedulable))
	}
}
