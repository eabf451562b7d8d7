package drain

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodetide/nodetide/pkg/state"
)

// releaseHook completes the lifecycle action of a drain Prepare refused
// because there is nothing it may drain (no node has the machine any more,
// or it is in no managed group), so the machine need not wait for the
// hook's timeout. It checks that again itself: a step event made by hand
// cannot release a machine whose node nodetide would drain, nor one of a
// hook or group this deployment does not manage, nor one its group does
// not own.
func (d *Steps) releaseHook(ctx context.Context, s State) (State, error) {
	in := s.Interruption
	if in == nil || in.Kind != state.InterruptLifecycle {
		return s, stepErr(ErrNameInvalidInput, "step ReleaseHook: drain %s of node %s carries no lifecycle action", s.DrainID, s.Node)
	}
	if _, err := d.Store.GetDrain(ctx, s.Node, s.DrainID); err == nil {
		return s, stepErr(ErrNameInvalidInput, "step ReleaseHook: drain %s of node %s was prepared: its own steps complete the action", s.DrainID, s.Node)
	} else if !errors.Is(err, state.ErrNoDrain) {
		return s, err
	}
	// Only an action of this deployment's hook and groups, for a machine
	// its group owns.
	if _, _, err := d.lifecycleOwner(ctx, in); err != nil {
		return s, fmt.Errorf("step ReleaseHook: %w", err)
	}
	node, err := d.nodeOfInstance(ctx, in.InstanceID)
	if err != nil {
		return s, err
	}
	if node != nil {
		g, err := d.groupOf(ctx, node.Spec.ProviderID)
		if err != nil {
			return s, err
		}
		if g != nil {
			return s, stepErr(ErrNameInvalidInput, "step ReleaseHook: machine %s is node %s of managed group %s: its drain completes the action", in.InstanceID, node.Name, g.Name())
		}
	}
	return s, d.completeHook(ctx, in)
}
