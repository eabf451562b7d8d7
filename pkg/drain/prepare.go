package drain

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

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
