package drain

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// removal is how Terminate removes a drain's machine.
type removal int

const (
	// removalDone: the record shows the machine terminated (a retried
	// Terminate): nothing is left to do.
	removalDone removal = iota
	// removalHook: the Auto Scaling Group terminates the machine and has
	// already lowered its desired capacity; it only waits for the
	// lifecycle hook, whose action is completed.
	removalHook
	// removalInterrupted: EC2 reclaims the machine anyway; removing it now
	// through the group lowers the target the replacement raised, down to
	// the provider's own minimum, at which it is left to the cloud.
	removalInterrupted
	// removalBelowMin: Prepare allowed going below nodetide's minimum:
	// through the group, keeping only the provider's own minimum.
	removalBelowMin
	// removalInGroup: through the group, within its effective minimum.
	removalInGroup
)

// removalOf decides how Terminate removes the record's machine.
func removalOf(rec state.DrainRecord) removal {
	in := rec.Interruption
	switch {
	case rec.Phase == state.PhaseTerminated:
		return removalDone
	case in != nil && in.Kind == state.InterruptLifecycle:
		return removalHook
	case in.Terminal():
		return removalInterrupted
	case rec.BelowMin:
		return removalBelowMin
	}
	return removalInGroup
}

// terminate removes the machine through its provider, which lowers the
// group's target by one.
// The record shows the pods gone (need); the machine is the record's.
func (d *Steps) terminate(ctx context.Context, s State, rec state.DrainRecord) (State, error) {
	way := removalOf(rec)
	if way == removalDone {
		s.Terminated = true
		return s, nil
	}
	g, err := d.group(ctx, rec.NodeGroup)
	if err != nil {
		return s, err
	}
	if err := d.advance(ctx, &rec, state.PhaseTerminating); err != nil {
		return s, err
	}
	err = d.remove(ctx, way, g, rec)
	switch {
	case errors.Is(err, providers.ErrUnknownInstance):
		// Prepare found the machine in this group: a cloud that no longer
		// knows it has terminated it already (a retried Terminate).
		d.log().Info("machine already gone", "node", s.Node, "providerID", s.ProviderID)
	case err != nil:
		return s, fmt.Errorf("node group %s: terminate %s: %w", s.NodeGroup, s.ProviderID, err)
	}
	s.Terminated = true
	return s, d.advance(ctx, &rec, state.PhaseTerminated)
}

// remove removes rec's machine of group g the way removalOf decided.
func (d *Steps) remove(ctx context.Context, way removal, g providers.NodeGroup, rec state.DrainRecord) error {
	switch way {
	case removalHook:
		// A machine the group is not terminating once the action is
		// completed (the action was not the group's) keeps its node.
		in := rec.Interruption
		if err := d.completeHook(ctx, in); err != nil {
			return err
		}
		gone, err := d.machineGone(ctx, rec)
		if err == nil && !gone {
			err = stepErr(ErrNameFailed, "machine %s of node %s is not terminating after its lifecycle action completed: the action was not its group's", in.InstanceID, rec.Node)
		}
		return err
	case removalInterrupted:
		err := providers.DeleteBelowMin(ctx, g, rec.ProviderID)
		if errors.Is(err, providers.ErrBelowMin) {
			d.log().Info("interrupted machine left to the cloud: its group is at its minimum", "node", rec.Node, "providerID", rec.ProviderID)
			return nil
		}
		return err
	case removalBelowMin:
		return providers.DeleteBelowMin(ctx, g, rec.ProviderID)
	case removalInGroup:
		return g.DeleteInstance(ctx, rec.ProviderID)
	}
	return nil
}

// removeNode deletes the Node object if it is still there (clusters without
// a cloud controller manager keep it); only once its machine is gone (need).
func (d *Steps) removeNode(ctx context.Context, s State, _ state.DrainRecord) (State, error) {
	err := d.Client.CoreV1().Nodes().Delete(ctx, s.Node, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return s, fmt.Errorf("delete node %s: %w", s.Node, err)
	}
	return s, nil
}

// finish records success and frees the node's drain mark; a surge still
// raised is taken back first.
func (d *Steps) finish(ctx context.Context, s State, rec state.DrainRecord) (State, error) {
	if err := d.restoreSurged(ctx, &rec); err != nil {
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
