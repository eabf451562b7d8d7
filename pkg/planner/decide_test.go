package planner

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// want is the part of a plan a case asserts. nil slices mean "none".
type want struct {
	up       []string // "group +delta =newTarget [pods]"
	down     []string // "group/node"
	unsched  []string // "pod: reason"
	decrease []string // "group -delta =newTarget"
	check    func(t *testing.T, p Plan)
}

func summarize(p Plan) (up, down, unsched, decrease []string) {
	for _, u := range p.ScaleUp {
		up = append(up, fmt.Sprintf("%s +%d =%d %v", u.NodeGroup, u.Delta, u.NewTargetSize, u.Pods))
	}
	for _, d := range p.ScaleDown {
		down = append(down, d.NodeGroup+"/"+d.Node)
	}
	for _, u := range p.Unschedulable {
		unsched = append(unsched, u.Pod+": "+u.Reason)
	}
	for _, d := range p.DecreaseTarget {
		decrease = append(decrease, fmt.Sprintf("%s -%d =%d", d.NodeGroup, d.Delta, d.NewTargetSize))
	}
	return
}

func assertPlan(t *testing.T, p Plan, w want) {
	t.Helper()
	up, down, unsched, decrease := summarize(p)
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"scaleUp", up, w.up}, {"scaleDown", down, w.down}, {"unschedulable", unsched, w.unsched}, {"decreaseTarget", decrease, w.decrease}} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s:\n got  %q\n want %q", c.what, c.got, c.want)
		}
	}
	if w.check != nil {
		w.check(t, p)
	}
}

type planCase struct {
	name string
	snap snapshot.Snapshot
	set  func(*Settings)
	want want
}

func runCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := DefaultSettings()
			if tc.set != nil {
				tc.set(&set)
			}
			assertPlan(t, Decide(tc.snap, set, t0), tc.want)
		})
	}
}

func workers(target int, nodes ...string) snapshot.NodeGroup {
	return group("workers", 0, 10, target, "4", "16Gi", nodes...)
}

func TestPending(t *testing.T) {
	gated := pod("gated", "1", "1Gi", pending())
	gated.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated
	bound := pod("bound", "1", "1Gi", pending())
	bound.Spec.NodeName = "elsewhere"
	runCases(t, []planCase{
		{
			name: "an unschedulable pod old enough asks for a node",
			snap: clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{pod("p", "1", "1Gi", pending())}),
			want: want{up: []string{"workers +1 =1 [default/p]"}, check: func(t *testing.T, p Plan) {
				if got, w := p.ScaleUp[0].Reason, "1 pending pod needs 1 node (least waste 84%)"; got != w {
					t.Errorf("reason %q, want %q", got, w)
				}
				if !p.State.LastScaleUp["workers"].Equal(t0) {
					t.Errorf("lastScaleUp %v, want %v", p.State.LastScaleUp, t0)
				}
			}},
		},
		{
			name: "a pod younger than pendingPodMinAge waits",
			snap: clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{pod("p", "1", "1Gi", pending(), created(t0.Add(-5*time.Second)))}),
		},
		{
			name: "bound, terminal, deleted and gated pods are not pending",
			snap: clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{
				bound,
				pod("failed", "1", "1Gi", pending(), phase(corev1.PodFailed)),
				pod("succeeded", "1", "1Gi", pending(), phase(corev1.PodSucceeded)),
				pod("deleted", "1", "1Gi", pending(), podDeleting()),
				gated,
				pod("no-condition", "1", "1Gi"),
			}),
		},
	})
}

func TestFilterOutSchedulable(t *testing.T) {
	full := func(n string) corev1.Pod { return pod("busy-"+n, "3500m", "1Gi", on(n)) }
	runCases(t, []planCase{
		{
			name: "a pod that fits an existing node needs no new node",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi")},
				[]corev1.Pod{pod("web-1", "1", "1Gi", on("n1")), pod("p", "2", "1Gi", pending())}),
		},
		{
			name: "requests of bound pods leave too little room",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi")},
				[]corev1.Pod{full("n1"), pod("p", "1", "1Gi", pending())}),
			want: want{up: []string{"workers +1 =2 [default/p]"}},
		},
		{
			name: "terminal pods hold no room",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi")},
				[]corev1.Pod{pod("done", "3", "1Gi", on("n1"), phase(corev1.PodSucceeded)), pod("p", "2", "1Gi", pending())}),
		},
		{
			name: "pending pods share one node's room",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi")},
				[]corev1.Pod{pod("p1", "3", "1Gi", pending()), pod("p2", "3", "1Gi", pending())}),
			want: want{up: []string{"workers +1 =2 [default/p2]"}},
		},
		{
			name: "a booting node takes pods despite its not-ready taint",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi", notReady(t0.Add(-5*time.Minute)))},
				[]corev1.Pod{pod("p", "1", "1Gi", pending())}),
		},
		{
			name: "a Ready node whose not-ready taint is not yet cleared takes pods",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")},
				[]corev1.Node{func() corev1.Node {
					n := node("n1", "workers", "4", "16Gi")
					n.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}
					return n
				}()},
				[]corev1.Pod{pod("p", "1", "1Gi", pending())}),
		},
		{
			name: "a node not ready past the provision time takes nothing",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi", notReady(t0.Add(-30*time.Minute)))},
				[]corev1.Pod{pod("p", "1", "1Gi", pending())}),
			want: want{up: []string{"workers +1 =2 [default/p]"}},
		},
		{
			name: "cordoned, draining and deleted nodes take nothing",
			snap: clusterOf([]snapshot.NodeGroup{workers(3, "n1", "n2", "n3")},
				[]corev1.Node{
					node("n1", "workers", "4", "16Gi", cordoned()),
					node("n2", "workers", "4", "16Gi", draining()),
					node("n3", "workers", "4", "16Gi", deleting()),
				},
				[]corev1.Pod{pod("p", "1", "1Gi", pending())}),
			want: want{up: []string{"workers +1 =4 [default/p]"}},
		},
		{
			name: "a node of no group is still a destination",
			snap: clusterOf([]snapshot.NodeGroup{workers(0)},
				[]corev1.Node{node("static", "static", "4", "16Gi")},
				[]corev1.Pod{pod("p", "1", "1Gi", pending())}),
		},
		{
			name: "the existing node must match the pod's selector",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi")},
				[]corev1.Pod{pod("p", "1", "1Gi", pending(), selector("disk", "ssd"))}),
			want: want{unsched: []string{"default/p: fits no node group: workers: node selector disk=ssd not matched"}},
		},
		{
			name: "a pod pinned to an existing node by name fits that node only",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi")},
				[]corev1.Pod{func() corev1.Pod {
					p := pod("p", "1", "1Gi", pending())
					p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n2")}}},
					}}}
					return p
				}()}),
			want: want{unsched: []string{"default/p: fits no node group: workers: required node affinity pins the pod to an existing node"}},
		},
	})
}

func TestTemplateFit(t *testing.T) {
	gpu := withTemplateTaint(group("gpu", 0, 4, 0, "8", "32Gi"), "nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule)
	gpu.Template.Allocatable[podfacts.ResourceGPU] = resource.MustParse("1")
	zone := func(name, z string) snapshot.NodeGroup {
		return withTemplateLabels(group(name, 0, 5, 0, "4", "16Gi"), "zone", z)
	}
	runCases(t, []planCase{
		{
			name: "node selector picks the group",
			snap: clusterOf([]snapshot.NodeGroup{workers(0), gpu}, nil, []corev1.Pod{
				pod("train", "2", "4Gi", pending(), selector("pool", "gpu"), tolerate("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule)),
			}),
			want: want{up: []string{"gpu +1 =1 [default/train]"}},
		},
		{
			name: "every group's misfit is named",
			snap: clusterOf([]snapshot.NodeGroup{workers(0), gpu}, nil, []corev1.Pod{pod("big", "6", "1Gi", pending())}),
			want: want{unsched: []string{"default/big: fits no node group: gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated; workers: insufficient cpu (needs 6, template has 4)"}},
		},
		{
			name: "memory and GPUs are checked",
			snap: clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{
				pod("mem", "1", "20Gi", pending()),
				func() corev1.Pod {
					p := pod("gpu", "1", "1Gi", pending())
					p.Spec.Containers[0].Resources.Requests[podfacts.ResourceGPU] = resource.MustParse("1")
					return p
				}(),
			}),
			want: want{unsched: []string{
				"default/gpu: fits no node group: workers: insufficient nvidia.com/gpu (needs 1, template has 0)",
				"default/mem: fits no node group: workers: insufficient memory (needs 20Gi, template has 16Gi)",
			}},
		},
		{
			name: "a selector no template matches",
			snap: clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{pod("p", "1", "1Gi", pending(), selector("pool", "gpu"))}),
			want: want{unsched: []string{"default/p: fits no node group: workers: node selector pool=gpu not matched"}},
		},
		{
			name: "required node affinity picks the group",
			snap: clusterOf([]snapshot.NodeGroup{zone("a", "eu-1a"), zone("b", "eu-1b")}, nil, []corev1.Pod{
				pod("p", "1", "1Gi", pending(), affinity([]corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "eu-1b", "eu-1c")})),
			}),
			want: want{up: []string{"b +1 =1 [default/p]"}},
		},
		{
			name: "affinity terms are ORed, requirements ANDed",
			snap: clusterOf([]snapshot.NodeGroup{zone("a", "eu-1a"), zone("b", "eu-1b")}, nil, []corev1.Pod{
				pod("p", "1", "1Gi", pending(), affinity(
					[]corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "eu-1a"), req("pool", corev1.NodeSelectorOpNotIn, "a")},
					[]corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpExists), req("pool", corev1.NodeSelectorOpIn, "b")},
				)),
			}),
			want: want{up: []string{"b +1 =1 [default/p]"}},
		},
		{
			name: "affinity no template matches",
			snap: clusterOf([]snapshot.NodeGroup{zone("a", "eu-1a")}, nil, []corev1.Pod{
				pod("p", "1", "1Gi", pending(), affinity([]corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpDoesNotExist)})),
			}),
			want: want{unsched: []string{"default/p: fits no node group: a: required node affinity not matched"}},
		},
		{
			name: "PreferNoSchedule taints do not repel",
			snap: clusterOf([]snapshot.NodeGroup{withTemplateTaint(workers(0), "spot", "", corev1.TaintEffectPreferNoSchedule)}, nil,
				[]corev1.Pod{pod("p", "1", "1Gi", pending())}),
			want: want{up: []string{"workers +1 =1 [default/p]"}},
		},
		{
			name: "an Exists toleration covers any value",
			snap: clusterOf([]snapshot.NodeGroup{withTemplateTaint(workers(0), "dedicated", "ml", corev1.TaintEffectNoExecute)}, nil,
				[]corev1.Pod{pod("p", "1", "1Gi", pending(), tolerate("dedicated", "", ""))}),
			want: want{up: []string{"workers +1 =1 [default/p]"}},
		},
		{
			name: "a NoExecute taint repels",
			snap: clusterOf([]snapshot.NodeGroup{withTemplateTaint(workers(0), "dedicated", "ml", corev1.TaintEffectNoExecute)}, nil,
				[]corev1.Pod{pod("p", "1", "1Gi", pending(), tolerate("dedicated", "ml", corev1.TaintEffectNoSchedule))}),
			want: want{unsched: []string{"default/p: fits no node group: workers: taint dedicated=ml:NoExecute not tolerated"}},
		},
	})
}

func TestDaemonSetOverhead(t *testing.T) {
	ds := func(name, nodeName string, opts ...podOpt) corev1.Pod {
		return pod("kube-system/"+name, "1", "1Gi", append([]podOpt{on(nodeName), daemon("ds-" + name)}, opts...)...)
	}
	runCases(t, []planCase{
		{
			name: "a new node carries the DaemonSets that would run on it",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{
				ds("logs", "n1"),
				pod("p", "3500m", "1Gi", pending()),
			}),
			want: want{unsched: []string{"default/p: fits no node group: workers: insufficient cpu (needs 3500m, template has 4, DaemonSets use 1)"}},
		},
		{
			name: "a DaemonSet whose selector misses the template costs nothing",
			snap: clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{
				ds("gpu-plugin", "n1", selector("pool", "gpu")),
				pod("busy", "3", "1Gi", on("n1")),
				pod("p", "3500m", "1Gi", pending()),
			}),
			want: want{up: []string{"workers +1 =2 [default/p]"}},
		},
		{
			name: "a DaemonSet that does not tolerate the template's taint costs nothing",
			snap: clusterOf([]snapshot.NodeGroup{withTemplateTaint(workers(0), "dedicated", "x", corev1.TaintEffectNoSchedule)}, []corev1.Node{node("n0", "other", "4", "16Gi")}, []corev1.Pod{
				ds("logs", "n0"),
				pod("p", "3500m", "1Gi", pending(), tolerate("dedicated", "x", corev1.TaintEffectNoSchedule)),
			}),
			want: want{up: []string{"workers +1 =1 [default/p]"}},
		},
	})
}

func TestUpcomingAndBackoff(t *testing.T) {
	withState := func(s snapshot.Snapshot, st snapshot.State) snapshot.Snapshot { s.State = st; return s }
	two := func(cpu string) []corev1.Pod {
		return []corev1.Pod{pod("p1", cpu, "1Gi", pending()), pod("p2", cpu, "1Gi", pending())}
	}
	spare := group("spare", 0, 5, 0, "4", "16Gi")
	runCases(t, []planCase{
		{
			name: "nodes still coming up take pending pods first",
			snap: withState(clusterOf([]snapshot.NodeGroup{workers(1)}, nil, two("1")),
				snapshot.State{LastScaleUp: map[string]time.Time{"workers": t0.Add(-5 * time.Minute)}}),
		},
		{
			name: "pods beyond the upcoming room get new nodes",
			snap: withState(clusterOf([]snapshot.NodeGroup{workers(1)}, nil, two("3")),
				snapshot.State{LastScaleUp: map[string]time.Time{"workers": t0.Add(-5 * time.Minute)}}),
			want: want{up: []string{"workers +1 =2 [default/p2]"}},
		},
		{
			name: "a raised target with no scale-up on record starts the clock now",
			snap: clusterOf([]snapshot.NodeGroup{workers(1)}, nil, two("1")),
			want: want{check: func(t *testing.T, p Plan) {
				if !p.State.LastScaleUp["workers"].Equal(t0) {
					t.Errorf("lastScaleUp = %v", p.State.LastScaleUp)
				}
			}},
		},
		{
			name: "nodes not registered in time are given back and the group backed off",
			snap: withState(clusterOf([]snapshot.NodeGroup{workers(2), spare}, nil, two("1")),
				snapshot.State{LastScaleUp: map[string]time.Time{"workers": t0.Add(-20 * time.Minute)}}),
			want: want{
				decrease: []string{"workers -2 =0"},
				up:       []string{"spare +1 =1 [default/p1 default/p2]"},
				check: func(t *testing.T, p Plan) {
					if got := p.State.BackoffUntil["workers"]; !got.Equal(t0.Add(5 * time.Minute)) {
						t.Errorf("backoffUntil = %v", p.State.BackoffUntil)
					}
					if got, w := p.DecreaseTarget[0].Reason, "2 nodes not registered within 15m0s of the scale-up at 2026-11-30T09:40:00Z; backed off until 2026-11-30T10:05:00Z"; got != w {
						t.Errorf("reason %q, want %q", got, w)
					}
				},
			},
		},
		{
			name: "a backed-off group is not grown",
			snap: withState(clusterOf([]snapshot.NodeGroup{workers(0)}, nil, two("1")),
				snapshot.State{BackoffUntil: map[string]time.Time{"workers": t0.Add(2 * time.Minute)}}),
			want: want{unsched: []string{
				"default/p1: node group workers backed off until 2026-11-30T10:02:00Z",
				"default/p2: node group workers backed off until 2026-11-30T10:02:00Z",
			}},
		},
		{
			name: "an expired backoff is forgotten",
			snap: withState(clusterOf([]snapshot.NodeGroup{workers(0)}, nil, two("1")),
				snapshot.State{BackoffUntil: map[string]time.Time{"workers": t0.Add(-time.Minute)}}),
			want: want{up: []string{"workers +1 =1 [default/p1 default/p2]"}, check: func(t *testing.T, p Plan) {
				if len(p.State.BackoffUntil) != 0 {
					t.Errorf("backoffUntil = %v", p.State.BackoffUntil)
				}
			}},
		},
	})
}

func TestExpander(t *testing.T) {
	small := group("small", 0, 5, 0, "4", "4Gi")
	large := group("large", 0, 5, 0, "16", "64Gi")
	selA := func(name string) corev1.Pod { return pod(name, "1", "1Gi", pending(), selector("pool", "a")) }
	selB := func(name string) corev1.Pod { return pod(name, "1", "1Gi", pending(), selector("pool", "b")) }
	runCases(t, []planCase{
		{
			name: "least waste picks the snug template",
			snap: clusterOf([]snapshot.NodeGroup{large, small}, nil, []corev1.Pod{pod("p", "3", "3Gi", pending())}),
			want: want{up: []string{"small +1 =1 [default/p]"}, check: func(t *testing.T, p Plan) {
				if got, w := p.ScaleUp[0].Reason, "1 pending pod needs 1 node (least waste 25%)"; got != w {
					t.Errorf("reason %q, want %q", got, w)
				}
			}},
		},
		{
			name: "priority overrides waste",
			snap: clusterOf([]snapshot.NodeGroup{large, small}, nil, []corev1.Pod{pod("p", "3", "3Gi", pending())}),
			set: func(s *Settings) {
				s.ScaleUp.Expanders = []string{ExpanderPriority}
				s.ScaleUp.Priorities = map[string]int{"large": 10, "small": 1}
			},
			want: want{up: []string{"large +1 =1 [default/p]"}, check: func(t *testing.T, p Plan) {
				if got, w := p.ScaleUp[0].Reason, "1 pending pod needs 1 node (priority 10, waste 88%)"; got != w {
					t.Errorf("reason %q, want %q", got, w)
				}
			}},
		},
		{
			name: "equal priorities fall back to least waste",
			snap: clusterOf([]snapshot.NodeGroup{large, small}, nil, []corev1.Pod{pod("p", "3", "3Gi", pending())}),
			set: func(s *Settings) {
				s.ScaleUp.Expanders = []string{ExpanderPriority}
				s.ScaleUp.Priorities = map[string]int{"large": 5, "small": 5}
			},
			want: want{up: []string{"small +1 =1 [default/p]"}},
		},
		{
			name: "equal waste: more pods placed wins",
			snap: clusterOf([]snapshot.NodeGroup{
				group("a", 0, 5, 0, "2", "2Gi"),
				withTemplateLabels(group("b", 0, 5, 0, "4", "4Gi"), "ssd", "yes"),
			}, nil, []corev1.Pod{
				pod("x", "2", "2Gi", pending()),
				pod("y", "2", "2Gi", pending(), selector("ssd", "yes")),
			}),
			want: want{up: []string{"b +1 =1 [default/x default/y]"}},
		},
		{
			name: "full ties go by name",
			snap: clusterOf([]snapshot.NodeGroup{group("b", 0, 5, 0, "4", "4Gi"), group("a", 0, 5, 0, "4", "4Gi")}, nil,
				[]corev1.Pod{pod("p", "2", "2Gi", pending())}),
			want: want{up: []string{"a +1 =1 [default/p]"}},
		},
		{
			name: "pods are placed group by group",
			snap: clusterOf([]snapshot.NodeGroup{group("a", 0, 5, 0, "4", "16Gi"), group("b", 0, 5, 0, "4", "16Gi")}, nil,
				[]corev1.Pod{selA("a1"), selA("a2"), selB("b1")}),
			want: want{up: []string{"a +1 =1 [default/a1 default/a2]", "b +1 =1 [default/b1]"}},
		},
	})
}

func TestCaps(t *testing.T) {
	pods := func(n int, cpu string) []corev1.Pod {
		var out []corev1.Pod
		for i := 1; i <= n; i++ {
			out = append(out, pod(fmt.Sprintf("p%d", i), cpu, "1Gi", pending()))
		}
		return out
	}
	capped := group("workers", 0, 2, 1, "4", "16Gi", "n1")
	night := capped
	night.BoundsFrom = "schedule night"
	busy := []corev1.Node{node("n1", "workers", "4", "16Gi")}
	busyPods := func(extra []corev1.Pod) []corev1.Pod {
		return append([]corev1.Pod{pod("busy", "4", "1Gi", on("n1"))}, extra...)
	}
	runCases(t, []planCase{
		{
			name: "maxSize caps the group",
			snap: clusterOf([]snapshot.NodeGroup{capped}, busy, busyPods(pods(3, "3"))),
			want: want{
				up: []string{"workers +1 =2 [default/p1]"},
				unsched: []string{
					"default/p2: node group workers at max size 2",
					"default/p3: node group workers at max size 2",
				},
			},
		},
		{
			name: "a schedule's max is named",
			snap: clusterOf([]snapshot.NodeGroup{night}, busy, busyPods(pods(2, "3"))),
			want: want{
				up:      []string{"workers +1 =2 [default/p1]"},
				unsched: []string{"default/p2: node group workers at max size 2 (max set by schedule night)"},
			},
		},
		{
			name: "maxNodesPerStep caps the plan",
			snap: clusterOf([]snapshot.NodeGroup{workers(0)}, nil, pods(3, "3")),
			set:  func(s *Settings) { s.ScaleUp.MaxNodesPerStep = 2 },
			want: want{
				up:      []string{"workers +2 =2 [default/p1 default/p2]"},
				unsched: []string{"default/p3: max nodes per step (2) reached"},
			},
		},
		{
			name: "maxNodesPerStep is shared by the groups",
			snap: clusterOf([]snapshot.NodeGroup{group("a", 0, 5, 0, "4", "16Gi"), group("b", 0, 5, 0, "4", "16Gi")}, nil, []corev1.Pod{
				pod("a1", "3", "1Gi", pending(), selector("pool", "a")),
				pod("a2", "3", "1Gi", pending(), selector("pool", "a")),
				pod("b1", "3", "1Gi", pending(), selector("pool", "b"), podLabels("app", "b")),
			}),
			set: func(s *Settings) { s.ScaleUp.MaxNodesPerStep = 2 },
			want: want{
				up:      []string{"a +2 =2 [default/a1 default/a2]"},
				unsched: []string{"default/b1: max nodes per step (2) reached"},
			},
		},
		{
			name: "first-fit decreasing mixes sizes",
			snap: clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{
				pod("c3", "3", "1Gi", pending()),
				pod("c1a", "1", "1Gi", pending()), pod("c1b", "1", "1Gi", pending()), pod("c1c", "1", "1Gi", pending()),
				pod("c2a", "2", "1Gi", pending()), pod("c2b", "2", "1Gi", pending()),
			}),
			want: want{up: []string{"workers +3 =3 [default/c1a default/c1b default/c1c default/c2a default/c2b default/c3]"}},
		},
	})
}

func TestUtilization(t *testing.T) {
	snap := clusterOf([]snapshot.NodeGroup{workers(3, "n1", "n2", "gone")},
		[]corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi"), node("static", "x", "4", "16Gi")},
		[]corev1.Pod{
			pod("web", "1", "4Gi", on("n1")),
			pod("kube-system/logs", "500m", "0", on("n1"), daemon("ds-logs")),
			pod("kube-system/etcd", "500m", "0", on("n1"), mirror()),
			pod("db", "2", "8Gi", on("n2")),
			pod("job", "3", "3Gi", on("n2"), phase(corev1.PodSucceeded)),
			pod("other", "3", "3Gi", on("static")),
		})
	p := Decide(snap, DefaultSettings(), t0)
	got := p.NodeGroups
	w := []GroupStatus{{Name: "workers", Nodes: 2, TargetSize: 3, CPUUtilization: 0.5, MemoryUtilization: 0.375}}
	if !slices.Equal(got, w) {
		t.Errorf("nodeGroups = %+v, want %+v", got, w)
	}
}

// scaleDownBase: three workers; n1 lightly used (its pods are the
// arguments), n2 and n3 at 75% cpu. n1 was unneeded 20 minutes ago.
func scaleDownBase(n1Pods ...corev1.Pod) snapshot.Snapshot {
	s := clusterOf([]snapshot.NodeGroup{group("workers", 1, 10, 3, "4", "16Gi", "n1", "n2", "n3")},
		[]corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi"), node("n3", "workers", "4", "16Gi")},
		append([]corev1.Pod{pod("busy2", "3", "1Gi", on("n2")), pod("busy3", "3", "1Gi", on("n3"))}, n1Pods...))
	s.State.UnneededSince = map[string]time.Time{"n1": t0.Add(-20 * time.Minute)}
	return s
}

func light(name string, opts ...podOpt) corev1.Pod {
	return pod(name, "500m", "1Gi", append([]podOpt{on("n1")}, opts...)...)
}

func TestScaleDown(t *testing.T) {
	removed := []string{"workers/n1"}
	modify := func(s snapshot.Snapshot, f func(*snapshot.Snapshot)) snapshot.Snapshot { f(&s); return s }
	unneededOnly := func(names ...string) func(*testing.T, Plan) {
		return func(t *testing.T, p Plan) {
			var got []string
			for n := range p.State.UnneededSince {
				got = append(got, n)
			}
			slices.Sort(got)
			if !slices.Equal(got, names) {
				t.Errorf("unneededSince = %v, want nodes %v", p.State.UnneededSince, names)
			}
		}
	}
	runCases(t, []planCase{
		{
			name: "a node unneeded long enough is removed",
			snap: scaleDownBase(light("a")),
			want: want{down: removed, check: func(t *testing.T, p Plan) {
				w := "utilisation 13% (cpu 13%, memory 6%) below 50%, unneeded since 2026-11-30T09:40:00Z; 1 pod fits on other nodes"
				if got := p.ScaleDown[0].Reason; got != w {
					t.Errorf("reason %q, want %q", got, w)
				}
				if !p.State.UnneededSince["n1"].Equal(t0.Add(-20 * time.Minute)) {
					t.Errorf("unneededSince = %v", p.State.UnneededSince)
				}
			}},
		},
		{
			name: "a newly unneeded node starts its clock",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) { s.State.UnneededSince = nil }),
			want: want{check: func(t *testing.T, p Plan) {
				if !p.State.UnneededSince["n1"].Equal(t0) {
					t.Errorf("unneededSince = %v", p.State.UnneededSince)
				}
			}},
		},
		{
			name: "nodes needed again are forgotten",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) { s.State.UnneededSince["n2"] = t0.Add(-time.Hour) }),
			want: want{down: removed, check: unneededOnly("n1")},
		},
		{
			name: "an empty node goes too",
			snap: scaleDownBase(),
			want: want{down: removed},
		},
		{
			name: "utilisation at the threshold keeps the node",
			snap: scaleDownBase(pod("half", "2", "1Gi", on("n1"))),
			want: want{check: unneededOnly()},
		},
		{
			name: "not within delayAfterAdd",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.State.LastScaleUp = map[string]time.Time{"workers": t0.Add(-5 * time.Minute)}
			}),
			want: want{check: unneededOnly("n1")},
		},
		{
			name: "not below minSize",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) { s.NodeGroups[0].MinSize = 3 }),
			want: want{check: unneededOnly("n1")},
		},
		{
			name: "draining nodes count against minSize",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.NodeGroups[0].MinSize = 2
				s.NodeGroups[0].Instances = append(s.NodeGroups[0].Instances, providerID("n4"))
				s.NodeGroups[0].TargetSize = 4
				s.Nodes = append(s.Nodes, node("n4", "workers", "4", "16Gi", draining()))
			}),
			set:  func(s *Settings) { s.ScaleDown.MaxConcurrentDrains = 5 },
			want: want{down: removed},
		},
		{
			name: "maxConcurrentDrains counts nodes already draining",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.NodeGroups[0].Instances = append(s.NodeGroups[0].Instances, providerID("n4"))
				s.NodeGroups[0].TargetSize = 4
				s.Nodes = append(s.Nodes, node("n4", "workers", "4", "16Gi", draining()))
			}),
			want: want{check: unneededOnly("n1")},
		},
		{
			name: "maxConcurrentDrains caps removals in one plan",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.NodeGroups[0].Instances = append(s.NodeGroups[0].Instances, providerID("n4"))
				s.NodeGroups[0].TargetSize = 4
				s.Nodes = append(s.Nodes, node("n4", "workers", "4", "16Gi"))
				s.State.UnneededSince["n4"] = t0.Add(-time.Hour)
			}),
			set:  func(s *Settings) { s.ScaleDown.MaxConcurrentDrains = 1 },
			want: want{down: []string{"workers/n4"}, check: unneededOnly("n1", "n4")},
		},
		{
			name: "pods that fit nowhere keep the node",
			snap: scaleDownBase(pod("b", "1500m", "1Gi", on("n1"))),
			want: want{check: unneededOnly()},
		},
		{
			name: "moved pods use up the room they land on",
			snap: modify(scaleDownBase(), func(s *snapshot.Snapshot) {
				s.Pods = []corev1.Pod{pod("a", "1500m", "1Gi", on("n1")), pod("b", "1500m", "1Gi", on("n2")), pod("c", "2", "1Gi", on("n3"))}
			}),
			want: want{down: removed, check: unneededOnly("n1")},
		},
		{
			name: "an unschedulable pod the template could host blocks the group, whatever its age",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.Pods = append(s.Pods, pod("new", "3500m", "1Gi", pending(), created(t0.Add(-2*time.Second))))
			}),
			want: want{check: unneededOnly("n1")},
		},
		{
			name: "an unschedulable pod no template hosts does not block",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.Pods = append(s.Pods, pod("gpu", "1", "1Gi", pending(), selector("pool", "gpu")))
			}),
			want: want{down: removed, unsched: []string{"default/gpu: fits no node group: workers: node selector pool=gpu not matched"}},
		},
		{
			name: "disabled scale-down tracks nothing",
			snap: scaleDownBase(light("a")),
			set:  func(s *Settings) { s.ScaleDown.Enabled = false },
			want: want{check: unneededOnly()},
		},
		{
			name: "nodes of no group are never removed",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) { s.NodeGroups[0].Instances = s.NodeGroups[0].Instances[1:] }),
			want: want{check: unneededOnly()},
		},
		{
			name: "not-ready, cordoned and deleted nodes are not candidates",
			snap: modify(scaleDownBase(light("a")), func(s *snapshot.Snapshot) {
				s.Nodes = append(s.Nodes, node("n4", "workers", "4", "16Gi", notReady(t0.Add(-time.Hour))),
					node("n5", "workers", "4", "16Gi", cordoned()), node("n6", "workers", "4", "16Gi", deleting()))
				s.NodeGroups[0].Instances = append(s.NodeGroups[0].Instances, providerID("n4"), providerID("n5"), providerID("n6"))
				s.NodeGroups[0].TargetSize = 6
			}),
			want: want{down: removed, check: unneededOnly("n1")},
		},
	})
}

func TestBlockingPods(t *testing.T) {
	type blockCase struct {
		name    string
		pods    []corev1.Pod
		pdbs    []policyv1.PodDisruptionBudget
		removed bool
	}
	ks := func(opts ...podOpt) corev1.Pod {
		return light("kube-system/dns", append([]podOpt{podLabels("k8s-app", "dns")}, opts...)...)
	}
	cases := []blockCase{
		{"a replicated pod moves", []corev1.Pod{light("a")}, nil, true},
		{"a bare pod blocks", []corev1.Pod{light("a", bare())}, nil, false},
		{"hostPath blocks", []corev1.Pod{light("a", hostPath("data"))}, nil, false},
		{"a disk emptyDir blocks", []corev1.Pod{light("a", emptyDir("tmp", ""))}, nil, false},
		{"a memory emptyDir does not", []corev1.Pod{light("a", emptyDir("tmp", corev1.StorageMediumMemory))}, nil, true},
		{"local volumes listed as safe do not", []corev1.Pod{light("a", hostPath("data"), emptyDir("tmp", ""), annotate(annotationSafeLocalVolumes, "data, tmp"))}, nil, true},
		{"a local volume missing from the list blocks", []corev1.Pod{light("a", hostPath("data"), emptyDir("tmp", ""), annotate(annotationSafeLocalVolumes, "data"))}, nil, false},
		{"kube-system without a PDB blocks", []corev1.Pod{ks()}, nil, false},
		{"kube-system with a PDB moves", []corev1.Pod{ks()}, []policyv1.PodDisruptionBudget{pdb("kube-system/dns", 1, "k8s-app", "dns")}, true},
		{"a PDB in another namespace does not cover", []corev1.Pod{ks()}, []policyv1.PodDisruptionBudget{pdb("default/dns", 1, "k8s-app", "dns")}, false},
		{"safe-to-evict=false blocks", []corev1.Pod{light("a", annotate(annotationSafeToEvict, "false"))}, nil, false},
		{"safe-to-evict=true lets a bare pod go", []corev1.Pod{light("a", bare(), hostPath("data"), annotate(annotationSafeToEvict, "true"))}, nil, true},
		{"safe-to-evict=true lets a kube-system pod go", []corev1.Pod{ks(annotate(annotationSafeToEvict, "true"))}, nil, true},
		{"do-not-disrupt blocks even when safe to evict", []corev1.Pod{light("a", annotate(annotationSafeToEvict, "true"), annotate(annotationDoNotDisrupt, "true"))}, nil, false},
		{"a PDB with no disruption left blocks", []corev1.Pod{light("a")}, []policyv1.PodDisruptionBudget{pdb("default/web", 0, "app", "web")}, false},
		{"a PDB with no disruption left blocks safe-to-evict pods too", []corev1.Pod{light("a", annotate(annotationSafeToEvict, "true"))}, []policyv1.PodDisruptionBudget{pdb("default/web", 0, "app", "web")}, false},
		{"a PDB allowing fewer disruptions than the node's pods blocks", []corev1.Pod{light("a"), light("b")}, []policyv1.PodDisruptionBudget{pdb("default/web", 1, "app", "web")}, false},
		{"a PDB with room lets pods go", []corev1.Pod{light("a"), light("b")}, []policyv1.PodDisruptionBudget{pdb("default/web", 2, "app", "web")}, true},
		{"DaemonSet and mirror pods never block", []corev1.Pod{light("kube-system/logs", daemon("ds-logs"), hostPath("logs")), light("kube-system/etcd", mirror(), hostPath("etcd"))}, nil, true},
		{"terminal pods are ignored", []corev1.Pod{light("done", bare(), hostPath("x"), phase(corev1.PodSucceeded))}, nil, true},
		{"terminating pods are ignored", []corev1.Pod{light("bye", bare(), podDeleting())}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := scaleDownBase(tc.pods...)
			s.PodDisruptionBudgets = tc.pdbs
			p := Decide(s, DefaultSettings(), t0)
			_, down, _, _ := summarize(p)
			_, unneeded := p.State.UnneededSince["n1"]
			if got := len(down) == 1; got != tc.removed || unneeded != tc.removed {
				t.Errorf("removed = %v (unneeded %v), want %v; plan %v", got, unneeded, tc.removed, down)
			}
		})
	}

	t.Run("disruptions used by an earlier removal are gone", func(t *testing.T) {
		s := clusterOf([]snapshot.NodeGroup{group("workers", 0, 10, 3, "4", "16Gi", "n1", "n2", "n3")},
			[]corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi"), node("n3", "workers", "4", "16Gi")},
			[]corev1.Pod{
				pod("db-1", "500m", "1Gi", on("n1"), podLabels("app", "db")),
				pod("db-2", "600m", "1Gi", on("n2"), podLabels("app", "db")),
				pod("busy", "2", "1Gi", on("n3")),
			})
		s.PodDisruptionBudgets = []policyv1.PodDisruptionBudget{pdb("default/db", 1, "app", "db")}
		p := Decide(s, DefaultSettings(), t0)
		if _, ok := p.State.UnneededSince["n1"]; !ok || len(p.State.UnneededSince) != 1 {
			t.Errorf("unneededSince = %v, want only n1", p.State.UnneededSince)
		}
	})
}

func TestNodeOptOut(t *testing.T) {
	for _, ann := range []string{annotationScaleDownDisabled, annotationDoNotDisrupt} {
		t.Run(ann, func(t *testing.T) {
			s := scaleDownBase(light("a"))
			s.Nodes[0] = node("n1", "workers", "4", "16Gi", nodeAnnotation(ann, "true"))
			p := Decide(s, DefaultSettings(), t0)
			if len(p.ScaleDown) != 0 || len(p.State.UnneededSince) != 0 {
				t.Errorf("plan removes or tracks an opted-out node: %v %v", p.ScaleDown, p.State.UnneededSince)
			}
		})
	}
}

func TestPlanState(t *testing.T) {
	amsterdam := time.FixedZone("CET", 3600)
	s := clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{pod("p", "1", "1Gi", pending())})
	s.State.LastScaleUp = map[string]time.Time{"gone": t0, "workers": t0.Add(-time.Hour).In(amsterdam)}
	before := deepCopySnapshot(s)
	p := Decide(s, DefaultSettings(), t0.In(amsterdam))
	if p.State.UnneededSince == nil || p.State.LastScaleUp == nil || p.State.BackoffUntil == nil {
		t.Fatalf("state has nil maps: %+v", p.State)
	}
	if _, ok := p.State.LastScaleUp["gone"]; ok {
		t.Errorf("state keeps a group that no longer exists: %v", p.State.LastScaleUp)
	}
	if got := p.State.LastScaleUp["workers"]; got.Location() != time.UTC || !got.Equal(t0) {
		t.Errorf("lastScaleUp = %v, want %v in UTC", got, t0)
	}
	if !equalSnapshots(before, s) {
		t.Errorf("Decide changed its input")
	}
	var empty Plan = Decide(snapshot.Snapshot{CapturedAt: t0}, DefaultSettings(), t0)
	if empty.ScaleUp == nil || empty.ScaleDown == nil || empty.Unschedulable == nil || empty.NodeGroups == nil {
		t.Errorf("empty plan has nil lists: %+v", empty)
	}
	if empty.State.UnneededSince == nil || empty.State.LastScaleUp == nil || empty.State.BackoffUntil == nil {
		t.Errorf("state has nil maps: %+v", empty.State)
	}
}

// TestScheduleCap: a group above the max a schedule set comes down to it at
// once: unregistered capacity first, then the emptiest nodes, never a node
// that must not be disrupted; a config max does not shrink anything.
func TestScheduleCap(t *testing.T) {
	night := func(target, maxSize int, nodes ...string) snapshot.NodeGroup {
		g := group("workers", 0, maxSize, target, "4", "16Gi", nodes...)
		g.BoundsFrom = "schedule night"
		return g
	}
	three := []corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi"), node("n3", "workers", "4", "16Gi")}
	work := []corev1.Pod{pod("big", "3", "1Gi", on("n1")), pod("small", "1", "1Gi", on("n2"))}
	noUnneeded := func(s *Settings) { s.ScaleDown.UnneededTime = time.Hour; s.ScaleDown.MaxConcurrentDrains = 1 }
	runCases(t, []planCase{
		{
			name: "the emptiest nodes go, at once, whatever unneededTime and maxConcurrentDrains say",
			snap: clusterOf([]snapshot.NodeGroup{night(3, 1, "n1", "n2", "n3")}, three, work),
			set:  noUnneeded,
			want: want{down: []string{"workers/n2", "workers/n3"}, check: func(t *testing.T, p Plan) {
				want := "node group workers is above its max size 1 (max set by schedule night): target 3, 0 draining; utilisation 0%"
				for _, d := range p.ScaleDown {
					if d.Node == "n3" && d.Reason != want {
						t.Errorf("reason %q, want %q", d.Reason, want)
					}
				}
				if !p.State.UnneededSince["n2"].Equal(t0) || !p.State.UnneededSince["n3"].Equal(t0) {
					t.Errorf("unneededSince %v: the chosen nodes need a time for their drains' names", p.State.UnneededSince)
				}
			}},
		},
		{
			name: "unregistered capacity is given back first",
			snap: clusterOf([]snapshot.NodeGroup{night(4, 1, "n1", "n2", "n3")}, three, work),
			set:  noUnneeded,
			want: want{decrease: []string{"workers -1 =3"}, down: []string{"workers/n2", "workers/n3"}},
		},
		{
			name: "nodes already draining count",
			snap: clusterOf([]snapshot.NodeGroup{night(3, 1, "n1", "n2", "n3")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi"), node("n3", "workers", "4", "16Gi", draining())}, work),
			set:  noUnneeded,
			want: want{down: []string{"workers/n2"}},
		},
		{
			name: "a node that must not be disrupted stays, even if the group stays above max",
			snap: clusterOf([]snapshot.NodeGroup{night(3, 1, "n1", "n2", "n3")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi", nodeAnnotation("cluster-autoscaler.kubernetes.io/scale-down-disabled", "true")), node("n3", "workers", "4", "16Gi")},
				append(work, pod("lonely", "1", "1Gi", on("n3"), bare()))),
			set:  noUnneeded,
			want: want{down: []string{"workers/n1"}},
		},
		{
			name: "pending pods are not counted on the nodes going away, and name the schedule",
			snap: clusterOf([]snapshot.NodeGroup{night(3, 1, "n1", "n2", "n3")}, three, append(work, pod("p", "2", "1Gi", pending()))),
			set:  noUnneeded,
			want: want{
				down:    []string{"workers/n2", "workers/n3"},
				unsched: []string{"default/p: node group workers at max size 1 (max set by schedule night)"},
			},
		},
		{
			name: "nodes whose pods a budget protects right now go last",
			snap: withPDBs(clusterOf([]snapshot.NodeGroup{night(3, 2, "n1", "n2", "n3")}, three, []corev1.Pod{
				pod("big", "3", "1Gi", on("n1")),
				pod("db", "1", "1Gi", on("n2"), podLabels("app", "db")),
				pod("half", "2", "1Gi", on("n3")),
			}), pdb("default/db", 0, "app", "db")),
			set:  noUnneeded,
			want: want{down: []string{"workers/n3"}},
		},
		{
			// The cap drains with scale-down off too, by the same rules.
			name: "with scale-down disabled, blocking pods and budgets still hold",
			snap: withPDBs(clusterOf([]snapshot.NodeGroup{night(3, 2, "n1", "n2", "n3")}, three, []corev1.Pod{
				pod("lonely", "1", "1Gi", on("n1"), bare()),
				pod("db", "1", "1Gi", on("n2"), podLabels("app", "db")),
				pod("half", "2", "1Gi", on("n3")),
			}), pdb("default/db", 0, "app", "db")),
			set:  func(s *Settings) { noUnneeded(s); s.ScaleDown.Enabled = false },
			want: want{down: []string{"workers/n3"}},
		},
		{
			name: "a node that is not Ready goes first",
			snap: clusterOf([]snapshot.NodeGroup{night(3, 2, "n1", "n2", "n3")},
				[]corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi"), node("n3", "workers", "4", "16Gi", notReady(t0.Add(-time.Hour)))},
				[]corev1.Pod{pod("big", "3", "1Gi", on("n1")), pod("half", "2", "1Gi", on("n3"))}),
			set:  noUnneeded,
			want: want{down: []string{"workers/n3"}},
		},
		{
			name: "a config max below the size only stops growth",
			snap: clusterOf([]snapshot.NodeGroup{group("workers", 0, 1, 3, "4", "16Gi", "n1", "n2", "n3")}, three, work),
			set:  noUnneeded,
		},
		{
			name: "at the schedule's max nothing goes",
			snap: clusterOf([]snapshot.NodeGroup{night(3, 3, "n1", "n2", "n3")}, three, work),
			set:  noUnneeded,
		},
	})
}

func withPDBs(s snapshot.Snapshot, pdbs ...policyv1.PodDisruptionBudget) snapshot.Snapshot {
	s.PodDisruptionBudgets = pdbs
	return s
}
