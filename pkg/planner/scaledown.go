package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// utilization is requests ÷ allocatable per dimension. A dimension with no
// allocatable counts as full when something requests it, empty otherwise.
func utilization(used, alloc int64) float64 {
	if alloc <= 0 {
		if used > 0 {
			return 1
		}
		return 0
	}
	return float64(used) / float64(alloc)
}

func (n *nodeInfo) utilization() (cpu, mem float64) {
	return utilization(n.used.cpu, n.alloc.cpu), utilization(n.used.mem, n.alloc.mem)
}

// pdbInfo is a PodDisruptionBudget with the disruptions this plan has left.
type pdbInfo struct {
	sel  labels.Selector
	left int32
}

// pdbSet holds the budgets, indexed so that matching a pod costs about one
// selector check rather than one per budget of its namespace (at 5,000
// nodes a namespace can hold hundreds of budgets).
type pdbSet struct {
	pdbs []pdbInfo
	byNS map[string]*nsBudgets
}

// nsBudgets are one namespace's budgets. A budget whose selector requires
// a label to have one of a few values (matchLabels, or an In expression)
// is filed under those key=value pairs: a pod lacking them cannot match
// it. Others (matchExpressions only, or an empty selector) are in rest.
type nsBudgets struct {
	keys    []string // the label keys budgets are filed under
	byLabel map[labelPair][]int32
	rest    []int32
}

type labelPair struct{ key, value string }

func (m *model) pdbSet() pdbSet {
	s := pdbSet{byNS: map[string]*nsBudgets{}}
	for i := range m.snap.PodDisruptionBudgets {
		b := &m.snap.PodDisruptionBudgets[i]
		// A null selector selects nothing and an invalid one is treated alike:
		// the budget then protects no pod.
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil {
			sel = labels.Nothing()
		}
		bi := int32(len(s.pdbs))
		s.pdbs = append(s.pdbs, pdbInfo{sel: sel, left: b.Status.DisruptionsAllowed})
		reqs, selectable := sel.Requirements()
		if !selectable {
			continue // matches no pod
		}
		nb := s.byNS[b.Namespace]
		if nb == nil {
			nb = &nsBudgets{byLabel: map[labelPair][]int32{}}
			s.byNS[b.Namespace] = nb
		}
		nb.add(bi, reqs)
	}
	return s
}

// add files budget bi, whose selector is reqs, under its first
// requirement that names the values a matching pod's label must have.
func (nb *nsBudgets) add(bi int32, reqs labels.Requirements) {
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		key := r.Key()
		if !slices.Contains(nb.keys, key) {
			nb.keys = append(nb.keys, key)
		}
		for _, v := range r.ValuesUnsorted() {
			lp := labelPair{key, v}
			if l := nb.byLabel[lp]; len(l) == 0 || l[len(l)-1] != bi { // In may repeat a value
				nb.byLabel[lp] = append(l, bi)
			}
		}
		return
	}
	nb.rest = append(nb.rest, bi)
}

// left is each budget's disruptions allowed, for a plan to spend.
func (s *pdbSet) left() []int32 {
	out := make([]int32, len(s.pdbs))
	for i := range s.pdbs {
		out[i] = s.pdbs[i].left
	}
	return out
}

// matching appends the budgets that cover pod p, in snapshot order.
func (s *pdbSet) matching(p *corev1.Pod, out []int32) []int32 {
	nb := s.byNS[p.Namespace]
	if nb == nil {
		return out
	}
	start := len(out)
	set := labels.Set(p.Labels)
	check := func(cands []int32) {
		for _, i := range cands {
			if s.pdbs[i].sel.Matches(set) {
				out = append(out, i)
			}
		}
	}
	for _, k := range nb.keys {
		if v, ok := p.Labels[k]; ok {
			check(nb.byLabel[labelPair{k, v}])
		}
	}
	check(nb.rest)
	if len(out)-start > 1 {
		slices.Sort(out[start:])
	}
	return out
}

// movesWithNode reports whether a pod on a removed node needs a new home:
// DaemonSet and mirror pods go with the node, terminal and terminating pods
// are on their way out anyway.
func movesWithNode(p *corev1.Pod) bool {
	return !isMirrorPod(p) && !isDaemonSetPod(p) && !isTerminal(p) && p.DeletionTimestamp == nil
}

// blocksRemoval is cluster-autoscaler's drainability rules, budgets aside:
// does pod p (one that must move when its node goes) keep the node? covered
// says whether a PodDisruptionBudget selects the pod.
func blocksRemoval(p *corev1.Pod, covered bool) bool {
	return podBlocker(p, covered) != ""
}

// podBlocker names the rule by which pod p keeps its node, or "".
func podBlocker(p *corev1.Pod, covered bool) string {
	if p.Annotations[annotationDoNotDisrupt] == "true" {
		return RuleDoNotDisrupt
	}
	switch p.Annotations[annotationSafeToEvict] {
	case "false":
		return RuleNotSafeToEvict
	case "true":
		return ""
	}
	if _, _, ok := controllerOf(p); !ok {
		return RuleNoController
	}
	if p.Namespace == metav1.NamespaceSystem && !covered {
		return RuleKubeSystem
	}
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		local := v.HostPath != nil || (v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory)
		if local && !listedSafe(p.Annotations[annotationSafeLocalVolumes], v.Name) {
			return fmt.Sprintf("%s (volume %q)", RuleLocalStorage, v.Name)
		}
	}
	return ""
}

// listedSafe reports whether volume is in the comma-separated list.
func listedSafe(list, volume string) bool {
	for item := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(item) == volume {
			return true
		}
	}
	return false
}

// nodeOptedOut reports the node annotations that forbid removing it.
func nodeOptedOut(n *corev1.Node) bool {
	return nodeBlocker(n) != ""
}

// nodeBlocker names the node annotation that forbids removing it, or "".
func nodeBlocker(n *corev1.Node) string {
	switch {
	case n.Annotations[annotationScaleDownDisabled] == "true":
		return RuleNodeScaleDownDisabled
	case n.Annotations[annotationDoNotDisrupt] == "true":
		return RuleNodeDoNotDisrupt
	}
	return ""
}

// removal simulates taking nodes away one after the other: each one's pods
// must fit on the nodes that stay, and consume their room.
type removal struct {
	m    *model
	dest []bool // may receive pods: Ready, schedulable, not already removed
	// cursor[c] is the first node that may still take a pod of class c. Free
	// capacity only shrinks (a rollback moves cursors back), so first fit
	// need not rescan the full nodes each time: this keeps the simulation
	// near linear on large clusters.
	cursor  []int32
	touched []int32 // classes whose cursor has moved, once each
	tracked []bool
	movedIn map[int32][]classCount
}

type move struct {
	node  int32
	class int32
	n     int64
}

func (r *removal) cursorOf(c int32) *int32 {
	for int(c) >= len(r.cursor) {
		r.cursor = append(r.cursor, 0)
		r.tracked = append(r.tracked, false)
	}
	return &r.cursor[c]
}

// place puts count pods of class c on destination nodes other than self
// (first fit) and returns how many did not fit.
func (r *removal) place(c int32, count int64, self int32, moves *[]move) int64 {
	m := r.m
	req := m.classes[c].req
	if m.classes[c].set >= 0 {
		return r.placeEach(c, count, self, moves)
	}
	cur := r.cursorOf(c)
	first := int32(-1)
	i := *cur
	for ; int(i) < len(m.nodes) && count > 0; i++ {
		useless := true
		switch {
		case !r.dest[i]:
		case i == self:
			useless = false
		default:
			n := &m.nodes[i]
			f := fitCount(n.free, req)
			if f == 0 || !m.fitsNode(c, i) {
				break
			}
			take := min(f, count)
			n.free = n.free.sub(req.mul(take))
			count -= take
			m.place(i, c, take)
			*moves = append(*moves, move{i, c, take})
			useless = take == f
		}
		if !useless && first < 0 {
			first = i
		}
	}
	if first < 0 {
		first = i
	}
	if first != *cur && !r.tracked[c] {
		r.tracked[c] = true
		r.touched = append(r.touched, c)
	}
	*cur = first
	return count
}

// placeEach is place for a class with pod-dependent rules: pod by pod,
// first fit, with the counts updated after each placement. The class's
// cursor skips the nodes that cannot take it until a rollback: full,
// not destinations, or refused by a rule that only looks at the pods on
// that node.
func (r *removal) placeEach(c int32, count int64, self int32, moves *[]move) int64 {
	m := r.m
	req := m.classes[c].req
	t := m.topoOf(c)
	cur := r.cursorOf(c)
	for ; count > 0; count-- {
		placed := false
		first := int32(-1)
		i := *cur
		for ; int(i) < len(m.nodes); i++ {
			n := &m.nodes[i]
			if !r.dest[i] || fitCount(n.free, req) == 0 {
				continue
			}
			if i == self {
				if first < 0 {
					first = i
				}
				continue
			}
			if !m.fitsNode(c, i) {
				continue
			}
			why, lasting := t.fits(i)
			if !why.ok() {
				if !lasting && first < 0 {
					first = i
				}
				continue
			}
			n.free = n.free.sub(req)
			m.place(i, c, 1)
			*moves = append(*moves, move{i, c, 1})
			if first < 0 {
				first = i
			}
			placed = true
			break
		}
		if first < 0 {
			first = i
		}
		if first != *cur && !r.tracked[c] {
			r.tracked[c] = true
			r.touched = append(r.touched, c)
		}
		*cur = first
		if !placed {
			return count
		}
	}
	return 0
}

// rollback gives back the room a failed attempt took.
func (r *removal) rollback(moves []move) {
	if len(moves) == 0 {
		return
	}
	for i := len(moves) - 1; i >= 0; i-- {
		r.m.unplace(moves[i].node, moves[i].class, moves[i].n)
	}
	low := moves[0].node
	for _, mv := range moves {
		n := &r.m.nodes[mv.node]
		n.free = n.free.add(r.m.classes[mv.class].req.mul(mv.n))
		low = min(low, mv.node)
	}
	for _, c := range r.touched {
		if r.cursor[c] > low {
			r.cursor[c] = low
		}
	}
}

func addClassCount(list []classCount, c int32, n int64) []classCount {
	for i := range list {
		if list[i].class == c {
			list[i].n += n
			return list
		}
	}
	return append(list, classCount{c, n})
}

// budgetIndex is the budgets, indexed once per decision.
func (m *model) budgetIndex() *pdbSet {
	if m.budgets == nil {
		s := m.pdbSet()
		m.budgets = &s
	}
	return m.budgets
}

// noteDrains records what removing each of nodes would ask of its pods,
// for eachMoving. Visiting 150,000 pods node by node costs more in cache
// misses than the drain rules themselves, so the pods are read here in
// snapshot order, and each once.
func (m *model) noteDrains(nodes []int32) {
	want := make([]bool, len(m.nodes))
	for _, ni := range nodes {
		want[ni] = true
	}
	budgets := m.budgetIndex()
	for i := range m.pods {
		pi := &m.pods[i]
		if pi.node < 0 || pi.noted || !want[pi.node] {
			continue
		}
		pi.noted = true
		p := &m.snap.Pods[i]
		if !movesWithNode(p) {
			pi.stays = true
			continue
		}
		from := len(m.covers)
		m.covers = budgets.matching(p, m.covers)
		if blocksRemoval(p, len(m.covers) > from) {
			pi.blocks = true
			m.covers = m.covers[:from]
			continue
		}
		pi.covers = span{int32(from), int32(len(m.covers))}
	}
}

// eachMoving calls fn with each pod of node ni that must move when the node
// goes and the budgets covering it, and reports whether a pod keeps the
// node (then fn has not seen every pod). The node's pods must be noted.
func (m *model) eachMoving(ni int32, fn func(pi int32, covering []int32)) (blocked bool) {
	for _, pi := range m.podsOf(ni) {
		info := &m.pods[pi]
		if info.stays {
			continue
		}
		if info.blocks {
			return true
		}
		fn(pi, m.covers[info.covers.from:info.covers.to])
	}
	return false
}

// unneededNode is a node the simulation removed, with how many pods it
// moved elsewhere.
type unneededNode struct {
	node  int32
	moved int64
}

// unneeded finds the nodes that could go: candidates by ascending
// utilisation, each removed in the simulation when nothing blocks it and its
// pods fit elsewhere. undo takes the simulation back.
func (m *model) unneeded(tr *trace) (out []unneededNode, undo func()) {
	var cands []int32
	util := make([]float64, len(m.nodes))
	r := &removal{m: m, dest: make([]bool, len(m.nodes)), movedIn: map[int32][]classCount{}}
	m.kept = make([]keptRec, 0, len(m.nodes))
	for i := range m.nodes {
		n := &m.nodes[i]
		r.dest[i] = n.ready && n.schedulable && !n.leaving && !n.replacing
		cpu, mem := n.utilization()
		util[i] = max(cpu, mem)
		if !m.keptBefore(int32(i), util[i]) {
			cands = append(cands, int32(i))
		}
	}
	slices.SortFunc(cands, func(a, b int32) int {
		if c := cmp.Compare(util[a], util[b]); c != 0 {
			return c
		}
		return strings.Compare(m.nodes[a].node.Name, m.nodes[b].node.Name)
	})

	m.noteDrains(cands)
	left := m.pdbLeft()
	var all []move // the moves of the nodes removed, for undo
	var classes []classCount
	var need []classCount // (budget index, pods of this node it covers)
	var moves []move
	hops := newHopTrace(m, tr)
	for _, ci := range cands {
		classes, need, moves = classes[:0], need[:0], moves[:0]
		hops.start()
		blocked := m.eachMoving(ci, func(pi int32, covering []int32) {
			for _, b := range covering {
				need = addClassCount(need, b, 1)
			}
			classes = addClassCount(classes, m.classOf(pi), 1)
			hops.moving(pi)
		})
		if blocked {
			m.keep(ci, kBlockedByPod, 0, 0)
			continue
		}
		for _, nb := range need {
			if int64(left[nb.class]) < nb.n {
				m.keep(ci, kNotEnoughPdb, nb.class, int32(nb.n))
				blocked = true
				break
			}
		}
		if blocked {
			continue
		}
		for _, cc := range r.movedIn[ci] {
			classes = addClassCount(classes, cc.class, cc.n)
		}
		m.removeNode(ci)
		fits := true
		for _, cc := range classes {
			if r.place(cc.class, cc.n, ci, &moves) > 0 {
				m.keep(ci, kNoPlaceToMovePods, cc.class, 0)
				fits = false
				break
			}
		}
		if !fits {
			r.rollback(moves)
			m.restoreNode(ci)
			continue
		}
		r.dest[ci] = false
		all = append(all, moves...)
		hops.moved(ci, moves)
		delete(r.movedIn, ci)
		for _, mv := range moves {
			r.movedIn[mv.node] = addClassCount(r.movedIn[mv.node], mv.class, mv.n)
		}
		for _, nb := range need {
			left[nb.class] -= int32(nb.n)
		}
		var moved int64
		for _, cc := range classes {
			moved += cc.n
		}
		out = append(out, unneededNode{ci, moved})
	}
	undo = func() {
		r.rollback(all)
		for _, u := range out {
			m.restoreNode(u.node)
		}
	}
	return out, undo
}

// scaleDown tracks unneeded nodes and lists those due for removal.
func (m *model) scaleDown(plan *Plan, next *snapshot.State, spares []spare, tr *trace) {
	if !m.set.ScaleDown.Enabled {
		m.replacementsUnderWay(plan, next, nil, make([]int, len(m.groups)), nil) // gives them up
		return
	}
	pendingFits := m.pendingFits()
	var limits []int
	if m.consolidating() {
		limits = m.disruptionLimits()
	}
	removals := make([]int, len(m.groups))
	removed := make([]res, len(m.groups))
	replaced := m.replacementsUnderWay(plan, next, limits, removals, tr)
	first := len(plan.ScaleDown)
	unneeded, undo := m.unneeded(tr)
	for _, u := range unneeded {
		n := &m.nodes[u.node]
		name := n.node.Name
		since, ok := m.snap.State.UnneededSince[name]
		if !ok || since.After(m.now) {
			since = m.now
		}
		next.UnneededSince[name] = since
		g := &m.groups[n.group]
		disrupting := int32(g.draining + removals[n.group])
		if code, a, b := m.holds(n, since, next, pendingFits, limits, disrupting); code != kNone {
			m.keep(u.node, code, a, b)
			continue
		}
		if !spares[n.group].keeps(int64(removals[n.group]+1), removed[n.group].add(n.alloc)) {
			m.keep(u.node, kHeadroom, 0, 0)
			continue
		}
		removals[n.group]++
		removed[n.group] = removed[n.group].add(n.alloc)
		down := ScaleDown{
			NodeGroup: g.ng.Name,
			Node:      name,
			Reason:    m.removalReason(n, since, u.moved),
		}
		if p := g.ng.Price; p != nil {
			down.SavingPerHour, down.Currency = p.PerHour, p.Currency
		}
		plan.ScaleDown = append(plan.ScaleDown, down)
	}
	if limits != nil {
		consolidated(plan.ScaleDown[first:])
	}
	plan.ScaleDown = append(plan.ScaleDown, replaced...)
	if m.replacing() {
		if why := m.unsettled(plan, next, len(plan.ScaleDown)-len(replaced)); len(why) > 0 {
			plan.ReplaceNotTaken = why
		} else {
			// The search starts from the cluster as it stands.
			undo()
			m.findReplacement(plan, next, limits)
		}
	}
	m.writeKept(plan, next)
}

// holds is what keeps unneeded node n, disrupting of its group's nodes
// being drained or removed by this plan: kNone when nothing does, else the
// code and its record's a and b.
func (m *model) holds(n *nodeInfo, since time.Time, next *snapshot.State, pendingFits []int32, limits []int, disrupting int32) (keptCode, int32, int32) {
	g := &m.groups[n.group]
	switch {
	case g.shrinking:
		return kGroupShrinking, 0, 0
	case m.now.Sub(since) < m.set.ScaleDown.UnneededTime:
		return kNotUnneededLongEnough, 0, 0
	}
	if last, ok := next.LastScaleUp[g.ng.Name]; ok && m.now.Sub(last) < m.set.ScaleDown.DelayAfterAdd {
		return kScaleDownInCooldown, 0, 0
	}
	if pendingFits[n.group] >= 0 {
		return kPendingPodFits, pendingFits[n.group], 0
	}
	if g.target-int(disrupting)-1 < g.ng.MinSize {
		return kMinSizeReached, disrupting, 0
	}
	if !m.mayDisrupt(limits, n.group, int(disrupting)+1) {
		if limits == nil {
			return kDisruptionLimit, disrupting, -1
		}
		return kDisruptionLimit, disrupting, int32(limits[n.group])
	}
	return kNone, 0, 0
}

// pendingFits is, per group, the first pod unschedulable now (whatever its
// age) that its template could host, or -1: such a group keeps its nodes,
// as removing one would only make room for a scale-up of the same group.
func (m *model) pendingFits() []int32 {
	fits := make([]int32, len(m.groups))
	for gi := range fits {
		fits[gi] = -1
	}
	for i := range m.pods {
		if !m.pods[i].unsched {
			continue
		}
		c := m.classOf(int32(i))
		for gi := range m.groups {
			if fits[gi] < 0 && m.fitsTemplate(c, gi) {
				fits[gi] = int32(i)
			}
		}
	}
	return fits
}

// mayDisrupt reports whether group gi may have disrupting nodes disrupted
// at once: up to maxConcurrentDrains, or with consolidation (limits set)
// up to the group's disruption limit (-1: none).
func (m *model) mayDisrupt(limits []int, gi, disrupting int) bool {
	if limits == nil {
		return disrupting <= m.set.ScaleDown.MaxConcurrentDrains
	}
	return limits[gi] < 0 || disrupting <= limits[gi]
}

// removalReason says why node n goes: its utilisation, since when it has
// been unneeded, and what happens to its pods (moved of them move).
func (m *model) removalReason(n *nodeInfo, since time.Time, moved int64) string {
	cpu, mem := n.utilization()
	moves := "no pods to move"
	if moved > 0 {
		moves = plural(int(moved), "pod") + " fit on other nodes"
		if moved == 1 {
			moves = "1 pod fits on other nodes"
		}
	}
	return fmt.Sprintf("utilisation %d%% (cpu %d%%, memory %d%%) below %d%%, unneeded since %s; %s",
		pct(max(cpu, mem)), pct(cpu), pct(mem), pct(m.set.ScaleDown.UtilizationThreshold), since.UTC().Format(time.RFC3339), moves)
}

// consolidated prefixes the reasons of one plan's consolidation removals
// with how many nodes go together: the simulation removed them all at
// once, each one's pods placed on the nodes that stay.
func consolidated(downs []ScaleDown) {
	what := "consolidation: " + plural(len(downs), "node") + ", pods fit on the rest; "
	for i := range downs {
		downs[i].Reason = what + downs[i].Reason
	}
}
