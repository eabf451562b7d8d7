package drain

import (
	"context"
	"fmt"

	"github.com/nodetide/nodetide/pkg/providers"
)

// checkOwnMin decides up front whether a belowMin removal can complete:
// it may take the group below nodetide's minimum (config, a schedule),
// never below the one the provider itself enforces, which would refuse the
// termination after the pods had moved.
func (d *Steps) checkOwnMin(ctx context.Context, g providers.NodeGroup, node string) error {
	own := providers.Own(g)
	// Drains first, then the target (see checkMin).
	draining, err := d.drainingIn(ctx, g, node)
	if err != nil {
		return err
	}
	target, err := own.TargetSize(ctx)
	if err != nil {
		return fmt.Errorf("node group %s: target size: %w", g.Name(), err)
	}
	if left, minSize := target-draining-1, own.Bounds().Min; left < minSize {
		return stepErr(ErrNameBelowMinSize, "removing node %s would leave node group %s with %d nodes (target %d, %d already draining), below the minimum its provider (%s) enforces, %d, which belowMin does not override",
			node, g.Name(), left, target, draining, own.Provider(), minSize)
	}
	return nil
}
