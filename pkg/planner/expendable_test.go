package planner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
)

var prio = snapshottest.Priority

func TestExpendablePending(t *testing.T) {
	below := "expendable: priority -11 below cutoff -10 (scaleUp.expendablePodsPriorityCutoff)"
	pending1 := func(opts ...podOpt) snapshot.Snapshot {
		return clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{pod("p", "1", "1Gi", append([]podOpt{pending()}, opts...)...)})
	}
	runCases(t, []planCase{
		{
			name: "below the cutoff: no scale-up, and the plan says why",
			snap: pending1(prio(-11)),
			want: want{unsched: []string{"default/p: " + below}},
		},
		{
			name: "at the cutoff: not expendable",
			snap: pending1(prio(-10)),
			want: want{up: []string{"workers +1 =1 [default/p]"}},
		},
		{
			name: "above the cutoff: not expendable",
			snap: pending1(prio(-1)),
			want: want{up: []string{"workers +1 =1 [default/p]"}},
		},
		{
			name: "no priority: never expendable",
			snap: pending1(),
			set:  func(s *Settings) { s.ScaleUp.ExpendablePodsPriorityCutoff = 100 },
			want: want{up: []string{"workers +1 =1 [default/p]"}},
		},
		{
			name: "a configured cutoff",
			snap: pending1(prio(-1)),
			set:  func(s *Settings) { s.ScaleUp.ExpendablePodsPriorityCutoff = 0 },
			want: want{unsched: []string{"default/p: expendable: priority -1 below cutoff 0 (scaleUp.expendablePodsPriorityCutoff)"}},
		},
		{
			name: "a young expendable pod is not listed yet",
			snap: pending1(prio(-11), created(t0)),
		},
		{
			name: "listed in order among the other unschedulable pods",
			snap: clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{
				pod("a", "1", "1Gi", pending(), prio(-11)),
				pod("b", "8", "1Gi", pending()),
				pod("c", "1", "1Gi", pending(), prio(-11)),
			}),
			want: want{unsched: []string{
				"default/a: " + below,
				"default/b: fits no node group: workers: insufficient cpu (needs 8, template has 4)",
				"default/c: " + below,
			}},
		},
	})
}

// Overprovisioning: pause pods below the cutoff hold room that real pods
// take by preempting them.
func TestExpendablePreempted(t *testing.T) {
	pause := func(name, n string) corev1.Pod {
		return pod(name, "3", "1Gi", on(n), prio(-20), ownedBy("ReplicaSet", "rs-pause"))
	}
	one := []snapshot.NodeGroup{workers(1, "n1")}
	n1 := []corev1.Node{node("n1", "workers", "4", "16Gi")}
	runCases(t, []planCase{
		{
			name: "a pending pod that fits only by preempting pause pods needs no new node",
			snap: clusterOf(one, n1, []corev1.Pod{pause("pause-1", "n1"), pod("p", "2", "1Gi", pending())}),
		},
		{
			name: "without preemption (pause pods above the cutoff) it needs a node",
			snap: clusterOf(one, n1, []corev1.Pod{pause("pause-1", "n1"), pod("p", "2", "1Gi", pending())}),
			set:  func(s *Settings) { s.ScaleUp.ExpendablePodsPriorityCutoff = -30 },
			want: want{up: []string{"workers +1 =2 [default/p]"}},
		},
		{
			name: "a pause pod marked not to be evicted keeps its room",
			snap: clusterOf(one, n1, []corev1.Pod{
				pod("pause-1", "3", "1Gi", on("n1"), prio(-20), annotate(annotationSafeToEvict, "false")),
				pod("p", "2", "1Gi", pending()),
			}),
			want: want{up: []string{"workers +1 =2 [default/p]"}},
		},
		{
			name: "a pending pod below the cutoff does not preempt and waits",
			snap: clusterOf(one, n1, []corev1.Pod{pod("busy", "3", "1Gi", on("n1")), pod("p", "2", "1Gi", pending(), prio(-11))}),
			want: want{unsched: []string{"default/p: expendable: priority -11 below cutoff -10 (scaleUp.expendablePodsPriorityCutoff)"}},
		},
	})
}

func TestExpendableScaleDown(t *testing.T) {
	runCases(t, []planCase{
		{
			name: "a node holding only expendable pods is removed: they need no new home",
			// Bare, and 3 cpu that would fit on neither n2 nor n3 (1 cpu free
			// each): counted, the pod would keep n1 three ways over.
			snap: scaleDownBase(pod("pause", "3", "1Gi", on("n1"), prio(-20), bare())),
			want: want{down: []string{"workers/n1"}},
		},
		{
			name: "the same pod above the cutoff keeps the node (75% used)",
			snap: scaleDownBase(pod("pause", "3", "1Gi", on("n1"), prio(-20))),
			set:  func(s *Settings) { s.ScaleUp.ExpendablePodsPriorityCutoff = -30 },
		},
		{
			name: "an expendable pod marked do-not-disrupt keeps the node",
			snap: scaleDownBase(light("a", prio(-20), annotate(annotationDoNotDisrupt, "true"))),
		},
		{
			name: "an expendable pod a budget allowing no disruption covers keeps the node",
			snap: func() snapshot.Snapshot {
				s := scaleDownBase(light("a", prio(-20), podLabels("app", "pause")))
				s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, pdb("default/pause", 0, "app", "pause"))
				return s
			}(),
		},
		{
			name: "one whose budget allows a disruption is still left out",
			snap: func() snapshot.Snapshot {
				s := scaleDownBase(pod("pause", "3", "1Gi", on("n1"), prio(-20), bare(), podLabels("app", "pause")))
				s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, pdb("default/pause", 1, "app", "pause"))
				return s
			}(),
			want: want{down: []string{"workers/n1"}},
		},
		{
			name: "an expendable pending pod does not hold the group's scale-down",
			snap: func() snapshot.Snapshot {
				s := scaleDownBase(light("a"))
				s.Pods = append(s.Pods, pod("p", "500m", "1Gi", pending(), prio(-11)))
				return s
			}(),
			want: want{down: []string{"workers/n1"}, unsched: []string{"default/p: expendable: priority -11 below cutoff -10 (scaleUp.expendablePodsPriorityCutoff)"}},
		},
	})
}
