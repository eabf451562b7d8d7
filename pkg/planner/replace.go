package planner

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Replace is one consolidation replacement as this plan sees it: Nodes go
// for Delta new nodes of NodeGroup, which cost Saving (per hour, in
// Currency) less than Nodes do. The new nodes are asked for first (phase
// Requested); the old ones stay (Waiting) until the new are Ready and the
// old ones' pods fit on what stays, then they drain (Draining). If the new
// nodes are not Ready in time, nothing is removed (Abandoned). Once
// drained, it holds the nodes that received the old ones' pods for
// max(delayAfterAdd, unneededTime) after (Holding).
type Replace struct {
	ID        string   `json:"id"`
	Phase     string   `json:"phase"`
	NodeGroup string   `json:"nodeGroup"`
	Delta     int      `json:"delta"`
	Nodes     []string `json:"nodes"`
	// Before is what Nodes cost per hour, After the new nodes; zero when
	// the groups have no price now (a replacement under way whose prices
	// went missing) or Nodes are gone or going (Holding).
	Before   float64 `json:"beforePerHour"`
	After    float64 `json:"afterPerHour"`
	Saving   float64 `json:"savingPerHour"`
	Currency string  `json:"currency,omitempty"`
	Reason   string  `json:"reason"`
}

// Phases of a Replace.
const (
	ReplaceRequested = "Requested"
	ReplaceWaiting   = "Waiting"
	ReplaceDraining  = "Draining"
	ReplaceAbandoned = "Abandoned"
	ReplaceHolding   = "Holding"
)

// DefaultReplaceMinSaving is the share of a replacement's cost it must
// save when scaleDown.replaceMinSaving is not set.
const DefaultReplaceMinSaving = 0.2

// Bounds of the replacement search, so it stays within the decision's
// time on large clusters: single-node replacements look at the
// maxReplaceCandidates least utilised candidates, multi-node ones at up
// to maxReplaceSet nodes of one group.
const (
	maxReplaceCandidates = 100
	maxReplaceSet        = 10
)

// replacing reports whether scale-down may replace nodes.
func (m *model) replacing() bool {
	return m.set.ScaleDown.Consolidation == ConsolidationReplace
}

func (m *model) replaceMinSaving() float64 {
	if s := m.set.ScaleDown.ReplaceMinSaving; s > 0 {
		return s
	}
	return DefaultReplaceMinSaving
}

// replacementID names a replacement by what it replaces and when.
func replacementID(nodes []string, since time.Time) string {
	h := fnv.New64a()
	for _, n := range nodes {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	h.Write([]byte(since.UTC().Format(time.RFC3339Nano)))
	return fmt.Sprintf("r-%016x", h.Sum64())
}

// markReplacing holds the nodes of replacements under way, before
// anything else looks at them: they are no candidates for scale-down and
// no destinations for pods, as they are about to go. A drained
// replacement's old nodes are draining or gone (or, their drain rolled
// back, ordinary nodes again).
func (m *model) markReplacing() {
	for _, rep := range m.snap.State.Replacing {
		if !rep.Drained.IsZero() {
			continue
		}
		for _, name := range rep.Nodes {
			if i, ok := m.nodeByName[name]; ok {
				m.nodes[i].replacing = true
			}
		}
	}
}

// replacementsUnderWay moves each replacement of the State on: its old
// nodes go (ScaleDowns returned, not yet in the plan) once the new nodes
// are Ready and the old ones' pods fit on what stays, and it stays in next
// drained, to hold the nodes that receive them; it is given up once the
// new nodes are late; else it waits, in next. removals counts this plan's
// removals per group, limits are the disruption limits; a traced decision
// records where the old nodes' pods go in tr.
func (m *model) replacementsUnderWay(plan *Plan, next *snapshot.State, limits, removals []int, tr *trace) []ScaleDown {
	var downs []ScaleDown
	for _, id := range sortedKeys(m.snap.State.Replacing) {
		rep := m.snap.State.Replacing[id]
		if !rep.Drained.IsZero() {
			// Done: whatever the settings now, its hold runs out on its own.
			m.holdDrained(plan, next, id, rep)
			continue
		}
		out := Replace{ID: id, NodeGroup: rep.NodeGroup, Delta: rep.Delta, Nodes: slices.Clone(rep.Nodes)}
		gi := m.groupIndex(rep.NodeGroup)
		var old []int32
		for _, name := range rep.Nodes {
			if i, ok := m.nodeByName[name]; ok && m.nodes[i].group >= 0 && !m.nodes[i].draining && m.nodes[i].node.DeletionTimestamp == nil {
				old = append(old, i)
			}
		}
		m.priceReplace(&out, old, gi)
		abandon := func(why string) {
			out.Phase, out.Reason = ReplaceAbandoned, why+"; nothing removed"
			m.release(old)
			plan.Replace = append(plan.Replace, out)
		}
		switch {
		case !m.set.ScaleDown.Enabled || !m.replacing():
			abandon("scaleDown.consolidation is no longer replace")
			continue
		case len(old) == 0:
			continue // the old nodes are gone or going: nothing left to do
		case gi < 0:
			abandon(fmt.Sprintf("node group %q is gone", rep.NodeGroup))
			continue
		}
		fresh, ready := m.newSince(gi, rep.Since)
		late := m.now.Sub(rep.Since) > m.set.ScaleUp.MaxNodeProvisionTime
		// The new nodes are held while the replacement is under way: removed
		// as empty, they would leave the old nodes' pods nowhere to go.
		hold := func() {
			for _, i := range fresh {
				m.nodes[i].receiving = true
			}
		}
		wait := func(why string) {
			if late {
				abandon(fmt.Sprintf("%s after scaleUp.maxNodeProvisionTime %s", why, m.set.ScaleUp.MaxNodeProvisionTime))
				return
			}
			hold()
			rep.Since = rep.Since.UTC()
			keepReplacing(next, id, rep)
			out.Phase, out.Reason = ReplaceWaiting, why
			plan.Replace = append(plan.Replace, out)
		}
		if ready < rep.Delta {
			wait(fmt.Sprintf("%d of %s of group %s Ready", ready, plural(rep.Delta, "new node"), rep.NodeGroup))
			continue
		}
		need, why := m.mayRemoveAll(old, limits, removals)
		var dest []int32
		if why == "" {
			dest, why = m.moveAll(old, fresh, newHopTrace(m, tr))
		}
		if why != "" {
			wait(why)
			continue
		}
		hold()
		for b, n := range need {
			m.spent[b] += n
		}
		// Its new nodes and the others its old nodes' pods move onto get
		// the pods now: from now on holdDrained holds them.
		rep.Since, rep.Drained, rep.Receivers = rep.Since.UTC(), m.now, m.receiverNames(dest)
		keepReplacing(next, id, rep)
		out.Phase = ReplaceDraining
		out.Reason = fmt.Sprintf("the %s of group %s are Ready and the pods fit on what stays: %s go",
			plural(rep.Delta, "new node"), rep.NodeGroup, plural(len(old), "node"))
		plan.Replace = append(plan.Replace, out)
		for _, i := range old {
			n := &m.nodes[i]
			n.leaving, n.replacing = true, false
			removals[n.group]++
			down := ScaleDown{NodeGroup: m.groups[n.group].ng.Name, Node: n.node.Name,
				Reason: fmt.Sprintf("consolidation: replaced by %s of group %s (replacement %s, saving %s)",
					plural(rep.Delta, "new node"), rep.NodeGroup, id, hourly(out.Saving, out.Currency))}
			if p := m.groups[n.group].ng.Price; p != nil {
				down.SavingPerHour, down.Currency = p.PerHour, p.Currency
			}
			downs = append(downs, down)
		}
	}
	return downs
}

// keepReplacing puts replacement id, as rep, in next.
func keepReplacing(next *snapshot.State, id string, rep snapshot.Replacement) {
	if next.Replacing == nil {
		next.Replacing = map[string]snapshot.Replacement{}
	}
	next.Replacing[id] = rep
}

// receiverNames are the names of nodes dest, sorted, at most
// snapshot.MaxReplacementReceivers: first fit moves a drain's pods onto a
// few nodes. Past the bound the rest are not held; their unneeded clock,
// which receiving the pods in this plan restarts, still keeps scale-down
// from them for unneededTime.
func (m *model) receiverNames(dest []int32) []string {
	names := make([]string, 0, len(dest))
	for _, i := range dest {
		names = append(names, m.nodes[i].node.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	return names[:min(len(names), snapshot.MaxReplacementReceivers)]
}

// drainedHold is why a drained replacement holds a node: until, the
// window after drained, or still draining (its old nodes' pods still
// moving).
type drainedHold struct {
	id             string
	drained, until time.Time
	window         time.Duration
	draining       bool
}

// reason says why a held node is kept.
func (h drainedHold) reason() string {
	if h.draining {
		return fmt.Sprintf("replacement %s drains its old nodes, whose pods move onto its new nodes and the nodes that stay: held until %s after the drain (the longer of delayAfterAdd and unneededTime), so that they do not move again at once (see the plan's replace)",
			h.id, h.window)
	}
	return fmt.Sprintf("replacement %s drained its old nodes at %s onto its new nodes and the nodes that stay: held until %s (the longer of delayAfterAdd and unneededTime after), so that the pods do not move again at once (see the plan's replace)",
		h.id, h.drained.UTC().Format(time.RFC3339), h.until.UTC().Format(time.RFC3339))
}

// holdDrained holds, for max(delayAfterAdd, unneededTime) after the pods
// moved, a drained replacement's new nodes (its group's nodes created
// since it started) and the others it moved its old nodes' pods onto: no
// candidates for scale-down nor for another replacement. The new nodes
// got their pods at the drain, up to scaleUp.maxNodeProvisionTime after
// they were created, so the young-node rule, which counts from creation,
// may have run out; taken at once, the pods would move twice within
// minutes. The pods move while the old nodes drain: a plan that sees one
// of them still draining moves the drained time on to now. Once the
// window has passed, or none of the nodes is left, the replacement is
// forgotten: it is not in next.
func (m *model) holdDrained(plan *Plan, next *snapshot.State, id string, rep snapshot.Replacement) {
	window := max(m.set.ScaleDown.DelayAfterAdd, m.set.ScaleDown.UnneededTime)
	draining := false
	for _, name := range rep.Nodes {
		if i, ok := m.nodeByName[name]; ok && (m.nodes[i].draining || m.nodes[i].node.DeletionTimestamp != nil) {
			draining = true
		}
	}
	if draining && m.now.After(rep.Drained) {
		rep.Drained = m.now
	}
	h := drainedHold{id: id, drained: rep.Drained, until: rep.Drained.Add(window), window: window, draining: draining}
	if !m.now.Before(h.until) {
		return
	}
	var held []int32
	if gi := m.groupIndex(rep.NodeGroup); gi >= 0 {
		held, _ = m.newSince(gi, rep.Since)
	}
	for _, name := range rep.Receivers {
		if i, ok := m.nodeByName[name]; ok {
			held = append(held, i)
		}
	}
	slices.Sort(held)
	held = slices.Compact(held)
	if len(held) == 0 && !draining {
		return
	}
	if m.heldBy == nil {
		m.heldBy = map[int32]drainedHold{}
	}
	for _, i := range held {
		// Held by two, a node names the hold that ends last.
		if prev, ok := m.heldBy[i]; !ok || h.until.After(prev.until) {
			m.heldBy[i] = h
		}
		m.nodes[i].received = true
	}
	rep.Since, rep.Drained = rep.Since.UTC(), rep.Drained.UTC()
	keepReplacing(next, id, rep)
	why := fmt.Sprintf("its old nodes drained at %s; until %s, the longer of delayAfterAdd and unneededTime after, it holds from scale-down and replacement the %s that received their pods (its new nodes of group %s and the others they moved onto)",
		h.drained.UTC().Format(time.RFC3339), h.until.UTC().Format(time.RFC3339), plural(len(held), "node"), rep.NodeGroup)
	if draining {
		why = fmt.Sprintf("its old nodes are draining; until %s after the drain, the longer of delayAfterAdd and unneededTime, it holds from scale-down and replacement the %s that receive their pods (its new nodes of group %s and the others they move onto)",
			window, plural(len(held), "node"), rep.NodeGroup)
	}
	plan.Replace = append(plan.Replace, Replace{ID: id, Phase: ReplaceHolding, NodeGroup: rep.NodeGroup, Delta: rep.Delta, Nodes: slices.Clone(rep.Nodes), Reason: why})
}

// release lets the nodes of a replacement given up be scale-down
// candidates and destinations again.
func (m *model) release(old []int32) {
	for _, i := range old {
		m.nodes[i].replacing = false
	}
}

// priceReplace fills out's money from the groups' prices now.
func (m *model) priceReplace(out *Replace, old []int32, gi int) {
	if gi < 0 || m.groups[gi].ng.Price == nil {
		return
	}
	np := m.groups[gi].ng.Price
	var before float64
	for _, i := range old {
		p := m.groups[m.nodes[i].group].ng.Price
		if p == nil || p.Currency != np.Currency {
			return
		}
		before += p.PerHour
	}
	after := float64(out.Delta) * np.PerHour
	out.Before, out.After, out.Saving, out.Currency = round4(before), round4(after), round4(before-after), np.Currency
}

// hourly is an hourly amount with its currency, for reasons.
func hourly(perHour float64, currency string) string {
	if currency == "" {
		return "unknown (no price)"
	}
	return money(perHour, currency) + "/h"
}

// groupIndex is the index of the named group, or -1.
func (m *model) groupIndex(name string) int {
	i, ok := slices.BinarySearchFunc(m.byName, name, func(gi int, name string) int {
		return strings.Compare(m.groups[gi].ng.Name, name)
	})
	if !ok {
		return -1
	}
	return m.byName[i]
}

// newSince lists group gi's nodes created at or after since (to the
// second, as the API server stamps creation), and counts the Ready,
// schedulable ones.
func (m *model) newSince(gi int, since time.Time) (fresh []int32, ready int) {
	from := since.Truncate(time.Second)
	for _, i := range m.groups[gi].nodes {
		ni := &m.nodes[i]
		if ni.node.CreationTimestamp.Time.Before(from) {
			continue
		}
		fresh = append(fresh, i)
		if ni.ready && ni.schedulable {
			ready++
		}
	}
	return fresh, ready
}

// mayRemoveAll says what keeps old from going now: a pod or node rule, the
// PodDisruptionBudgets, a group's min size or disruption limit; "" when
// nothing does, with what the old nodes' pods need of each budget.
func (m *model) mayRemoveAll(old []int32, limits, removals []int) (map[int32]int32, string) {
	m.noteDrains(old)
	perGroup := map[int]int{}
	for _, i := range old {
		n := &m.nodes[i]
		if nodeOptedOut(n.node) {
			return nil, fmt.Sprintf("node %s: %s", n.node.Name, Blocker{Node: n.node.Name, Rule: nodeBlocker(n.node)}.String())
		}
		if m.eachMoving(i, func(int32, []int32) {}) {
			return nil, fmt.Sprintf("node %s: %s", n.node.Name, m.blockingPod(i))
		}
		perGroup[n.group]++
	}
	for gi, k := range perGroup {
		g := &m.groups[gi]
		disrupting := g.draining + removals[gi] + k
		if g.target-disrupting < g.ng.MinSize {
			return nil, fmt.Sprintf("group %s would go below its min size %d", g.ng.Name, g.ng.MinSize)
		}
		if !m.mayDisrupt(limits, gi, disrupting) {
			return nil, fmt.Sprintf("group %s's disruption budget allows no more nodes at once now", g.ng.Name)
		}
	}
	left := m.pdbLeft()
	need := map[int32]int32{}
	for _, i := range old {
		m.eachMoving(i, func(_ int32, covering []int32) {
			for _, b := range covering {
				need[b]++
			}
		})
	}
	for _, b := range sortedKeys(need) {
		if need[b] > left[b] {
			pdb := &m.snap.PodDisruptionBudgets[b]
			return nil, fmt.Sprintf("PodDisruptionBudget %s/%s allows %d disruptions now, the nodes' pods need %d", pdb.Namespace, pdb.Name, left[b], need[b])
		}
	}
	return need, ""
}

// pdbLeft is what the budgets allow less what this plan's replacements
// spent.
func (m *model) pdbLeft() []int32 {
	left := m.budgetIndex().left()
	for b, n := range m.spent {
		left[b] -= n
	}
	return left
}

// moveAll places the pods of old on the nodes that stay, for good: ""
// when all fit, else why not (and nothing placed). As the search that
// chose the replacement did: all the old nodes' pods together, first on
// the nodes that were there then, the rest on the new nodes fresh; placed
// another way, first fit could need more room than the new nodes were
// sized for. hops, when tracing, learns where each pod went. dest are the
// nodes the pods went to, a node once per move.
func (m *model) moveAll(old, fresh []int32, hops *hopTrace) (dest []int32, why string) {
	r := m.destinations()
	for _, i := range old {
		r.dest[i] = false
		m.removeNode(i)
	}
	var classes []classCount
	from := map[int32]int32{} // class → an old node with a pod of it
	for _, i := range old {
		m.eachMoving(i, func(pi int32, _ []int32) {
			c := m.classOf(pi)
			classes = addClassCount(classes, c, 1)
			if _, ok := from[c]; !ok {
				from[c] = i
			}
		})
	}
	m.largestFirst(classes)
	// A removal's cursors pass over the nodes it may not use, for good:
	// the new nodes get a removal of their own.
	onNew := &removal{m: m, dest: make([]bool, len(m.nodes)), movedIn: map[int32][]classCount{}}
	for _, i := range fresh {
		onNew.dest[i], r.dest[i] = r.dest[i], false
	}
	var moves, movesNew []move
	var rest []classCount
	for _, cc := range classes {
		if n := r.place(cc.class, cc.n, -1, &moves); n > 0 {
			rest = append(rest, classCount{cc.class, n})
		}
	}
	for _, cc := range rest {
		if onNew.place(cc.class, cc.n, -1, &movesNew) > 0 {
			onNew.rollback(movesNew)
			r.rollback(moves)
			for _, j := range old {
				m.restoreNode(j)
			}
			i := from[cc.class]
			return nil, fmt.Sprintf("pods of node %s (%s) fit on no node that stays", m.nodes[i].node.Name, m.unplaceable(i, cc.class))
		}
	}
	moves = append(moves, movesNew...)
	for _, mv := range moves {
		m.nodes[mv.node].receiving = true
		dest = append(dest, mv.node)
	}
	if hops != nil {
		// The old nodes go together: their pods are one lot for the trace.
		hops.start()
		for _, i := range old {
			m.eachMoving(i, func(pi int32, _ []int32) { hops.moving(pi) })
		}
		hops.moved(old[0], moves)
	}
	return dest, ""
}

// largestFirst orders the classes of pods a replacement moves, the
// largest first (CPU, then memory, then the class): the search and the
// drain that follows place them in the same order, and first fit
// decreasing packs the new nodes well.
func (m *model) largestFirst(classes []classCount) {
	slices.SortFunc(classes, func(a, b classCount) int {
		ra, rb := m.classes[a.class].req, m.classes[b.class].req
		return cmp.Or(cmp.Compare(rb.cpu, ra.cpu), cmp.Compare(rb.mem, ra.mem), cmp.Compare(a.class, b.class))
	})
}

// destinations is a removal whose destinations are the Ready, schedulable
// nodes that stay: not removed by this plan, not being replaced.
func (m *model) destinations() *removal {
	r := &removal{m: m, dest: make([]bool, len(m.nodes)), movedIn: map[int32][]classCount{}}
	for i := range m.nodes {
		n := &m.nodes[i]
		r.dest[i] = n.ready && n.schedulable && !n.leaving && !n.replacing
	}
	return r
}

// restoreDest makes node i a destination again after a trial took it
// away: the cursors that passed over it while it was none must come back
// to it, or the sets tried after would see fewer nodes than there are.
func (r *removal) restoreDest(i int32) {
	r.dest[i] = true
	for _, c := range r.touched {
		if r.cursor[c] > i {
			r.cursor[c] = i
		}
	}
}

// replaceOption is one replacement the search found: set goes for nodes
// new nodes of group to.
type replaceOption struct {
	set           []int32
	to            int
	nodes         int64
	before, after float64
	currency      string
}

func (o *replaceOption) saving() float64 { return o.before - o.after }

// better orders options: the larger saving, then fewer new nodes, fewer
// nodes replaced, and names.
func (m *model) better(a, b *replaceOption) bool {
	if c := cmp.Or(cmp.Compare(b.saving(), a.saving()), cmp.Compare(a.nodes, b.nodes), cmp.Compare(len(a.set), len(b.set)),
		strings.Compare(m.groups[a.to].ng.Name, m.groups[b.to].ng.Name)); c != 0 {
		return c < 0
	}
	return strings.Compare(m.nodes[a.set[0]].node.Name, m.nodes[b.set[0]].node.Name) < 0
}

// replaceCandidate says whether node i may be replaced as far as the node
// and its group go (ncCandidate), or why not: priced, Ready, in use as it
// stands, not opted out, not young, not in a group in cooldown. Whether a
// pod on it keeps it is for the caller, once every candidate's pods are
// noted.
func (m *model) replaceCandidate(i int32, next *snapshot.State) notCandidate {
	n := &m.nodes[i]
	switch {
	case n.group < 0:
		return ncNoGroup
	case n.draining || n.leaving || n.node.DeletionTimestamp != nil:
		return ncGoing
	case !n.ready || !n.schedulable:
		return ncNotReady
	case n.replacing || n.receiving || n.received || n.gotPending:
		return ncHeld
	case nodeOptedOut(n.node):
		return ncOptedOut
	case m.young(n):
		return ncYoung
	}
	g := &m.groups[n.group]
	if g.ng.Price == nil {
		return ncNoPrice
	}
	if last, ok := next.LastScaleUp[g.ng.Name]; ok && m.now.Sub(last) < m.set.ScaleDown.DelayAfterAdd {
		return ncCooldown
	}
	return ncCandidate
}

// findReplacement looks for the replacement that saves the most, at least
// replaceMinSaving of what the replaced nodes cost: single nodes (the
// least utilised first) and, per group, its least utilised nodes
// together. The cluster's simulated state is as the registered nodes
// have it. It records the best in plan and next; when there is none, why
// in plan.ReplaceNotTaken.
func (m *model) findReplacement(plan *Plan, next *snapshot.State, limits []int) {
	misses := newReplaceMisses(len(m.groups))
	var maybe []int32
	for i := range m.nodes {
		why := m.replaceCandidate(int32(i), next)
		if why == ncCandidate {
			maybe = append(maybe, int32(i))
			continue
		}
		misses.exclude(m.nodes[i].group, why)
	}
	// One pass over the pods for every candidate: per node, it would be
	// nodes × pods.
	m.noteDrains(maybe)
	var cands []int32
	util := make(map[int32]float64, len(maybe))
	for _, i := range maybe {
		if m.eachMoving(i, func(int32, []int32) {}) {
			misses.exclude(m.nodes[i].group, ncBlocked)
			continue
		}
		cpu, mem := m.nodes[i].utilization()
		util[i] = max(cpu, mem)
		cands = append(cands, i)
		misses.candidate(m.nodes[i].group, i)
	}
	slices.SortFunc(cands, func(a, b int32) int {
		return cmp.Or(cmp.Compare(util[a], util[b]), strings.Compare(m.nodes[a].node.Name, m.nodes[b].node.Name))
	})
	r := m.destinations()
	left := m.pdbLeft()
	var best *replaceOption
	consider := func(set []int32) {
		if o := m.replaceWith(r, set, limits, left, misses); o != nil && (best == nil || m.better(o, best)) {
			best = o
		}
	}
	for _, c := range cands[:min(len(cands), maxReplaceCandidates)] {
		consider([]int32{c})
	}
	byGroup := map[int][]int32{}
	for _, c := range cands {
		byGroup[m.nodes[c].group] = append(byGroup[m.nodes[c].group], c)
	}
	for _, gi := range m.byName {
		list := byGroup[gi]
		for k := 2; k <= min(len(list), maxReplaceSet); k++ {
			consider(list[:k])
		}
	}
	if best != nil {
		m.startReplacement(best, plan, next, m.cheaperNotTaken(best))
		return
	}
	plan.ReplaceNotTaken, plan.ReplaceNotTakenOmitted = m.notReplaced(misses)
}

// replaceWith is the cheapest way to replace set (nodes of one group) by
// new nodes of one group, when it saves enough within left of the
// budgets; nil when there is none, and misses notes why.
// The simulation is taken back.
func (m *model) replaceWith(r *removal, set []int32, limits []int, left []int32, misses *replaceMisses) *replaceOption {
	from := m.nodes[set[0]].group
	fg := &m.groups[from]
	miss := func(code missCode, a, b int64) *replaceOption {
		misses.note(from, replaceMiss{code: code, set: set, to: -1, a: a, b: b})
		return nil
	}
	if limits != nil && limits[from] >= 0 && fg.draining+len(set) > limits[from] {
		return miss(mDisruptionLimit, int64(limits[from]), int64(fg.draining))
	}
	need := map[int32]int32{}
	var classes []classCount
	for _, i := range set {
		m.eachMoving(i, func(pi int32, covering []int32) {
			for _, b := range covering {
				need[b]++
			}
			classes = addClassCount(classes, m.classOf(pi), 1)
		})
	}
	// The first budget short, so that the plan names the same one each time.
	short := int32(-1)
	for b, n := range need {
		if n > left[b] && (short < 0 || b < short) {
			short = b
		}
	}
	if short >= 0 {
		return miss(mNotEnoughPdb, int64(short), int64(need[short]))
	}
	m.largestFirst(classes)
	for _, i := range set {
		r.dest[i] = false
		m.removeNode(i)
	}
	var moves []move
	var rest []classCount
	for _, cc := range classes {
		if n := r.place(cc.class, cc.n, -1, &moves); n > 0 {
			rest = append(rest, classCount{cc.class, n})
		}
	}
	r.rollback(moves)
	for _, i := range set {
		r.restoreDest(i)
		m.restoreNode(i)
	}
	if len(rest) == 0 {
		return miss(mFitsOnOthers, 0, 0) // a delete, not a replacement
	}
	// The new nodes are sized for every pod moving, not only for those
	// that do not fit on what stays: the scheduler may well put on the new
	// nodes the pods the simulation put elsewhere.
	for _, cc := range classes {
		// Pod-dependent rules (the class's own, or another pod's required
		// anti-affinity matching it): the packer onto new nodes does not
		// simulate them. A class merely counted by the topology (any pod
		// of the cluster has rules) is plain.
		c := &m.classes[cc.class]
		if c.feat != nil || (c.set >= 0 && m.sets[c.set].targeted) {
			return miss(mPodRules, int64(cc.class), 0)
		}
	}
	mv := m.movingOf(set, classes)
	var best *replaceOption
	for _, gi := range m.byName {
		o, why := m.replaceBy(&mv, gi)
		if o == nil {
			misses.note(from, why)
			continue
		}
		if best == nil || m.better(o, best) {
			best = o
		}
	}
	if best != nil {
		best.set = slices.Clone(set)
	}
	return best
}

// moving is what a set of nodes asks of the new nodes that would replace
// it: every pod moving, by class (largest first), the largest of them, and
// what the set costs per hour.
type moving struct {
	set     []int32
	from    int
	classes []classCount
	largest res
	before  float64
}

// movingOf is what set asks of new nodes, its pods moving by class,
// largest first.
func (m *model) movingOf(set []int32, classes []classCount) moving {
	mv := moving{set: set, from: m.nodes[set[0]].group, classes: classes}
	mv.before = float64(len(set)) * m.groups[mv.from].ng.Price.PerHour
	// The scheduler does not place as the packer does: it spreads pods by
	// its scores. Each new node is sized with room for one more of the
	// largest pod moving, so that any order of placement finds room: a pod
	// finds none only if every new node holds more than its capacity less
	// that pod, more in all than the pods moving.
	for _, cc := range classes {
		req := m.classes[cc.class].req
		mv.largest.cpu, mv.largest.mem = max(mv.largest.cpu, req.cpu), max(mv.largest.mem, req.mem)
	}
	return mv
}

// replaceBy is the replacement of mv's nodes by new nodes of group gi when
// it saves enough, else nil and why not. The checks run from what no
// other set of nodes could change (the group's price, its template) to
// what a nearer option would (its room, the saving), the order of
// missCode.
func (m *model) replaceBy(mv *moving, gi int) (*replaceOption, replaceMiss) {
	g, fg := &m.groups[gi], &m.groups[mv.from]
	miss := replaceMiss{set: mv.set, to: gi}
	fail := func(code missCode, a, b int64) (*replaceOption, replaceMiss) {
		miss.code, miss.a, miss.b = code, a, b
		return nil, miss
	}
	switch {
	case g.ng.Price == nil:
		return fail(mNoPriceTo, 0, 0)
	case g.ng.Price.Currency != fg.ng.Price.Currency:
		return fail(mCurrency, 0, 0)
	}
	for _, cc := range mv.classes {
		if !m.fitsTemplate(cc.class, gi) {
			return fail(mTemplate, int64(cc.class), 0)
		}
	}
	if g.backoff.After(m.now) {
		return fail(mBackedOff, 0, 0)
	}
	room := m.replaceRoom(gi)
	p, ok := m.packNew(mv, gi, room)
	if !ok {
		code := mMaxNodesPerStep
		if g.ng.MaxSize-g.target <= room {
			code = mMaxSize
		}
		all, _ := m.packNew(mv, gi, math.MaxInt)
		return fail(code, all.opened, int64(room))
	}
	sizeAfter := fg.target - len(mv.set)
	if gi == mv.from {
		sizeAfter += int(p.opened)
	}
	if sizeAfter < fg.ng.MinSize {
		return fail(mMinSize, int64(sizeAfter), 0)
	}
	o := &replaceOption{set: mv.set, to: gi, nodes: p.opened, before: mv.before, after: float64(p.opened) * g.ng.Price.PerHour, currency: fg.ng.Price.Currency}
	miss.a, miss.before, miss.after = p.opened, o.before, o.after
	switch {
	case o.saving() <= 0:
		miss.code = mNotCheaper
	case o.saving() < m.replaceMinSaving()*o.before-1e-9:
		miss.code = mSavingTooSmall
	default:
		return o, replaceMiss{}
	}
	return nil, miss
}

// replaceRoom is how many new nodes a replacement may ask of group gi:
// what its max size leaves, at most a step.
func (m *model) replaceRoom(gi int) int {
	g := &m.groups[gi]
	return max(0, min(g.ng.MaxSize-g.target, m.set.ScaleUp.MaxNodesPerStep, snapshot.MaxReplacementNodes))
}

// packNew packs mv's pods onto at most limit new nodes of group gi, each
// with room for one more of the largest; ok when all fit.
func (m *model) packNew(mv *moving, gi, limit int) (p packer, ok bool) {
	g := &m.groups[gi]
	p = packer{cap: g.cap, limit: int64(limit)}
	if c := g.cap.sub(mv.largest); c.cpu >= mv.largest.cpu && c.mem >= mv.largest.mem {
		p.cap = c
	}
	for _, cc := range mv.classes {
		if p.place(m.classes[cc.class].req, cc.n) < cc.n {
			return p, false
		}
	}
	return p, true
}

// startReplacement asks for o's new nodes and remembers the replacement,
// holding its old nodes until they are Ready.
func (m *model) startReplacement(o *replaceOption, plan *Plan, next *snapshot.State, note string) {
	g := &m.groups[o.to]
	names := make([]string, len(o.set))
	for i, ni := range o.set {
		names[i] = m.nodes[ni].node.Name
		m.nodes[ni].replacing = true
	}
	slices.Sort(names)
	// They were kept for what held them before this search; now it is
	// the replacement.
	for k := range m.kept {
		if m.nodes[m.kept[k].node].replacing {
			m.kept[k] = keptRec{node: m.kept[k].node, code: kReplacing}
		}
	}
	id := replacementID(names, m.now)
	from := m.groups[m.nodes[o.set[0]].group].ng.Name
	pct := int(o.saving()/o.before*100 + 0.5)
	why := fmt.Sprintf("consolidation: replace %s of group %s (%s) with %s of group %s (%s), saving %s (%d%%); the old nodes drain once the new are Ready",
		plural(len(names), "node"), from, hourly(o.before, o.currency), plural(int(o.nodes), "new node"), g.ng.Name, hourly(o.after, o.currency),
		hourly(o.saving(), o.currency), pct)
	if note != "" {
		why += "; " + note
	}
	plan.ScaleUp = append(plan.ScaleUp, ScaleUp{NodeGroup: g.ng.Name, Delta: int(o.nodes), NewTargetSize: g.target + int(o.nodes), Pods: []string{}, Reason: why})
	next.LastScaleUp[g.ng.Name] = m.now
	if next.Replacing == nil {
		next.Replacing = map[string]snapshot.Replacement{}
	}
	next.Replacing[id] = snapshot.Replacement{NodeGroup: g.ng.Name, Delta: int(o.nodes), Nodes: names, Since: m.now}
	plan.Replace = append(plan.Replace, Replace{
		ID: id, Phase: ReplaceRequested, NodeGroup: g.ng.Name, Delta: int(o.nodes), Nodes: names,
		Before: round4(o.before), After: round4(o.after), Saving: round4(o.saving()), Currency: o.currency, Reason: why,
	})
}
