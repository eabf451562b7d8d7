package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/aws/smithy-go"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/k8s/facts"
	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// Store is what the steps keep in the state table: the drain records and
// the group locks that make a drain's claim against the minimum atomic.
type Store interface {
	state.DrainStore
	state.Leaser
}

// Steps runs the drain steps against a cluster, its node groups and the
// drain records.
type Steps struct {
	Client kubernetes.Interface
	Groups func(ctx context.Context) ([]providers.NodeGroup, error)
	Store  Store
	Now    func() time.Time
	Log    *slog.Logger
	// Lifecycle completes and heartbeats Auto Scaling lifecycle actions
	// (drains of machines an ASG terminates); nil without AWS groups.
	Lifecycle LifecycleAPI
	// Machines asks EC2 whether what an event or a drain record says of a
	// machine is so; nil without AWS groups.
	Machines InstancesAPI
	// Hook is this deployment's termination lifecycle hook
	// (config.LifecycleHookName); a lifecycle action of another hook is
	// not acted on. Empty: any hook of a managed group.
	Hook string
	// HeartbeatEvery: see DefaultHeartbeatEvery (used when zero).
	HeartbeatEvery time.Duration
	// StepWait is how long a step keeps checking for progress it can expect
	// within seconds (an evicted pod going away, a replacement turning
	// Ready) before handing back to the state machine's Wait loop; it saves
	// a 10 s round in most drains. Zero means 5 s; negative, no waiting.
	StepWait time.Duration
	// Events, when set, records DrainStarted, ScaleDown, DrainRolledBack and
	// DrainFailed on the node; a failed write never fails a step.
	Events *kubeevents.Recorder
}

// nodeEvent records one event on a drain's node.
func (d *Steps) nodeEvent(ctx context.Context, node, typ, reason, msg string) {
	d.Events.Record(ctx, kubeevents.Event{Object: kubeevents.Node(node, ""), Type: typ, Reason: reason, Message: msg})
}

func (d *Steps) stepWait() time.Duration {
	switch {
	case d.StepWait < 0:
		return 0
	case d.StepWait == 0:
		return 5 * time.Second
	}
	return d.StepWait
}

// settle calls once until it reports done or the step wait runs out.
func (d *Steps) settle(ctx context.Context, once func() (done bool, err error)) error {
	until := time.Now().Add(d.stepWait())
	for {
		done, err := once()
		if err != nil || done || !time.Now().Before(until) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (d *Steps) now() time.Time {
	if d.Now != nil {
		return d.Now().UTC()
	}
	return time.Now().UTC()
}

func (d *Steps) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

// Run dispatches one step by name.
func (d *Steps) Run(ctx context.Context, step string, s State) (State, error) {
	fns := map[string]func(context.Context, State) (State, error){
		"Prepare": d.Prepare, "Cordon": d.Cordon, "Surge": d.SurgeStep, "Evict": d.Evict,
		"ForceDelete": d.ForceDelete, "WaitReplacements": d.WaitReplacements, "Terminate": d.Terminate,
		"RemoveNode": d.RemoveNode, "Finish": d.Finish, "Rollback": d.Rollback, "ReleaseHook": d.ReleaseHook,
	}
	fn, ok := fns[step]
	if !ok {
		names := make([]string, 0, len(fns))
		for k := range fns {
			names = append(names, k)
		}
		slices.Sort(names)
		return s, stepErr(ErrNameInvalidInput, "unknown step %q (one of %v)", step, names)
	}
	if err := s.Validate(); err != nil {
		return s, &StepError{Name: ErrNameInvalidInput, Err: fmt.Errorf("step %s: %w", step, err)}
	}
	start := time.Now()
	var out State
	var err error
	switch step {
	case "Prepare", "ReleaseHook":
		out, err = fn(ctx, s)
	case "Cordon", "Surge", "Evict", "ForceDelete", "WaitReplacements":
		if out, err = d.checked(ctx, step, s, fn); err == nil {
			d.heartbeat(ctx, &out)
		}
	default:
		out, err = d.checked(ctx, step, s, fn)
	}
	attrs := []any{"step", step, "node", s.Node, "drainId", s.DrainID, "ms", time.Since(start).Milliseconds()}
	if step == "Prepare" && err != nil && rejected(err) {
		metrics.From(ctx).Add(metrics.DrainsRejected, 1, nil)
	}
	if err != nil {
		name := ErrorName(err)
		d.log().Warn("drain step failed", append(attrs, "error", err.Error(), "errorName", name)...)
		if name != ErrNameTransient && step != "Rollback" {
			// Transient failures are retried; this one ends the drain.
			d.nodeEvent(ctx, s.Node, corev1.EventTypeWarning, kubeevents.ReasonDrainFailed,
				fmt.Sprintf("drain %s failed at %s: %s: %v", s.DrainID, step, name, err))
		}
		return s, err
	}
	d.log().Info("drain step", append(attrs, "remaining", len(out.Remaining))...)
	return out, nil
}

// ErrorName is the name the state machine sees for err: Transient for what a
// retry can fix, a specific name for what it cannot.
func ErrorName(err error) string {
	var se *StepError
	var netErr net.Error
	switch {
	case errors.As(err, &se):
		return se.Name
	case errors.Is(err, state.ErrDraining):
		return ErrNameAlreadyDraining
	case errors.Is(err, providers.ErrBelowMin):
		return ErrNameBelowMinSize
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return ErrNameForbidden
	case apierrors.IsConflict(err), apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err),
		apierrors.IsTimeout(err), apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsUnexpectedServerError(err), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr), cloudTransient(err):
		return ErrNameTransient
	}
	return ErrNameFailed
}

// cloudTransient reports an AWS API error (DynamoDB, a provider's cloud)
// that a later try can get past: throttling, or the service failing.
func cloudTransient(err error) bool {
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && (status.HTTPStatusCode() >= 500 || status.HTTPStatusCode() == 429) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ThrottlingException", "Throttling", "ProvisionedThroughputExceededException",
			"RequestLimitExceeded", "TooManyRequestsException", "InternalServerError", "ServiceUnavailable":
			return true
		}
	}
	return false
}

// checked runs a step after Prepare only for a drain the record knows: the
// record must exist, name the same node group and machine, and (except for
// Finish and Rollback, which are then no-ops) still be running. The record's
// policy, deadline and flags replace the event's, so a hand-made step event
// can neither start a drain's later steps nor steer them elsewhere.
func (d *Steps) checked(ctx context.Context, step string, s State, fn func(context.Context, State) (State, error)) (State, error) {
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if errors.Is(err, state.ErrNoDrain) {
		return s, stepErr(ErrNameInvalidInput, "step %s: no drain %s of node %s was prepared", step, s.DrainID, s.Node)
	}
	if err != nil {
		return s, err
	}
	if rec.NodeGroup != s.NodeGroup || rec.ProviderID != s.ProviderID {
		return s, stepErr(ErrNameInvalidInput, "step %s: node group %q and providerID %q do not match drain %s of node %s (%q, %q)",
			step, s.NodeGroup, s.ProviderID, s.DrainID, s.Node, rec.NodeGroup, rec.ProviderID)
	}
	s.Policy, s.Deadline, s.BelowMin, s.Force, s.Interruption = rec.Policy, rec.Deadline, rec.BelowMin, rec.Force, rec.Interruption
	if rec.Status != state.DrainRunning {
		if step == "Finish" || step == "Rollback" {
			// Ended already: a retried or late last step. Ending again only
			// frees the node if the first end's second write was lost.
			return s, d.Store.EndDrain(ctx, s.Node, s.DrainID, rec.Status, rec.Error, d.now())
		}
		return s, stepErr(ErrNameInvalidInput, "step %s: drain %s of node %s has ended (%s)", step, s.DrainID, s.Node, rec.Status)
	}
	return fn(ctx, s)
}

// setPhase records how far the drain got.
func (d *Steps) setPhase(ctx context.Context, s State, phase string) error {
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if err != nil {
		return err
	}
	if rec.Phase == phase {
		return nil
	}
	rec.Phase = phase
	return d.Store.UpdateDrain(ctx, rec)
}

// needPhase refuses a step whose prerequisite the record does not show.
func (d *Steps) needPhase(ctx context.Context, step string, s State, want string) (state.DrainRecord, error) {
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if err != nil {
		return rec, err
	}
	if !state.PhaseAtLeast(rec.Phase, want) {
		have := rec.Phase
		if have == "" {
			have = "none"
		}
		return rec, stepErr(ErrNameInvalidInput, "step %s: drain %s of node %s has not reached %s (it is at %s)", step, s.DrainID, s.Node, want, have)
	}
	return rec, nil
}

// Prepare checks the node can be drained and claims it: it exists, belongs
// to a managed group (by providerID), nothing on it must not be disrupted
// (unless Force), removing it keeps the group at or above its effective
// minimum (with BelowMin, the minimum its provider enforces), and no other
// drain holds it. The minimum check and the claim happen under the group's
// lock, counting every drain that holds a node of the group, so concurrent
// drains cannot together take the group below its minimum.
func (d *Steps) Prepare(ctx context.Context, s State) (State, error) {
	node, g, err := d.nodeToDrain(ctx, &s)
	if err != nil {
		return s, err
	}
	if done, err := d.claimedBefore(ctx, s); err != nil || done {
		return s, err
	}
	if err := d.checkDisruptable(ctx, node, s); err != nil {
		return s, err
	}
	return s, d.claim(ctx, s, node, g)
}

// nodeToDrain reads s's node and finds its managed group, which it records
// in s with the node's providerID. The group must be the one s names, if
// any, and the machine the one an interruption names.
func (d *Steps) nodeToDrain(ctx context.Context, s *State) (*corev1.Node, providers.NodeGroup, error) {
	node, err := d.Client.CoreV1().Nodes().Get(ctx, s.Node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, stepErr(ErrNameNodeNotFound, "node %s does not exist", s.Node)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get node %s: %w", s.Node, err)
	}
	g, err := d.groupOf(ctx, node.Spec.ProviderID)
	if err != nil {
		return nil, nil, err
	}
	if g == nil {
		return nil, nil, stepErr(ErrNameNotManaged, "node %s (providerID %q) belongs to no managed node group", s.Node, node.Spec.ProviderID)
	}
	if s.NodeGroup != "" && s.NodeGroup != g.Name() {
		return nil, nil, stepErr(ErrNameNotManaged, "node %s belongs to node group %s, not %s", s.Node, g.Name(), s.NodeGroup)
	}
	s.NodeGroup, s.ProviderID = g.Name(), node.Spec.ProviderID
	if in := s.Interruption; in != nil && instanceOf(node.Spec.ProviderID) != in.InstanceID {
		return nil, nil, stepErr(ErrNameInvalidInput, "node %s (providerID %q) is not machine %s the interruption names", s.Node, node.Spec.ProviderID, in.InstanceID)
	}
	if in := s.Interruption; in != nil && in.Kind == state.InterruptLifecycle {
		// A lifecycle drain skips the do-not-disrupt rules and the
		// minimum: only for an action proven open, of this node's group.
		if err := d.proveFor(ctx, in, s.Node, g); err != nil {
			return nil, nil, err
		}
	}
	if in := s.Interruption; in != nil && in.Kind == state.InterruptSpot {
		// A Spot drain skips the same rules; its execution input may not
		// come from the drain function's checked event (StartExecution or a
		// step invoked by hand), so EC2 is asked again.
		if err := d.proveSpot(ctx, in, s.Deadline); err != nil {
			return nil, nil, err
		}
	}
	return node, g, nil
}

// claimedBefore reports whether this drain already holds the node with its
// record running (a re-run of Prepare: nothing left to do), and refuses a
// node another drain holds or a drain that already ended.
func (d *Steps) claimedBefore(ctx context.Context, s State) (bool, error) {
	active, _, err := d.Store.NodeDrain(ctx, s.Node)
	if err != nil {
		return false, err
	}
	switch {
	case active == s.DrainID: // a re-run of our own Prepare: the claim is made
		rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
		switch {
		case errors.Is(err, state.ErrNoDrain):
			// The claim landed, the record not (or its answer was lost):
			// go on and write it; the checks below leave this node out.
		case err != nil:
			return false, err
		case rec.Status != state.DrainRunning:
			return false, stepErr(ErrNameAlreadyDraining, "drain %s of node %s already ended (%s)", s.DrainID, s.Node, rec.Status)
		default:
			return true, nil
		}
	case active != "":
		return false, stepErr(ErrNameAlreadyDraining, "node %s is already being drained by %s", s.Node, active)
	}
	return false, nil
}

// claim checks the group's minimum and begins the drain's record, both under
// the group's lock, then announces the drain on the node.
func (d *Steps) claim(ctx context.Context, s State, node *corev1.Node, g providers.NodeGroup) error {
	lock, err := state.LockGroup(ctx, d.Store, g.Name(), s.DrainID, state.GroupLockWait, d.Now)
	if err != nil {
		return &StepError{Name: ErrNameTransient, Err: err}
	}
	defer func() {
		if err := lock.Unlock(); err != nil {
			d.log().Warn("unlock node group", "nodeGroup", g.Name(), "error", err.Error())
		}
	}()
	check := d.checkMin
	if s.BelowMin {
		check = d.checkOwnMin // nodetide's minimum may go, the provider's stays
	}
	if s.Interruption.Terminal() {
		// The cloud decided: the machine goes at whatever size it leaves.
		check = func(context.Context, providers.NodeGroup, string) error { return nil }
	}
	if err := check(ctx, g, s.Node); err != nil {
		return err
	}
	rec, err := d.Store.BeginDrain(ctx, state.DrainRecord{
		Node: s.Node, ID: s.DrainID, NodeGroup: g.Name(), StartedAt: d.now(),
		ProviderID: s.ProviderID, Policy: s.Policy, Deadline: s.Deadline, BelowMin: s.BelowMin, Force: s.Force,
		WasUnschedulable: node.Spec.Unschedulable, Phase: state.PhasePrepared, Interruption: s.Interruption,
	})
	if err != nil {
		return err
	}
	if rec.Status != state.DrainRunning {
		return stepErr(ErrNameAlreadyDraining, "drain %s of node %s already ended (%s)", s.DrainID, s.Node, rec.Status)
	}
	msg := fmt.Sprintf("drain %s started: cordon, then evict the pods (on timeout %s at %s)", s.DrainID, s.Policy, s.Deadline.UTC().Format(time.RFC3339))
	if s.Reason != "" {
		msg += "; " + s.Reason
	}
	d.nodeEvent(ctx, s.Node, corev1.EventTypeNormal, kubeevents.ReasonDrainStarted, msg)
	metrics.From(ctx).Add(metrics.DrainsStarted, 1, nil)
	return nil
}

func (d *Steps) groupOf(ctx context.Context, providerID string) (providers.NodeGroup, error) {
	if providerID == "" {
		return nil, nil
	}
	groups, err := d.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("node groups: %w", err)
	}
	for _, g := range groups {
		insts, err := g.Instances(ctx)
		if err != nil {
			return nil, fmt.Errorf("node group %s: instances: %w", g.Name(), err)
		}
		for _, in := range insts {
			if in.ProviderID == providerID {
				return g, nil
			}
		}
	}
	return nil, nil
}

func (d *Steps) group(ctx context.Context, name string) (providers.NodeGroup, error) {
	groups, err := d.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("node groups: %w", err)
	}
	for _, g := range groups {
		if g.Name() == name {
			return g, nil
		}
	}
	return nil, stepErr(ErrNameNotManaged, "node group %s is not managed", name)
}

// checkMin refuses a removal that would take the group below its effective
// minimum, counting the drains already under way in it.
func (d *Steps) checkMin(ctx context.Context, g providers.NodeGroup, node string) error {
	// Drains first, then the target: a drain frees its claim only after its
	// machine is gone, so this order never sees a claim already freed
	// together with a target not yet lowered.
	draining, err := d.drainingIn(ctx, g, node)
	if err != nil {
		return err
	}
	target, err := g.TargetSize(ctx)
	if err != nil {
		return fmt.Errorf("node group %s: target size: %w", g.Name(), err)
	}
	// The group's min is its effective one: Groups lists it narrowed by
	// the config and a schedule (setup's narrow).
	b := g.Bounds()
	minSize := b.Min
	if target-draining-1 < minSize {
		setBy := ""
		if b.MinSchedule != "" {
			setBy = " (set by " + b.MinSchedule + ")"
		}
		return stepErr(ErrNameBelowMinSize, "removing node %s would leave node group %s with %d nodes (target %d, %d already draining), below its min size %d%s",
			node, g.Name(), target-draining-1, target, draining, minSize, setBy)
	}
	return nil
}

// drainingIn counts the drains that hold a node of the group (other than
// except) by their claims in the state table: a drain counts from the moment
// Prepare claims its node until it ends, whether or not it has cordoned yet;
// not one whose machine the group had already taken out of its target.
func (d *Steps) drainingIn(ctx context.Context, g providers.NodeGroup, except string) (int, error) {
	running, err := d.Store.RunningDrains(ctx)
	if err != nil {
		return 0, fmt.Errorf("node group %s: drains in flight: %w", g.Name(), err)
	}
	n := 0
	for _, r := range running {
		if r.Node != except && r.NodeGroup == g.Name() && !groupLowered(r.ID) {
			n++
		}
	}
	return n, nil
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// Cordon makes the node unschedulable and taints it as draining.
//
// A Cordon whose invocation outlived its task timeout may land after the
// drain has ended (rolled back or recovered); it then undoes itself, so no
// node is left cordoned without a drain.
func (d *Steps) Cordon(ctx context.Context, s State) (State, error) {
	if err := k8s.Cordon(ctx, d.Client, s.Node, TaintKey); err != nil {
		return s, err
	}
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if err != nil || rec.Status == state.DrainRunning {
		return s, err
	}
	if rec.WasUnschedulable {
		err = k8s.RemoveTaint(ctx, d.Client, s.Node, TaintKey)
	} else {
		err = k8s.Uncordon(ctx, d.Client, s.Node, TaintKey)
	}
	return s, errors.Join(stepErr(ErrNameInvalidInput, "step Cordon: drain %s of node %s ended meanwhile (%s)", s.DrainID, s.Node, rec.Status), err)
}

// podsOn lists the pods bound to a node.
func (d *Steps) podsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := d.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	return list.Items, nil
}

// movable reports whether a drain moves the pod: DaemonSet and mirror pods
// stay with the node, terminal pods are done.
func movable(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if facts.IsMirrorPod(p) {
		return false
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
		return false
	}
	return true
}

// deploymentOf finds the Deployment that owns a pod through its ReplicaSet.
func (d *Steps) deploymentOf(ctx context.Context, p *corev1.Pod) (*appsv1.Deployment, error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return nil, nil
	}
	rs, err := d.Client.AppsV1().ReplicaSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get replicaset %s/%s: %w", p.Namespace, ref.Name, err)
	}
	dref := metav1.GetControllerOf(rs)
	if dref == nil || dref.Kind != "Deployment" {
		return nil, nil
	}
	dep, err := d.Client.AppsV1().Deployments(p.Namespace).Get(ctx, dref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get deployment %s/%s: %w", p.Namespace, dref.Name, err)
	}
	return dep, nil
}

// workloadOf names the controller whose replacement the drain waits for.
func (d *Steps) workloadOf(ctx context.Context, p *corev1.Pod) (*Workload, error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return nil, nil
	}
	switch ref.Kind {
	case "ReplicaSet":
		dep, err := d.deploymentOf(ctx, p)
		if err != nil {
			return nil, err
		}
		if dep != nil {
			return &Workload{Kind: "Deployment", Namespace: p.Namespace, Name: dep.Name}, nil
		}
		return &Workload{Kind: "ReplicaSet", Namespace: p.Namespace, Name: ref.Name}, nil
	case "StatefulSet":
		return &Workload{Kind: "StatefulSet", Namespace: p.Namespace, Name: ref.Name}, nil
	}
	return nil, nil
}

// pdbBlocks reports whether a PDB covering the pod allows no disruption now.
func (d *Steps) pdbBlocks(ctx context.Context, p *corev1.Pod) (bool, error) {
	pdbs, err := d.Client.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list PDBs in %s: %w", p.Namespace, err)
	}
	for _, pdb := range pdbs.Items {
		// As policy/v1 reads it: an empty selector covers every pod of the
		// namespace, a null one none (LabelSelectorAsSelector gives Nothing).
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if pdb.Status.DisruptionsAllowed < 1 {
			return true, nil
		}
	}
	return false, nil
}

// SurgeStep replaces, before eviction, the pods whose eviction would leave
// their Deployment with no ready replica (one replica, or a PDB allowing no
// disruption): it raises the Deployment by the pods on this node, waits until
// the replacements are Ready elsewhere, gives the old pods the lowest
// deletion cost and restores the count, so the ReplicaSet itself removes the
// old pods. The original counts are in the drain record before anything
// changes. Called again until SurgeDone.
func (d *Steps) SurgeStep(ctx context.Context, s State) (State, error) {
	s.PastDeadline = !d.now().Before(s.Deadline)
	if !s.Surge {
		s.SurgeDone = true
		return s, nil
	}
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if err != nil {
		return s, err
	}
	if len(rec.Surged) == 0 && len(rec.NotSurged) == 0 && !s.SurgeDone {
		if rec.Surged, rec.NotSurged, err = d.surgeCandidates(ctx, s.Node); err != nil {
			return s, err
		}
		if len(rec.Surged) == 0 && len(rec.NotSurged) == 0 {
			s.SurgeDone = true
			return s, nil
		}
		// Recorded before any replica count changes, so a rollback after a
		// crash restores the right numbers.
		if err := d.Store.UpdateDrain(ctx, rec); err != nil {
			return s, err
		}
		for _, n := range rec.NotSurged {
			d.surgeLeft(ctx, s.Node, n.Namespace, n.Name, "not surged: "+n.Reason)
		}
	}
	err = d.settle(ctx, func() (bool, error) {
		if err := d.surgeRound(ctx, &rec, s.Node); err != nil {
			return false, err
		}
		return allRestored(rec.Surged), nil
	})
	if err != nil {
		return s, err
	}
	s.SurgeDone = allRestored(rec.Surged)
	return s, nil
}

// surgeRound moves each surged workload one phase on: grown by its delta,
// then (once its replacements are Ready elsewhere) old pods marked cheapest
// and the delta taken back off.
func (d *Steps) surgeRound(ctx context.Context, rec *state.DrainRecord, node string) error {
	for i := range rec.Surged {
		w := &rec.Surged[i]
		if w.Restored {
			continue
		}
		if err := d.grow(ctx, rec, i); err != nil {
			return err
		}
		want, err := d.replicas(ctx, w)
		if err != nil {
			return err
		}
		ready, err := d.readyElsewhere(ctx, w, node)
		if err != nil {
			return err
		}
		if ready < want-w.Delta {
			continue
		}
		for _, pod := range w.Pods {
			if err := d.annotatePod(ctx, w.Namespace, pod, DeletionCostAnnotation, strconv.Itoa(math.MinInt32)); err != nil {
				return err
			}
		}
		if err := d.shrink(ctx, rec, i); err != nil {
			return err
		}
	}
	return nil
}

func allRestored(ws []state.SurgedWorkload) bool {
	for _, w := range ws {
		if !w.Restored {
			return false
		}
	}
	return true
}

// surgeCandidates are the Deployments with pods on the node that cannot
// lose a pod without losing availability: those to surge, and those an HPA
// manages, which are not surged (see hpaFor).
func (d *Steps) surgeCandidates(ctx context.Context, node string) ([]state.SurgedWorkload, []state.NotSurged, error) {
	pods, err := d.podsOn(ctx, node)
	if err != nil {
		return nil, nil, err
	}
	byDep := map[types.NamespacedName]*state.SurgedWorkload{}
	notSurgedSeen := map[types.NamespacedName]bool{}
	var order []types.NamespacedName
	var notSurged []state.NotSurged
	hpas := map[string][]autoscalingv2.HorizontalPodAutoscaler{}
	for i := range pods {
		p := &pods[i]
		if !movable(p) || p.DeletionTimestamp != nil {
			continue
		}
		dep, err := d.deploymentOf(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		if dep == nil || dep.Spec.Replicas == nil {
			continue
		}
		key := types.NamespacedName{Namespace: dep.Namespace, Name: dep.Name}
		if w, ok := byDep[key]; ok {
			w.Pods = append(w.Pods, p.Name)
			continue
		}
		if notSurgedSeen[key] {
			continue
		}
		blocked := *dep.Spec.Replicas == 1
		if !blocked {
			if blocked, err = d.pdbBlocks(ctx, p); err != nil {
				return nil, nil, err
			}
		}
		if !blocked {
			continue
		}
		if _, listed := hpas[dep.Namespace]; !listed {
			if hpas[dep.Namespace], err = d.hpasIn(ctx, dep.Namespace); err != nil {
				return nil, nil, err
			}
		}
		if hpa := hpaFor(dep, hpas[dep.Namespace]); hpa != "" {
			notSurgedSeen[key] = true
			notSurged = append(notSurged, state.NotSurged{Namespace: dep.Namespace, Name: dep.Name,
				Reason: fmt.Sprintf("HorizontalPodAutoscaler %s sets its replicas; its pods are evicted under their PodDisruptionBudgets", hpa)})
			continue
		}
		byDep[key] = &state.SurgedWorkload{Namespace: dep.Namespace, Name: dep.Name, OriginalReplicas: *dep.Spec.Replicas, Pods: []string{p.Name}}
		order = append(order, key)
	}
	out := make([]state.SurgedWorkload, 0, len(order))
	for _, k := range order {
		w := byDep[k]
		w.Delta = int32(len(w.Pods))
		out = append(out, *w)
	}
	return out, notSurged, nil
}

// hpasIn lists the HorizontalPodAutoscalers of a namespace.
func (d *Steps) hpasIn(ctx context.Context, ns string) ([]autoscalingv2.HorizontalPodAutoscaler, error) {
	list, err := d.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list HorizontalPodAutoscalers in %s: %w", ns, err)
	}
	return list.Items, nil
}

// surgeLeft says, in the log and as an event on the Deployment, that the
// drain of node left its replica count as it found it.
func (d *Steps) surgeLeft(ctx context.Context, node, ns, name, why string) {
	d.log().Info("surge left replicas as found", "node", node, "deployment", ns+"/"+name, "why", why)
	d.Events.Record(ctx, kubeevents.Event{Object: kubeevents.Deployment(ns, name, ""), Type: corev1.EventTypeNormal,
		Reason: kubeevents.ReasonSurgeLeft, Message: fmt.Sprintf("drain of node %s: %s", node, why)})
}

func (d *Steps) replicas(ctx context.Context, w *state.SurgedWorkload) (int32, error) {
	scale, err := d.Client.AppsV1().Deployments(w.Namespace).GetScale(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("deployment %s/%s: get scale: %w", w.Namespace, w.Name, err)
	}
	return scale.Spec.Replicas, nil
}

// grow adds the workload's delta to its replicas once. What it is about to
// do (the count it read) is recorded before the write, which is conditioned
// on the resourceVersion read with the count; a retry after a crash or a
// lost answer then tells from the count whether the write happened: still
// the count read, not yet; that plus the delta, done. Any other count (a
// person changed it too) is taken as not grown, since one replica too many
// is better than one too few.
func (d *Steps) grow(ctx context.Context, rec *state.DrainRecord, i int) error {
	w := &rec.Surged[i]
	if w.Grown {
		return nil
	}
	deps := d.Client.AppsV1().Deployments(w.Namespace)
	for attempt := 0; ; attempt++ {
		scale, err := deps.GetScale(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("deployment %s/%s: get scale: %w", w.Namespace, w.Name, err)
		}
		if w.Growing && scale.Spec.Replicas == addReplicas(w.GrowFrom, w.Delta) {
			w.Grown = true
			return d.Store.UpdateDrain(ctx, *rec)
		}
		w.Growing, w.GrowFrom = true, scale.Spec.Replicas
		if err := d.Store.UpdateDrain(ctx, *rec); err != nil {
			return err
		}
		scale.Spec.Replicas = addReplicas(scale.Spec.Replicas, w.Delta)
		_, err = deps.UpdateScale(ctx, w.Name, scale, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue // refused: nothing changed
		}
		if err != nil {
			return fmt.Errorf("deployment %s/%s: grow by %d: %w", w.Namespace, w.Name, w.Delta, err)
		}
		w.Grown = true
		return d.Store.UpdateDrain(ctx, *rec)
	}
}

// shrink takes the surge back once: the count goes back to what grow found
// only while it is still the count grow wrote, by a write conditioned on the
// resourceVersion read with it (a conflict re-reads and decides again). Any
// other count is someone else's and is left, with why in the record, the
// log and an event (see decideRestore).
func (d *Steps) shrink(ctx context.Context, rec *state.DrainRecord, i int) error {
	w := &rec.Surged[i]
	if w.Restored {
		return nil
	}
	if !w.Grown {
		if err := d.settleGrow(ctx, rec, i); err != nil {
			return err
		}
		if !w.Grown {
			w.Restored = true
			return d.Store.UpdateDrain(ctx, *rec)
		}
	}
	deps := d.Client.AppsV1().Deployments(w.Namespace)
	for attempt := 0; ; attempt++ {
		scale, err := deps.GetScale(ctx, w.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			w.Restored = true
			return d.Store.UpdateDrain(ctx, *rec)
		}
		if err != nil {
			return fmt.Errorf("deployment %s/%s: get scale: %w", w.Namespace, w.Name, err)
		}
		dec := decideRestore(addReplicas(w.GrowFrom, w.Delta), w.Delta, scale.Spec.Replicas, w.Shrinking)
		if !dec.Write {
			w.Restored, w.Left = true, dec.Left
			if err := d.Store.UpdateDrain(ctx, *rec); err != nil {
				return err
			}
			if dec.Left != "" {
				d.surgeLeft(ctx, rec.Node, w.Namespace, w.Name, "not taken back: "+dec.Left)
			}
			return nil
		}
		w.Shrinking, w.ShrinkFrom = true, scale.Spec.Replicas
		if err := d.Store.UpdateDrain(ctx, *rec); err != nil {
			return err
		}
		scale.Spec.Replicas = dec.To
		_, err = deps.UpdateScale(ctx, w.Name, scale, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 5 {
			w.Shrinking = false // refused: nothing changed
			continue
		}
		if err != nil {
			return fmt.Errorf("deployment %s/%s: take back %d: %w", w.Namespace, w.Name, w.Delta, err)
		}
		w.Restored = true
		return d.Store.UpdateDrain(ctx, *rec)
	}
}

// settleGrow decides a grow in doubt (recorded as about to happen, not as
// done) without changing the Deployment.
func (d *Steps) settleGrow(ctx context.Context, rec *state.DrainRecord, i int) error {
	w := &rec.Surged[i]
	if w.Grown || !w.Growing {
		return nil
	}
	scale, err := d.Client.AppsV1().Deployments(w.Namespace).GetScale(ctx, w.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deployment %s/%s: get scale: %w", w.Namespace, w.Name, err)
	}
	if scale.Spec.Replicas == addReplicas(w.GrowFrom, w.Delta) {
		w.Grown = true
		return d.Store.UpdateDrain(ctx, *rec)
	}
	return nil
}

// addReplicas adds without wrapping past the largest replica count.
func addReplicas(n, delta int32) int32 {
	if delta > 0 && n > math.MaxInt32-delta {
		return math.MaxInt32
	}
	return n + delta
}

// readyElsewhere counts the Deployment's Ready pods off the node.
func (d *Steps) readyElsewhere(ctx context.Context, w *state.SurgedWorkload, node string) (int32, error) {
	dep, err := d.Client.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("get deployment %s/%s: %w", w.Namespace, w.Name, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return 0, fmt.Errorf("deployment %s/%s: selector: %w", w.Namespace, w.Name, err)
	}
	pods, err := d.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return 0, fmt.Errorf("list pods of deployment %s/%s: %w", w.Namespace, w.Name, err)
	}
	var n int32
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Spec.NodeName != node && p.DeletionTimestamp == nil && podReady(&p) {
			n++
		}
	}
	return n, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (d *Steps) annotatePod(ctx context.Context, ns, name, key, value string) error {
	var patch string
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, key)
	} else {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	}
	_, err := d.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotate pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// Evict asks the Eviction API to remove every movable pod; a PDB refusal
// (429) leaves the pod for the next round. Evicted is set when no movable
// pod is left on the node.
func (d *Steps) Evict(ctx context.Context, s State) (State, error) {
	err := d.settle(ctx, func() (bool, error) {
		refused, err := d.evictRound(ctx, &s)
		// Refused pods wait for the state machine's next round; pods on
		// their way out are worth a short wait here.
		return len(s.Remaining) == refused, err
	})
	if err != nil {
		return s, err
	}
	s.Evicted = len(s.Remaining) == 0
	s.PastDeadline = !d.now().Before(s.Deadline)
	if s.Evicted {
		return s, d.setPhase(ctx, s, state.PhaseEvicted)
	}
	return s, nil
}

// evictRound asks for the eviction of every movable pod on the node and
// returns how many a PodDisruptionBudget refused.
func (d *Steps) evictRound(ctx context.Context, s *State) (refused int, err error) {
	pods, err := d.podsOn(ctx, s.Node)
	if err != nil {
		return 0, err
	}
	s.Remaining = s.Remaining[:0]
	for i := range pods {
		p := &pods[i]
		if !movable(p) {
			continue
		}
		if err := d.noteWorkload(ctx, s, p); err != nil {
			return 0, err
		}
		s.Remaining = append(s.Remaining, p.Namespace+"/"+p.Name)
		if p.DeletionTimestamp != nil {
			continue // on its way out
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		err := d.Client.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			refused++
			d.log().Info("eviction refused for now", "node", s.Node, "pod", p.Namespace+"/"+p.Name, "reason", err.Error())
		default:
			return 0, fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return refused, nil
}

func (d *Steps) noteWorkload(ctx context.Context, s *State, p *corev1.Pod) error {
	w, err := d.workloadOf(ctx, p)
	if err != nil || w == nil {
		return err
	}
	if !slices.Contains(s.Workloads, *w) {
		s.Workloads = append(s.Workloads, *w)
	}
	return nil
}

// ForceDelete deletes the movable pods still on the node at the deadline
// (policy force), PodDisruptionBudgets notwithstanding.
func (d *Steps) ForceDelete(ctx context.Context, s State) (State, error) {
	// s carries the record's policy and deadline (see checked).
	if s.Policy != PolicyForce {
		return s, stepErr(ErrNameInvalidInput, "step ForceDelete: drain %s of node %s has policy %s, not force", s.DrainID, s.Node, s.Policy)
	}
	if d.now().Before(s.Deadline) {
		return s, stepErr(ErrNameInvalidInput, "step ForceDelete: drain %s of node %s is before its deadline %s", s.DrainID, s.Node, s.Deadline.Format(time.RFC3339))
	}
	// A surge that never got its replacements Ready gives way too: the
	// Deployment goes back to its recorded count.
	if err := d.restoreSurged(ctx, s); err != nil {
		return s, err
	}
	pods, err := d.podsOn(ctx, s.Node)
	if err != nil {
		return s, err
	}
	for i := range pods {
		p := &pods[i]
		if !movable(p) || p.DeletionTimestamp != nil {
			continue
		}
		if err := d.noteWorkload(ctx, &s, p); err != nil {
			return s, err
		}
		err := d.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return s, fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		d.log().Warn("pod deleted at the drain deadline (policy force)", "node", s.Node, "pod", p.Namespace+"/"+p.Name)
	}
	s.Remaining, s.Evicted = nil, true
	return s, d.setPhase(ctx, s, state.PhaseEvicted)
}

// WaitReplacements sets Replaced once every workload whose pods left the
// node is back at its desired ready replicas.
func (d *Steps) WaitReplacements(ctx context.Context, s State) (State, error) {
	err := d.settle(ctx, func() (bool, error) {
		s.Replaced = true
		for _, w := range s.Workloads {
			ok, err := d.workloadReady(ctx, w)
			if err != nil || !ok {
				s.Replaced = false
				return false, err
			}
		}
		return true, nil
	})
	s.PastDeadline = !d.now().Before(s.Deadline)
	return s, err
}

func (d *Steps) workloadReady(ctx context.Context, w Workload) (bool, error) {
	var want, ready int32
	var err error
	switch w.Kind {
	case "Deployment":
		var o *appsv1.Deployment
		if o, err = d.Client.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			want, ready = derefReplicas(o.Spec.Replicas), o.Status.ReadyReplicas
		}
	case "StatefulSet":
		var o *appsv1.StatefulSet
		if o, err = d.Client.AppsV1().StatefulSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			want, ready = derefReplicas(o.Spec.Replicas), o.Status.ReadyReplicas
		}
	case "ReplicaSet":
		var o *appsv1.ReplicaSet
		if o, err = d.Client.AppsV1().ReplicaSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			want, ready = derefReplicas(o.Spec.Replicas), o.Status.ReadyReplicas
		}
	default:
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		return true, nil // deleted meanwhile: nothing to wait for
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", w, err)
	}
	return ready >= want, nil
}

func derefReplicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// Terminate removes the machine through its provider, which lowers the
// group's target by one.
// The record must show the pods gone; the machine is the record's.
func (d *Steps) Terminate(ctx context.Context, s State) (State, error) {
	rec, err := d.needPhase(ctx, "Terminate", s, state.PhaseEvicted)
	if err != nil {
		return s, err
	}
	if rec.Phase == state.PhaseTerminated {
		s.Terminated = true
		return s, nil
	}
	g, err := d.group(ctx, rec.NodeGroup)
	if err != nil {
		return s, err
	}
	if err := d.setPhase(ctx, s, state.PhaseTerminating); err != nil {
		return s, err
	}
	in := rec.Interruption
	switch {
	case in != nil && in.Kind == state.InterruptLifecycle:
		// The Auto Scaling Group terminates the machine, and has already
		// lowered its desired capacity: it only waits for the hook. A
		// machine the group is not terminating after that (the action was
		// not the group's) keeps its node.
		if err = d.completeHook(ctx, in); err == nil {
			var gone bool
			if gone, err = d.machineGone(ctx, rec); err == nil && !gone {
				err = stepErr(ErrNameFailed, "machine %s of node %s is not terminating after its lifecycle action completed: the action was not its group's", in.InstanceID, s.Node)
			}
		}
	case in.Terminal():
		// EC2 reclaims it anyway; removing it now through the group lowers
		// the target the replacement raised. At the provider's own
		// minimum the group keeps its size and replaces it itself.
		err = providers.DeleteBelowMin(ctx, g, rec.ProviderID)
		if errors.Is(err, providers.ErrBelowMin) {
			d.log().Info("interrupted machine left to the cloud: its group is at its minimum", "node", s.Node, "providerID", rec.ProviderID)
			err = nil
		}
	case rec.BelowMin:
		// Prepare allowed going below nodetide's minimum: the provider's
		// own minimum is the one left to keep.
		err = providers.DeleteBelowMin(ctx, g, rec.ProviderID)
	default:
		err = g.DeleteInstance(ctx, rec.ProviderID)
	}
	switch {
	case errors.Is(err, providers.ErrUnknownInstance):
		// Prepare found the machine in this group: a cloud that no longer
		// knows it has terminated it already (a retried Terminate).
		d.log().Info("machine already gone", "node", s.Node, "providerID", s.ProviderID)
	case err != nil:
		return s, fmt.Errorf("node group %s: terminate %s: %w", s.NodeGroup, s.ProviderID, err)
	}
	s.Terminated = true
	return s, d.setPhase(ctx, s, state.PhaseTerminated)
}

// RemoveNode deletes the Node object if it is still there (clusters without
// a cloud controller manager keep it); only once its machine is gone.
func (d *Steps) RemoveNode(ctx context.Context, s State) (State, error) {
	if _, err := d.needPhase(ctx, "RemoveNode", s, state.PhaseTerminated); err != nil {
		return s, err
	}
	err := d.Client.CoreV1().Nodes().Delete(ctx, s.Node, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return s, fmt.Errorf("delete node %s: %w", s.Node, err)
	}
	return s, nil
}

// Finish records success and frees the node's drain mark; a surge still
// raised is taken back first.
func (d *Steps) Finish(ctx context.Context, s State) (State, error) {
	rec, err := d.needPhase(ctx, "Finish", s, state.PhaseTerminated)
	if err != nil {
		return s, err
	}
	if err := d.restoreSurged(ctx, s); err != nil {
		return s, err
	}
	if err := d.Store.EndDrain(ctx, s.Node, s.DrainID, state.DrainSucceeded, "", d.now()); err != nil {
		return s, err
	}
	d.nodeEvent(ctx, s.Node, corev1.EventTypeNormal, kubeevents.ReasonScaleDown,
		fmt.Sprintf("node removed: drain %s completed, machine %s terminated", s.DrainID, s.ProviderID))
	d.recordEnd(ctx, rec, true)
	return s, nil
}

// recordEnd publishes a drain's end: succeeded (its node removed) or
// rolled back, and how long it took.
func (d *Steps) recordEnd(ctx context.Context, rec state.DrainRecord, removed bool) {
	m := metrics.From(ctx)
	if removed {
		m.Add(metrics.DrainsSucceeded, 1, nil)
		m.Add(metrics.NodesRemoved, 1, nil)
	} else {
		m.Add(metrics.DrainsRolledBack, 1, nil)
	}
	if !rec.StartedAt.IsZero() {
		m.Observe(metrics.DrainDuration, metrics.Seconds, d.now().Sub(rec.StartedAt).Seconds(), nil)
	}
}

// rejected tells a Prepare refusal (the drain never began, nothing
// changed) from a failure.
func rejected(err error) bool {
	switch ErrorName(err) {
	case ErrNameNodeNotFound, ErrNameNotManaged, ErrNameAlreadyDraining, ErrNameBelowMinSize, ErrNameNotDisruptable, ErrNameForbidden:
		return true
	}
	return false
}

// restoreSurged takes back the delta of every surged Deployment not yet
// restored.
func (d *Steps) restoreSurged(ctx context.Context, s State) error {
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if errors.Is(err, state.ErrNoDrain) {
		return nil
	}
	if err != nil {
		return err
	}
	for i := range rec.Surged {
		if err := d.shrink(ctx, &rec, i); err != nil {
			return err
		}
	}
	return nil
}

// Rollback undoes what the drain did (see undo) and records the failure;
// a drain whose Terminate already reached the cloud is completed instead
// (see end).
func (d *Steps) Rollback(ctx context.Context, s State) (State, error) {
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if err != nil {
		return s, err
	}
	cause := "rolled back"
	if s.Error != nil {
		cause = s.Error.Error + ": " + s.Error.Cause
	}
	completed, err := d.end(ctx, rec, cause)
	if completed && err == nil {
		d.log().Warn("drain failed after its machine was terminated: the removal was completed instead of rolled back", "node", s.Node, "drainId", s.DrainID, "cause", cause)
	}
	if err == nil {
		d.recordEnd(ctx, rec, completed)
	}
	return s, err
}

// undo puts back what a drain changed, from its record alone (the
// execution's state may be lost): the taint goes, the node is uncordoned
// unless it was cordoned before the drain, surged Deployments lose the
// drain's delta, old pods lose their deletion cost; then the drain ends as
// rolled back, freeing the node and its claim on the group.
func (d *Steps) undo(ctx context.Context, rec state.DrainRecord, cause string) error {
	var errs []error
	var err error
	switch {
	case rec.Interruption.Terminal():
		// The machine goes anyway: no pod should land on it meanwhile.
	case rec.WasUnschedulable:
		err = k8s.RemoveTaint(ctx, d.Client, rec.Node, TaintKey)
	default:
		err = k8s.Uncordon(ctx, d.Client, rec.Node, TaintKey)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	for i := range rec.Surged {
		if err := d.shrink(ctx, &rec, i); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
		w := rec.Surged[i]
		for _, pod := range w.Pods {
			if err := d.annotatePod(ctx, w.Namespace, pod, DeletionCostAnnotation, ""); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return &StepError{Name: ErrNameTransient, Err: fmt.Errorf("rollback of drain %s: %w", rec.ID, errors.Join(errs...))}
	}
	if err := d.Store.EndDrain(ctx, rec.Node, rec.ID, state.DrainRolledBack, cause, d.now()); err != nil {
		return err
	}
	d.log().Warn("drain rolled back", "node", rec.Node, "drainId", rec.ID, "cause", cause)
	left := "node schedulable again"
	if rec.WasUnschedulable {
		left = "node left cordoned, as it was before the drain"
	}
	d.nodeEvent(ctx, rec.Node, corev1.EventTypeWarning, kubeevents.ReasonDrainRolledBack,
		fmt.Sprintf("drain %s rolled back, %s: %s", rec.ID, left, cause))
	return nil
}
