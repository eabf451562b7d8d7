package evaluate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/buildinfo"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/shadowcompare"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// StatusName names the evaluate status document (sk STATUS#evaluate).
const StatusName = "evaluate"

// Status is the summary of the last evaluate cycle that `nodetide status`
// shows. Lists are capped so the document stays under DynamoDB's item limit
// at 5,000 nodes; each *Omitted field says how many entries were left out.
type Status struct {
	CycleAt  time.Time `json:"cycleAt"`
	Duration string    `json:"duration"`
	Holder   string    `json:"holder,omitempty"`
	// Error is this cycle's error, if it failed; LastError the most recent
	// error of any cycle (a failed cycle, or a failed scale-up or drain
	// start), kept until a newer one.
	Error     string       `json:"error,omitempty"`
	LastError *StatusError `json:"lastError,omitempty"`
	// GroupsAt is when NodeGroups were read: an earlier cycle's time when
	// this one failed before reading them.
	GroupsAt          time.Time      `json:"groupsAt,omitzero"`
	NodeGroups        []GroupSummary `json:"nodeGroups"`
	NodeGroupsOmitted int            `json:"nodeGroupsOmitted,omitempty"`
	// UnschedulablePods is how many pending pods the plan left pending.
	UnschedulablePods int              `json:"unschedulablePods"`
	Unneeded          []UnneededNode   `json:"unneeded"`
	UnneededOmitted   int              `json:"unneededOmitted,omitempty"`
	Drains            []DrainSummary   `json:"drains"`
	DrainsOmitted     int              `json:"drainsOmitted,omitempty"`
	Actions           []Action         `json:"actions"`
	ActionsOmitted    int              `json:"actionsOmitted,omitempty"`
	Recovered         *RecoveredCounts `json:"recovered,omitempty"`
	// Problems is what the cycle found wrong: what the essential
	// monitoring level's alarm fires on (see Problem).
	Problems []Problem `json:"problems"`
	// Build is the build that ran the cycle (the function's, or the CLI's
	// for nodetide run); nil in a status an earlier version wrote.
	Build *buildinfo.Info `json:"build,omitempty"`
	// Shadow says the cycle ran in shadow mode (evaluate.shadow): its
	// actions are what it would have done, and nothing was changed.
	Shadow bool `json:"shadow,omitempty"`
	// ShadowCompare is how the shadow cycle's plan compared with what
	// cluster-autoscaler did (evaluate.shadowCompare); bounded.
	ShadowCompare *shadowcompare.Comparison `json:"shadowCompare,omitempty"`

	// Cost is what the priced groups cost at their targets now and once
	// the cycle's plan is carried out; nil when no group has a price.
	Cost *StatusCost `json:"cost,omitempty"`
	// Replacing are the cycle's consolidation replacements (requested,
	// waiting, draining or given up), ReplacingOmitted how many more.
	Replacing        []planner.Replace `json:"replacing,omitempty"`
	ReplacingOmitted int               `json:"replacingOmitted,omitempty"`
	// ReplaceNotTaken says why the cycle started no replacement (the
	// plan's first), ReplaceNotTakenOmitted how many more.
	ReplaceNotTaken        []planner.ReplaceNotTaken `json:"replaceNotTaken,omitempty"`
	ReplaceNotTakenOmitted int                       `json:"replaceNotTakenOmitted,omitempty"`

	// Kept are the first nodes scale-down keeps and why, KeptOmitted how
	// many more; KeptCounts count them all, per group and code.
	Kept        []planner.Kept      `json:"kept,omitempty"`
	KeptOmitted int                 `json:"keptOmitted,omitempty"`
	KeptCounts  []planner.KeptCount `json:"keptCounts,omitempty"`
}

// StatusError is an error and when it happened.
type StatusError struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// Health values of a group; a healthy group has none.
const (
	HealthBackedOff     = "BackedOff"
	HealthAtMax         = "AtMax"
	HealthScaleUpFailed = "ScaleUpFailed"
	HealthProvisioning  = "Provisioning"
	HealthNodesNotReady = "NodesNotReady"
)

// GroupSummary is one node group as the cycle saw it.
type GroupSummary struct {
	Name       string `json:"name"`
	Provider   string `json:"provider"`
	MinSize    int    `json:"minSize"`
	MaxSize    int    `json:"maxSize"`
	BoundsFrom string `json:"boundsFrom,omitempty"`
	TargetSize int    `json:"targetSize"`
	// Registered nodes have the group's providerID; Ready ones also the
	// Ready condition.
	Registered        int        `json:"registered"`
	Ready             int        `json:"ready"`
	Health            []string   `json:"health"`
	BackoffUntil      *time.Time `json:"backoffUntil,omitempty"`
	LastScaleUp       *time.Time `json:"lastScaleUp,omitempty"`
	LastScaleDown     *time.Time `json:"lastScaleDown,omitempty"`
	CPUUtilization    float64    `json:"cpuUtilization"`
	MemoryUtilization float64    `json:"memoryUtilization"`
	// Headroom is how the group's headroom stood; nil when it keeps none.
	Headroom *GroupHeadroom `json:"headroom,omitempty"`
	// Price is the group's price; nil when it has none.
	Price *GroupPrice `json:"price,omitempty"`
}

// StatusCost is the plan's cost (planner.Cost) without its per-group
// rows, which the groups carry: totals per currency now, after the plan,
// and the change (negative is a saving), and how many groups have no price.
type StatusCost struct {
	Now       []planner.CostTotal `json:"now"`
	AfterPlan []planner.CostTotal `json:"afterPlan"`
	Change    []planner.CostTotal `json:"change"`
	NoPrice   int                 `json:"noPrice,omitempty"`
}

// GroupPrice is one node of a group for one hour, and where the figure
// came from (snapshot.PriceSource).
type GroupPrice struct {
	PerNodeHour float64 `json:"perNodeHour"`
	Currency    string  `json:"currency"`
	Source      string  `json:"source"`
}

// GroupHeadroom is how a group's headroom stood in the cycle (the plan's
// planner.HeadroomStatus): its rule, what the group had, whether it held,
// the nodes it lacked, the nodes the cycle added for it and why fewer.
type GroupHeadroom struct {
	Rule    string `json:"rule"`
	Free    string `json:"free"`
	Met     bool   `json:"met"`
	Need    int    `json:"need,omitempty"`
	Adding  int    `json:"adding,omitempty"`
	Blocked string `json:"blocked,omitempty"`
}

// UnneededNode is a scale-down candidate and since when.
type UnneededNode struct {
	Node      string    `json:"node"`
	NodeGroup string    `json:"nodeGroup,omitempty"`
	Since     time.Time `json:"since"`
}

// DrainSummary is a running drain.
type DrainSummary struct {
	Node      string    `json:"node"`
	NodeGroup string    `json:"nodeGroup"`
	ID        string    `json:"id"`
	Phase     string    `json:"phase,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	Deadline  time.Time `json:"deadline,omitzero"`
}

// RecoveredCounts counts what the cycle's recovery finished.
type RecoveredCounts struct {
	RolledBack int `json:"rolledBack"`
	Completed  int `json:"completed"`
	Untainted  int `json:"untainted"`
}

// Caps of the status lists and messages. At them the document stays well
// within one DynamoDB item: about 590 KB with every name and message at its
// longest, a tenth of that gzipped as stored (TestStatusFitsOneItemAt5000Nodes). The *Omitted counts say what
// was left out.
const (
	maxStatusGroups   = 300
	maxStatusUnneeded = 300
	maxStatusKept     = 10  // the plan lists the most telling first
	maxStatusReplace  = 20  // of at most 10 nodes each
	maxStatusNotTaken = 10  // of at most 10 nodes each, the dearest groups first
	maxStatusCounts   = 300 // (group, code) pairs
	maxStatusDrains   = 100
	maxStatusActions  = 50
	maxStatusProblems = 20 // names logged for a headroom's missing groups
	maxStatusMessage  = 300
	clipHead          = 120 // of a clipped message, the bytes kept from its start
)

// ReadStatus returns the stored status of the last evaluate cycle.
func ReadStatus(ctx context.Context, store state.StatusStore) (Status, error) {
	doc, err := store.GetStatus(ctx, StatusName)
	if err != nil {
		return Status{}, err
	}
	var st Status
	if err := json.Unmarshal(doc, &st); err != nil {
		return Status{}, fmt.Errorf("status %s: %w", StatusName, err)
	}
	return st, nil
}

// RunningDrains lists the drains holding nodes now, at most limit of them
// with their phase and start, and how many more there are.
func RunningDrains(ctx context.Context, store state.DrainStore, limit int) ([]DrainSummary, int, error) {
	running, err := store.RunningDrains(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("running drains: %w", err)
	}
	slices.SortFunc(running, func(a, b state.RunningDrain) int { return cmp.Compare(a.Node, b.Node) })
	omitted := max(0, len(running)-limit)
	running = running[:len(running)-omitted]
	out := make([]DrainSummary, 0, len(running))
	for _, r := range running {
		d := DrainSummary{Node: r.Node, NodeGroup: r.NodeGroup, ID: r.ID}
		rec, err := store.GetDrain(ctx, r.Node, r.ID)
		switch {
		case errors.Is(err, state.ErrNoDrain): // claimed, record not yet written
		case err != nil:
			return nil, 0, fmt.Errorf("drain %s of node %s: %w", r.ID, r.Node, err)
		default:
			d.Phase, d.StartedAt, d.Deadline = rec.Phase.String(), rec.StartedAt, rec.Deadline
		}
		out = append(out, d)
	}
	return out, omitted, nil
}

// saveStatus writes the cycle's status and returns its problems; a failure
// to save is logged, never returned (the status is for people, the cycle's
// work is done).
func (e *Evaluator) saveStatus(ctx context.Context, began time.Time, snap snapshot.Snapshot, res Result, cycleErr error) []Problem {
	store, ok := e.Store.(state.StatusStore)
	if !ok {
		return e.problems(snap, res, nil, cycleErr)
	}
	var prev Status
	if p, err := ReadStatus(ctx, store); err != nil && !errors.Is(err, state.ErrNoStatus) {
		e.log().Warn("read previous status", "error", err.Error())
	} else {
		prev = p
	}
	st := e.buildStatus(prev, began, snap, res, cycleErr)
	build := buildinfo.Read()
	st.Build = &build
	if ds, ok := e.Store.(state.DrainStore); ok {
		var err error
		if st.Drains, st.DrainsOmitted, err = RunningDrains(ctx, ds, maxStatusDrains); err != nil {
			e.log().Warn("status: running drains", "error", err.Error())
		}
	}
	if st.Drains == nil {
		st.Drains = []DrainSummary{}
	}
	st.Problems = e.problems(snap, res, st.Drains, cycleErr)
	if c := st.ShadowCompare; c != nil && len(c.Problems) > 0 {
		st.Problems = append(st.Problems, Problem{Kind: ProblemShadowCompareFailed, Count: len(c.Problems), Detail: c.Problems[0]})
	}
	if st.Problems == nil {
		st.Problems = []Problem{}
	}
	if e.StatusMap != nil {
		if err := e.StatusMap.Write(ctx, st); err != nil {
			st.Problems = append(st.Problems, Problem{Kind: ProblemStatusNotPublished, Count: 1, Detail: clip(err.Error())})
		}
	}
	doc, err := json.Marshal(st)
	if err == nil {
		err = store.PutStatus(ctx, StatusName, doc)
	}
	if err != nil {
		e.log().Warn("status not saved", "error", err.Error())
	}
	return st.Problems
}

// buildStatus summarises a cycle; prev is the last stored status, whose
// groups stand when this cycle read none, and whose last scale-downs and
// last error carry over.
func (e *Evaluator) buildStatus(prev Status, began time.Time, snap snapshot.Snapshot, res Result, cycleErr error) Status {
	now := e.now()
	st := Status{
		CycleAt: now, Duration: time.Since(began).Round(time.Millisecond).String(), Holder: e.Holder,
		LastError: prev.LastError, Unneeded: []UnneededNode{}, Actions: []Action{}, Shadow: e.Shadow,
		ShadowCompare: res.ShadowCompare,
	}
	if cycleErr != nil {
		st.Error = clip(cycleErr.Error())
		st.LastError = &StatusError{At: now, Message: st.Error}
	}
	if r := res.Recovered; r != nil {
		st.Recovered = &RecoveredCounts{RolledBack: len(r.RolledBack), Completed: len(r.Completed), Untainted: len(r.Untainted)}
	}
	st.addActions(res.Actions, cycleErr == nil, now)
	if res.Plan == nil {
		// Nothing read this cycle: the last known groups stand.
		st.GroupsAt, st.NodeGroups, st.NodeGroupsOmitted = prev.GroupsAt, prev.NodeGroups, prev.NodeGroupsOmitted
		st.Unneeded, st.UnneededOmitted = prev.Unneeded, prev.UnneededOmitted
		st.Kept, st.KeptOmitted, st.KeptCounts = prev.Kept, prev.KeptOmitted, prev.KeptCounts
		st.Cost, st.Replacing, st.ReplacingOmitted = prev.Cost, prev.Replacing, prev.ReplacingOmitted
		st.ReplaceNotTaken, st.ReplaceNotTakenOmitted = prev.ReplaceNotTaken, prev.ReplaceNotTakenOmitted
		if st.NodeGroups == nil {
			st.NodeGroups = []GroupSummary{}
		}
		if st.Unneeded == nil {
			st.Unneeded = []UnneededNode{}
		}
		return st
	}
	plan := res.Plan
	st.GroupsAt = snap.CapturedAt
	st.UnschedulablePods = len(plan.Unschedulable)
	groupOf, registered, ready := countNodes(snap)
	st.NodeGroups, st.NodeGroupsOmitted = groupSummaries(prev, snap, plan, res.Actions, now, registered, ready)
	st.Unneeded, st.UnneededOmitted = unneededNodes(plan.State.UnneededSince, groupOf)
	st.addKept(plan)
	if c := plan.Cost; c != nil {
		st.Cost = &StatusCost{Now: c.Now, AfterPlan: c.Totals, Change: c.Change, NoPrice: len(c.NoPrice)}
	}
	if n := min(len(plan.Replace), maxStatusReplace); n > 0 {
		st.Replacing = make([]planner.Replace, n)
		for i, r := range plan.Replace[:n] {
			r.Reason = clip(r.Reason)
			st.Replacing[i] = r
		}
		st.ReplacingOmitted = len(plan.Replace) - n
	}
	if n := min(len(plan.ReplaceNotTaken), maxStatusNotTaken); n > 0 {
		st.ReplaceNotTaken = make([]planner.ReplaceNotTaken, n)
		for i, r := range plan.ReplaceNotTaken[:n] {
			r.Reason = clip(r.Reason)
			st.ReplaceNotTaken[i] = r
		}
		st.ReplaceNotTakenOmitted = len(plan.ReplaceNotTaken) - n + plan.ReplaceNotTakenOmitted
	}
	return st
}

// addKept takes the plan's first kept nodes, their reasons clipped, and
// its counts, up to the caps.
func (st *Status) addKept(plan *planner.Plan) {
	n := min(len(plan.Kept), maxStatusKept)
	st.Kept = make([]planner.Kept, n)
	for i, k := range plan.Kept[:n] {
		k.Reason = clip(k.Reason)
		st.Kept[i] = k
	}
	st.KeptOmitted = len(plan.Kept) - n + plan.KeptOmitted
	st.KeptCounts = plan.KeptCounts[:min(len(plan.KeptCounts), maxStatusCounts)]
	if n == 0 {
		st.Kept = nil
	}
}

// addActions lists the cycle's actions, up to the cap; the last failed one
// is the last error unless the cycle itself failed (ok false).
func (st *Status) addActions(actions []Action, ok bool, now time.Time) {
	for _, a := range actions {
		if a.Error != "" {
			if ok {
				st.LastError = &StatusError{At: now, Message: clip(fmt.Sprintf("%s %s: %s", a.Kind, a.NodeGroup, a.Error))}
			}
			a.Error = clip(a.Error)
		}
		if len(st.Actions) < maxStatusActions {
			st.Actions = append(st.Actions, a)
		} else {
			st.ActionsOmitted++
		}
	}
}

// groupSummaries summarises the snapshot's groups as the plan left them,
// up to the cap, and says how many more there were.
func groupSummaries(prev Status, snap snapshot.Snapshot, plan *planner.Plan, actions []Action, now time.Time, registered, ready map[string]int) ([]GroupSummary, int) {
	lastDown := map[string]*time.Time{}
	for _, g := range prev.NodeGroups {
		lastDown[g.Name] = g.LastScaleDown
	}
	failedUp := map[string]bool{}
	for _, a := range actions {
		switch {
		case a.Kind == "drain" && a.Error == "":
			t := now
			lastDown[a.NodeGroup] = &t
		case a.Kind == "scaleUp" && a.Error != "":
			failedUp[a.NodeGroup] = true
		}
	}
	planned := map[string]planner.GroupStatus{}
	for _, g := range plan.NodeGroups {
		planned[g.Name] = g
	}
	out, omitted := []GroupSummary{}, 0
	for _, g := range snap.NodeGroups {
		if len(out) == maxStatusGroups {
			omitted++
			continue
		}
		p := planned[g.Name]
		gs := GroupSummary{
			Name: g.Name, Provider: g.Provider, MinSize: g.MinSize, MaxSize: g.MaxSize, BoundsFrom: g.BoundsFrom,
			TargetSize: g.TargetSize, Registered: registered[g.Name], Ready: ready[g.Name], Health: []string{},
			LastScaleUp: timeOf(plan.State.LastScaleUp, g.Name), LastScaleDown: lastDown[g.Name],
			CPUUtilization: p.CPUUtilization, MemoryUtilization: p.MemoryUtilization,
			Headroom: groupHeadroom(p.Headroom, failedUp[g.Name]),
		}
		if pr := g.Price; pr != nil {
			gs.Price = &GroupPrice{PerNodeHour: pr.PerHour, Currency: pr.Currency, Source: string(pr.Source)}
		}
		for _, up := range plan.ScaleUp {
			if up.NodeGroup == g.Name && !failedUp[g.Name] {
				gs.TargetSize = up.NewTargetSize
			}
		}
		gs.setHealth(plan.State.BackoffUntil, failedUp[g.Name], now)
		out = append(out, gs)
	}
	return out, omitted
}

// setHealth lists what is wrong with the group, and its backoff.
func (gs *GroupSummary) setHealth(backoffUntil map[string]time.Time, failedUp bool, now time.Time) {
	out := []string{}
	if b := timeOf(backoffUntil, gs.Name); b != nil && b.After(now) {
		gs.BackoffUntil = b
		out = append(out, HealthBackedOff)
	}
	if failedUp {
		out = append(out, HealthScaleUpFailed)
	}
	if gs.TargetSize >= gs.MaxSize {
		out = append(out, HealthAtMax)
	}
	if gs.TargetSize > gs.Registered {
		out = append(out, HealthProvisioning)
	}
	if gs.Ready < gs.Registered {
		out = append(out, HealthNodesNotReady)
	}
	gs.Health = out
}

// groupHeadroom is the status of a group's headroom; a failed scale-up
// added nothing.
func groupHeadroom(h *planner.HeadroomStatus, failedUp bool) *GroupHeadroom {
	if h == nil {
		return nil
	}
	out := &GroupHeadroom{Rule: h.Rule, Free: h.Free, Met: h.Met, Need: h.Need, Adding: h.Adding, Blocked: clip(h.Blocked)}
	if failedUp && out.Adding > 0 {
		out.Adding, out.Blocked = 0, "the scale-up failed"
	}
	return out
}

// unneededNodes lists the unneeded nodes, the longest unneeded first (the
// next to go), up to the cap, and says how many more there were.
func unneededNodes(since map[string]time.Time, groupOf map[string]string) ([]UnneededNode, int) {
	out := make([]UnneededNode, 0, min(len(since), maxStatusUnneeded+1))
	for node, t := range since {
		out = append(out, UnneededNode{Node: node, NodeGroup: groupOf[node], Since: t})
	}
	slices.SortFunc(out, func(a, b UnneededNode) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.Node, b.Node))
	})
	if n := len(out); n > maxStatusUnneeded {
		return out[:maxStatusUnneeded], n - maxStatusUnneeded
	}
	return out, 0
}

// unmatchedHeadroom lists, sorted, the groups a headroom is set for that
// are not among groups.
func unmatchedHeadroom(headroom map[string]snapshot.Headroom, groups []snapshot.NodeGroup) []string {
	found := make(map[string]bool, len(groups))
	for _, g := range groups {
		found[g.Name] = true
	}
	var out []string
	for name := range headroom {
		if !found[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// countNodes maps node → group and counts each group's registered and
// Ready nodes, by providerID.
func countNodes(snap snapshot.Snapshot) (groupOf map[string]string, registered, ready map[string]int) {
	byID := map[string]string{}
	for _, g := range snap.NodeGroups {
		for _, id := range g.Instances {
			byID[id] = g.Name
		}
	}
	groupOf, registered, ready = map[string]string{}, map[string]int{}, map[string]int{}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		g, ok := byID[n.Spec.ProviderID]
		if !ok {
			continue
		}
		groupOf[n.Name] = g
		registered[g]++
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready[g]++
			}
		}
	}
	return groupOf, registered, ready
}

func timeOf(m map[string]time.Time, k string) *time.Time {
	if t, ok := m[k]; ok {
		t = t.UTC()
		return &t
	}
	return nil
}

// clip bounds a message to maxStatusMessage bytes by cutting out its
// middle: a wrapped error names what failed first and the cloud's own answer
// (its error code and message) last, and both are what a reader needs.
func clip(s string) string {
	if len(s) <= maxStatusMessage {
		return s
	}
	const gap = " ... "
	head := clipHead
	for head > 0 && s[head]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		head--
	}
	tail := len(s) - (maxStatusMessage - clipHead - len(gap))
	for tail < len(s) && s[tail]&0xC0 == 0x80 {
		tail++
	}
	return s[:head] + gap + s[tail:]
}
