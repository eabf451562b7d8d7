package planner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReplaceNotTaken: when replace consolidation starts nothing, the plan
// says why for the expensive node big-0 (replaceCluster: a 3-CPU pod on an
// 8-CPU node at 0.4/h, an empty group small of 4-CPU nodes), one case per
// reason: the row of big's nodes by small (or by no group, or of the
// plan), its code, and what its reason names.
func TestReplaceNotTaken(t *testing.T) {
	groupNamed := func(s *snapshot.Snapshot, name string) *snapshot.NodeGroup {
		for i := range s.NodeGroups {
			if s.NodeGroups[i].Name == name {
				return &s.NodeGroups[i]
			}
		}
		t.Fatalf("no group %s", name)
		return nil
	}
	// The pod on big-0 changed by fn.
	withPod := func(fn func(p *corev1.Pod)) func(*snapshot.Snapshot, *Settings) {
		return func(s *snapshot.Snapshot, _ *Settings) { fn(&s.Pods[0]) }
	}
	// A second 3-CPU pod on big-0: one 4-CPU small node holds one.
	twoPods := func(s *snapshot.Snapshot) {
		s.Pods = append(s.Pods, pod("default/app-2", "3", "4Gi", on("big-0")))
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	cases := []struct {
		name  string
		small float64 // small's price a node
		setup func(*snapshot.Snapshot, *Settings)
		// The row: group of the old nodes ("" for the plan), group of the
		// new ones, code, and words of its reason.
		from, with, code string
		says             []string
		option           *ReplaceOption
	}{
		{name: "saving under replaceMinSaving", small: 0.35, from: "big", with: "small", code: NotReplacedSavingTooSmall,
			says:   []string{"1 node ($0.4/h) by 1 new node of group small ($0.35/h) saves $0.05/h (13%), under scaleDown.replaceMinSaving 20%"},
			option: &ReplaceOption{NewNodes: 1, Before: 0.4, After: 0.35, Saving: 0.05, Currency: "USD"}},
		{name: "saving under a configured replaceMinSaving", small: 0.2, from: "big", with: "small", code: NotReplacedSavingTooSmall,
			setup: func(_ *snapshot.Snapshot, set *Settings) { set.ScaleDown.ReplaceMinSaving = 0.6 },
			says:  []string{"saves $0.2/h (50%), under scaleDown.replaceMinSaving 60%"}},
		{name: "cheaper nodes, more of them", small: 0.25, from: "big", with: "small", code: NotReplacedNotCheaper,
			setup: func(s *snapshot.Snapshot, _ *Settings) { twoPods(s) },
			says:  []string{"1 node ($0.4/h) by 2 new nodes of group small ($0.5/h) saves nothing"}},
		{name: "more new nodes than a step", small: 0.1, from: "big", with: "small", code: ReasonMaxNodesPerStep,
			setup: func(s *snapshot.Snapshot, set *Settings) { twoPods(s); set.ScaleUp.MaxNodesPerStep = 1 },
			says:  []string{"1 node would take 2 new nodes, more than scaleUp.maxNodesPerStep 1"}},
		{name: "group at its max size", small: 0.1, from: "big", with: "small", code: ReasonMaxSizeReached,
			setup: func(s *snapshot.Snapshot, _ *Settings) { groupNamed(s, "small").MaxSize = 0 },
			says:  []string{"group small is at its max size 0 (target 0); 1 node would take 1 new node"}},
		{name: "group short of room", small: 0.1, from: "big", with: "small", code: ReasonMaxSizeReached,
			setup: func(s *snapshot.Snapshot, _ *Settings) { twoPods(s); groupNamed(s, "small").MaxSize = 1 },
			says:  []string{"1 node would take 2 new nodes; group small has room for 1 below its max size 1"}},
		{name: "group backed off", small: 0.1, from: "big", with: "small", code: ReasonBackedOff,
			setup: func(s *snapshot.Snapshot, _ *Settings) {
				s.State.BackoffUntil = map[string]time.Time{"small": t0.Add(5 * time.Minute)}
			},
			says: []string{"group small is backed off until 2026-11-30T10:05:00Z"}},
		{name: "node selector", small: 0.1, from: "big", with: "small", code: ReasonNodeSelector,
			setup: withPod(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "big"} }),
			says:  []string{"pod default/app: node selector pool=big not matched"}},
		{name: "taint", small: 0.1, from: "big", with: "small", code: ReasonTaint,
			setup: func(s *snapshot.Snapshot, _ *Settings) {
				*groupNamed(s, "small") = withTemplateTaint(*groupNamed(s, "small"), "dedicated", "batch", corev1.TaintEffectNoSchedule)
			},
			says: []string{"pod default/app: taint dedicated=batch:NoSchedule not tolerated"}},
		{name: "template too small", small: 0.1, from: "big", with: "small", code: ReasonInsufficient,
			setup: withPod(func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = rl("5", "4Gi") }),
			says:  []string{"pod default/app: insufficient cpu (needs 5, template has 4)"}},
		{name: "other currency", small: 0.1, from: "big", with: "small", code: NotReplacedOtherCurrency,
			setup: func(s *snapshot.Snapshot, _ *Settings) { groupNamed(s, "small").Price.Currency = "EUR" },
			says:  []string{"group small is priced in EUR, group big in USD: prices in different currencies are not compared"}},
		{name: "no price on the new nodes' group", small: 0.1, from: "big", with: "small", code: NotReplacedNoPrice,
			setup: func(s *snapshot.Snapshot, _ *Settings) { groupNamed(s, "small").Price = nil },
			says:  []string{"group small has no price"}},
		{name: "min size of the old nodes' group", small: 0.1, from: "big", with: "small", code: KeptNodeGroupMinSizeReached,
			setup: func(s *snapshot.Snapshot, _ *Settings) { groupNamed(s, "big").MinSize = 1 },
			says:  []string{"replacing 1 node would leave group big 0 nodes, below its min size 1"}},
		{name: "pod anti-affinity", small: 0.1, from: "big", code: ReasonPodAffinity,
			setup: withPod(func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: sel}},
				}}
			}),
			says: []string{"pod default/app has required pod affinity or anti-affinity: a replacement moves no pod with pod-dependent rules"}},
		{name: "topology spread", small: 0.1, from: "big", code: ReasonTopologySpread,
			setup: withPod(func(p *corev1.Pod) {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel,
				}}
			}),
			says: []string{"pod default/app has topology spread constraints"}},
		{name: "host port", small: 0.1, from: "big", code: ReasonHostPort,
			setup: withPod(func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
			}),
			says: []string{"pod default/app uses host ports"}},
		{name: "PodDisruptionBudget", small: 0.1, from: "big", code: KeptNotEnoughPdb,
			setup: func(s *snapshot.Snapshot, _ *Settings) {
				s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, pdb("default/web", 0, "app", "web"))
			},
			says: []string{"PodDisruptionBudget default/web allows 0 disruptions now, the pods of 1 node need 1"}},
		{name: "disruption budget", small: 0.1, from: "big", code: KeptDisruptionLimitReached,
			setup: func(_ *snapshot.Snapshot, set *Settings) {
				set.ScaleDown.DisruptionBudgets = []DisruptionBudget{{Nodes: 0}}
			},
			says: []string{"group big's disruption budget allows 0 nodes at once, 0 draining: 1 node would be too many"}},
		{name: "pods fit on the nodes that stay", small: 0.1, from: "big", code: NotReplacedFitsOnOtherNodes,
			setup: func(s *snapshot.Snapshot, _ *Settings) {
				s.NodeGroups = append(s.NodeGroups, group("other", 0, 3, 1, "8", "32Gi", "other-0"))
				s.Nodes = append(s.Nodes, node("other-0", "other", "8", "32Gi"))
			},
			says: []string{"the pods of 1 node fit on the nodes that stay as they are: a deletion, not a replacement"}},
		{name: "no candidate", small: 0.1, from: "big", code: NotReplacedNoCandidate,
			setup: func(s *snapshot.Snapshot, _ *Settings) {
				s.Nodes[0].CreationTimestamp = metav1.NewTime(t0.Add(-5 * time.Minute))
			},
			says: []string{"no candidate among its 1 node: 1 too new (see kept)"}},
		{name: "no candidate: a pod keeps it", small: 0.1, from: "big", code: NotReplacedNoCandidate,
			setup: withPod(func(p *corev1.Pod) { p.OwnerReferences = nil }),
			says:  []string{"no candidate among its 1 node: 1 kept by a pod (see kept)"}},
		{name: "no price on the old nodes' group", small: 0.1, from: "big", code: NotReplacedNoPrice,
			setup: func(s *snapshot.Snapshot, _ *Settings) { groupNamed(s, "big").Price = nil },
			says:  []string{"group big has no price: its nodes are not replaced"}},
		{name: "no cheaper group", small: 0.5, from: "big", code: NotReplacedNoCheaperGroup,
			says: []string{"no group's nodes cost less ($0.4/h a node here)"}},
		{name: "pending pods", small: 0.1, code: NotReplacedPendingPods,
			setup: func(s *snapshot.Snapshot, _ *Settings) {
				s.Pods = append(s.Pods, pod("default/huge", "100", "1Gi", pending(), created(t0.Add(-time.Hour))))
			},
			says: []string{"1 pending pod (default/huge first): a replacement waits for a settled cluster"}},
		{name: "other changes planned", small: 0.1, code: NotReplacedChangesPlanned,
			setup: func(s *snapshot.Snapshot, _ *Settings) {
				big := groupNamed(s, "big")
				big.TargetSize, big.Instances = 2, append(big.Instances, providerID("big-1"))
				s.Nodes = append(s.Nodes, node("big-1", "big", "8", "32Gi"))
				s.State.UnneededSince = map[string]time.Time{"big-1": t0.Add(-time.Hour)}
			},
			says: []string{"this plan removes 1 node: a replacement is sought only in a plan that changes nothing else"}},
		{name: "group still growing", small: 0.1, code: NotReplacedNodeGroupChanging,
			setup: func(s *snapshot.Snapshot, _ *Settings) {
				groupNamed(s, "small").TargetSize = 1
				s.State.LastScaleUp = map[string]time.Time{"small": t0.Add(-time.Minute)}
			},
			says: []string{"group small has 1 node still coming; a replacement waits for a settled cluster"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := replaceCluster(tc.small)
			set := replaceSettings()
			if tc.setup != nil {
				tc.setup(&s, &set)
			}
			p := Decide(s, set, t0)
			if len(p.Replace) != 0 {
				t.Fatalf("a replacement started: %+v", p.Replace)
			}
			row, ok := notTakenRow(p, tc.from, tc.with)
			if !ok {
				t.Fatalf("no row for %q by %q in %s", tc.from, tc.with, notTakenRows(p))
			}
			if row.Code != tc.code {
				t.Errorf("code %s, want %s (%s)", row.Code, tc.code, row.Reason)
			}
			for _, w := range tc.says {
				if !strings.Contains(row.Reason, w) {
					t.Errorf("reason %q does not say %q", row.Reason, w)
				}
			}
			// A row for a group as a whole, or the plan, names no nodes.
			whole := tc.from == "" || tc.code == NotReplacedNoCandidate || tc.code == NotReplacedNoCheaperGroup ||
				(tc.code == NotReplacedNoPrice && tc.with == "")
			if got := strings.Join(row.Nodes, ","); whole != (got == "") || !whole && got != "big-0" {
				t.Errorf("row names nodes %q, want big-0 unless for a whole group", got)
			}
			if tc.option != nil && (row.Option == nil || *row.Option != *tc.option) {
				t.Errorf("option %+v, want %+v", row.Option, tc.option)
			}
		})
	}
}

// notTakenRow finds the row of from's nodes by with ("": by no group).
func notTakenRow(p Plan, from, with string) (ReplaceNotTaken, bool) {
	for _, r := range p.ReplaceNotTaken {
		if r.NodeGroup == from && r.With == with {
			return r, true
		}
	}
	return ReplaceNotTaken{}, false
}

func notTakenRows(p Plan) string {
	var b strings.Builder
	for _, r := range p.ReplaceNotTaken {
		fmt.Fprintf(&b, "\n  %s %v by %q: %s %s", r.NodeGroup, r.Nodes, r.With, r.Code, r.Reason)
	}
	return b.String()
}

// TestReplaceNotTakenOnlyWithoutReplacement: a plan that starts a
// replacement, and one that does not replace at all (delete consolidation,
// scale-down off), say nothing of replacements not taken.
func TestReplaceNotTakenOnlyWithoutReplacement(t *testing.T) {
	off := replaceSettings()
	off.ScaleDown.Enabled = false
	for name, set := range map[string]Settings{"replace": replaceSettings(), "delete": consolidate(), "scale-down off": off} {
		p := Decide(replaceCluster(0.1), set, t0)
		if (name == "replace") != (len(p.Replace) == 1) {
			t.Errorf("%s: replace %+v", name, p.Replace)
		}
		if len(p.ReplaceNotTaken) != 0 || p.ReplaceNotTakenOmitted != 0 {
			t.Errorf("%s: replaceNotTaken %s (+%d)", name, notTakenRows(p), p.ReplaceNotTakenOmitted)
		}
	}
}

// TestReplaceNotTakenUnderWay: while a replacement waits for its new
// node, and in the plan that gives it up, no other is sought, and the
// plan names the one in the way.
func TestReplaceNotTakenUnderWay(t *testing.T) {
	set := replaceSettings()
	first := Decide(replaceCluster(0.1), set, t0)
	if len(first.Replace) != 1 {
		t.Fatalf("first plan replace = %+v", first.Replace)
	}
	id := first.Replace[0].ID
	for _, tc := range []struct {
		name, code, says string
		at               time.Time
	}{
		{"waiting", NotReplacedUnderWay, "replacement " + id + " (Waiting) is under way: one at a time", t0.Add(2 * time.Minute)},
		{"given up", NotReplacedAbandoned, "this plan gives up replacement " + id + ": none starts in the same plan", t0.Add(set.ScaleUp.MaxNodeProvisionTime + time.Minute)},
	} {
		s := replaceCluster(0.1)
		s.State = first.State
		p := Decide(s, set, tc.at)
		row, ok := notTakenRow(p, "", "")
		if !ok || row.Code != tc.code || row.Reason != tc.says || len(p.ReplaceNotTaken) != 1 {
			t.Errorf("%s: replaceNotTaken %s; want only %s: %s", tc.name, notTakenRows(p), tc.code, tc.says)
		}
	}
}

// TestReplaceNotTakenBoundAndOrder: 30 priced groups of one node each,
// none of whose nodes can go (their pods select their own group): the
// rows start with the dearest group's nodes, stop at MaxReplaceNotTaken,
// and count the rest.
func TestReplaceNotTakenBoundAndOrder(t *testing.T) {
	var groups []snapshot.NodeGroup
	var nodes []corev1.Node
	var pods []corev1.Pod
	const n = 30
	for i := range n {
		name := fmt.Sprintf("g%02d", i)
		g := group(name, 0, 3, 1, "8", "32Gi", name+"-0")
		g.Price = &snapshot.Price{PerHour: 0.1 * float64(i+1), Currency: "USD"}
		groups = append(groups, g)
		nodes = append(nodes, node(name+"-0", name, "8", "32Gi"))
		pods = append(pods, pod("default/"+name, "1", "1Gi", on(name+"-0"), selector("pool", name)))
	}
	p := Decide(clusterOf(groups, nodes, pods), replaceSettings(), t0)
	if len(p.Replace) != 0 || len(p.ReplaceNotTaken) != MaxReplaceNotTaken {
		t.Fatalf("replace %+v, %d rows; want none and %d rows", p.Replace, len(p.ReplaceNotTaken), MaxReplaceNotTaken)
	}
	// Each group's nodes by every cheaper group, 29+28+...+1 rows, and the
	// cheapest group's: no cheaper group.
	if want := n*(n-1)/2 + 1 - MaxReplaceNotTaken; p.ReplaceNotTakenOmitted != want {
		t.Errorf("omitted %d, want %d", p.ReplaceNotTakenOmitted, want)
	}
	first := p.ReplaceNotTaken[0]
	if first.NodeGroup != "g29" || first.With != "g00" || first.Code != ReasonNodeSelector {
		t.Errorf("first row %+v, want g29's node by g00, NodeSelector", first)
	}
	for _, r := range p.ReplaceNotTaken {
		if r.NodeGroup != "g29" && r.NodeGroup != "g28" {
			t.Errorf("row of %s before the dearer groups' were all listed: %s", r.NodeGroup, notTakenRows(p))
			break
		}
	}
}

// TestReplaceNotTakenNotConsidered: a group's one candidate, busier than
// the 100 the search tries alone, is named as not considered.
func TestReplaceNotTakenNotConsidered(t *testing.T) {
	var names []string
	var nodes []corev1.Node
	var pods []corev1.Pod
	for i := range maxReplaceCandidates + 1 {
		name := fmt.Sprintf("a-%03d", i)
		names = append(names, name)
		nodes = append(nodes, node(name, "a", "8", "32Gi"))
		pods = append(pods, pod("default/"+name, "1", "1Gi", on(name), selector("pool", "a")))
	}
	a := group("a", 0, 200, len(names), "8", "32Gi", names...)
	a.Price = &snapshot.Price{PerHour: 0.1, Currency: "USD"}
	b := group("b", 0, 3, 1, "8", "32Gi", "b-0")
	b.Price = &snapshot.Price{PerHour: 0.4, Currency: "USD"}
	nodes = append(nodes, node("b-0", "b", "8", "32Gi"))
	pods = append(pods, pod("default/b", "3", "1Gi", on("b-0"), selector("pool", "b")))
	p := Decide(clusterOf([]snapshot.NodeGroup{a, b}, nodes, pods), replaceSettings(), t0)
	row, ok := notTakenRow(p, "b", "")
	if !ok || row.Code != NotReplacedNotConsidered || len(row.Nodes) != 1 || row.Nodes[0] != "b-0" ||
		!strings.Contains(row.Reason, "not among the 100 least utilised nodes of the cluster") {
		t.Errorf("b's row %+v in %s\nplan: up %+v down %+v decrease %+v", row, notTakenRows(p), p.ScaleUp, len(p.ScaleDown), p.DecreaseTarget)
	}
}

// TestReplaceNotesCheaperGroup: a replacement by group mid (16-CPU nodes at
// 0.2/h) says why small, whose nodes cost less, did not take big-0's pods,
// as a scale-up names a cheaper group not taken; with none cheaper, it
// says nothing of it.
func TestReplaceNotesCheaperGroup(t *testing.T) {
	withMid := func(smallPrice float64, extra func(*snapshot.Snapshot)) snapshot.Snapshot {
		s := replaceCluster(smallPrice)
		mid := group("mid", 0, 5, 0, "16", "64Gi")
		mid.Price = &snapshot.Price{PerHour: 0.2, Currency: "USD"}
		s.NodeGroups = append(s.NodeGroups, mid)
		if extra != nil {
			extra(&s)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		s    snapshot.Snapshot
		note string // "": none
	}{
		{"small at its max size", withMid(0.1, func(s *snapshot.Snapshot) { s.NodeGroups[1].MaxSize = 0 }),
			"; cheaper group small ($0.1/h a node) not taken: group small is at its max size 0 (target 0); 1 node would take 1 new node"},
		{"small saving less", withMid(0.15, func(s *snapshot.Snapshot) {
			s.Pods = append(s.Pods, pod("default/app-2", "3", "4Gi", on("big-0")))
		}), "; cheaper group small ($0.15/h a node) not taken: 2 new nodes of it ($0.3/h) would save $0.1/h, less"},
		{"small dearer", withMid(0.3, nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.s, replaceSettings(), t0)
			if len(p.Replace) != 1 || p.Replace[0].NodeGroup != "mid" || len(p.ScaleUp) != 1 {
				t.Fatalf("replace %+v: want big-0 replaced by mid", p.Replace)
			}
			why := p.Replace[0].Reason
			if got := why[strings.Index(why, " once the new are Ready")+len(" once the new are Ready"):]; got != tc.note {
				t.Errorf("reason ends %q, want %q", got, tc.note)
			}
			if p.ScaleUp[0].Reason != why {
				t.Errorf("scale-up reason %q, want the replacement's", p.ScaleUp[0].Reason)
			}
		})
	}
}
