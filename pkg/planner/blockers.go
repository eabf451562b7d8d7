package planner

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The rules by which a node must not be removed (cluster-autoscaler's and
// Karpenter's), as Blocker.Rule names them.
const (
	RuleNodeScaleDownDisabled = `node annotation cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`
	RuleNodeDoNotDisrupt      = `node annotation karpenter.sh/do-not-disrupt: "true"`
	RuleDoNotDisrupt          = `annotation karpenter.sh/do-not-disrupt: "true"`
	RuleNotSafeToEvict        = `annotation cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`
	RuleNoController          = "not managed by a controller (a bare pod would be lost)"
	RuleKubeSystem            = "kube-system pod without a PodDisruptionBudget"
	RuleLocalStorage          = "local storage (hostPath or disk emptyDir) not listed in cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
)

// Blocker is one reason a node must not be removed: the node's own
// annotation (Pod empty) or a pod on it.
type Blocker struct {
	Node string `json:"node"`
	// Pod is namespace/name.
	Pod  string `json:"pod,omitempty"`
	Rule string `json:"rule"`
}

func (b Blocker) String() string {
	if b.Pod == "" {
		return "node " + b.Node + ": " + b.Rule
	}
	return "pod " + b.Pod + ": " + b.Rule
}

// DisruptionBlockers lists what forbids removing node, given the pods bound
// to it and the cluster's PodDisruptionBudgets: the node's opt-out
// annotations, then each pod that must move with the node and keeps it by
// the scale-down rules. DaemonSet, mirror, terminal and terminating pods
// never block, and safe-to-evict "true" overrides the bare, local-storage and
// kube-system rules. A budget only matters here by covering a kube-system
// pod: one that allows no disruption right now is a wait, not a refusal.
func DisruptionBlockers(node *corev1.Node, pods []corev1.Pod, pdbs []policyv1.PodDisruptionBudget) []Blocker {
	var out []Blocker
	if rule := nodeBlocker(node); rule != "" {
		out = append(out, Blocker{Node: node.Name, Rule: rule})
	}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != node.Name || !movesWithNode(p) {
			continue
		}
		if rule := podBlocker(p, covered(p, pdbs)); rule != "" {
			out = append(out, Blocker{Node: node.Name, Pod: podKey(p), Rule: rule})
		}
	}
	return out
}

// covered reports whether a budget selects p; a null or invalid selector
// selects nothing, as in the scale-down simulation.
func covered(p *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) bool {
	for i := range pdbs {
		b := &pdbs[i]
		if b.Namespace != p.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err == nil && sel.Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}
