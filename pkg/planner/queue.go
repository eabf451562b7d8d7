package planner

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Where pending pods compete for capacity the plan cannot give them all
// (a group's max, the step's budget), which of them the scheduler places
// is its active queue's order: kube-scheduler's PrioritySort plugin pops
// the higher priority first, then the pod queued earlier. The plan
// promises the capacity in that order, the pod's creation standing for
// its queue time (the scheduler refreshes that at each failed attempt,
// which the snapshot does not record). Pods that tie keep the packing's
// order (first-fit decreasing), so a plan without competition, or with
// pods all alike in priority and age, is packed as before.

// AssignmentPredicted is the plan's note when pending pods compete for
// the new nodes: which pod gets which node is the scheduler's to decide.
const AssignmentPredicted = "predicted: pending pods compete for the new nodes; the plan promises them in kube-scheduler's queue order (higher priority first, then the older pod), and the scheduler decides which pod gets which node"

func podPriority(p *corev1.Pod) int32 {
	if p.Spec.Priority == nil {
		return 0
	}
	return *p.Spec.Priority
}

// compareQueue orders pods as the scheduler's queue would, ties 0.
func compareQueue(a, b *corev1.Pod) int {
	if c := cmp.Compare(podPriority(b), podPriority(a)); c != 0 {
		return c
	}
	return a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time)
}

// queueOrder orders each class's pods as the scheduler's queue would
// (stably: ties keep their names' order), so the pods placed first, and
// promised capacity first, are the ones the scheduler takes first.
func (m *model) queueOrder(classes []int32) {
	by := func(a, b int32) int { return compareQueue(&m.snap.Pods[a], &m.snap.Pods[b]) }
	for _, c := range classes {
		if pods := m.classes[c].pods; !slices.IsSortedFunc(pods, by) {
			slices.SortStableFunc(pods, by)
		}
	}
}

// queueSeg is a run of one class's pending pods that the queue does not
// tell apart: cl.pods[from:to], all of one priority and creation time.
type queueSeg struct {
	class    int32
	from, to int
	prio     int32
	created  time.Time
}

func sameQueueKey(a, b *queueSeg) bool { return a.prio == b.prio && a.created.Equal(b.created) }

// queueSegs cuts the classes' pods (in queue order) into runs and orders
// the runs as the queue would, ties by class.
func (m *model) queueSegs(classes []int32) []queueSeg {
	var segs []queueSeg
	for _, c := range classes {
		pods := m.classes[c].pods
		for i := 0; i < len(pods); {
			p := &m.snap.Pods[pods[i]]
			s := queueSeg{class: c, from: i, prio: podPriority(p), created: p.CreationTimestamp.Time}
			for i++; i < len(pods) && compareQueue(p, &m.snap.Pods[pods[i]]) == 0; i++ {
			}
			s.to = i
			segs = append(segs, s)
		}
	}
	slices.SortStableFunc(segs, func(a, b queueSeg) int {
		if c := cmp.Compare(b.prio, a.prio); c != 0 {
			return c
		}
		return a.created.Compare(b.created)
	})
	return segs
}

// queued calls place for the pods of the classes in order, in the queue's
// order: runs of equal rank go by their class's place in order. place is
// given a class and how many of its next pods to place, and returns how
// many it placed; a class that took fewer gets no more, as a pod that
// does not fit leaves the next of its class no room either.
func (m *model) queued(order []int32, place func(c int32, n int64) int64) {
	rank := make(map[int32]int, len(order))
	for i, c := range order {
		rank[c] = i
	}
	segs := m.queueSegs(order)
	done := make(map[int32]int64, len(order))
	failed := map[int32]bool{}
	for i := 0; i < len(segs); {
		j := i + 1
		for j < len(segs) && sameQueueKey(&segs[i], &segs[j]) {
			j++
		}
		bucket := segs[i:j]
		slices.SortStableFunc(bucket, func(a, b queueSeg) int { return cmp.Compare(rank[a.class], rank[b.class]) })
		for _, s := range bucket {
			cl := &m.classes[s.class]
			start := max(s.from, cl.next+int(done[s.class]))
			n := int64(s.to - start)
			if failed[s.class] || n <= 0 {
				continue
			}
			got := place(s.class, n)
			done[s.class] += got
			if got < n {
				failed[s.class] = true
			}
		}
		i = j
	}
}
