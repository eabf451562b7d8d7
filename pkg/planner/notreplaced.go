package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// ReplaceNotTaken is why consolidation replace started no replacement:
// for the plan as a whole (NodeGroup empty: the cluster is not settled),
// for a group's nodes whatever the new nodes (With empty), or for a
// group's nodes by new nodes of group With, the nearest the search came.
// Nodes are the nodes of the example: the least utilised the search
// tried, or the set that came nearest.
type ReplaceNotTaken struct {
	NodeGroup string   `json:"nodeGroup,omitempty"`
	Nodes     []string `json:"nodes,omitempty"`
	With      string   `json:"with,omitempty"`
	// Code classifies Reason: one of the NotReplaced* constants, or a
	// Kept* or Reason* code where one means the same.
	Code   string `json:"code"`
	Reason string `json:"reason"`
	// Option is the replacement found that did not save enough.
	Option *ReplaceOption `json:"option,omitempty"`
}

// ReplaceOption is a replacement of Nodes by NewNodes new nodes of With:
// they cost After per hour, the old ones Before.
type ReplaceOption struct {
	NewNodes int     `json:"newNodes"`
	Before   float64 `json:"beforePerHour"`
	After    float64 `json:"afterPerHour"`
	Saving   float64 `json:"savingPerHour"`
	Currency string  `json:"currency"`
}

// MaxReplaceNotTaken bounds Plan.ReplaceNotTaken: past it,
// Plan.ReplaceNotTakenOmitted counts the rest.
const MaxReplaceNotTaken = 20

// Codes of ReplaceNotTaken besides the Kept* and Reason* ones it shares
// (NotEnoughPdb, DisruptionLimitReached, NodeGroupMinSizeReached;
// MaxSizeReached, MaxNodesPerStep, BackedOff, the template's codes
// NodeSelector, Taint, Volume, Insufficient, Other, and the pod-dependent
// rules' PodAffinity, TopologySpread, HostPort).
const (
	// An option found saves less than scaleDown.replaceMinSaving, or
	// nothing.
	NotReplacedSavingTooSmall = "SavingTooSmall"
	NotReplacedNotCheaper     = "NotCheaper"
	// The group's prices are in another currency, or it has none.
	NotReplacedOtherCurrency = "OtherCurrency"
	NotReplacedNoPrice       = "NoPrice"
	// The nodes' pods fit on the nodes that stay: scale-down's to remove.
	NotReplacedFitsOnOtherNodes = "FitsOnOtherNodes"
	// No group is cheaper a node, and no fewer nodes save.
	NotReplacedNoCheaperGroup = "NoCheaperGroup"
	// None of the group's nodes may be replaced (see kept), or its one
	// candidate is not among those the search tries alone.
	NotReplacedNoCandidate   = "NoCandidate"
	NotReplacedNotConsidered = "NotConsidered"
	// The cluster is not settled: no search.
	NotReplacedUnderWay          = "ReplacementUnderWay"
	NotReplacedAbandoned         = "ReplacementAbandoned"
	NotReplacedPendingPods       = "PendingPods"
	NotReplacedChangesPlanned    = "ChangesPlanned"
	NotReplacedNodeGroupChanging = "NodeGroupChanging"
)

// missCode is why the search took no replacement. Within a level, the
// order is nearness: for a set of nodes by one group, from an option that
// saves too little to a group with no price; a pair of groups shows the
// nearest any set came.
type missCode uint8

const (
	// A set of nodes by new nodes of one group.
	mSavingTooSmall missCode = iota
	mNotCheaper
	mMinSize
	mMaxNodesPerStep
	mMaxSize
	mBackedOff
	mTemplate
	mCurrency
	mNoPriceTo
	// A set of nodes, whatever the group.
	mFitsOnOthers
	mPodRules
	mNotEnoughPdb
	mDisruptionLimit
	// A group's nodes.
	mNoCheaperGroup
	mNotConsidered
	mNoCandidate
	mNoPrice
)

var missCodes = [...]string{
	mSavingTooSmall: NotReplacedSavingTooSmall, mNotCheaper: NotReplacedNotCheaper, mMinSize: KeptNodeGroupMinSizeReached,
	mMaxNodesPerStep: ReasonMaxNodesPerStep, mMaxSize: ReasonMaxSizeReached, mBackedOff: ReasonBackedOff,
	mCurrency: NotReplacedOtherCurrency, mNoPriceTo: NotReplacedNoPrice, mFitsOnOthers: NotReplacedFitsOnOtherNodes,
	mNotEnoughPdb: KeptNotEnoughPdb, mDisruptionLimit: KeptDisruptionLimitReached, mNoCheaperGroup: NotReplacedNoCheaperGroup,
	mNotConsidered: NotReplacedNotConsidered, mNoCandidate: NotReplacedNoCandidate, mNoPrice: NotReplacedNoPrice,
}

// replaceMiss is one reason recorded cheaply on the search's path; only
// those the plan lists become text. set is the nodes, to the group of the
// new nodes (-1: none); a and b depend on the code: the class (template,
// pod rules), the budget and the pods it covers (NotEnoughPdb), the limit
// and the nodes draining (DisruptionLimitReached), the new nodes needed
// and the room (MaxSizeReached, MaxNodesPerStep), the group's size after
// (NodeGroupMinSizeReached), the new nodes of an option, whose costs are
// before and after.
type replaceMiss struct {
	code          missCode
	set           []int32
	to            int
	a, b          int64
	before, after float64
}

// share is what an option saves of what its nodes cost.
func (x *replaceMiss) share() float64 { return (x.before - x.after) / x.before }

// nearer reports whether x came nearer to a replacement than y: a lower
// code, or for options the larger saving. Else the first found stays: the
// search tries the least utilised nodes first.
func (x *replaceMiss) nearer(y *replaceMiss) bool {
	if x.code != y.code {
		return x.code < y.code
	}
	return (x.code == mSavingTooSmall || x.code == mNotCheaper) && x.share() > y.share()
}

// notCandidate is why a node is no candidate for replacement.
type notCandidate uint8

const (
	ncCandidate notCandidate = iota
	ncNoGroup
	ncGoing // draining, removed or deleted: not counted
	ncNotReady
	ncHeld
	ncOptedOut
	ncYoung
	ncNoPrice
	ncCooldown
	ncBlocked
	ncCount
)

var notCandidateText = [ncCount]string{
	ncNotReady: "not Ready or cordoned", ncHeld: "held by a replacement or a pending pod", ncOptedOut: "opted out of scale-down",
	ncYoung: "too new", ncCooldown: "in the group's scale-up cooldown", ncBlocked: "kept by a pod",
}

// missKey files a miss: per pair of groups (code 0), or per group and
// code when to is -1.
type missKey struct {
	from, to int32
	code     missCode
}

// replaceMisses gathers what the search found in the way, per group.
type replaceMisses struct {
	byKey map[missKey]replaceMiss
	// reached: a set of the group's nodes was tried on the groups.
	reached []bool
	// nodes counts the group's nodes the search looked at, excluded why
	// each was no candidate, cands its candidates (first, the first).
	nodes    []int
	excluded [][ncCount]int32
	cands    []int
	first    []int32
}

func newReplaceMisses(groups int) *replaceMisses {
	return &replaceMisses{byKey: map[missKey]replaceMiss{}, reached: make([]bool, groups), nodes: make([]int, groups),
		excluded: make([][ncCount]int32, groups), cands: make([]int, groups), first: make([]int32, groups)}
}

func (rm *replaceMisses) exclude(g int, why notCandidate) {
	if g < 0 || why == ncGoing {
		return
	}
	rm.nodes[g]++
	rm.excluded[g][why]++
}

func (rm *replaceMisses) candidate(g int, i int32) {
	if rm.cands[g] == 0 {
		rm.first[g] = i
	}
	rm.nodes[g]++
	rm.cands[g]++
}

// note records x for nodes of group from, when it came nearer than what
// is on file.
func (rm *replaceMisses) note(from int, x replaceMiss) {
	k := missKey{from: int32(from), to: int32(x.to)}
	if x.to < 0 {
		k.code = x.code
	} else {
		rm.reached[from] = true
	}
	if y, ok := rm.byKey[k]; ok && !x.nearer(&y) {
		return
	}
	x.set = slices.Clone(x.set)
	rm.byKey[k] = x
}

// notReplaced writes why the search found no replacement, per group of
// the nodes, the dearest a node first (a user asks about those): the
// groups whose new nodes would be cheaper a node, in another currency or
// without a price, and any option that saved too little, each the nearest
// any set came; when no set reached the groups, what stopped the sets.
// At most MaxReplaceNotTaken, and how many more.
func (m *model) notReplaced(rm *replaceMisses) ([]ReplaceNotTaken, int) {
	froms := slices.Clone(m.byName)
	slices.SortStableFunc(froms, func(a, b int) int {
		pa, pb := m.groups[a].ng.Price, m.groups[b].ng.Price
		if pa == nil || pb == nil {
			return cmp.Compare(boolInt(pa == nil), boolInt(pb == nil)) // unpriced last
		}
		return cmp.Compare(pb.PerHour, pa.PerHour)
	})
	type row struct {
		from int
		x    replaceMiss
	}
	var rows []row
	for _, from := range froms {
		g := &m.groups[from]
		switch {
		case rm.nodes[from] == 0:
			continue
		case g.ng.Price == nil:
			rows = append(rows, row{from, replaceMiss{code: mNoPrice, to: -1}})
			continue
		case rm.cands[from] == 0:
			rows = append(rows, row{from, replaceMiss{code: mNoCandidate, to: -1}})
			continue
		}
		var mine []row
		for _, to := range m.byName {
			x, ok := rm.byKey[missKey{from: int32(from), to: int32(to)}]
			if ok && m.tellsWhy(from, &x) {
				mine = append(mine, row{from, x})
			}
		}
		if rm.reached[from] && len(mine) == 0 {
			mine = append(mine, row{from, replaceMiss{code: mNoCheaperGroup, to: -1}})
		}
		if !rm.reached[from] {
			for code := mFitsOnOthers; code <= mDisruptionLimit; code++ {
				if x, ok := rm.byKey[missKey{from: int32(from), to: -1, code: code}]; ok {
					mine = append(mine, row{from, x})
				}
			}
		}
		if len(mine) == 0 {
			mine = append(mine, row{from, replaceMiss{code: mNotConsidered, to: -1, set: []int32{rm.first[from]}}})
		}
		slices.SortStableFunc(mine, func(a, b row) int { return cmp.Compare(a.x.code, b.x.code) })
		rows = append(rows, mine...)
	}
	omitted := max(0, len(rows)-MaxReplaceNotTaken)
	rows = rows[:len(rows)-omitted]
	out := make([]ReplaceNotTaken, len(rows))
	for i, r := range rows {
		out[i] = m.missRow(r.from, &r.x, rm)
	}
	return out, omitted
}

// tellsWhy reports whether a pair's miss answers "why not that group":
// its new nodes cost less a node, their price is in another currency or
// unknown, or an option was found that saved too little. That dearer
// groups fit no better says nothing.
func (m *model) tellsWhy(from int, x *replaceMiss) bool {
	switch x.code {
	case mSavingTooSmall, mCurrency, mNoPriceTo:
		return true
	}
	fp, tp := m.groups[from].ng.Price, m.groups[x.to].ng.Price
	return tp.Currency == fp.Currency && tp.PerHour < fp.PerHour
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// missRow writes miss x of group from's nodes as the plan lists it.
func (m *model) missRow(from int, x *replaceMiss, rm *replaceMisses) ReplaceNotTaken {
	out := ReplaceNotTaken{NodeGroup: m.groups[from].ng.Name, Code: missCodes[x.code]}
	for _, i := range x.set {
		out.Nodes = append(out.Nodes, m.nodes[i].node.Name)
	}
	slices.Sort(out.Nodes)
	if x.to >= 0 {
		out.With = m.groups[x.to].ng.Name
	}
	switch x.code {
	case mTemplate:
		out.Code = m.templateVerdict(int32(x.a), x.to).code()
	case mPodRules:
		out.Code, _ = m.podRule(int32(x.a))
	case mSavingTooSmall, mNotCheaper:
		cur := m.groups[from].ng.Price.Currency
		out.Option = &ReplaceOption{NewNodes: int(x.a), Before: round4(x.before), After: round4(x.after), Saving: round4(x.before - x.after), Currency: cur}
	}
	out.Reason = m.missReason(from, x, rm)
	return out
}

// missReason says why, naming what is in the way.
func (m *model) missReason(from int, x *replaceMiss, rm *replaceMisses) string {
	fg := &m.groups[from]
	var to *groupInfo
	if x.to >= 0 {
		to = &m.groups[x.to]
	}
	nodes := plural(len(x.set), "node")
	switch x.code {
	case mSavingTooSmall, mNotCheaper:
		cur := fg.ng.Price.Currency
		what := fmt.Sprintf("%s (%s) by %s of group %s (%s)", nodes, hourly(x.before, cur), plural(int(x.a), "new node"), to.ng.Name, hourly(x.after, cur))
		if x.code == mNotCheaper {
			return what + " saves nothing"
		}
		return fmt.Sprintf("%s saves %s (%d%%), under scaleDown.replaceMinSaving %d%%", what, hourly(x.before-x.after, cur), pct(x.share()), pct(m.replaceMinSaving()))
	case mMinSize:
		return fmt.Sprintf("replacing %s would leave group %s %s, below its min size %d", nodes, fg.ng.Name, plural(int(x.a), "node"), fg.ng.MinSize)
	case mMaxSize:
		if x.b == 0 {
			return fmt.Sprintf("group %s is at its max size %d (target %d); %s would take %s", to.ng.Name, to.ng.MaxSize, to.target, nodes, plural(int(x.a), "new node"))
		}
		return fmt.Sprintf("%s would take %s; group %s has room for %d below its max size %d", nodes, plural(int(x.a), "new node"), to.ng.Name, x.b, to.ng.MaxSize)
	case mMaxNodesPerStep:
		if x.b < snapshot.MaxReplacementNodes {
			return fmt.Sprintf("%s would take %s, more than scaleUp.maxNodesPerStep %d", nodes, plural(int(x.a), "new node"), x.b)
		}
		return fmt.Sprintf("%s would take %s, more than the %d a replacement may ask for", nodes, plural(int(x.a), "new node"), x.b)
	case mBackedOff:
		return fmt.Sprintf("group %s is backed off until %s", to.ng.Name, to.backoff.UTC().Format(time.RFC3339))
	case mTemplate:
		c := int32(x.a)
		return fmt.Sprintf("pod %s: %s", m.podOfClass(x.set, c), m.templateMisfit(c, x.to, m.templateVerdict(c, x.to)))
	case mCurrency:
		return fmt.Sprintf("group %s is priced in %s, group %s in %s: prices in different currencies are not compared",
			to.ng.Name, to.ng.Price.Currency, fg.ng.Name, fg.ng.Price.Currency)
	case mNoPriceTo:
		return fmt.Sprintf("group %s has no price", to.ng.Name)
	case mFitsOnOthers:
		// Not scale-down's code for the node: its simulation removes the
		// nodes one after the other, and may have taken away the room the
		// pods would have here.
		return fmt.Sprintf("the pods of %s fit on the nodes that stay as they are: a deletion, not a replacement (see kept for why scale-down keeps them)", nodes)
	case mPodRules:
		c := int32(x.a)
		_, rule := m.podRule(c)
		return fmt.Sprintf("pod %s %s: a replacement moves no pod with pod-dependent rules", m.podOfClass(x.set, c), rule)
	case mNotEnoughPdb:
		b := &m.snap.PodDisruptionBudgets[x.a]
		return fmt.Sprintf("PodDisruptionBudget %s/%s allows %d disruptions now, the pods of %s need %d",
			b.Namespace, b.Name, m.pdbLeft()[x.a], nodes, x.b)
	case mDisruptionLimit:
		return fmt.Sprintf("group %s's disruption budget allows %s at once, %d draining: %s would be too many",
			fg.ng.Name, plural(int(x.a), "node"), x.b, nodes)
	case mNoCheaperGroup:
		return fmt.Sprintf("no group's nodes cost less (%s a node here), and no replacement by fewer nodes was found that saves",
			hourly(fg.ng.Price.PerHour, fg.ng.Price.Currency))
	case mNotConsidered:
		return fmt.Sprintf("its one candidate is not among the %d least utilised nodes of the cluster, which the search tries alone", maxReplaceCandidates)
	case mNoCandidate:
		var parts []string
		for why := range ncCount {
			if k := rm.excluded[from][why]; k > 0 && notCandidateText[why] != "" {
				parts = append(parts, fmt.Sprintf("%d %s", k, notCandidateText[why]))
			}
		}
		return fmt.Sprintf("no candidate among its %s: %s (see kept)", plural(rm.nodes[from], "node"), strings.Join(parts, ", "))
	}
	return fmt.Sprintf("group %s has no price: its nodes are not replaced", fg.ng.Name)
}

// cheaperNotTaken says why the group whose nodes cost least in the
// currency of replacement o, when they cost less than o's new nodes, does
// not take o's nodes, as the expander notes a cheaper group for a
// scale-up; "" when no group's nodes cost less.
func (m *model) cheaperNotTaken(o *replaceOption) string {
	tp := m.groups[o.to].ng.Price
	cheapest := -1
	for _, gi := range m.byName {
		p := m.groups[gi].ng.Price
		if p == nil || p.Currency != tp.Currency || p.PerHour >= tp.PerHour {
			continue
		}
		if cheapest < 0 || p.PerHour < m.groups[cheapest].ng.Price.PerHour {
			cheapest = gi
		}
	}
	if cheapest < 0 {
		return ""
	}
	var classes []classCount
	for _, i := range o.set {
		m.eachMoving(i, func(pi int32, _ []int32) { classes = addClassCount(classes, m.classOf(pi), 1) })
	}
	m.largestFirst(classes)
	mv := m.movingOf(o.set, classes)
	g := &m.groups[cheapest]
	head := fmt.Sprintf("cheaper group %s (%s a node) not taken: ", g.ng.Name, hourly(g.ng.Price.PerHour, g.ng.Price.Currency))
	alt, miss := m.replaceBy(&mv, cheapest)
	if alt == nil {
		return head + m.missReason(mv.from, &miss, nil)
	}
	than := "no more"
	if alt.saving() < o.saving()-1e-9 {
		than = "less"
	}
	return head + fmt.Sprintf("%s of it (%s) would save %s, %s", plural(int(alt.nodes), "new node"), hourly(alt.after, alt.currency),
		hourly(alt.saving(), alt.currency), than)
}

// podRule is the code and words of class c's first pod-dependent rule.
func (m *model) podRule(c int32) (code, rule string) {
	f := m.classes[c].feat
	switch {
	case f == nil:
		return ReasonPodAffinity, "is matched by another pod's required anti-affinity"
	case len(f.aff) > 0 || len(f.anti) > 0:
		return ReasonPodAffinity, "has required pod affinity or anti-affinity"
	case len(f.spread) > 0:
		return ReasonTopologySpread, "has topology spread constraints"
	}
	return ReasonHostPort, "uses host ports"
}

// podOfClass names a pod of class c moving off the nodes of set.
func (m *model) podOfClass(set []int32, c int32) string {
	for _, i := range set {
		for _, pi := range m.podsOf(i) {
			if info := &m.pods[pi]; !info.stays && !info.blocks && info.class == c {
				return podKey(&m.snap.Pods[pi])
			}
		}
	}
	return "of " + plural(len(set), "node")
}

// unsettled says what keeps this plan from seeking a replacement; none:
// it may. One at a time, not in the plan that gives one up (its nodes did
// not come: the group's backoff decides when to ask again), and only on a
// settled cluster, as Karpenter consolidates: no pending pods, nothing
// growing, shrinking or draining, nothing else in this plan. removals is
// how many of plan.ScaleDown are not a replacement's.
//
// A drained replacement that only holds the nodes that received its pods
// (Holding) is not under way: it changes nothing in the cluster, and its
// nodes are no candidates while it holds them, so the search may look at
// the others. Its old nodes still draining keep the cluster unsettled as
// any drain does (NodeGroupChanging).
func (m *model) unsettled(plan *Plan, next *snapshot.State, removals int) []ReplaceNotTaken {
	var out []ReplaceNotTaken
	note := func(code, format string, args ...any) {
		out = append(out, ReplaceNotTaken{Code: code, Reason: fmt.Sprintf(format, args...)})
	}
	under, abandoned := -1, -1
	for i, r := range plan.Replace {
		switch {
		case r.Phase == ReplaceAbandoned:
			abandoned = max(abandoned, i)
		case r.Phase != ReplaceHolding && under < 0:
			under = i
		}
	}
	waiting := ""
	for _, id := range sortedKeys(next.Replacing) {
		if next.Replacing[id].Drained.IsZero() {
			waiting = id
			break
		}
	}
	switch {
	case under >= 0:
		r := plan.Replace[under]
		note(NotReplacedUnderWay, "replacement %s (%s) is under way: one at a time", r.ID, r.Phase)
	case waiting != "":
		note(NotReplacedUnderWay, "replacement %s is under way: one at a time", waiting)
	case abandoned >= 0:
		note(NotReplacedAbandoned, "this plan gives up replacement %s: none starts in the same plan", plan.Replace[abandoned].ID)
	}
	pending, first := 0, int32(-1)
	for i := range m.pods {
		if m.pods[i].unsched {
			if pending == 0 {
				first = int32(i)
			}
			pending++
		}
	}
	if pending > 0 {
		note(NotReplacedPendingPods, "%s (%s first): a replacement waits for a settled cluster", plural(pending, "pending pod"), m.keyOf(first))
	}
	var acts []string
	if n := len(plan.ScaleUp); n > 0 {
		acts = append(acts, "scales up "+plural(n, "group"))
	}
	if removals > 0 {
		acts = append(acts, "removes "+plural(removals, "node"))
	}
	if n := len(plan.DecreaseTarget); n > 0 {
		acts = append(acts, "decreases "+plural(n, "target"))
	}
	if len(acts) > 0 {
		note(NotReplacedChangesPlanned, "this plan %s: a replacement is sought only in a plan that changes nothing else", strings.Join(acts, ", "))
	}
	changing, what := 0, ""
	for _, gi := range m.byName {
		g := &m.groups[gi]
		var parts []string
		if g.upcoming > 0 {
			parts = append(parts, fmt.Sprintf("has %s still coming", plural(g.upcoming, "node")))
		}
		if g.draining > 0 {
			parts = append(parts, fmt.Sprintf("has %s draining", plural(g.draining, "node")))
		}
		if g.shrinking {
			parts = append(parts, fmt.Sprintf("is above its max size %d", g.ng.MaxSize))
		}
		if len(parts) > 0 {
			if changing == 0 {
				what = fmt.Sprintf("group %s %s", g.ng.Name, strings.Join(parts, " and "))
			}
			changing++
		}
	}
	if changing > 0 {
		if changing > 1 {
			what += fmt.Sprintf(" (and %s)", plural(changing-1, "more group"))
		}
		note(NotReplacedNodeGroupChanging, "%s; a replacement waits for a settled cluster", what)
	}
	return out
}
