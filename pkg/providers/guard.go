package providers

import (
	"context"
	"fmt"
)

// Guard serialises the writers of one node group's size across processes
// (evaluate, add, schedules, drains run in different functions) and counts
// the drains in flight, which will each lower the group by one.
type Guard interface {
	// LockGroup holds the group until unlock is called.
	LockGroup(ctx context.Context, group string) (unlock func(), err error)
	// DrainsInFlight is how many of the group's nodes drains hold.
	DrainsInFlight(ctx context.Context, group string) (int, error)
}

// Guarded makes every size change of g happen under the guard's lock, so
// the bounds checks of the groups inside (see Narrow) read a target no
// other writer is changing; lowering the target also keeps room for the
// drains in flight above the minimum.
func Guarded(g NodeGroup, guard Guard) NodeGroup {
	return &guarded{NodeGroup: g, guard: guard}
}

type guarded struct {
	NodeGroup
	guard Guard
}

func (g *guarded) locked(ctx context.Context, fn func() error) error {
	unlock, err := g.guard.LockGroup(ctx, g.Name())
	if err != nil {
		return fmt.Errorf("node group %s: %w", g.Name(), err)
	}
	defer unlock()
	return fn()
}

func (g *guarded) IncreaseSize(ctx context.Context, delta int) error {
	return g.locked(ctx, func() error { return g.NodeGroup.IncreaseSize(ctx, delta) })
}

func (g *guarded) DeleteInstance(ctx context.Context, providerID string) error {
	return g.locked(ctx, func() error { return g.NodeGroup.DeleteInstance(ctx, providerID) })
}

func (g *guarded) DecreaseTargetSize(ctx context.Context, delta int) error {
	return g.locked(ctx, func() error {
		draining, err := g.guard.DrainsInFlight(ctx, g.Name())
		if err != nil {
			return fmt.Errorf("node group %s: %w", g.Name(), err)
		}
		target, err := g.TargetSize(ctx)
		if err != nil {
			return fmt.Errorf("node group %s: target size: %w", g.Name(), err)
		}
		if minSize := g.Bounds().Min; target+delta-draining < minSize {
			return fmt.Errorf("node group %s: size %d %+d with %d draining: %w (%d)", g.Name(), target, delta, draining, ErrBelowMin, minSize)
		}
		return g.NodeGroup.DecreaseTargetSize(ctx, delta)
	})
}

// GrowTo raises g's target to want (nothing when it is there already),
// computed from the target read under g's lock when g is guarded, so
// concurrent callers asking for the same size grow it once. It returns the
// target it found.
func GrowTo(ctx context.Context, g NodeGroup, want int) (from int, err error) {
	inner, run := g, func(fn func() error) error { return fn() }
	if gg, ok := g.(*guarded); ok {
		inner, run = gg.NodeGroup, func(fn func() error) error { return gg.locked(ctx, fn) }
	}
	err = run(func() error {
		from, err = inner.TargetSize(ctx)
		if err != nil {
			return fmt.Errorf("node group %s: target size: %w", g.Name(), err)
		}
		if want <= from {
			return nil
		}
		if maxSize := inner.Bounds().Max; want > maxSize {
			return fmt.Errorf("node group %s: size %d: %w (%d)", g.Name(), want, ErrAboveMax, maxSize)
		}
		return inner.IncreaseSize(ctx, want-from)
	})
	return from, err
}

// DeleteBelowMin removes a machine past nodetide's own narrowing of the
// group (a drain asked to go below its minimum), keeping only the minimum
// the provider itself enforces, under g's lock when g is guarded.
func DeleteBelowMin(ctx context.Context, g NodeGroup, providerID string) error {
	if gg, ok := g.(*guarded); ok {
		return gg.locked(ctx, func() error { return Own(gg.NodeGroup).DeleteInstance(ctx, providerID) })
	}
	return Own(g).DeleteInstance(ctx, providerID)
}

// Unwrap returns the group inside, for Own.
func (g *guarded) Unwrap() NodeGroup { return g.NodeGroup }
