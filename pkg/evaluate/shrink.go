package evaluate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/state"
)

// shrinkLeaseWait bounds how long Shrink waits for a running evaluate cycle
// (a few seconds at most; a watch holds the lease only while it runs one).
const shrinkLeaseWait = 30 * time.Second

// Shrink brings groups down to the given sizes now (a schedule firing): it
// takes the evaluate lease, so no cycle picks nodes at the same time, caps
// each group's max at its size for this decision, and carries out only
// those groups' removals, which the planner's schedule-cap rule chooses:
// unregistered capacity first, then the emptiest nodes that may be
// disrupted, each through a drain. A size below a group's min stops at the
// min.
func (e *Evaluator) Shrink(ctx context.Context, sizes map[string]int, from string) (Result, error) {
	lease, err := e.acquireWaiting(ctx, shrinkLeaseWait)
	if err != nil {
		return Result{Actions: []Action{}}, fmt.Errorf("shrink: %w", err)
	}
	defer e.release(lease)

	snap, groups, err := e.Snapshot(ctx)
	if err != nil {
		return Result{Actions: []Action{}}, fmt.Errorf("shrink: %w", err)
	}
	known := map[string]bool{}
	for i := range snap.NodeGroups {
		g := &snap.NodeGroups[i]
		size, ok := sizes[g.Name]
		if !ok {
			continue
		}
		known[g.Name] = true
		if size = max(size, g.MinSize); size < g.MaxSize {
			g.MaxSize, g.BoundsFrom = size, from
		}
	}
	for name := range sizes {
		if !known[name] {
			return Result{Actions: []Action{}}, fmt.Errorf("shrink: unknown node group %q", name)
		}
	}
	plan := planner.Decide(snap, e.Settings, snap.CapturedAt)
	mine := func(group string) bool { _, ok := sizes[group]; return ok }
	only := planner.Plan{
		ScaleUp:        []planner.ScaleUp{},
		ScaleDown:      slices.DeleteFunc(plan.ScaleDown, func(d planner.ScaleDown) bool { return !mine(d.NodeGroup) }),
		DecreaseTarget: slices.DeleteFunc(plan.DecreaseTarget, func(d planner.DecreaseTarget) bool { return !mine(d.NodeGroup) }),
		Unschedulable:  []planner.Unschedulable{},
		NodeGroups:     plan.NodeGroups,
	}
	e.log().Info("shrink plan", "from", from, "sizes", sizes, "plan", only)
	// Only the chosen nodes' times are kept (the rest of the plan, such as
	// other groups' scale-ups, is not acted on here). They name the drains:
	// saved, the next cycle derives the same names and cannot start a
	// second drain of a node before its first one cordons it.
	next := copyState(snap.State)
	for _, d := range only.ScaleDown {
		next.UnneededSince[d.Node] = plan.State.UnneededSince[d.Node]
	}
	only.State = next
	actions := e.act(ctx, only, groups, snap, &next)
	recordActions(ctx, actions)
	if err := e.Store.SaveState(ctx, snap.State, next); err != nil {
		e.log().Warn("shrink: save state", "error", err.Error())
	}
	return Result{Plan: &only, Actions: actions}, nil
}

// acquireWaiting takes the evaluate lease, waiting up to wait for a
// running cycle to release it.
func (e *Evaluator) acquireWaiting(ctx context.Context, wait time.Duration) (state.Lease, error) {
	deadline := time.Now().Add(wait)
	for {
		lease, skipped, err := e.acquire(ctx)
		if err != nil {
			return state.Lease{}, err
		}
		if skipped == "" {
			return lease, nil
		}
		if time.Now().After(deadline) {
			return state.Lease{}, fmt.Errorf("%s (waited %s)", skipped, wait)
		}
		select {
		case <-ctx.Done():
			return state.Lease{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
