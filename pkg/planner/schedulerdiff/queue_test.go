package schedulerdiff

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

const competeTrials = 32

// The priority classes the competing trials' pods use (none: priority 0).
// They never preempt: a pod placed stays placed, as in the plan.
var competeClasses = map[string]int32{"nodetide-diff-low": 100, "nodetide-diff-high": 1000}

// competeTrial is a workload whose pending pods compete for new nodes the
// plan cannot give them all: one group with no node yet and room for one
// to three, sometimes fewer allowed by the step's budget, and apps whose
// pods each take a node of their own (more than half of one), of random
// priorities and ages, some with a host port (placed pod by pod).
type competeTrial struct {
	id      string
	group   snapshot.NodeGroup
	pending []corev1.Pod
	budget  int
}

func generateCompete(r *rand.Rand, idx int, ns string) competeTrial {
	tr := competeTrial{id: fmt.Sprintf("q%03d", idx)}
	l := map[string]string{labelTrial: tr.id, "pool": tr.id + "-g"}
	tr.group = snapshot.NodeGroup{
		Name: tr.id + "-g", Provider: "kwok", MaxSize: 1 + r.IntN(3),
		Template: snapshot.Template{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: quantity("4"), corev1.ResourceMemory: quantity("8Gi"), corev1.ResourcePods: quantity("110")}, Labels: l},
	}
	if r.IntN(3) == 0 {
		tr.budget = 1 + r.IntN(2)
	}
	names := slices.Sorted(maps.Keys(competeClasses))
	for a := range 2 + r.IntN(2) {
		app := fmt.Sprintf("%s-a%d", tr.id, a)
		cpu := []string{"2500m", "3", "3500m"}[r.IntN(3)]
		port := r.IntN(3) == 0
		for k := range 1 + r.IntN(3) {
			p := corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-p%d", app, k), Namespace: ns, Labels: map[string]string{"app": app}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{labelTrial: tr.id},
					Containers: []corev1.Container{{Name: "c", Image: "fake", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: quantity(cpu), corev1.ResourceMemory: quantity("128Mi")}}}},
				},
				Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
					Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
			}
			if port {
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9000}}
			}
			if c := r.IntN(len(names) + 1); c < len(names) {
				v := competeClasses[names[c]]
				p.Spec.PriorityClassName, p.Spec.Priority = names[c], &v
			}
			tr.pending = append(tr.pending, p)
		}
	}
	// Distinct ages in a random order, apart from the names and priorities.
	for i, j := range r.Perm(len(tr.pending)) {
		tr.pending[i].CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour + time.Duration(j)*time.Second))
	}
	return tr
}

// queueOrder is the pods as kube-scheduler's active queue holds them:
// higher priority first, then the older.
func queueOrder(pods []corev1.Pod) []corev1.Pod {
	out := slices.Clone(pods)
	prio := func(p *corev1.Pod) int32 {
		if p.Spec.Priority == nil {
			return 0
		}
		return *p.Spec.Priority
	}
	slices.SortStableFunc(out, func(a, b corev1.Pod) int {
		if pa, pb := prio(&a), prio(&b); pa != pb {
			return int(pb) - int(pa)
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return out
}

// TestPromisesFollowQueue checks the plan's story where pending pods
// compete: the pods it promises the new nodes are the ones the real
// scheduler places there, and those it leaves pending stay pending. The
// plan's new nodes are created first; the pods then arrive one at a time
// in the queue's order, as the scheduler's queue holds them when the nodes
// come up (its order among pods already waiting is that one: the pods
// were all refused before, so their backoff is over). Each pod takes a
// node of its own and the nodes are alike, so which pods are placed does
// not depend on the scheduler's scoring: the comparison is exact, pod by
// pod (the stated tolerance is none).
func TestPromisesFollowQueue(t *testing.T) {
	cp := testbed.Cluster(t)
	ctx := t.Context()
	client := cp.Client
	ns := cp.Namespace(t)
	const batch = "queue"
	for name, v := range competeClasses {
		never := corev1.PreemptNever
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelBatch: batch}}, Value: v, PreemptionPolicy: &never}
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create priority class: %v", err)
		}
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = client.CoreV1().Pods(ns).DeleteCollection(c, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}, metav1.ListOptions{})
		sel := metav1.ListOptions{LabelSelector: labelBatch + "=" + batch}
		if err := client.CoreV1().Nodes().DeleteCollection(c, metav1.DeleteOptions{}, sel); err != nil {
			t.Errorf("delete the nodes: %v", err)
		}
		if err := client.SchedulingV1().PriorityClasses().DeleteCollection(c, metav1.DeleteOptions{}, sel); err != nil {
			t.Errorf("delete the priority classes: %v", err)
		}
	})

	var trs []competeTrial
	var plans []planner.Plan
	var nodes []*corev1.Node
	competing := 0
	for i := range competeTrials {
		tr := generateCompete(rand.New(rand.NewPCG(2028, uint64(i))), i, ns)
		set := settings(false, false)
		if tr.budget > 0 {
			set.ScaleUp.MaxNodesPerStep = tr.budget
		}
		p := planner.Decide(snapshot.Snapshot{CapturedAt: t0, NodeGroups: []snapshot.NodeGroup{tr.group}, Pods: tr.pending}, set, t0)
		if len(p.Unschedulable) > 0 {
			competing++
		}
		if (p.Assignment != "") != (len(p.Unschedulable) > 0) {
			t.Errorf("trial %s: assignment note %q with %d pods left pending", tr.id, p.Assignment, len(p.Unschedulable))
		}
		for _, u := range p.ScaleUp {
			for k := range u.Delta {
				l := map[string]string{labelBatch: batch}
				for key, v := range tr.group.Template.Labels {
					l[key] = v
				}
				nodes = append(nodes, testbed.NodeObject(testbed.Node{Name: fmt.Sprintf("%s-new%d", u.NodeGroup, k), CPU: "4", Memory: "8Gi", Labels: l}))
			}
		}
		trs = append(trs, tr)
		plans = append(plans, p)
	}
	if competing < competeTrials/2 {
		t.Fatalf("only %d of %d trials leave pods competing: the generator lost its point", competing, competeTrials)
	}
	if err := forEach(nodes, func(n *corev1.Node) error {
		_, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("create nodes: %v", err)
	}
	cp.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d nodes Ready", len(nodes)), func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labelBatch + "=" + batch})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range l.Items {
			if usable(&l.Items[i]) {
				ready++
			}
		}
		return ready == len(nodes), nil
	})
	// Trials run side by side; within one, the pods arrive in queue order.
	total := 0
	if err := forEach(trs, func(tr competeTrial) error {
		for _, p := range queueOrder(tr.pending) {
			p.Status, p.CreationTimestamp = corev1.PodStatus{}, metav1.Time{}
			if p.Spec.PriorityClassName == "" {
				p.Spec.Priority = nil
			}
			if _, err := client.CoreV1().Pods(ns).Create(ctx, &p, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("create pods: %v", err)
	}
	for _, tr := range trs {
		total += len(tr.pending)
	}

	got := map[string]string{}
	last, lastChange := "", time.Now()
	cp.WaitFor(t, 5*time.Minute, "the scheduler to settle", func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		decided := 0
		var sig []string
		for i := range l.Items {
			p := &l.Items[i]
			got[p.Name] = p.Spec.NodeName
			if p.Spec.NodeName != "" || unschedulable(p) {
				decided++
			}
			sig = append(sig, p.Name+"@"+p.Spec.NodeName)
		}
		slices.Sort(sig)
		if s := strings.Join(sig, ","); s != last {
			last, lastChange = s, time.Now()
		}
		return decided == total && len(l.Items) == total && time.Since(lastChange) > 12*time.Second, nil
	})

	promised, stayed := 0, 0
	for i, tr := range trs {
		p := plans[i]
		want := map[string]bool{}
		for _, u := range p.ScaleUp {
			for _, key := range u.Pods {
				want[key[strings.Index(key, "/")+1:]] = true
			}
		}
		var bad []string
		for _, pod := range tr.pending {
			placed := got[pod.Name] != ""
			switch {
			case want[pod.Name] && !placed:
				bad = append(bad, pod.Name+" was promised a node and stayed pending")
			case !want[pod.Name] && placed:
				bad = append(bad, pod.Name+" was declared unschedulable and placed on "+got[pod.Name])
			}
			if want[pod.Name] {
				promised++
			} else {
				stayed++
			}
		}
		if len(bad) > 0 {
			var order []string
			for _, q := range queueOrder(tr.pending) {
				order = append(order, fmt.Sprintf("%s(prio %s, cpu %s)", q.Name, q.Spec.PriorityClassName, q.Spec.Containers[0].Resources.Requests.Cpu()))
			}
			t.Errorf("trial %s:\n  %s\n  queue: %s\n  plan: up %+v unschedulable %+v", tr.id, strings.Join(bad, "\n  "), strings.Join(order, " "), p.ScaleUp, p.Unschedulable)
		}
	}
	t.Logf("%d competing trials of %d, %d nodes, %d pods promised a node, %d left pending", competing, len(trs), len(nodes), promised, stayed)
}
