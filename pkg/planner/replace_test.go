package planner

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// replaceCluster is one 8-CPU node big-0 (group big, 0.4/h) holding a
// 3-CPU pod, and an empty group small of 4-CPU nodes at smallPrice/h;
// extra are registered nodes of small.
func replaceCluster(smallPrice float64, extra ...corev1.Node) snapshot.Snapshot {
	big := group("big", 0, 3, 1, "8", "32Gi", "big-0")
	big.Price = &snapshot.Price{PerHour: 0.4, Currency: "USD"}
	var names []string
	for _, n := range extra {
		names = append(names, n.Name)
	}
	small := group("small", 0, 5, len(extra), "4", "16Gi", names...)
	small.Price = &snapshot.Price{PerHour: smallPrice, Currency: "USD"}
	nodes := append([]corev1.Node{node("big-0", "big", "8", "32Gi")}, extra...)
	return clusterOf([]snapshot.NodeGroup{big, small}, nodes, []corev1.Pod{pod("default/app", "3", "4Gi", on("big-0"))})
}

func replaceSettings() Settings {
	set := DefaultSettings()
	set.ScaleDown.Consolidation = ConsolidationReplace
	return set
}

// TestReplaceNewNodesFirst walks one replacement: the cheaper node is asked
// for and the old one kept; once the new node is Ready the old one drains;
// a replacement whose node never comes removes nothing; one that saves
// less than the minimum share is never started.
func TestReplaceNewNodesFirst(t *testing.T) {
	set := replaceSettings()
	first := Decide(replaceCluster(0.1), set, t0)
	if len(first.ScaleDown) != 0 || len(first.ScaleUp) != 1 || first.ScaleUp[0].NodeGroup != "small" || first.ScaleUp[0].Delta != 1 {
		t.Fatalf("first plan: scaleUp %+v, scaleDown %+v; want small +1 and nothing removed", first.ScaleUp, first.ScaleDown)
	}
	if len(first.Replace) != 1 || first.Replace[0].Phase != ReplaceRequested || first.Replace[0].Saving != 0.3 ||
		!slices.Equal(first.Replace[0].Nodes, []string{"big-0"}) {
		t.Fatalf("first plan replace = %+v", first.Replace)
	}
	if len(first.State.Replacing) != 1 {
		t.Fatalf("state.replacing = %+v", first.State.Replacing)
	}

	// Two minutes on, the new node is not there yet: the old one is kept.
	later := t0.Add(2 * time.Minute)
	waiting := replaceCluster(0.1)
	waiting.State = first.State
	p := Decide(waiting, set, later)
	if len(p.ScaleDown) != 0 || len(p.ScaleUp) != 0 || len(p.Replace) != 1 || p.Replace[0].Phase != ReplaceWaiting {
		t.Fatalf("waiting plan: scaleUp %+v, scaleDown %+v, replace %+v", p.ScaleUp, p.ScaleDown, p.Replace)
	}

	// The new node is Ready: the old one goes.
	fresh := node("small-0", "small", "4", "16Gi")
	fresh.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	ready := replaceCluster(0.1, fresh)
	ready.State = p.State
	done := Decide(ready, set, t0.Add(4*time.Minute))
	if got := removedNodes(done); !slices.Equal(got, []string{"big-0"}) || len(done.Replace) != 1 || done.Replace[0].Phase != ReplaceDraining {
		t.Fatalf("ready plan: removed %v, replace %+v", got, done.Replace)
	}
	if len(done.State.Replacing) != 0 {
		t.Errorf("a replacement whose old nodes drain stays in the state: %+v", done.State.Replacing)
	}

	// The new node never came: after maxNodeProvisionTime nothing is removed.
	late := replaceCluster(0.1)
	late.State = p.State
	gone := Decide(late, set, t0.Add(set.ScaleUp.MaxNodeProvisionTime+time.Minute))
	if len(gone.ScaleDown) != 0 || len(gone.Replace) != 1 || gone.Replace[0].Phase != ReplaceAbandoned || len(gone.State.Replacing) != 0 {
		t.Fatalf("late plan: scaleDown %+v, replace %+v, state %+v", gone.ScaleDown, gone.Replace, gone.State.Replacing)
	}

	// 0.4 → 0.35 saves 12.5%, below the default 20%: no replacement.
	if small := Decide(replaceCluster(0.35), set, t0); len(small.ScaleUp) != 0 || len(small.Replace) != 0 {
		t.Errorf("a saving below replaceMinSaving started %+v / %+v", small.ScaleUp, small.Replace)
	}
	// Without replace, the same cluster is left alone.
	if del := Decide(replaceCluster(0.1), consolidate(), t0); len(del.ScaleUp) != 0 || len(del.Replace) != 0 {
		t.Errorf("delete consolidation replaced: %+v / %+v", del.ScaleUp, del.Replace)
	}
}

// TestReplaceSearchSeesEveryNodeThatStays: twelve nodes of a group, each
// with a 1-CPU pod on its 8 CPUs, next to a far cheaper empty group. Any
// of them, or ten together, have their pods fit on the nodes that stay: a
// deletion, never a replacement, however many sets the search tried
// before (each takes its own nodes away while it is tried, and must give
// them back).
func TestReplaceSearchSeesEveryNodeThatStays(t *testing.T) {
	var names []string
	var nodes []corev1.Node
	var pods []corev1.Pod
	for i := range 12 {
		name := fmt.Sprintf("a-%02d", i)
		names = append(names, name)
		nodes = append(nodes, node(name, "a", "8", "32Gi"))
		pods = append(pods, pod("default/"+name, "1", "1Gi", on(name)))
	}
	a := group("a", 0, 20, len(names), "8", "32Gi", names...)
	a.Price = &snapshot.Price{PerHour: 0.4, Currency: "USD"}
	cheap := group("cheap", 0, 20, 0, "8", "32Gi")
	cheap.Price = &snapshot.Price{PerHour: 0.01, Currency: "USD"}
	p := Decide(clusterOf([]snapshot.NodeGroup{a, cheap}, nodes, pods), replaceSettings(), t0)
	if len(p.Replace) != 0 || len(p.ScaleUp) != 0 {
		t.Fatalf("replaced %+v (scale-up %+v): the pods fit on the nodes that stay", p.Replace, p.ScaleUp)
	}
	if row, ok := notTakenRow(p, "a", ""); !ok || row.Code != NotReplacedFitsOnOtherNodes {
		t.Errorf("a's row %+v in %s, want %s", row, notTakenRows(p), NotReplacedFitsOnOtherNodes)
	}
}
