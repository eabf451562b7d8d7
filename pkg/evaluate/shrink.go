package evaluate

import (
	"context"
	"fmt"
	"time"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/state"
)

// shrinkLeaseWait bounds how long Shrink waits for a running evaluate cycle
// (a few seconds at most; a watch holds the lease only while it runs one).
const shrinkLeaseWait = 30 * time.Second

// Shrink brings groups down to the given sizes now (a schedule firing; see
// planner.Shrink for which nodes go): it takes the evaluate lease, so no
// cycle picks nodes at the same time, reads, and carries out and saves
// what the planner decides.
func (e *Evaluator) Shrink(ctx context.Context, sizes map[string]int, from string) (Result, error) {
	if e.Shadow {
		// A schedule's removals are drains like a cycle's: none in shadow.
		return Result{Actions: []Action{}}, fmt.Errorf("shrink (%s): %w", from, ErrShadow)
	}
	lease, err := e.acquireWaiting(ctx, shrinkLeaseWait)
	if err != nil {
		return Result{Actions: []Action{}}, fmt.Errorf("shrink: %w", err)
	}
	defer e.release(lease)

	snap, groups, err := e.Snapshot(ctx)
	if err != nil {
		return Result{Actions: []Action{}}, fmt.Errorf("shrink: %w", err)
	}
	plan, err := planner.Shrink(snap, e.Settings, snap.CapturedAt, sizes, from)
	if err != nil {
		return Result{Actions: []Action{}}, err
	}
	e.log().Info("shrink plan", "from", from, "sizes", sizes, "plan", plan)
	next := plan.State
	actions := e.act(ctx, plan, groups, snap, &next)
	recordActions(ctx, actions)
	if err := e.Store.SaveState(ctx, snap.State, next); err != nil {
		e.log().Warn("shrink: save state", "error", err.Error())
	}
	return Result{Plan: &plan, Actions: actions}, nil
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
