package planner

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestStartupAndStatusTaints: as cluster-autoscaler reads them, a node
// with a startup taint is still starting (pending pods wait for it, as for
// a booting node, until the provision time is up), a status taint keeps
// pods off the node that has it (the scheduler honours it) but leaves it
// ready, and neither is on a new node of a group.
func TestStartupAndStatusTaints(t *testing.T) {
	const cilium = "node.cilium.io/agent-not-ready"
	startupPrefixed := podfacts.StartupTaintPrefix + "cni"
	statusPrefixed := podfacts.StatusTaintPrefix + "degraded"
	createdAgo := func(d time.Duration) nodeOpt {
		return func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(t0.Add(-d)) }
	}
	readyWith := func(key string, age time.Duration) corev1.Node {
		return node("n1", "workers", "4", "16Gi", createdAgo(age), nodeTaint(key, "", corev1.TaintEffectNoSchedule))
	}
	one := func(n corev1.Node) snapshot.Snapshot {
		return clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{n}, []corev1.Pod{pod("p", "1", "1Gi", pending())})
	}
	atZero := func(key string) snapshot.Snapshot {
		g := withTemplateTaint(workers(0), key, "", corev1.TaintEffectNoSchedule)
		return clusterOf([]snapshot.NodeGroup{g}, nil, []corev1.Pod{pod("p", "1", "1Gi", pending())})
	}
	ignoring := func(startup, status []string) func(*Settings) {
		return func(s *Settings) { s.ScaleUp.IgnoredTaints = podfacts.IgnoredTaints{Startup: startup, Status: status} }
	}
	grow := want{up: []string{"workers +1 =1 [default/p]"}}
	growMore := want{up: []string{"workers +1 =2 [default/p]"}}
	runCases(t, []planCase{
		{name: "a Ready node with a prefixed startup taint is starting: the pod waits for it", snap: one(readyWith(startupPrefixed, 5*time.Minute))},
		{name: "the deprecated ignore-taint prefix is a startup taint", snap: one(readyWith(podfacts.IgnoreTaintPrefix+"cni", 5*time.Minute))},
		{name: "a configured startup taint", snap: one(readyWith(cilium, 5*time.Minute)), set: ignoring([]string{cilium}, nil)},
		{name: "the same taint not configured keeps the pod off: a new node", snap: one(readyWith(cilium, 5*time.Minute)), want: growMore},
		{name: "a node starting past the provision time takes nothing", snap: one(readyWith(startupPrefixed, 30*time.Minute)), want: growMore},
		{name: "a status taint keeps the pod off its node", snap: one(readyWith(statusPrefixed, 5*time.Minute)), want: growMore},
		{name: "a prefixed startup taint on a template", snap: atZero(startupPrefixed), want: grow},
		{name: "a prefixed status taint on a template", snap: atZero(statusPrefixed), want: grow},
		{name: "a configured status taint on a template", snap: atZero("example.com/degraded"), set: ignoring(nil, []string{"example.com/degraded"}), want: grow},
	})
}

// TestStartupTaintedNodeIsNotRemoved: a starting node is neither a
// candidate for removal nor a home for the pods of one.
func TestStartupTaintedNodeIsNotRemoved(t *testing.T) {
	startup := nodeTaint(podfacts.StartupTaintPrefix+"cni", "", corev1.TaintEffectNoSchedule)
	young := func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute)) }
	snap := clusterOf([]snapshot.NodeGroup{workers(2, "n1", "n2")},
		[]corev1.Node{node("n1", "workers", "4", "16Gi", young, startup), node("n2", "workers", "4", "16Gi")},
		[]corev1.Pod{pod("web-1", "1", "1Gi", on("n2"))})
	snap.State.UnneededSince = map[string]time.Time{"n1": t0.Add(-time.Hour), "n2": t0.Add(-time.Hour)}
	p := Decide(snap, DefaultSettings(), t0)
	if len(p.ScaleDown) != 0 {
		t.Errorf("scale-down %v: a starting node is no candidate, and n2's pod has no home on it", p.ScaleDown)
	}
}
