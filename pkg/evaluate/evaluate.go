// Package evaluate is nodetide's evaluate cycle: read (a snapshot of the
// cluster, the provider groups and the stored state), decide (pkg/planner),
// act (scale up through the providers, start drains for removals, record the
// new state). The Lambda function and `nodetide run` both drive it.
package evaluate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/shadowcompare"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// LeaseName is the lease that keeps two evaluate runs from acting at once.
const LeaseName = "evaluate"

// Drainer starts the removal of a node the plan chose. Starting must be
// idempotent for the same node and unneeded-since time (a retried run must not
// start two drains).
type Drainer interface {
	StartDrain(ctx context.Context, d planner.ScaleDown, unneededSince time.Time) error
}

// Recoverer finishes the drains whose execution has ended without finishing
// them, and frees nodes left with the draining taint (drain.Recovery). Every
// cycle recovers drains before its snapshot and sweeps the snapshot's nodes.
type Recoverer interface {
	Drains(ctx context.Context) (drain.Recovered, error)
	Untaint(ctx context.Context, nodes []corev1.Node) ([]string, error)
}

// ClusterReader reads the cluster's nodes, pods and PodDisruptionBudgets
// (k8s.Reader); the objects are valid until the next Read.
type ClusterReader interface {
	Read(ctx context.Context) (k8s.Objects, k8s.ReadStats, error)
}

// Evaluator runs the evaluate cycle for one cluster.
type Evaluator struct {
	Client kubernetes.Interface
	// Reader, when set, reads the cluster for each snapshot and keeps what it
	// read between cycles; nil lists everything through Client each time.
	Reader   ClusterReader
	Groups   func(ctx context.Context) ([]providers.NodeGroup, error)
	Store    state.Store
	Settings planner.Settings
	// Prices answers the groups' prices from their providers' sources
	// (cached in the state table) when the expander chain ranks by price
	// and the config sets none; nil reads none.
	Prices *state.PriceCache
	// Headroom is, by node group name, the spare capacity groups keep
	// (config's nodeGroups[].headroom); the snapshot's groups carry it.
	Headroom map[string]snapshot.Headroom
	// Drainer may be nil: removals are then planned and logged, not acted on.
	Drainer Drainer
	// Recoverer may be nil (no drain state machine: no drains to recover).
	Recoverer Recoverer
	Log       *slog.Logger
	Now       func() time.Time
	// Holder names this run in the lease (e.g. the Lambda request ID).
	Holder string
	// LeaseTTL must outlive one run (the function timeout).
	LeaseTTL time.Duration
	// Events, when set, records the cycle's Kubernetes Events, bounded by
	// EventSettings.
	Events        *kubeevents.Recorder
	EventSettings EventSettings
	// PendingAlarm is how long a pod may stay unschedulable before it is a
	// problem (Status.Problems, metrics.Problems); 0: DefaultPendingAlarm.
	PendingAlarm time.Duration
	// StatusMap, when set, also publishes each cycle's status where kubectl
	// reads it (statusmap.Writer: the status ConfigMap).
	StatusMap StatusPublisher
	// Shadow plans and reports each cycle and changes nothing in the cloud
	// or the cluster: no scale-up or decrease, no drain, no recovery, no
	// Event. The status (and its ConfigMap) lists what the cycle would have
	// done as shadow actions; Add is refused.
	Shadow bool
	// Compare, when set in shadow mode, compares each cycle's shadow plan
	// with what cluster-autoscaler did since the last cycle
	// (Result.ShadowCompare, Status.ShadowCompare, metrics.ShadowAgreement).
	Compare Observer

	notTriggered podEventMemory
	// blockedNoted: when each node last got ScaleDownBlocked (keyed by UID).
	blockedNoted podEventMemory
}

// StatusPublisher publishes a cycle's status beside the stored one. Its
// refusal is the cycle's problem, never its error.
type StatusPublisher interface {
	Write(ctx context.Context, st Status) error
}

// Action is one thing a run did, or tried to do.
type Action struct {
	Kind string `json:"kind"` // scaleUp, decreaseTarget, drain, add, shadow
	// Would is what a shadow action would have been (scaleUp,
	// decreaseTarget, drain); set only when Kind is shadow.
	Would     string `json:"would,omitempty"`
	NodeGroup string `json:"nodeGroup"`
	Node      string `json:"node,omitempty"`
	Delta     int    `json:"delta,omitempty"`
	Error     string `json:"error,omitempty"`
	// Reason sorts a failed scale-up's error (the Reason* constants).
	Reason string `json:"reason,omitempty"`
}

// Result is what a run did.
type Result struct {
	Plan    *planner.Plan `json:"plan,omitempty"`
	Actions []Action      `json:"actions"`
	// Skipped says why nothing was done (another run holds the lease).
	Skipped string `json:"skipped,omitempty"`
	// WatchRuns counts the extra cycles the watch that followed started.
	WatchRuns int `json:"watchRuns,omitempty"`
	// Recovered lists the ended drains this cycle finished first.
	Recovered *drain.Recovered `json:"recovered,omitempty"`
	// TriggerRuns counts the further cycles a triggered run made for pods
	// that were too young to count in the first.
	TriggerRuns int `json:"triggerRuns,omitempty"`
	// ShadowCompare is a shadow cycle's comparison with cluster-autoscaler
	// (Evaluator.Compare).
	ShadowCompare *shadowcompare.Comparison `json:"shadowCompare,omitempty"`

	// caNames is cluster-autoscaler's name of the groups it names otherwise.
	caNames map[string]string
	// comingOfAge is when the youngest Unschedulable pod this cycle left out
	// for its age reaches pendingPodMinAge (zero: none left out).
	comingOfAge time.Time
}

func (e *Evaluator) now() time.Time {
	if e.Now != nil {
		return e.Now().UTC()
	}
	return time.Now().UTC()
}

func (e *Evaluator) log() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.Default()
}

// Snapshot reads the cluster, the node groups and the stored state.
func (e *Evaluator) Snapshot(ctx context.Context) (snapshot.Snapshot, []providers.NodeGroup, error) {
	now := e.now()
	objs, err := e.read(ctx)
	if err != nil {
		return snapshot.Snapshot{}, nil, fmt.Errorf("snapshot: %w", err)
	}
	groups, err := e.Groups(ctx)
	if err != nil {
		return snapshot.Snapshot{}, nil, fmt.Errorf("snapshot: node groups: %w", err)
	}
	nodes := objs.Nodes
	if nodes == nil {
		nodes = []corev1.Node{} // read, and none: not "ask the groups"
	}
	described, err := describe(ctx, groups, nodes, e.Settings.ScaleUp.IgnoredTaints)
	if err != nil {
		return snapshot.Snapshot{}, nil, err
	}
	e.providerPrices(ctx, groups, described)
	for i := range described {
		if h, ok := e.Headroom[described[i].Name]; ok {
			described[i].Headroom = &h
		}
	}
	if missing := unmatchedHeadroom(e.Headroom, described); len(missing) > 0 {
		// Not an error: a discovered group may come and go (its ASG
		// untagged, its pool deleted); the status lists it as a problem.
		e.log().Warn("headroom for node groups not found", "count", len(missing), "nodeGroups", missing[:min(len(missing), maxStatusProblems)])
	}
	st, err := e.Store.LoadState(ctx)
	if err != nil {
		return snapshot.Snapshot{}, nil, fmt.Errorf("snapshot: load state: %w", err)
	}
	e.noteUnplacedPods(objs)
	return snapshot.Snapshot{
		CapturedAt:           now,
		NodeGroups:           described,
		Nodes:                objs.Nodes,
		Pods:                 objs.Pods,
		PodDisruptionBudgets: objs.PodDisruptionBudgets,
		State:                st,

		PersistentVolumeClaims: objs.PersistentVolumeClaims,
		PersistentVolumes:      objs.PersistentVolumes,
		StorageClasses:         objs.StorageClasses,
	}, groups, nil
}

// noteUnplacedPods logs the pods bound to a node the read did not return.
// The pods of a deleted Node linger until the pod garbage collector removes
// them (about a minute), and nodes and pods are read at different versions:
// such a pod is no reason to fail a cycle. The planner plans as if it were
// not there (planner.UnplacedPods).
func (e *Evaluator) noteUnplacedPods(objs k8s.Objects) {
	gone := planner.UnplacedPods(objs.Nodes, objs.Pods)
	if len(gone) == 0 {
		return
	}
	names := make([]string, 0, min(len(gone), maxStatusProblems))
	for _, i := range gone[:cap(names)] {
		p := &objs.Pods[i]
		names = append(names, p.Namespace+"/"+p.Name+" on "+p.Spec.NodeName)
	}
	e.log().Info("pods bound to a node not read, planned as on no node", "count", len(gone), "pods", names)
}

func (e *Evaluator) read(ctx context.Context) (k8s.Objects, error) {
	if e.Reader == nil {
		return k8s.List(ctx, e.Client)
	}
	start := time.Now()
	objs, st, err := e.Reader.Read(ctx)
	if err != nil {
		return k8s.Objects{}, err
	}
	e.log().Info("cluster read", "listed", st.Listed, "events", st.Events, "nodes", len(objs.Nodes),
		"pods", len(objs.Pods), "pdbs", len(objs.PodDisruptionBudgets), "seconds", time.Since(start).Seconds())
	return objs, nil
}

// Describe turns provider groups into the planner's view of them, with
// their providers' templates (no nodes are read).
func Describe(ctx context.Context, groups []providers.NodeGroup) ([]snapshot.NodeGroup, error) {
	return describe(ctx, groups, nil, podfacts.IgnoredTaints{})
}

// nodeBacked is a group whose machines are Node objects (kwok.Group): its
// target and instances follow from a read of the cluster's nodes.
type nodeBacked interface {
	FromNodes(nodes []corev1.Node) (target int, instances []providers.Instance)
}

// sizeOf is g's target and instances: from nodes, the cycle's read of every
// Node, when g's machines are Nodes and nodes is not nil (no second and
// third read of the same Nodes a tick); else from the provider. The
// wrappers above the provider's group (bounds, guard) change its bounds
// and writes, not these reads.
func sizeOf(ctx context.Context, g providers.NodeGroup, nodes []corev1.Node) (int, []providers.Instance, error) {
	if nb, ok := providers.Own(g).(nodeBacked); ok && nodes != nil {
		target, insts := nb.FromNodes(nodes)
		return target, insts, nil
	}
	target, err := g.TargetSize(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("node group %s: target size: %w", g.Name(), err)
	}
	insts, err := g.Instances(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("node group %s: instances: %w", g.Name(), err)
	}
	return target, insts, nil
}

// describe is Describe, with the cycle's nodes (nil: none read) for sizeOf
// and for the groups' templates (groupTemplate).
func describe(ctx context.Context, groups []providers.NodeGroup, nodes []corev1.Node, ignored podfacts.IgnoredTaints) ([]snapshot.NodeGroup, error) {
	out := make([]snapshot.NodeGroup, 0, len(groups))
	idx := indexNodes(nodes)
	for _, g := range groups {
		target, insts, err := sizeOf(ctx, g, nodes)
		if err != nil {
			return nil, err
		}
		tpl, err := g.Template(ctx)
		if err != nil {
			return nil, fmt.Errorf("node group %s: template: %w", g.Name(), err)
		}
		ids := make([]string, 0, len(insts))
		for _, in := range insts {
			ids = append(ids, in.ProviderID)
		}
		slices.Sort(ids)
		b := g.Bounds()
		// The zones are the provider's: one node's zone is not the group's.
		zones := providers.Zones(g, tpl)
		tpl, from := groupTemplate(tpl, zones, idx, insts, ignored)
		out = append(out, snapshot.NodeGroup{
			Name: g.Name(), Provider: g.Provider(),
			MinSize: b.Min, MaxSize: b.Max, TargetSize: target,
			Template: tpl, TemplateFrom: from, Instances: ids, MaxFrom: b.MaxFrom, BoundsFrom: b.MaxSchedule,
			Zones: zones, Price: b.Price,
		})
	}
	return out, nil
}

// Plan reads and decides, and changes nothing (the "plan" action, dry runs).
func (e *Evaluator) Plan(ctx context.Context) (planner.Plan, error) {
	snap, _, err := e.Snapshot(ctx)
	if err != nil {
		return planner.Plan{}, err
	}
	return planner.Decide(snap, e.Settings, snap.CapturedAt), nil
}

// Run is one evaluate cycle. When another run holds the lease it does nothing
// and says so in Result.Skipped.
func (e *Evaluator) Run(ctx context.Context) (Result, error) {
	start := time.Now()
	lease, skipped, err := e.acquire(ctx)
	if err != nil || skipped != "" {
		return Result{Skipped: skipped, Actions: []Action{}}, err
	}
	defer e.release(lease)
	began := time.Now()
	res, snap, err := e.cycle(ctx, lease)
	if errors.Is(err, errSuperseded) {
		// Another run acts on what this one read: its plan is void, and
		// the status is that run's.
		e.log().Info("skipped: superseded while deciding", "error", err.Error())
		metrics.From(ctx).Add(metrics.LeaseSkips, 1, nil)
		return Result{Skipped: err.Error(), Actions: []Action{}, Recovered: res.Recovered}, nil
	}
	if err == nil && res.Plan != nil && e.Shadow && e.Compare != nil {
		res.ShadowCompare = e.compare(ctx, snap, res)
	}
	problems := e.saveStatus(ctx, began, snap, res, err)
	if err == nil && res.Plan != nil {
		recordCycle(ctx, snap, *res.Plan, res.Actions, time.Since(start), e.Shadow)
		recordComparison(ctx, res.ShadowCompare)
	}
	recordProblems(ctx, problems)
	return res, err
}

// cycle is Run's work under the lease; it also returns the snapshot it
// read (empty when reading failed), for the status. It fails with
// errSuperseded, having done nothing the plan says, when another run took
// the lease meanwhile (see confirm).
func (e *Evaluator) cycle(ctx context.Context, lease state.Lease) (Result, snapshot.Snapshot, error) {
	var rec drain.Recovered
	if e.Recoverer != nil && !e.Shadow {
		// Before the snapshot, so the plan sees the nodes it gave back.
		var err error
		if rec, err = e.Recoverer.Drains(ctx); err != nil {
			e.log().Error("recover drains", "error", err.Error())
		}
	}

	snap, groups, err := e.Snapshot(ctx)
	if err == nil && e.Recoverer != nil && !e.Shadow {
		// The snapshot's nodes, not a list of its own: no second read of
		// every Node per cycle. A node freed here is seen by the next cycle.
		var uerr error
		if rec.Untainted, uerr = e.Recoverer.Untaint(ctx, snap.Nodes); uerr != nil {
			e.log().Error("recover drains: untaint", "error", uerr.Error())
		}
	}
	var recovered *drain.Recovered
	if len(rec.RolledBack)+len(rec.Completed)+len(rec.Untainted) > 0 {
		recovered = &rec
	}
	if err != nil {
		return Result{Actions: []Action{}, Recovered: recovered}, snapshot.Snapshot{}, err
	}
	plan := planner.Decide(snap, e.Settings, snap.CapturedAt)
	e.log().Info("plan", "plan", plan)

	next := plan.State
	var actions []Action
	if e.Shadow {
		actions, next = shadowActions(plan), shadowState(plan.State, snap.State)
	} else {
		if acts(plan) {
			if err := e.confirm(ctx, lease, snap.State); err != nil {
				return Result{Actions: []Action{}, Recovered: recovered}, snap, err
			}
		}
		actions = e.act(ctx, plan, groups, snap, &next)
		e.recordEvents(ctx, plan, snap, actions)
	}
	if err := e.Store.SaveState(ctx, snap.State, next); err != nil {
		return Result{Plan: &plan, Actions: actions, Recovered: recovered}, snap, fmt.Errorf("save state: %w", err)
	}
	plan.State = next
	return Result{Plan: &plan, Actions: actions, Recovered: recovered, caNames: caNames(groups),
		comingOfAge: comingOfAge(snap.Pods, e.Settings.ScaleUp.PendingPodMinAge, snap.CapturedAt)}, snap, nil
}

// errSuperseded: another run took the lease while this one decided.
var errSuperseded = errors.New("another evaluate run took the lease while this one decided; its plan is not acted on")

// acts reports whether carrying plan out changes the cloud or the cluster.
func acts(plan planner.Plan) bool {
	return len(plan.ScaleUp)+len(plan.DecreaseTarget)+len(plan.ScaleDown) > 0
}

// confirm checks, just before a cycle acts, that it still acts alone on
// what it read. A cycle held up past its lease (a throttled API, a paused
// process) may find that another run has taken the lease and acted: it
// would then ask for nodes or start a replacement a second time. So the
// lease is renewed (refused while another holds it) and the state read
// again: if what runs record when they act is as the cycle read it, no
// other run has acted since, and none can until this one's act is done
// (errSuperseded otherwise).
func (e *Evaluator) confirm(ctx context.Context, lease state.Lease, read snapshot.State) error {
	_, err := e.Store.AcquireLease(ctx, LeaseName, lease.Holder, e.leaseTTL(), e.now())
	if errors.Is(err, state.ErrLeaseHeld) {
		return fmt.Errorf("%w: %w", errSuperseded, err)
	}
	if err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	now, err := e.Store.LoadState(ctx)
	if err != nil {
		return fmt.Errorf("confirm the state: %w", err)
	}
	if !sameActs(read, now) {
		return fmt.Errorf("%w: scale-ups, back-offs or replacements were recorded since it read the state", errSuperseded)
	}
	return nil
}

// sameActs reports whether two states record the same scale-ups,
// back-offs and replacements: every run that grows a group or starts a
// replacement changes them. Unneeded times are left out: drains clear
// them as they end, and a drain started twice is one drain (its name
// comes from the node and that time).
func sameActs(a, b snapshot.State) bool {
	times := func(x, y map[string]time.Time) bool {
		return maps.EqualFunc(x, y, time.Time.Equal)
	}
	return times(a.LastScaleUp, b.LastScaleUp) && times(a.BackoffUntil, b.BackoffUntil) &&
		maps.EqualFunc(a.Replacing, b.Replacing, func(x, y snapshot.Replacement) bool {
			return x.NodeGroup == y.NodeGroup && x.Delta == y.Delta && slices.Equal(x.Nodes, y.Nodes) && x.Since.Equal(y.Since)
		})
}

func (e *Evaluator) leaseTTL() time.Duration {
	if e.LeaseTTL <= 0 {
		return 2 * time.Minute
	}
	return e.LeaseTTL
}

func (e *Evaluator) acquire(ctx context.Context) (state.Lease, string, error) {
	ttl := e.leaseTTL()
	holder := e.Holder
	if holder == "" {
		holder = fmt.Sprintf("evaluate-%d", time.Now().UnixNano())
	}
	lease, err := e.Store.AcquireLease(ctx, LeaseName, holder, ttl, e.now())
	if errors.Is(err, state.ErrLeaseHeld) {
		e.log().Info("skipped: another evaluate run holds the lease", "error", err.Error())
		metrics.From(ctx).Add(metrics.LeaseSkips, 1, nil)
		return lease, err.Error(), nil
	}
	if err != nil {
		return lease, "", fmt.Errorf("acquire lease: %w", err)
	}
	return lease, "", nil
}

func (e *Evaluator) release(l state.Lease) {
	// Release even when the run's context is done, so the next run need not
	// wait for expiry.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Store.ReleaseLease(ctx, l); err != nil {
		e.log().Warn("release lease", "error", err.Error())
	}
}

// act carries the plan out. A failed scale-up is not recorded as a scale-up:
// the group is backed off instead, so the next cycle tries another group.
func (e *Evaluator) act(ctx context.Context, plan planner.Plan, groups []providers.NodeGroup, snap snapshot.Snapshot, next *snapshot.State) []Action {
	byName := make(map[string]providers.NodeGroup, len(groups))
	for _, g := range groups {
		byName[g.Name()] = g
	}
	actions := []Action{}
	for _, d := range plan.DecreaseTarget {
		a := Action{Kind: "decreaseTarget", NodeGroup: d.NodeGroup, Delta: -d.Delta}
		// The plan says how much to give back; the provider takes a negative delta.
		if err := byName[d.NodeGroup].DecreaseTargetSize(ctx, -d.Delta); err != nil {
			a.Error = err.Error()
			e.log().Warn("decrease target", "nodeGroup", d.NodeGroup, "delta", d.Delta, "error", a.Error)
		}
		actions = append(actions, a)
	}
	for _, up := range plan.ScaleUp {
		a := Action{Kind: "scaleUp", NodeGroup: up.NodeGroup, Delta: up.Delta}
		if err := byName[up.NodeGroup].IncreaseSize(ctx, up.Delta); err != nil {
			a.Error, a.Reason = err.Error(), failureReason(err)
			e.log().Error("scale up", "nodeGroup", up.NodeGroup, "delta", up.Delta, "reason", a.Reason, "error", a.Error)
			*next = planner.AfterScaleUpFailure(*next, snap.State, up.NodeGroup, snap.CapturedAt, e.Settings)
		} else {
			e.log().Info("scaled up", "nodeGroup", up.NodeGroup, "delta", up.Delta, "newTargetSize", up.NewTargetSize, "pods", len(up.Pods))
		}
		actions = append(actions, a)
	}
	for _, down := range plan.ScaleDown {
		a := Action{Kind: "drain", NodeGroup: down.NodeGroup, Node: down.Node}
		switch {
		case e.Drainer == nil:
			a.Error = notStarted + " no drainer configured"
			e.log().Info("scale-down planned, not acted on", "nodeGroup", down.NodeGroup, "node", down.Node, "reason", down.Reason)
		default:
			if err := e.Drainer.StartDrain(ctx, down, next.UnneededSince[down.Node]); err != nil {
				a.Error = err.Error()
				e.log().Error("start drain", "node", down.Node, "error", a.Error)
			}
		}
		actions = append(actions, a)
	}
	return actions
}

// shadowActions lists what act would have done with the plan, doing none of it.
func shadowActions(plan planner.Plan) []Action {
	actions := []Action{}
	for _, d := range plan.DecreaseTarget {
		actions = append(actions, Action{Kind: KindShadow, Would: "decreaseTarget", NodeGroup: d.NodeGroup, Delta: -d.Delta})
	}
	for _, up := range plan.ScaleUp {
		actions = append(actions, Action{Kind: KindShadow, Would: "scaleUp", NodeGroup: up.NodeGroup, Delta: up.Delta})
	}
	for _, down := range plan.ScaleDown {
		actions = append(actions, Action{Kind: KindShadow, Would: "drain", NodeGroup: down.NodeGroup, Node: down.Node})
	}
	return actions
}

// KindShadow is the kind of an action a shadow cycle would have taken.
const KindShadow = "shadow"

// shadowState is the state a shadow cycle saves: the plan's unneeded timers,
// so planned removals come due as they would, but no scale-up or back-off:
// none happened, and recording one would hold back the next plans.
func shadowState(planned, prev snapshot.State) snapshot.State {
	kept := copyState(prev)
	kept.UnneededSince = planned.UnneededSince
	return kept
}

// ErrShadow refuses what would change the cloud in shadow mode.
var ErrShadow = errors.New("evaluate.shadow is on: nodetide changes nothing (turn evaluate.shadow off to act)")

// MaxAdd is the most nodes one add may ask for; more is taken for a mistake
// (no group is that large) and refused before anything is read.
const MaxAdd = 1000

// Add grows a group by count by hand (scalerctl's addinstances), never past its
// maximum; it is recorded as a scale-up so scale-down waits delayAfterAdd.
func (e *Evaluator) Add(ctx context.Context, group string, count int) (Result, error) {
	if count < 1 || count > MaxAdd {
		return Result{}, fmt.Errorf("add: count must be from 1 to %d, got %d", MaxAdd, count)
	}
	if e.Shadow {
		return Result{}, fmt.Errorf("add: node group %s: %w", group, ErrShadow)
	}
	lease, skipped, err := e.acquire(ctx)
	if err != nil {
		return Result{}, err
	}
	if skipped != "" {
		return Result{}, fmt.Errorf("add: %s; try again in a moment", skipped)
	}
	defer e.release(lease)

	groups, err := e.Groups(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("add: node groups: %w", err)
	}
	var g providers.NodeGroup
	names := make([]string, 0, len(groups))
	for _, cand := range groups {
		names = append(names, cand.Name())
		if cand.Name() == group {
			g = cand
		}
	}
	if g == nil {
		return Result{}, fmt.Errorf("add: unknown node group %q (known: %v)", group, names)
	}
	target, err := g.TargetSize(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("add: node group %s: %w", group, err)
	}
	if maxSize := g.Bounds().Max; count > maxSize-target { // not target+count: that can wrap
		return Result{}, fmt.Errorf("add: node group %s: %d + %d is above its max size %d: %w", group, target, count, maxSize, providers.ErrAboveMax)
	}
	if err := g.IncreaseSize(ctx, count); err != nil {
		metrics.From(ctx).AddRollUp(metrics.ScaleUpFailures, 1, metrics.Dims{metrics.DimReason: failureReason(err)})
		return Result{}, fmt.Errorf("add: node group %s: %w", group, err)
	}
	prev, err := e.Store.LoadState(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("add: load state: %w", err)
	}
	next := copyState(prev)
	next.LastScaleUp[group] = e.now()
	if err := e.Store.SaveState(ctx, prev, next); err != nil {
		return Result{}, fmt.Errorf("add: save state: %w", err)
	}
	metrics.From(ctx).Add(metrics.ScaleUpNodes, float64(count), metrics.Dims{metrics.DimNodeGroup: group})
	e.log().Info("added", "nodeGroup", group, "count", count, "newTargetSize", target+count)
	return Result{Actions: []Action{{Kind: "add", NodeGroup: group, Delta: count}}}, nil
}

// copyState copies every part of a state, replacements under way too: a
// part left out would read as removed and be deleted on save.
func copyState(s snapshot.State) snapshot.State { return s.Normal() }
