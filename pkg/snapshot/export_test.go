package snapshot

import (
	"io"

	corev1 "k8s.io/api/core/v1"
)

// What the external tests of this package read of its insides.
var (
	NormalGroups   = normalGroups
	FirstDuplicate = firstDuplicate
	UTCSeconds     = utcSeconds
	BigExponent    = bigExponent
	MaxSharedLists = maxSharedLists
	MaxPrealloc    = maxPreallocUnknown
)

type CompactCounts = compactCounts

// OrEmpty is s, or an empty list for nil, as documents write lists.
func OrEmpty[T any](s []T) []T { return orEmpty(s) }

// SharedLists is how many distinct resource lists t shares.
func (t *Trimmer) SharedLists() int { return len(t.lists) }

// WriteFullWith writes s in the full form, an object at a time, with node and
// pod changed by the functions given (to add the fields the API serves).
func WriteFullWith(w io.Writer, s Snapshot, node func(corev1.Node, int) corev1.Node, pod func(corev1.Pod, int) corev1.Pod) error {
	sw := newSnapWriter(w, "  ")
	sw.raw("{\n")
	sw.field("capturedAt", s.CapturedAt.UTC())
	sw.field("nodeGroups", normalGroups(s.NodeGroups))
	sw.list("nodes", len(s.Nodes), func(i int) {
		n := node(s.Nodes[i], i)
		sw.encode(&n, 2, true)
	})
	sw.list("pods", len(s.Pods), func(i int) {
		p := pod(s.Pods[i], i)
		sw.encode(&p, 2, true)
	})
	writeList(sw, "podDisruptionBudgets", s.PodDisruptionBudgets)
	sw.field("state", s.State.Normal())
	sw.raw("\n}\n")
	return sw.flush()
}
