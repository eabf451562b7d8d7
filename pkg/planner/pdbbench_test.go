package planner

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// budgetCluster is the read path's scale cluster (hack/measure -scale, the
// API double's shape) as a snapshot: 30 pods a node in Deployments of 20
// across 50 namespaces, every third Deployment with a
// PodDisruptionBudget selecting its app label, so each namespace holds
// about 50 budgets. trimmed passes every object through a Trimmer, as
// evaluate's reader does, so a Deployment's pods share one label map;
// otherwise each pod has its own.
func budgetCluster(nodes int, trimmed bool) snapshot.Snapshot {
	r := rand.New(rand.NewPCG(uint64(nodes), 7))
	s := snapshot.Snapshot{CapturedAt: t0}
	g := snapshot.NodeGroup{Name: "workers", Provider: "kwok", MaxSize: 2 * nodes, TargetSize: nodes,
		Template: snapshot.Template{Allocatable: rl("16", "64Gi", "pods", "110")}}
	for i := range nodes {
		name := fmt.Sprintf("node-%05d", i)
		s.Nodes = append(s.Nodes, node(name, "workers", "16", "64Gi"))
		g.Instances = append(g.Instances, providerID(name))
	}
	s.NodeGroups = []snapshot.NodeGroup{g}
	pods := 30 * nodes
	for i := range pods {
		app := i / 20
		name := fmt.Sprintf("app-%05d", app)
		ns := fmt.Sprintf("team-%03d", app%50)
		p := pod(fmt.Sprintf("%s/%s-%06d", ns, name, i), fmt.Sprintf("%dm", 50+(app%8)*50), fmt.Sprintf("%dMi", 64+(app%6)*64),
			on(fmt.Sprintf("node-%05d", r.IntN(nodes))))
		p.Labels = map[string]string{"app": name, "team": ns, "tier": "backend", "version": "v1.4.2",
			"pod-template-hash": "7d9f8c6b5", "app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop",
			"app.kubernetes.io/managed-by": "helm"}
		p.OwnerReferences = []metav1.OwnerReference{controllerRef("ReplicaSet", "rs-"+ns+"-"+name)}
		s.Pods = append(s.Pods, p)
		if i%20 == 0 && app%3 == 0 {
			s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, pdb(ns+"/"+name, 1, "app", name))
		}
	}
	if trimmed {
		t := snapshot.NewTrimmer()
		for i := range s.Nodes {
			s.Nodes[i] = t.Node(&s.Nodes[i])
		}
		for i := range s.Pods {
			s.Pods[i] = t.Pod(&s.Pods[i])
		}
		for i := range s.PodDisruptionBudgets {
			s.PodDisruptionBudgets[i] = t.PDB(&s.PodDisruptionBudgets[i])
		}
	}
	return s
}

// BenchmarkDecideBudgets is Decide on budgetCluster: the warm evaluate tick's
// planning at the read path's scale, where matching pods against their
// namespace's budgets used to cost more than everything else.
func BenchmarkDecideBudgets(b *testing.B) {
	for _, n := range []int{5000} {
		for _, trimmed := range []bool{true, false} {
			b.Run(fmt.Sprintf("nodes=%d/trimmed=%t", n, trimmed), func(b *testing.B) {
				s := budgetCluster(n, trimmed)
				set := DefaultSettings()
				b.ReportAllocs()
				var p Plan
				before, _ := processCPU()
				for b.Loop() {
					p = Decide(s, set, s.CapturedAt)
				}
				// ns/op is wall time, which a busy machine inflates; the
				// tick is billed and bounded by CPU.
				if after, ok := processCPU(); ok {
					b.ReportMetric(float64(after-before)/float64(b.N), "cpu-ns/op")
				}
				b.ReportMetric(float64(len(s.Pods)), "pods")
				b.ReportMetric(float64(len(s.PodDisruptionBudgets)), "pdbs")
				b.ReportMetric(float64(len(p.State.UnneededSince)), "unneeded")
			})
		}
	}
}
