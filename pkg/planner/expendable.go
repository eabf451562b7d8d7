package planner

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// expendable reports whether pod p is below the priority cutoff, so that the
// simulation leaves it out (cluster-autoscaler's expendable pods). A pod
// without spec.priority is never expendable, as in cluster-autoscaler. A
// bound pod marked not to be disrupted stays in: its node must keep it.
func (m *model) expendable(p *corev1.Pod) bool {
	if p.Spec.Priority == nil || int(*p.Spec.Priority) >= m.set.ScaleUp.ExpendablePodsPriorityCutoff {
		return false
	}
	if p.Spec.NodeName == "" {
		return true
	}
	return p.Annotations[annotationDoNotDisrupt] != "true" && p.Annotations[annotationSafeToEvict] != "false"
}

// expendablePending lists the pending pods left out as expendable, so the
// plan says why they got no node.
func (m *model) expendablePending(plan *Plan) {
	added := false
	for i := range m.pods {
		pi := &m.pods[i]
		if !pi.expendable || pi.node >= 0 {
			continue
		}
		p := &m.snap.Pods[i]
		if p.Spec.NodeName != "" || !isUnschedulable(p) || m.now.Sub(p.CreationTimestamp.Time) < m.set.ScaleUp.PendingPodMinAge {
			continue
		}
		plan.Unschedulable = append(plan.Unschedulable, Unschedulable{
			Pod: podKey(p),
			Reason: fmt.Sprintf("expendable: priority %d below cutoff %d (scaleUp.expendablePodsPriorityCutoff)",
				*p.Spec.Priority, m.set.ScaleUp.ExpendablePodsPriorityCutoff),
		})
		added = true
	}
	if added {
		slices.SortFunc(plan.Unschedulable, func(a, b Unschedulable) int { return strings.Compare(a.Pod, b.Pod) })
	}
}
