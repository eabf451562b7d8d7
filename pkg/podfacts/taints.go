package podfacts

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Prefixes of the taint keys cluster-autoscaler ignores whatever its flags
// say. A startup taint is one a node carries while it starts (a CNI or a
// device plugin not up yet) and loses once it is ready for pods; a status
// taint reports something about a running node that pods need not
// tolerate to land on new nodes. The ignore-taint prefix is the old name of
// the startup one.
const (
	StartupTaintPrefix = "startup-taint.cluster-autoscaler.kubernetes.io/"
	StatusTaintPrefix  = "status-taint.cluster-autoscaler.kubernetes.io/"
	IgnoreTaintPrefix  = "ignore-taint.cluster-autoscaler.kubernetes.io/"
)

// IgnoredTaints are the startup and status taints, as cluster-autoscaler
// reads them: those under the prefixes above and the keys given here
// (config's scaleUp.startupTaints and scaleUp.statusTaints). Neither is on
// a new node, so both are left out of a group's template. A node carrying a
// startup taint is still starting: it is not ready yet, and pods wait for
// it instead of calling for more nodes. A status taint leaves a node ready
// (and, as the scheduler honours it, still keeps pods off that node).
type IgnoredTaints struct {
	Startup []string
	Status  []string
}

// IsStartup reports whether key is a startup taint.
func (t IgnoredTaints) IsStartup(key string) bool {
	return strings.HasPrefix(key, StartupTaintPrefix) || strings.HasPrefix(key, IgnoreTaintPrefix) || slices.Contains(t.Startup, key)
}

// IsStatus reports whether key is a status taint.
func (t IgnoredTaints) IsStatus(key string) bool {
	return strings.HasPrefix(key, StatusTaintPrefix) || slices.Contains(t.Status, key)
}

// Starting returns the key of the first startup taint n carries, and
// whether it carries one.
func (t IgnoredTaints) Starting(n *corev1.Node) (string, bool) {
	for i := range n.Spec.Taints {
		if k := n.Spec.Taints[i].Key; t.IsStartup(k) {
			return k, true
		}
	}
	return "", false
}

// Without returns taints less the startup and status ones (what a new
// node of a group will not carry): taints itself when it has none of them,
// else a new slice.
func (t IgnoredTaints) Without(taints []corev1.Taint) []corev1.Taint {
	return without(taints, func(key string) bool { return t.IsStartup(key) || t.IsStatus(key) })
}

// WithoutStartup returns taints less the startup ones (what a starting node
// will lose): taints itself when it has none, else a new slice. A running
// node's status taints stay: the scheduler honours them.
func (t IgnoredTaints) WithoutStartup(taints []corev1.Taint) []corev1.Taint {
	return without(taints, t.IsStartup)
}

func without(taints []corev1.Taint, drop func(key string) bool) []corev1.Taint {
	i := 0
	for i < len(taints) && !drop(taints[i].Key) {
		i++
	}
	if i == len(taints) {
		return taints
	}
	out := append(make([]corev1.Taint, 0, len(taints)-1), taints[:i]...)
	for _, x := range taints[i+1:] {
		if !drop(x.Key) {
			out = append(out, x)
		}
	}
	return out
}
