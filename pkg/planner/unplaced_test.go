package planner

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// TestDropUnplacedPods: pods bound to a node the snapshot lacks (a deleted
// Node's, not yet collected) are left out of what the live reader hands on,
// the rest untouched; the snapshot left is one WriteSnapshot takes and plans
// as the live one does, a DaemonSet pod on the gone node included (its
// requests are no overhead of new nodes in either).
func TestDropUnplacedPods(t *testing.T) {
	live := snapshot.Snapshot{
		CapturedAt: t0,
		NodeGroups: []snapshot.NodeGroup{group("workers", 0, 10, 1, "4", "16Gi", "a")},
		Nodes:      []corev1.Node{node("a", "workers", "4", "16Gi")},
		Pods: []corev1.Pod{
			pod("shop/on-a", "4", "1Gi", on("a")),
			pod("shop/on-gone", "1", "1Gi", on("gone")),
			pod("kube-system/ds-gone", "2", "1Gi", on("gone"), daemon("ds-only-on-gone")),
			pod("shop/p1", "1", "1Gi", pending(), created(t0.Add(-time.Minute))),
			pod("shop/p2", "1", "1Gi", pending(), created(t0.Add(-time.Minute))),
			pod("shop/p3", "1", "1Gi", pending(), created(t0.Add(-time.Minute))),
		},
	}
	if got := UnplacedPods(live.Nodes, live.Pods); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("UnplacedPods = %v, want [1 2]", got)
	}
	before := slices.Clone(live.Pods)
	kept, dropped := DropUnplacedPods(live)
	if want := []string{"shop/on-gone", "kube-system/ds-gone"}; !slices.Equal(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	var names []string
	for _, p := range kept.Pods {
		names = append(names, p.Name)
	}
	if want := "on-a p1 p2 p3"; strings.Join(names, " ") != want {
		t.Errorf("kept %v, want %s", names, want)
	}
	for i := range before {
		if live.Pods[i].Name != before[i].Name || live.Pods[i].Spec.NodeName != before[i].Spec.NodeName {
			t.Fatalf("the live pod list was changed at %d", i)
		}
	}
	var b bytes.Buffer
	if err := snapshot.WriteCompactSnapshot(&b, live); err == nil || !strings.Contains(err.Error(), `pods[1].spec.nodeName: "gone" is not a node of the snapshot`) {
		t.Errorf("writing the live snapshot: %v, want the unplaced pod refused", err)
	}
	if err := snapshot.WriteCompactSnapshot(&b, kept); err != nil {
		t.Fatalf("writing what is kept: %v", err)
	}
	read, err := snapshot.ReadSnapshot(&b)
	if err != nil {
		t.Fatal(err)
	}
	got, want := planJSON(t, read, DefaultSettings()), planJSON(t, live, DefaultSettings())
	if got != want {
		t.Errorf("the written snapshot plans differently from the live one:\n--- written\n%s\n--- live\n%s", got, want)
	}
	if !strings.Contains(want, `"delta": 1`) {
		t.Errorf("want one new node for the three pending pods (no DaemonSet overhead from the gone node's pod):\n%s", want)
	}
	if same, none := DropUnplacedPods(kept); len(none) != 0 || &same.Pods[0] != &kept.Pods[0] {
		t.Errorf("a snapshot with nothing to leave out is returned as is (dropped %v)", none)
	}
}
