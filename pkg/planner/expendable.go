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
// bound pod marked not to be disrupted stays in: its node must keep it; so
// does one a PodDisruptionBudget allowing no disruption covers, since its
// node's drain could not evict it (cluster-autoscaler would choose the node
// and its drain would fail).
func (m *model) expendable(p *corev1.Pod) bool {
	if p.Spec.Priority == nil || int(*p.Spec.Priority) >= m.set.ScaleUp.ExpendablePodsPriorityCutoff {
		return false
	}
	if p.Spec.NodeName == "" {
		return true
	}
	if p.Annotations[annotationDoNotDisrupt] == "true" || p.Annotations[annotationSafeToEvict] == "false" {
		return false
	}
	return !m.budgetSpent(p)
}

// budgetSpent reports whether a PodDisruptionBudget that allows no
// disruption now covers pod p.
func (m *model) budgetSpent(p *corev1.Pod) bool {
	if len(m.snap.PodDisruptionBudgets) == 0 {
		return false
	}
	b := m.budgetIndex()
	var buf [4]int32
	for _, bi := range b.matching(p, buf[:0]) {
		if b.pdbs[bi].left <= 0 {
			return true
		}
	}
	return false
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
