package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// trace records where pending pods went without new nodes; tests use it to
// check that every pending pod is accounted for.
type trace struct {
	existing map[string]string // pod → node
	upcoming map[string]string // pod → node group

	// hops: pod → the nodes the scale-down simulation moved it to, in turn.
	hops map[string][]string
}

// upcomingCapacity works out each group's upcoming nodes and backs off the
// groups whose last scale-up did not register within the provision time.
func (m *model) upcomingCapacity(plan *Plan, next *snapshot.State) {
	prev := m.snap.State
	for _, gi := range m.byName {
		g := &m.groups[gi]
		name := g.ng.Name
		if until, ok := prev.BackoffUntil[name]; ok && until.After(m.now) {
			g.backoff = until
		}
		up := g.target - len(g.nodes)
		if up <= 0 {
			continue
		}
		last, ok := prev.LastScaleUp[name]
		if !ok {
			// Someone else raised the target (by hand, a schedule): start the
			// provision clock now rather than count those nodes forever.
			next.LastScaleUp[name] = m.now
			g.upcoming = up
			continue
		}
		if m.now.Sub(last) <= m.set.ScaleUp.MaxNodeProvisionTime {
			g.upcoming = up
			continue
		}
		g.backoff = backOff(g.backoff, m.now, m.set)
		g.target = len(g.nodes)
		plan.DecreaseTarget = append(plan.DecreaseTarget, DecreaseTarget{
			NodeGroup:     name,
			Delta:         up,
			NewTargetSize: g.target,
			Reason: fmt.Sprintf("%s not registered within %s of the scale-up at %s; backed off until %s",
				plural(up, "node"), m.set.ScaleUp.MaxNodeProvisionTime, last.UTC().Format(time.RFC3339),
				g.backoff.UTC().Format(time.RFC3339)),
		})
	}
}

// sortDecreasing orders classes for first-fit decreasing: by the share of a
// reference node they take (cpu + memory), then GPUs, then pod slots, then
// class index, which follows the pods' names, so ties are stable.
func (m *model) sortDecreasing(classes []int32, ref res) {
	score := func(c int32) float64 {
		r := m.classes[c].req
		var s float64
		if ref.cpu > 0 {
			s += float64(r.cpu) / float64(ref.cpu)
		}
		if ref.mem > 0 {
			s += float64(r.mem) / float64(ref.mem)
		}
		return s
	}
	slices.SortFunc(classes, func(a, b int32) int {
		if c := cmp.Compare(score(b), score(a)); c != 0 {
			return c
		}
		ra, rb := m.classes[a].req, m.classes[b].req
		if c := cmp.Compare(rb.gpu, ra.gpu); c != 0 {
			return c
		}
		if c := cmp.Compare(rb.pods, ra.pods); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}

// pendingClasses groups the pending pods into classes, in the order of their
// first pod's "ns/name", each class's pods in the scheduler's queue order
// (queue.go), ties by "ns/name". The pods are
// ordered by index, their keys compared in place: building a key per pod
// was most of a large plan's time and memory.
func (m *model) pendingClasses() []int32 {
	n := 0
	for i := range m.pods {
		if m.pods[i].pending {
			n++
		}
	}
	pend := make([]int32, 0, n)
	for i := range m.pods {
		if m.pods[i].pending {
			pend = append(pend, int32(i))
		}
	}
	sortRuns(pend, func(a, b int32) int { return compareKeys(&m.snap.Pods[a], &m.snap.Pods[b]) })
	of := make([]int32, len(pend))
	var classes []int32
	for j, i := range pend {
		c := m.classOf(i)
		of[j] = c
		if cl := &m.classes[c]; cl.pending == 0 {
			classes = append(classes, c)
		}
		m.classes[c].pending++
	}
	// Every class's pods in one array, each its own part of it.
	all := make([]int32, len(pend))
	off := 0
	for _, c := range classes {
		cl := &m.classes[c]
		cl.pods = all[off : off : off+cl.pending]
		off += cl.pending
	}
	for j, i := range pend {
		cl := &m.classes[of[j]]
		cl.pods = append(cl.pods, i)
	}
	m.queueOrder(classes)
	return classes
}

// keyOf is pod i's "ns/name".
func (m *model) keyOf(i int32) string { return podKey(&m.snap.Pods[i]) }

// compareKeys orders pods as their "ns/name" strings would, without
// building them.
func compareKeys(a, b *corev1.Pod) int {
	if a.Namespace == b.Namespace {
		return strings.Compare(a.Name, b.Name)
	}
	na, nb := a.Namespace, b.Namespace
	for i := range min(len(na), len(nb)) {
		if na[i] != nb[i] {
			return cmp.Compare(na[i], nb[i])
		}
	}
	// One namespace starts the other: the shorter one's "/" meets the
	// other's next byte, which a valid namespace never makes a "/".
	long, sign := nb, 1
	if len(na) > len(nb) {
		long, sign = na, -1
	}
	if c := long[min(len(na), len(nb))]; c != '/' {
		return sign * cmp.Compare(byte('/'), c)
	}
	return strings.Compare(podKey(a), podKey(b))
}

// sortRuns sorts s by cmp. Input made of a few sorted runs (one list from
// the API server, or several appended) is merged in linear time; anything
// else is sorted.
func sortRuns[T any](s []T, cmp func(a, b T) int) {
	const maxRuns = 8
	var ends [maxRuns]int
	runs := 0
	for i := 1; i <= len(s); i++ {
		if i == len(s) || cmp(s[i-1], s[i]) > 0 {
			if runs == maxRuns {
				slices.SortFunc(s, cmp)
				return
			}
			ends[runs] = i
			runs++
		}
	}
	if runs <= 1 {
		return
	}
	src, dst := s, make([]T, len(s))
	for ; runs > 1; src, dst = dst, src {
		// Merge neighbouring runs pairwise, from src into dst.
		from, out := 0, 0
		for r := 0; r < runs; r += 2 {
			end := ends[r]
			if r+1 < runs {
				end = ends[r+1]
				mergeRuns(dst[from:end], src[from:ends[r]], src[ends[r]:end], cmp)
			} else {
				copy(dst[from:end], src[from:end])
			}
			ends[out] = end
			from = end
			out++
		}
		runs = out
	}
	if len(s) > 0 && &src[0] != &s[0] {
		copy(s, src)
	}
}

// mergeRuns merges the sorted a and b into out (len(a)+len(b) long),
// stably.
func mergeRuns[T any](out, a, b []T, cmp func(a, b T) int) {
	i, j := 0, 0
	for k := range out {
		if j == len(b) || (i < len(a) && cmp(a[i], b[j]) <= 0) {
			out[k] = a[i]
			i++
		} else {
			out[k] = b[j]
			j++
		}
	}
}

func remaining(cl *podClass) int64 { return int64(len(cl.pods) - cl.next) }

// onExisting is cluster-autoscaler's "filter out schedulable": pending pods
// that fit on existing schedulable nodes (Ready, or still booting) need no
// new node. Placements consume the nodes' free capacity.
func (m *model) onExisting(classes []int32, tr *trace) {
	var ref res
	for i := range m.nodes {
		ref = ref.max(m.nodes[i].alloc)
	}
	order := slices.Clone(classes)
	m.sortDecreasing(order, ref)
	m.affinityLast(order)
	for _, c := range order {
		cl := &m.classes[c]
		if cl.set >= 0 {
			m.existingEach(c, tr)
			continue
		}
		count := remaining(cl)
		for i := range m.nodes {
			if count == 0 {
				break
			}
			n := &m.nodes[i]
			if !n.schedulable || !(n.ready || n.booting) {
				continue
			}
			f := fitCount(n.free, cl.req)
			if f == 0 || !m.fitsNode(c, int32(i)) {
				continue
			}
			take := min(f, count)
			n.free = n.free.sub(cl.req.mul(take))
			n.gotPending = true
			m.place(int32(i), c, take)
			if tr != nil {
				for _, pi := range cl.pods[cl.next : cl.next+int(take)] {
					tr.existing[m.keyOf(pi)] = n.node.Name
				}
			}
			cl.next += int(take)
			count -= take
		}
	}
	m.retryAffinity(order, func(c int32) { m.existingEach(c, tr) })
}

func (m *model) hasAffinity(c int32) bool {
	f := m.classes[c].feat
	return f != nil && len(f.aff) > 0
}

// affinityLast moves the classes with required pod affinity to the end
// (stably): the pods they need may be among those placed before them.
func (m *model) affinityLast(order []int32) {
	slices.SortStableFunc(order, func(a, b int32) int {
		switch ha, hb := m.hasAffinity(a), m.hasAffinity(b); {
		case ha == hb:
			return 0
		case hb:
			return -1
		}
		return 1
	})
}

// retryAffinity places the pods of affinity classes again while that
// places more: one may need another placed after it.
func (m *model) retryAffinity(order []int32, place func(c int32)) {
	for progress := true; progress; {
		progress = false
		for _, c := range order {
			cl := &m.classes[c]
			if !m.hasAffinity(c) || remaining(cl) == 0 {
				continue
			}
			before := cl.next
			place(c)
			progress = progress || cl.next != before
		}
	}
}

// existingEach is onExisting for a class with pod-dependent rules: pod by
// pod, first fit, with the counts updated after each placement.
func (m *model) existingEach(c int32, tr *trace) {
	cl := &m.classes[c]
	t := m.topoOf(c)
	var cands []int32
	for i := range m.nodes {
		n := &m.nodes[i]
		if n.schedulable && (n.ready || n.booting) && fitCount(n.free, cl.req) > 0 && m.fitsNode(c, int32(i)) {
			cands = append(cands, int32(i))
		}
	}
	for remaining(cl) > 0 {
		placed := false
		for j := 0; j < len(cands); j++ {
			i := cands[j]
			n := &m.nodes[i]
			if fitCount(n.free, cl.req) == 0 {
				cands = slices.Delete(cands, j, j+1)
				j--
				continue
			}
			why, lasting := t.fits(i)
			if !why.ok() {
				if lasting {
					cands = slices.Delete(cands, j, j+1)
					j--
				}
				continue
			}
			n.free = n.free.sub(cl.req)
			n.gotPending = true
			m.place(i, c, 1)
			if tr != nil {
				tr.existing[m.keyOf(cl.pods[cl.next])] = n.node.Name
			}
			cl.next++
			placed = true
			break
		}
		if !placed {
			return
		}
	}
}

// fillSlots places up to count pods of class c on the given simulated nodes
// of group g (first fit), opening new ones while fewer than limit are
// open, and returns how many it placed. Classes with pod-dependent rules go
// pod by pod; the others by count.
func (m *model) fillSlots(c int32, g int, slots *[]int32, count, limit int64) int64 {
	cl := &m.classes[c]
	var placed int64
	if cl.set < 0 {
		for _, s := range *slots {
			if count == 0 {
				break
			}
			free := m.slotFree(s)
			take := min(fitCount(*free, cl.req), count)
			if take > 0 {
				*free = free.sub(cl.req.mul(take))
				m.place(s, c, take)
				placed += take
				count -= take
			}
		}
		k := fitCount(m.groups[g].cap, cl.req)
		for count > 0 && k > 0 && int64(len(*slots)) < limit {
			s := m.addSim(g, "new")
			*slots = append(*slots, s)
			take := min(k, count)
			free := m.slotFree(s)
			*free = free.sub(cl.req.mul(take))
			m.place(s, c, take)
			placed += take
			count -= take
		}
		return placed
	}
	t := m.topoOf(c)
	for ; count > 0; count-- {
		slot := int32(-1)
		var last refusal
		for _, s := range *slots {
			if fitCount(*m.slotFree(s), cl.req) == 0 {
				continue
			}
			if why, _ := t.fits(s); !why.ok() {
				last = why
				continue
			}
			slot = s
			break
		}
		if slot < 0 {
			if int64(len(*slots)) >= limit {
				if !last.ok() {
					m.noteWhy(c, g, t, last)
				}
				break
			}
			s := m.addSim(g, "new")
			if why, _ := t.fits(s); !why.ok() {
				m.noteWhy(c, g, t, why)
				m.dropSims(s)
				break
			}
			*slots = append(*slots, s)
			slot = s
		}
		free := m.slotFree(slot)
		*free = free.sub(cl.req)
		m.place(slot, c, 1)
		placed++
	}
	return placed
}

// refused is a pod-dependent rule that kept a pod off a planned node: its
// GroupReason code and its explanation.
type refused struct{ code, why string }

func (m *model) noteWhy(c int32, g int, t *topo, r refusal) {
	cl := &m.classes[c]
	if cl.why == nil {
		cl.why = map[int]refused{}
	}
	cl.why[g] = refused{code: r.code(), why: t.explain(r)}
}

// fittingClasses are the classes with pods left whose pods fit group g's
// template, in first-fit-decreasing order for that template.
func (m *model) fittingClasses(classes []int32, g int) []int32 {
	var out []int32
	for _, c := range classes {
		if remaining(&m.classes[c]) > 0 && m.fitsTemplate(c, g) {
			out = append(out, c)
		}
	}
	m.sortDecreasing(out, m.groups[g].alloc)
	return out
}

// onUpcoming packs pending pods onto the nodes groups are already bringing
// up, so a cycle does not add nodes for pods that earlier nodes will take.
func (m *model) onUpcoming(classes []int32, tr *trace) {
	if m.topoOn {
		m.upcomingEach(classes, tr)
		return
	}
	for _, gi := range m.byName {
		g := &m.groups[gi]
		if g.upcoming <= 0 {
			continue
		}
		p := packer{cap: g.cap, runs: []run{{int64(g.upcoming), g.cap}}}
		for _, c := range m.fittingClasses(classes, gi) {
			cl := &m.classes[c]
			n := int(p.place(cl.req, remaining(cl)))
			if tr != nil {
				for _, pi := range cl.pods[cl.next : cl.next+n] {
					tr.upcoming[m.keyOf(pi)] = g.ng.Name
				}
			}
			cl.next += n
		}
		for _, r := range p.runs {
			g.upFree = g.upFree.add(r.free.mul(r.n))
			if r.free == g.cap {
				g.upEmpty += r.n
			}
		}
	}
}

// upcomingEach is onUpcoming with pod-dependent rules: the upcoming nodes
// are simulated one by one, each its own hostname.
func (m *model) upcomingEach(classes []int32, tr *trace) {
	slots := make([][]int32, len(m.groups))
	for _, gi := range m.byName {
		for range m.groups[gi].upcoming {
			slots[gi] = append(slots[gi], m.addSim(gi, "upcoming"))
		}
	}
	for _, gi := range m.byName {
		if len(slots[gi]) == 0 {
			continue
		}
		place := func(c int32) {
			cl := &m.classes[c]
			n := int(m.fillSlots(c, gi, &slots[gi], remaining(cl), int64(len(slots[gi]))))
			if tr != nil {
				for _, pi := range cl.pods[cl.next : cl.next+n] {
					tr.upcoming[m.keyOf(pi)] = m.groups[gi].ng.Name
				}
			}
			cl.next += n
		}
		order := m.fittingClasses(classes, gi)
		m.affinityLast(order)
		for _, c := range order {
			place(c)
		}
		m.retryAffinity(order, place)
		g := &m.groups[gi]
		for _, s := range slots[gi] {
			free := *m.slotFree(s)
			g.upFree = g.upFree.add(free)
			if free == g.cap {
				g.upEmpty++
			}
		}
	}
}

// estimate is what new nodes of one group would do for the pending pods.
type estimate struct {
	group  int
	nodes  int64
	pods   int64
	placed []classCount
	// waste is the mean unused share of cpu and memory on the new nodes.
	// DaemonSet requests count as waste: they are what another node costs
	// before it runs anything.
	waste float64
	limit int64
	// log is a committed estimate's placements, so it can be taken back;
	// slots the new nodes it opened (pod-dependent rules only).
	log   []placement
	slots []int32
	// note is what the expanders passed over, for the reason (expand).
	note string
}

type classCount struct {
	class int32
	n     int64
}

// With pod-dependent rules on, the new nodes are simulated one by one and,
// unless commit, taken back afterwards. limit is how many new nodes the
// estimate may open.
func (m *model) estimate(classes []int32, g int, limit int64, commit bool) estimate {
	gr := &m.groups[g]
	e := estimate{group: g}
	var used res
	if m.topoOn {
		used = m.estimateEach(classes, &e, limit, commit)
	} else {
		used = m.estimatePacked(classes, &e, limit)
	}
	e.waste = wasteOf(gr, e.nodes, used)
	return e
}

// estimatePacked is estimate by counts: first-fit decreasing, or, when
// that leaves pods the limit has no room for, the queue's order
// (queue.go). It returns the requests placed.
func (m *model) estimatePacked(classes []int32, e *estimate, limit int64) res {
	gr := &m.groups[e.group]
	order := m.fittingClasses(classes, e.group)
	p := packer{cap: gr.cap, limit: limit}
	var used res
	at := map[int32]int{} // e.placed's entry of a class, once placed in queue order
	add := func(c int32, n int64) {
		if i, ok := at[c]; ok {
			e.placed[i].n += n
		} else {
			at[c] = len(e.placed)
			e.placed = append(e.placed, classCount{c, n})
		}
		e.pods += n
		used = used.add(m.classes[c].req.mul(n))
	}
	capped := false
	for _, c := range order {
		left := remaining(&m.classes[c])
		if n := p.place(m.classes[c].req, left); n > 0 {
			e.placed = append(e.placed, classCount{c, n})
			e.pods += n
			used = used.add(m.classes[c].req.mul(n))
			capped = capped || n < left
		} else {
			capped = true
		}
	}
	if capped {
		e.placed, e.pods, used = nil, 0, res{}
		p = packer{cap: gr.cap, limit: limit}
		m.queued(order, func(c int32, n int64) int64 {
			got := p.place(m.classes[c].req, n)
			if got > 0 {
				add(c, got)
			}
			return got
		})
	}
	e.nodes = p.opened
	return used
}

// estimateEach is estimate with pod-dependent rules: pod by pod, first
// onto the nodes earlier rounds of this plan opened for the group, then
// onto new ones; when the limit leaves pods without room, again in the
// queue's order (queue.go). It returns the requests placed on the new
// nodes.
func (m *model) estimateEach(classes []int32, e *estimate, limit int64, commit bool) res {
	g := e.group
	gr := &m.groups[g]
	var log []placement
	m.log = &log
	mark := m.slotCount()
	limit += int64(len(gr.planned))
	order := m.fittingClasses(classes, g)
	m.affinityLast(order)
	opened, done := m.fillEach(order, g, limit, false)
	if int64(len(opened)) == limit && m.leftOver(order, done) {
		m.undo(log)
		m.dropSims(mark)
		log = log[:0]
		opened, done = m.fillEach(order, g, limit, true)
	}
	for _, c := range order {
		if done[c] > 0 {
			e.placed = append(e.placed, classCount{c, done[c]})
			e.pods += done[c]
		}
	}
	m.log = nil
	e.slots = opened[len(gr.planned):]
	e.nodes = int64(len(e.slots))
	// What the new nodes hold is their capacity less what is left free.
	var used res
	for _, s := range e.slots {
		used = used.add(gr.cap.sub(*m.slotFree(s)))
	}
	if !commit {
		m.undo(log)
		m.dropSims(mark)
		e.slots = nil
	} else {
		e.log = log
	}
	return used
}

// fillEach places the pods of the classes in order onto group g's
// planned nodes and up to limit nodes in all, class by class or, with
// queued, in the queue's order; then the affinity classes again while
// that places more. It returns the nodes and the pods placed by class.
func (m *model) fillEach(order []int32, g int, limit int64, queued bool) ([]int32, map[int32]int64) {
	opened := slices.Clone(m.groups[g].planned)
	// Pods count as placed only at commit (cl.next), so a retry here
	// tracks its own progress.
	done := map[int32]int64{}
	place := func(c int32, n int64) int64 {
		got := m.fillSlots(c, g, &opened, n, limit)
		done[c] += got
		return got
	}
	if queued {
		m.queued(order, place)
	} else {
		for _, c := range order {
			place(c, remaining(&m.classes[c]))
		}
	}
	for progress := true; progress; {
		progress = false
		for _, c := range order {
			if left := remaining(&m.classes[c]) - done[c]; m.hasAffinity(c) && left > 0 {
				progress = place(c, left) > 0 || progress
			}
		}
	}
	return opened, done
}

// leftOver: some class in order has pods the estimate did not place.
func (m *model) leftOver(order []int32, done map[int32]int64) bool {
	for _, c := range order {
		if remaining(&m.classes[c]) > done[c] {
			return true
		}
	}
	return false
}

// wasteOf is the mean unused share of cpu and memory on n new nodes of
// group g holding used.
func wasteOf(g *groupInfo, n int64, used res) float64 {
	if n <= 0 {
		return 0
	}
	var w, dims float64
	if g.alloc.cpu > 0 {
		total := float64(g.alloc.cpu) * float64(n)
		w += (total - float64(used.cpu)) / total
		dims++
	}
	if g.alloc.mem > 0 {
		total := float64(g.alloc.mem) * float64(n)
		w += (total - float64(used.mem)) / total
		dims++
	}
	if dims == 0 {
		return 0
	}
	return w / dims
}

func (m *model) stepBudget() int64 {
	if m.set.ScaleUp.MaxNodesPerStep <= 0 {
		return math.MaxInt64
	}
	return int64(m.set.ScaleUp.MaxNodesPerStep)
}

// onNewNodes is the expander loop: estimate every group that may grow, take
// the expanders' choice (expand), remove its pods and repeat until no group
// places anything. With pod-dependent rules a group that has grown may grow
// again in a later round: the nodes other groups added since can let it
// take pods its round could not (zone spread over one group per zone), onto
// the room left on its new nodes first.
func (m *model) onNewNodes(classes []int32, plan *Plan, next *snapshot.State) (grown map[int]int, budget int64) {
	grown = map[int]int{}
	budget = m.stepBudget()
	m.probeZones(classes)
	for {
		var opts []estimate
		for _, gi := range m.byName {
			g := &m.groups[gi]
			_, done := grown[gi]
			limit := max(0, min(int64(g.ng.MaxSize-g.target-grown[gi]), budget))
			if done && !m.topoOn || limit == 0 && len(g.planned) == 0 || g.backoff.After(m.now) {
				continue
			}
			e := m.estimate(classes, gi, limit, false)
			e.limit = limit
			if e.pods > 0 {
				opts = append(opts, e)
			}
		}
		if len(opts) == 0 {
			break
		}
		best, note := m.expand(opts)
		_, again := grown[best.group]
		if !again && m.set.ScaleUp.BalanceSimilarNodeGroups && m.balance(classes, best, plan, next, grown, &budget) {
			continue
		}
		if m.topoOn {
			// The same estimate again, kept this time: later choices must see
			// these nodes and pods.
			limit := best.limit
			*best = m.estimate(classes, best.group, limit, true)
		}
		best.note = note
		m.record(best, "", plan, next, grown, &budget)
	}
	return grown, budget
}

// probeZones counts, for zone spread, the zone of every one-zone group that
// may grow for a pending zone-spread pod as a domain from the start: once
// any round adds a node there, the scheduler counts that zone for every
// pod, those planned in earlier rounds and onto other groups included, so
// a plan that counted it only from then on could break the skew. A zone
// the plan then does not grow in only makes it take fewer pods.
func (m *model) probeZones(classes []int32) {
	if !m.topoOn || m.stepBudget() <= 0 {
		return
	}
	for _, gi := range m.byName {
		g := &m.groups[gi]
		if g.labels[labelZone] == "" || g.ng.MaxSize <= g.target || g.backoff.After(m.now) {
			continue
		}
		for _, c := range classes {
			cl := &m.classes[c]
			if remaining(cl) > 0 && cl.feat != nil && len(cl.feat.spread) > 0 && m.fitsTemplate(c, gi) {
				m.addProbe(gi)
				break
			}
		}
	}
}

// record turns an estimate into the plan's scale-up of its group: its pods
// are taken, its nodes counted against the step budget. extra is appended
// to the reason. A later round of the same group joins its scale-up.
func (m *model) record(best *estimate, extra string, plan *Plan, next *snapshot.State, grown map[int]int, budget *int64) {
	g := &m.groups[best.group]
	pods := make([]string, 0, best.pods)
	for _, cc := range best.placed {
		cl := &m.classes[cc.class]
		for _, pi := range cl.pods[cl.next : cl.next+int(cc.n)] {
			pods = append(pods, m.keyOf(pi))
		}
		cl.next += int(cc.n)
		g.placed = addClassCount(g.placed, cc.class, cc.n)
		g.newUsed = g.newUsed.add(cl.req.mul(cc.n))
	}
	g.newNodes += best.nodes
	g.planned = append(g.planned, best.slots...)
	g.rounds++
	if extra != "" {
		g.extra = append(g.extra, extra)
	}
	grown[best.group] += int(best.nodes)
	*budget -= best.nodes
	next.LastScaleUp[g.ng.Name] = m.now
	if g.note == "" {
		g.note = best.note // what the expanders passed over when it was first chosen
	}
	up := ScaleUp{NodeGroup: g.ng.Name, Pods: pods}
	at := -1
	if g.rounds > 1 {
		at = slices.IndexFunc(plan.ScaleUp, func(u ScaleUp) bool { return u.NodeGroup == g.ng.Name })
	}
	if at >= 0 {
		up.Pods = append(plan.ScaleUp[at].Pods, pods...)
	}
	slices.Sort(up.Pods)
	up.Delta = grown[best.group]
	up.NewTargetSize = g.target + up.Delta
	up.Reason = m.growthReason(best.group, len(up.Pods))
	if at >= 0 {
		plan.ScaleUp[at] = up
		return
	}
	plan.ScaleUp = append(plan.ScaleUp, up)
}

// growthReason says why group g grows by its new nodes for its pods pods.
func (m *model) growthReason(gi, pods int) string {
	g := &m.groups[gi]
	var rules []string
	for _, cc := range g.placed {
		if f := m.classes[cc.class].feat; f != nil {
			for _, r := range f.describe() {
				if !slices.Contains(rules, r) {
					rules = append(rules, r)
				}
			}
		}
	}
	// The expanders' terms over every round's nodes: the group's whole
	// growth, its cost included.
	all := estimate{group: gi, nodes: g.newNodes, pods: int64(pods), waste: wasteOf(g, g.newNodes, g.newUsed)}
	why := m.expanderWhy(&all)
	if g.note != "" {
		why += "; " + g.note
	}
	if len(rules) > 0 {
		why += "; placed pod by pod under " + strings.Join(rules, ", ")
	}
	if zr := m.zoneReason(gi, g.placed); zr != "" {
		why += "; " + zr
	}
	if g.rounds > 1 {
		why += fmt.Sprintf("; grown in %d rounds, as other groups' new nodes allowed", g.rounds)
	}
	for _, x := range g.extra {
		why += "; " + x
	}
	verb := "need"
	if pods == 1 {
		verb = "needs"
	}
	delta := int(g.newNodes)
	return fmt.Sprintf("%s %s %s (%s)", plural(pods, "pending pod"), verb, plural(delta, "node"), why)
}

// unschedulable lists the pending pods the plan leaves pending.
func (m *model) unschedulable(classes []int32, grown map[int]int, budget int64, plan *Plan) {
	for _, c := range classes {
		cl := &m.classes[c]
		if remaining(cl) == 0 {
			continue
		}
		var blocked, misfit, zonal []string
		var groups []GroupReason
		stepCapped := false
		for _, gi := range m.byName {
			g := &m.groups[gi]
			if v := m.templateVerdict(c, gi); v.why != misfitNone {
				why := m.templateMisfit(c, gi, v)
				misfit = append(misfit, g.ng.Name+": "+why)
				if v.zonal() {
					// A group that would fit if it were in one zone: worth
					// saying beside the groups that are merely full.
					zonal = append(zonal, why)
				}
				groups = append(groups, GroupReason{NodeGroup: g.ng.Name, Code: v.code(), Reason: why})
				continue
			}
			gr := GroupReason{NodeGroup: g.ng.Name}
			switch {
			case g.backoff.After(m.now):
				gr.Code, gr.Reason = ReasonBackedOff, fmt.Sprintf("node group %s backed off until %s", g.ng.Name, g.backoff.UTC().Format(time.RFC3339))
				blocked = append(blocked, gr.Reason)
			case g.target+grown[gi] >= g.ng.MaxSize:
				if grown[gi] > 0 && cl.why[gi].why == "" {
					plan.Assignment = AssignmentPredicted
				}
				s := fmt.Sprintf("node group %s at max size %d", g.ng.Name, g.ng.MaxSize)
				if g.ng.BoundsFrom != "" {
					s += " (max set by " + g.ng.BoundsFrom + ")"
				}
				gr.Code, gr.Reason = ReasonMaxSizeReached, s
				blocked = append(blocked, s)
			case budget <= 0:
				if len(plan.ScaleUp) > 0 && cl.why[gi].why == "" {
					plan.Assignment = AssignmentPredicted
				}
				gr.Code, gr.Reason = ReasonMaxNodesPerStep, fmt.Sprintf("max nodes per step (%d) reached", m.set.ScaleUp.MaxNodesPerStep)
				if !stepCapped {
					blocked = append(blocked, gr.Reason)
					stepCapped = true
				}
			case cl.why[gi].why != "":
				gr.Code, gr.Reason = cl.why[gi].code, fmt.Sprintf("node group %s: %s", g.ng.Name, cl.why[gi].why)
				blocked = append(blocked, gr.Reason)
			default:
				gr.Code, gr.Reason = ReasonNoRoom, fmt.Sprintf("node group %s: no room on the planned new nodes", g.ng.Name)
				blocked = append(blocked, gr.Reason)
			}
			groups = append(groups, gr)
		}
		var reason string
		switch {
		case cl.vol != nil && cl.vol.blocked != "":
			// No node of any group takes it: one reason says it all.
			reason = cl.vol.blocked
		case len(blocked) > 0:
			reason = strings.Join(append(blocked, zonal...), "; ")
		case len(m.groups) == 0:
			reason = "fits no node group: there are no node groups"
		default:
			reason = "fits no node group: " + strings.Join(misfit, "; ")
		}
		for _, pi := range cl.pods[cl.next:] {
			// The pods of a class share one slice: it is never changed.
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: m.keyOf(pi), Reason: reason, NodeGroups: groups})
		}
	}
	slices.SortFunc(plan.Unschedulable, func(a, b Unschedulable) int { return strings.Compare(a.Pod, b.Pod) })
}

func pct(f float64) int { return int(math.Round(f * 100)) }

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
