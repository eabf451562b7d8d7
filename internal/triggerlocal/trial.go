package triggerlocal

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/providers/kwok"
)

// Trial is one measured scale-up: a pod only a new node of a kwok group
// fits is created, and the latency is from the moment a watch sees the
// scheduler mark it Unschedulable to the moment a watch sees the group's
// first new Node, which the kwok provider creates inside IncreaseSize.
type Trial struct {
	Client kubernetes.Interface
	// Namespace the pod is made in; Group the kwok group (empty at the
	// start) and Selector the label its template carries, which the pod
	// selects.
	Namespace, Group string
	Selector         map[string]string
	// CPU the pod requests: more than any existing node has free.
	CPU     string
	Timeout time.Duration
}

// Run makes the pod, measures, then deletes the pod and the group's nodes
// (so the next trial starts from an empty group).
func (tr Trial) Run(ctx context.Context, name string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, tr.Timeout)
	defer cancel()
	pods := tr.Client.CoreV1().Pods(tr.Namespace)
	nodes := tr.Client.CoreV1().Nodes()
	groupSel := kwok.GroupLabel + "=" + tr.Group
	nodeList, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: groupSel})
	if err != nil {
		return 0, fmt.Errorf("trial %s: list nodes: %w", name, err)
	}
	if len(nodeList.Items) > 0 {
		return 0, fmt.Errorf("trial %s: group %s has %d nodes, want none at the start", name, tr.Group, len(nodeList.Items))
	}
	nw, err := nodes.Watch(ctx, metav1.ListOptions{LabelSelector: groupSel, ResourceVersion: nodeList.ResourceVersion})
	if err != nil {
		return 0, fmt.Errorf("trial %s: watch nodes: %w", name, err)
	}
	defer nw.Stop()
	pw, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return 0, fmt.Errorf("trial %s: watch pods: %w", name, err)
	}
	defer pw.Stop()
	grace := int64(0)
	defer func() {
		// Clean up even when the trial's context is done.
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		_ = pods.Delete(cctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		_ = nodes.DeleteCollection(cctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{LabelSelector: groupSel})
		for cctx.Err() == nil {
			l, err := nodes.List(cctx, metav1.ListOptions{LabelSelector: groupSel})
			if err == nil && len(l.Items) == 0 {
				if _, err := pods.Get(cctx, name, metav1.GetOptions{}); err != nil {
					return
				}
			}
			time.Sleep(100 * time.Millisecond) // a poll, not a synchronisation
		}
	}()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tr.Namespace},
		Spec: corev1.PodSpec{
			NodeSelector:                  tr.Selector,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tr.CPU), corev1.ResourceMemory: resource.MustParse("1Gi")},
			}}},
		},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("trial %s: create pod: %w", name, err)
	}
	var marked, added time.Time
	for marked.IsZero() || added.IsZero() {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("trial %s: after %s: unschedulable seen %v, node seen %v", name, tr.Timeout, !marked.IsZero(), !added.IsZero())
		case ev, ok := <-pw.ResultChan():
			if !ok {
				return 0, fmt.Errorf("trial %s: pod watch closed", name)
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && marked.IsZero() && unschedulable(p) {
				marked = time.Now()
			}
		case ev, ok := <-nw.ResultChan():
			if !ok {
				return 0, fmt.Errorf("trial %s: node watch closed", name)
			}
			if ev.Type == watch.Added && added.IsZero() {
				added = time.Now()
			}
		}
	}
	return max(added.Sub(marked), 0), nil
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}
