package drain

import (
	"context"
	"errors"

	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/state"
)

// cordon makes the node unschedulable and taints it as draining.
//
// A Cordon whose invocation outlived its task timeout may land after the
// drain has ended (rolled back or recovered); it then undoes itself, so no
// node is left cordoned without a drain.
func (d *Steps) cordon(ctx context.Context, s State, _ state.DrainRecord) (State, error) {
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
