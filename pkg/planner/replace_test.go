package planner

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
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
	// It stays, drained, to hold the node that received the pod.
	if r, ok := done.State.Replacing[done.Replace[0].ID]; len(done.State.Replacing) != 1 || !ok ||
		!r.Drained.Equal(t0.Add(4*time.Minute)) || !slices.Equal(r.Receivers, []string{"small-0"}) {
		t.Errorf("state after the drain = %+v, want the replacement drained at 10:04 onto small-0", done.State.Replacing)
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

// heldCluster is a replacement of big-0 by one node of group small, at
// 0.1/h, asked for at t0: small-0 came at t0+1m; mid-0, an older node of
// small, holds a 1.5-CPU pod. Before the drain (drained false), big-0
// holds app (3 CPU, which only small-0 has room for) and side (1 CPU, which
// fits on mid-0); after, they are there, and big-0 is gone, or still
// draining, empty (still). Group tiny, far cheaper and empty, would
// replace small's nodes.
func heldCluster(drained, still bool) snapshot.Snapshot {
	var bigNodes []string
	var nodes []corev1.Node
	if !drained || still {
		bigNodes = []string{"big-0"}
		var opts []nodeOpt
		if still {
			opts = append(opts, draining())
		}
		nodes = append(nodes, node("big-0", "big", "8", "32Gi", opts...))
	}
	big := group("big", 0, 3, len(bigNodes), "8", "32Gi", bigNodes...)
	big.Price = &snapshot.Price{PerHour: 0.4, Currency: "USD"}
	small := group("small", 0, 5, 2, "4", "16Gi", "mid-0", "small-0")
	small.Price = &snapshot.Price{PerHour: 0.1, Currency: "USD"}
	tiny := group("tiny", 0, 5, 0, "4", "16Gi")
	tiny.Price = &snapshot.Price{PerHour: 0.01, Currency: "USD"}
	fresh := node("small-0", "small", "4", "16Gi")
	fresh.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	nodes = append(nodes, node("mid-0", "small", "4", "16Gi"), fresh)
	appOn, sideOn := "big-0", "big-0"
	if drained {
		appOn, sideOn = "small-0", "mid-0"
	}
	pods := []corev1.Pod{
		pod("default/app", "3", "4Gi", on(appOn)), pod("default/side", "1", "1Gi", on(sideOn)), pod("default/mid", "1500m", "1Gi", on("mid-0")),
	}
	s := clusterOf([]snapshot.NodeGroup{big, small, tiny}, nodes, pods)
	s.State.LastScaleUp = map[string]time.Time{"small": t0}
	return s
}

// TestReplaceHoldsWhatReceivedItsPods: once a replacement drains its old
// nodes, the nodes that received their pods (its new node small-0, and
// mid-0 that the drain moved a pod onto) are held for max(delayAfterAdd,
// unneededTime), 10m by default, after the drain: kept
// (ReceivedMovedPods), no candidates for another replacement, the
// replacement listed as Holding and kept in the state. The window counts
// from the drain, moved on while the old node still drains; once over,
// the replacement is forgotten and the nodes are ordinary (here, taken by
// a replacement by the cheaper group). A replacement that only holds does
// not keep the search from running.
func TestReplaceHoldsWhatReceivedItsPods(t *testing.T) {
	set := replaceSettings()
	id := replacementID([]string{"big-0"}, t0)
	waiting := heldCluster(false, false)
	waiting.State.Replacing = map[string]snapshot.Replacement{id: {NodeGroup: "small", Delta: 1, Nodes: []string{"big-0"}, Since: t0}}
	drain := Decide(waiting, set, t0.Add(4*time.Minute))
	if got := removedNodes(drain); !slices.Equal(got, []string{"big-0"}) || len(drain.Replace) != 1 || drain.Replace[0].Phase != ReplaceDraining {
		t.Fatalf("drain plan: removed %v, replace %+v", got, drain.Replace)
	}
	want := snapshot.Replacement{NodeGroup: "small", Delta: 1, Nodes: []string{"big-0"}, Since: t0,
		Drained: t0.Add(4 * time.Minute), Receivers: []string{"mid-0", "small-0"}}
	if r := drain.State.Replacing[id]; len(drain.State.Replacing) != 1 || !reflect.DeepEqual(r, want) {
		t.Fatalf("state after the drain = %+v, want %+v", drain.State.Replacing, want)
	}

	for _, tc := range []struct {
		name  string
		still bool // big-0 still draining
		at    time.Duration
		// held: the plan lists the replacement Holding, keeps it in the
		// state drained at drained, and keeps mid-0 and small-0 with a
		// reason naming until (empty while draining).
		held           bool
		drained, until time.Duration
		reason         string
	}{
		{name: "just drained", at: 5 * time.Minute, held: true, drained: 4 * time.Minute, until: 14 * time.Minute,
			reason: "its old nodes drained at 2026-11-30T10:04:00Z; until 2026-11-30T10:14:00Z, the longer of delayAfterAdd and unneededTime after, it holds from scale-down and replacement the 2 nodes that received their pods (its new nodes of group small and the others they moved onto)"},
		// small-0 came at 10:01: by creation alone it would be old enough
		// from 10:11.
		{name: "young no more, within the window", at: 13*time.Minute + 59*time.Second, held: true, drained: 4 * time.Minute, until: 14 * time.Minute},
		{name: "window over", at: 14 * time.Minute},
		{name: "old node still draining", still: true, at: 20 * time.Minute, held: true, drained: 20 * time.Minute,
			reason: "its old nodes are draining; until 10m0s after the drain, the longer of delayAfterAdd and unneededTime, it holds from scale-down and replacement the 2 nodes that receive their pods (its new nodes of group small and the others they move onto)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := heldCluster(true, tc.still)
			s.State = drain.State
			p := Decide(s, set, t0.Add(tc.at))
			for _, name := range []string{"mid-0", "small-0"} {
				i := slices.IndexFunc(p.Kept, func(k Kept) bool { return k.Node == name })
				if held := i >= 0 && p.Kept[i].Code == KeptReceivedMovedPods; held != tc.held {
					t.Errorf("%s held %v, want %v: kept %+v", name, held, tc.held, p.Kept)
					continue
				}
				if tc.held && tc.until != 0 && !strings.Contains(p.Kept[i].Reason, "held until "+t0.Add(tc.until).Format(time.RFC3339)) {
					t.Errorf("%s kept: %q, want it to name when the hold ends", name, p.Kept[i].Reason)
				}
			}
			if tc.held {
				if !slices.ContainsFunc(p.KeptCounts, func(kc KeptCount) bool {
					return kc.NodeGroup == "small" && kc.Code == KeptReceivedMovedPods && kc.Nodes == 2
				}) {
					t.Errorf("keptCounts %+v, want 2 of small %s", p.KeptCounts, KeptReceivedMovedPods)
				}
				if len(p.Replace) != 1 || p.Replace[0].ID != id || p.Replace[0].Phase != ReplaceHolding ||
					tc.reason != "" && p.Replace[0].Reason != tc.reason {
					t.Errorf("replace = %+v, want %s Holding, %q", p.Replace, id, tc.reason)
				}
				hold := want
				hold.Drained = t0.Add(tc.drained)
				if r := p.State.Replacing[id]; !reflect.DeepEqual(r, hold) {
					t.Errorf("state replacing = %+v, want %+v", p.State.Replacing, hold)
				}
				if len(p.ScaleUp) != 0 || len(p.ScaleDown) != 0 {
					t.Errorf("scaleUp %+v, scaleDown %+v: the held nodes went", p.ScaleUp, p.ScaleDown)
				}
			} else if _, ok := p.State.Replacing[id]; ok || slices.ContainsFunc(p.Replace, func(r Replace) bool { return r.ID == id }) {
				t.Errorf("replace %+v, state %+v: want %s forgotten once its window is over", p.Replace, p.State.Replacing, id)
			}
			switch {
			case tc.still:
				// The drain keeps the cluster unsettled, as any does.
				if row, ok := notTakenRow(p, "", ""); !ok || row.Code != NotReplacedNodeGroupChanging {
					t.Errorf("replaceNotTaken %s, want %s", notTakenRows(p), NotReplacedNodeGroupChanging)
				}
			case tc.held:
				// Holding is not under way: the search ran, and found
				// small's nodes held.
				row, ok := notTakenRow(p, "small", "")
				if !ok || row.Code != NotReplacedNoCandidate || !strings.Contains(row.Reason, "2 held by a replacement") {
					t.Errorf("replaceNotTaken %s, want small %s, 2 held", notTakenRows(p), NotReplacedNoCandidate)
				}
			default:
				if len(p.Replace) != 1 || p.Replace[0].Phase != ReplaceRequested || p.Replace[0].NodeGroup != "tiny" {
					t.Errorf("replace %+v, want small's nodes, free again, replaced by tiny", p.Replace)
				}
			}
		})
	}

	// A new node gone, the other receiver held alone; both gone and the
	// old node too, nothing is left to hold.
	s := heldCluster(true, false)
	s.State = drain.State
	s.Nodes = slices.DeleteFunc(s.Nodes, func(n corev1.Node) bool { return n.Name == "small-0" })
	s.Pods = slices.DeleteFunc(s.Pods, func(p corev1.Pod) bool { return p.Name == "app" })
	if p := Decide(s, set, t0.Add(5*time.Minute)); len(p.Replace) != 1 || !strings.Contains(p.Replace[0].Reason, "the 1 node that received") {
		t.Errorf("replace %+v, want mid-0 held alone", p.Replace)
	}
	s.Nodes = slices.DeleteFunc(s.Nodes, func(n corev1.Node) bool { return n.Name == "mid-0" })
	s.Pods = nil
	if p := Decide(s, set, t0.Add(5*time.Minute)); len(p.Replace) != 0 || len(p.State.Replacing) != 0 {
		t.Errorf("replace %+v, state %+v: want nothing held, the replacement forgotten", p.Replace, p.State.Replacing)
	}
}
