package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A DaemonSet's controller pins each of its pods to its node with required
// node affinity: every term gets matchFields [metadata.name In [node]]. So
// every DaemonSet pod has a spec of its own, and a shape of its own; the
// compact form writes the affinity once, with the name left empty, and the
// node per pod (pinnedNode).

// pinnedNode returns the node a's required terms all pin the pod to, or ""
// when a does not pin it that way.
func pinnedNode(a *corev1.Affinity) string {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	node := ""
	for i := range terms {
		f := terms[i].MatchFields
		if len(f) != 1 || f[0].Key != metav1.ObjectNameField || f[0].Operator != corev1.NodeSelectorOpIn || len(f[0].Values) != 1 || f[0].Values[0] == "" {
			return ""
		}
		if i > 0 && f[0].Values[0] != node {
			return ""
		}
		node = f[0].Values[0]
	}
	return node
}

// pinAffinity returns a copy of a whose terms' metadata.name is node,
// sharing the rest. pinAffinity(a, "") is the shape's affinity.
func pinAffinity(a *corev1.Affinity, node string) *corev1.Affinity {
	na := *a.NodeAffinity
	req := *na.RequiredDuringSchedulingIgnoredDuringExecution
	req.NodeSelectorTerms = make([]corev1.NodeSelectorTerm, len(req.NodeSelectorTerms))
	for i, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		t.MatchFields = []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}
		req.NodeSelectorTerms[i] = t
	}
	na.RequiredDuringSchedulingIgnoredDuringExecution = &req
	out := *a
	out.NodeAffinity = &na
	return &out
}

// pinnable reports whether a is a shape's affinity with the name left
// empty in every term.
func pinnable(a *corev1.Affinity) bool {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		f := terms[i].MatchFields
		if len(f) != 1 || f[0].Key != metav1.ObjectNameField || f[0].Operator != corev1.NodeSelectorOpIn || len(f[0].Values) != 1 || f[0].Values[0] != "" {
			return false
		}
	}
	return len(terms) > 0
}
