package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Leaser takes and gives back named leases; every Store is one.
type Leaser interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (Lease, error)
	ReleaseLease(ctx context.Context, l Lease) error
}

// Group lock timings: the lease outlives any one holder's read-decide-write
// of a group's size (a provider call is bounded well below it), and a writer
// waits for another's turn rather than failing at once.
const (
	GroupLockTTL  = 2 * time.Minute
	GroupLockWait = 45 * time.Second
)

// GroupLockName is the lease that serialises every writer of one node
// group's size: evaluate's scale-ups and give-backs, add, schedules, and the
// drain's claim against the group's minimum.
func GroupLockName(group string) string { return "group/" + group }

// GroupLock is a held group lock; Unlock gives it back.
type GroupLock struct {
	leaser Leaser
	lease  Lease
}

// Unlock releases the lock. It uses its own short context so that a caller
// whose context has ended still frees the group at once instead of after
// GroupLockTTL.
//
// A release whose answer is lost is tried again: releasing a lease that is
// gone already is no error.
func (g *GroupLock) Unlock() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for range 3 {
		if err = g.leaser.ReleaseLease(ctx, g.lease); err == nil {
			return nil
		}
	}
	return err
}

// LockGroup takes the group's lock for holder, waiting up to wait while
// another holder has it. Each call gets a holder of its own (holder plus a
// random suffix): two concurrent callers in one process must not share a
// lease the way a re-acquiring holder would.
func LockGroup(ctx context.Context, l Leaser, group, holder string, wait time.Duration, now func() time.Time) (*GroupLock, error) {
	if now == nil {
		now = time.Now
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("lock node group %s: %w", group, err)
	}
	unique := holder + "/" + hex.EncodeToString(b)
	name := GroupLockName(group)
	deadline := time.Now().Add(wait)
	pause := 50 * time.Millisecond
	failures := 0
	for {
		lease, err := l.AcquireLease(ctx, name, unique, GroupLockTTL, now())
		if err == nil {
			return &GroupLock{leaser: l, lease: lease}, nil
		}
		if !errors.Is(err, ErrLeaseHeld) {
			// The write may have landed with its answer lost: the same
			// holder asking again gets the lease it already has.
			if failures++; failures > 3 {
				return nil, fmt.Errorf("lock node group %s: %w", group, err)
			}
		} else if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("lock node group %s: %w", group, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lock node group %s: %w", group, ctx.Err())
		case <-time.After(pause):
		}
		if pause < time.Second {
			pause *= 2
		}
	}
}

// GroupGuard is the providers.Guard of a state table: group locks are
// leases, drains in flight are the drain marks.
type GroupGuard struct {
	Store interface {
		Leaser
		DrainStore
	}
	// Holder names this process in the leases.
	Holder string
}

// LockGroup implements providers.Guard.
func (g GroupGuard) LockGroup(ctx context.Context, group string) (func(), error) {
	lock, err := LockGroup(ctx, g.Store, group, g.Holder, GroupLockWait, nil)
	if err != nil {
		return nil, err
	}
	return func() { _ = lock.Unlock() }, nil
}

// DrainsInFlight implements providers.Guard.
func (g GroupGuard) DrainsInFlight(ctx context.Context, group string) (int, error) {
	running, err := g.Store.RunningDrains(ctx)
	if err != nil {
		return 0, fmt.Errorf("drains in flight: %w", err)
	}
	n := 0
	for _, r := range running {
		if r.NodeGroup == group {
			n++
		}
	}
	return n, nil
}
