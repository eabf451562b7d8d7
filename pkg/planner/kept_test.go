package planner

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestKept: every node scale-down considers and keeps is listed once, with
// the code and a reason naming what keeps it.
func TestKept(t *testing.T) {
	with := func(s snapshot.Snapshot, f func(*snapshot.Snapshot)) snapshot.Snapshot { f(&s); return s }
	consolidate := DefaultSettings()
	consolidate.ScaleDown.Consolidation = ConsolidationDelete
	budgeted := consolidate
	budgeted.ScaleDown.DisruptionBudgets = []DisruptionBudget{{Nodes: 1}}
	cases := []struct {
		name       string
		snap       snapshot.Snapshot
		set        *Settings
		node, code string
		reason     string // a part of the reason
		removes    bool   // the plan removes another node
	}{
		{
			name: "a pod not safe to evict", node: "n1", code: KeptBlockedByPod,
			snap:   scaleDownBase(light("shop/db-0", annotate(annotationSafeToEvict, "false"))),
			reason: `pod shop/db-0: annotation cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`,
		},
		{
			name: "a bare pod", node: "n1", code: KeptBlockedByPod,
			snap:   scaleDownBase(light("shop/debug", bare())),
			reason: "pod shop/debug: not managed by a controller",
		},
		{
			name: "a budget with no disruption left", node: "n1", code: KeptNotEnoughPdb,
			snap: with(scaleDownBase(light("shop/q-0", podLabels("app", "q"))), func(s *snapshot.Snapshot) {
				s.PodDisruptionBudgets = []policyv1.PodDisruptionBudget{pdb("shop/queue", 0, "app", "q")}
			}),
			reason: "PodDisruptionBudget shop/queue has too few disruptions left (status.disruptionsAllowed 0) for the node's 1 pod it covers",
		},
		{
			name: "pods that fit nowhere else", node: "n1", code: KeptNoPlaceToMovePods,
			snap:   scaleDownBase(pod("shop/big", "1500m", "1Gi", on("n1"))),
			reason: "pod shop/big fits on no other node",
		},
		{
			name: "the group at its min size", node: "n1", code: KeptNodeGroupMinSizeReached,
			snap:   with(scaleDownBase(light("a")), func(s *snapshot.Snapshot) { s.NodeGroups[0].MinSize = 3 }),
			reason: "group at its min size 3 (target 3, 0 draining or removed by this plan)",
		},
		{
			name: "unneeded for less than unneededTime", node: "n1", code: KeptNotUnneededLongEnough,
			snap: with(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.State.UnneededSince = map[string]time.Time{"n1": t0.Add(-4 * time.Minute)}
			}),
			reason: "unneeded since 2026-11-30T09:56:00Z, for 4m0s of scaleDown.unneededTime 10m0s",
		},
		{
			name: "a scale-up within delayAfterAdd", node: "n1", code: KeptScaleDownInCooldown,
			snap: with(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.State.LastScaleUp = map[string]time.Time{"workers": t0.Add(-5 * time.Minute)}
			}),
			reason: "group scaled up at 2026-11-30T09:55:00Z, within scaleDown.delayAfterAdd 10m0s",
		},
		{
			name: "a pending pod the group could host", node: "n1", code: KeptPendingPodFits,
			snap: with(scaleDownBase(light("a"), pod("shop/report", "3800m", "1Gi", pending())), func(s *snapshot.Snapshot) {
				s.NodeGroups[0].MaxSize = 3
			}),
			reason: "pending pod shop/report fits the group's template",
		},
		{
			name: "maxConcurrentDrains reached", node: "n1", code: KeptDisruptionLimitReached,
			snap: with(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.Nodes[1].Spec.Taints = append(s.Nodes[1].Spec.Taints, corev1.Taint{Key: TaintDraining, Effect: corev1.TaintEffectNoSchedule})
			}),
			reason: "scaleDown.maxConcurrentDrains 1 reached (1 draining or removed by this plan)",
		},
		{
			name: "a disruption budget used up", node: "n1", code: KeptDisruptionLimitReached, set: &budgeted,
			snap: with(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.Nodes[1].Spec.Taints = append(s.Nodes[1].Spec.Taints, corev1.Taint{Key: TaintDraining, Effect: corev1.TaintEffectNoSchedule})
			}),
			reason: "disruption budget allows 1 node of the group at once, 1 draining or removed by this plan",
		},
		{
			name: "a group shrinking to its schedule's max", node: "n4", code: KeptGroupShrinking, removes: true,
			snap: with(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.Nodes = append(s.Nodes, node("n4", "workers", "4", "16Gi"))
				s.Pods = append(s.Pods, pod("b", "500m", "1Gi", on("n4")))
				s.NodeGroups[0].Instances = append(s.NodeGroups[0].Instances, providerID("n4"))
				s.NodeGroups[0].TargetSize, s.NodeGroups[0].MaxSize, s.NodeGroups[0].BoundsFrom = 4, 3, "schedule night"
				s.State.UnneededSince["n4"] = t0.Add(-20 * time.Minute)
			}),
			reason: "group above its max size 3: the surplus goes by shrinking it",
		},
		{
			name: "the node's scale-down-disabled annotation", node: "n1", code: KeptScaleDownDisabled,
			snap: with(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.Nodes[0].Annotations = map[string]string{annotationScaleDownDisabled: "true"}
			}),
			reason: `node n1: node annotation cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`,
		},
		{
			name: "utilisation not below the threshold", node: "n2", code: KeptNotUnderutilized, removes: true,
			snap:   scaleDownBase(light("a")),
			reason: "utilisation 75% (cpu 75%, memory 6%) not below 50%",
		},
		{
			name: "a node not Ready", node: "n1", code: KeptNotReady,
			snap: with(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.Nodes[0] = node("n1", "workers", "4", "16Gi", notReady(t0.Add(-time.Hour)))
			}),
			reason: "node is not Ready",
		},
		{
			name: "a node cordoned by hand", node: "n1", code: KeptUnschedulable,
			snap:   with(scaleDownBase(light("a")), func(s *snapshot.Snapshot) { s.Nodes[0].Spec.Unschedulable = true }),
			reason: "node is cordoned",
		},
		{
			name: "a node too new to consolidate", node: "n1", code: KeptNodeTooNew, set: &consolidate,
			snap: with(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.Nodes[0].CreationTimestamp = metav1.NewTime(t0.Add(-2 * time.Minute))
			}),
			reason: "created 2026-11-30T09:58:00Z, within 10m0s",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := DefaultSettings()
			if c.set != nil {
				set = *c.set
			}
			p := Decide(c.snap, set, t0)
			if !c.removes && len(p.ScaleDown) != 0 {
				t.Fatalf("scaleDown = %+v, want none", p.ScaleDown)
			}
			i := slices.IndexFunc(p.Kept, func(k Kept) bool { return k.Node == c.node })
			if i < 0 {
				t.Fatalf("%s not kept: %+v", c.node, p.Kept)
			}
			k := p.Kept[i]
			if k.NodeGroup != "workers" || k.Code != c.code || !strings.Contains(k.Reason, c.reason) {
				t.Errorf("kept %+v, want workers/%s %s with reason containing %q", k, c.node, c.code, c.reason)
			}
			if !slices.ContainsFunc(p.KeptCounts, func(kc KeptCount) bool { return kc.NodeGroup == "workers" && kc.Code == c.code }) {
				t.Errorf("keptCounts %+v count no %s", p.KeptCounts, c.code)
			}
		})
	}
}

// TestKeptLeavesOut: a node the plan removes, drains or deletes is not
// kept; busy nodes come after the nodes kept for another reason.
func TestKeptLeavesOut(t *testing.T) {
	s := scaleDownBase(light("a"))
	s.Nodes = append(s.Nodes, node("n4", "workers", "4", "16Gi", draining()), node("n5", "workers", "4", "16Gi", deleting()))
	s.NodeGroups[0].TargetSize = 5
	s.NodeGroups[0].Instances = append(s.NodeGroups[0].Instances, providerID("n4"), providerID("n5"))
	set := DefaultSettings()
	set.ScaleDown.MaxConcurrentDrains = 2
	p := Decide(s, set, t0)
	if len(p.ScaleDown) != 1 || p.ScaleDown[0].Node != "n1" {
		t.Fatalf("scaleDown = %+v, want n1", p.ScaleDown)
	}
	var got []string
	for _, k := range p.Kept {
		got = append(got, k.Node+" "+k.Code)
	}
	if want := []string{"n2 NotUnderutilized", "n3 NotUnderutilized"}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if want := []KeptCount{{NodeGroup: "workers", Code: KeptNotUnderutilized, Nodes: 2}}; !slices.Equal(p.KeptCounts, want) {
		t.Errorf("keptCounts %+v, want %+v", p.KeptCounts, want)
	}
}

// TestKeptCapped: past MaxKept the plan lists the first by code, group and
// node, and counts the rest; the per-group counts count every node.
func TestKeptCapped(t *testing.T) {
	const n = MaxKept + 7
	var names []string
	var nodes []corev1.Node
	var pods []corev1.Pod
	for i := range n {
		name := fmt.Sprintf("w-%03d", i)
		names = append(names, name)
		nodes = append(nodes, node(name, "workers", "4", "16Gi"))
		pods = append(pods, pod("busy-"+name, "3", "1Gi", on(name)))
	}
	// One node under the threshold, blocked: listed first though last by name.
	pods[n-1] = pod("shop/db", "1", "1Gi", on(names[n-1]), annotate(annotationSafeToEvict, "false"))
	s := clusterOf([]snapshot.NodeGroup{group("workers", 1, 100, n, "4", "16Gi", names...)}, nodes, pods)
	p := Decide(s, DefaultSettings(), t0)
	if len(p.Kept) != MaxKept || p.KeptOmitted != n-MaxKept {
		t.Fatalf("kept %d, omitted %d; want %d and %d", len(p.Kept), p.KeptOmitted, MaxKept, n-MaxKept)
	}
	if k := p.Kept[0]; k.Node != names[n-1] || k.Code != KeptBlockedByPod {
		t.Errorf("first kept %+v, want the blocked node", k)
	}
	if k := p.Kept[1]; k.Node != names[0] || k.Code != KeptNotUnderutilized {
		t.Errorf("second kept %+v, want %s busy", k, names[0])
	}
	want := []KeptCount{{"workers", KeptBlockedByPod, 1}, {"workers", KeptNotUnderutilized, n - 1}}
	if !slices.Equal(p.KeptCounts, want) {
		t.Errorf("keptCounts %+v, want %+v", p.KeptCounts, want)
	}
}
