package planner

import (
	"strings"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// replaceBenchCluster is the 5,000-node synthetic cluster, packed (60 pods
// a node where they fit, about 208,000 in all) so that a node's pods do
// not all fit on the others and a replacement is worth seeking, with a price on
// every group (per CPU, so a large node costs what its CPUs do, a spot one
// less), no group still growing, and a small, cheaper-per-node group of
// 2-CPU nodes with none yet.
func replaceBenchCluster() snapshot.Snapshot {
	s := syntheticCluster(5000, 60, 0, 5000)
	priceGroups(&s)
	s.NodeGroups = append(s.NodeGroups, smallGroup())
	return s
}

// priceGroups prices every group per CPU (a spot node a third of that),
// and leaves none still growing: a replacement waits for a quiet cluster.
func priceGroups(s *snapshot.Snapshot) {
	for i := range s.NodeGroups {
		g := &s.NodeGroups[i]
		g.TargetSize = len(g.Instances)
		perHour := 0.048 * float64(g.Template.Allocatable.Cpu().Value())
		if g.Name == "spot" {
			perHour /= 3
		}
		g.Price = &snapshot.Price{PerHour: perHour, Currency: "USD", Source: snapshot.PriceConfig}
	}
}

// smallGroup is an empty group of 2-CPU nodes, cheaper a CPU than any.
func smallGroup() snapshot.NodeGroup {
	return snapshot.NodeGroup{
		Name: "small", Provider: "kwok", MinSize: 0, MaxSize: 1000,
		Template: snapshot.Template{Allocatable: snapshottest.Resources("2", "8Gi", "pods", "110"), Labels: map[string]string{"pool": "small"}},
		Price:    &snapshot.Price{PerHour: 0.03, Currency: "USD", Source: snapshot.PriceConfig},
	}
}

// replaceFoundCluster is the 5,000-node synthetic cluster (34 pods a node,
// about 153,000, and a filler pod on most nodes) where replacements are
// found: every node is filled to its last 25m of CPU but ten general
// nodes, which keep only pods that may move (no bare or local-storage pod,
// none under the budget that allows no disruption) up to 30% of their CPU
// and memory. One of those nodes' pods fit on the other nine, so the
// search finds no single replacement; eight or more together fit nowhere
// else, and a group general-v2 of the same shape, 40% cheaper a node,
// takes them on fewer new nodes. Every group is priced, small among them.
func replaceFoundCluster() snapshot.Snapshot {
	s := syntheticCluster(5000, 34, 0, 5000)
	priceGroups(&s)
	s.NodeGroups = append(s.NodeGroups, smallGroup(), snapshot.NodeGroup{
		Name: "general-v2", Provider: "kwok", MinSize: 0, MaxSize: 1000,
		Template: snapshot.Template{Allocatable: snapshottest.Resources("8", "32Gi", "pods", "110"), Labels: map[string]string{"pool": "general-v2"}},
		Price:    &snapshot.Price{PerHour: 0.6 * 0.048 * 8, Currency: "USD", Source: snapshot.PriceConfig},
	})
	type load struct {
		cpu, mem   int64
		light      bool
		allocCPU   int64
		allocBytes int64
	}
	loads := make(map[string]*load, len(s.Nodes))
	light := 0
	for i := range s.Nodes {
		n := &s.Nodes[i]
		l := &load{allocCPU: n.Status.Allocatable.Cpu().MilliValue(), allocBytes: n.Status.Allocatable.Memory().Value()}
		if light < 10 && n.Labels["pool"] == "general" && !nodeOptedOut(n) {
			l.light = true
			light++
		}
		loads[n.Name] = l
	}
	kept := s.Pods[:0]
	for _, p := range s.Pods {
		l := loads[p.Spec.NodeName]
		var cpu, mem int64
		for _, c := range p.Spec.Containers {
			cpu += c.Resources.Requests.Cpu().MilliValue()
			mem += c.Resources.Requests.Memory().Value()
		}
		if l.light && !isDaemonSetPod(&p) {
			_, _, owned := controllerOf(&p)
			if !owned || len(p.Spec.Volumes) > 0 || p.Labels["app"] == "app-07" ||
				(l.cpu+cpu)*10 > 3*l.allocCPU || (l.mem+mem)*10 > 3*l.allocBytes {
				continue
			}
		}
		l.cpu += cpu
		l.mem += mem
		kept = append(kept, p)
	}
	s.Pods = kept
	for i := range s.Nodes {
		n := &s.Nodes[i]
		l := loads[n.Name]
		free := l.allocCPU - l.cpu
		if free -= free % 25; l.light || free <= 0 {
			continue
		}
		ctrl := true
		s.Pods = append(s.Pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: "fill-" + strings.TrimPrefix(n.Name, "node-"), Namespace: "fill", Labels: map[string]string{"app": "fill"},
				CreationTimestamp: n.CreationTimestamp,
				OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "fill-rs", UID: "uid-fill", Controller: &ctrl}},
			},
			Spec: corev1.PodSpec{
				NodeName: n.Name,
				Containers: []corev1.Container{{Name: "fill", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: *resource.NewMilliQuantity(free, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("16Mi"),
				}}}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		})
	}
	return s
}
