package state

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Memory is a Store held in this process, for local runs and unit tests. It
// follows the DynamoDB store's rules (conflicts, lease expiry in whole
// seconds) so code tested against it behaves the same in AWS. It is safe for
// concurrent use.
type Memory struct {
	cluster string

	mu     sync.Mutex
	state  snapshot.State
	leases map[string]Lease
	// statuses are the STATUS# documents, by writer.
	statuses map[string][]byte
	// prices are the PRICE# items (prices.go).
	prices map[PriceKey]Price

	drainOnce  sync.Once
	drainState *memDrains
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty store for one cluster.
func NewMemory(cluster string) *Memory {
	return &Memory{cluster: cluster, state: emptyState(), leases: map[string]Lease{}}
}

// LoadState returns a copy of the stored State.
func (m *Memory) LoadState(ctx context.Context) (snapshot.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state.Normal(), nil
}

// SaveState applies the differences between prev and next, item by item,
// like the DynamoDB store.
func (m *Memory) SaveState(ctx context.Context, prev, next snapshot.State) error {
	// Checked before anything is written: an invalid replacement changes
	// nothing.
	replacing, err := diffReplacing(prev, next)
	if err != nil {
		return fmt.Errorf("save state of cluster %q: %w", m.cluster, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var conflicts []string
	for _, c := range diff(prev, next) {
		if !m.matches(c) {
			conflicts = append(conflicts, c.sk())
			continue
		}
		for _, f := range c.fields {
			if f.next.ok {
				m.field(f.attr)[c.name] = f.next.t.UTC()
			} else {
				delete(m.field(f.attr), c.name)
			}
		}
	}
	more, err := m.saveReplacing(replacing)
	if err != nil {
		return fmt.Errorf("save state of cluster %q: %w", m.cluster, err)
	}
	if conflicts = append(conflicts, more...); len(conflicts) > 0 {
		return conflictError(m.cluster, conflicts)
	}
	return nil
}

// matches reports whether every field c writes still holds prev's or
// already next's value: the condition the DynamoDB store puts on its write.
func (m *Memory) matches(c itemChange) bool {
	for _, f := range c.fields {
		cur := lookup(m.field(f.attr), c.name)
		if !cur.equal(f.prev) && !cur.equal(f.next) {
			return false
		}
	}
	return true
}

// field returns the map holding an attribute's values.
func (m *Memory) field(attr string) map[string]time.Time {
	switch attr {
	case attrLastScaleUp:
		return m.state.LastScaleUp
	case attrBackoffUntil:
		return m.state.BackoffUntil
	case attrUnneededSince:
		return m.state.UnneededSince
	}
	panic(fmt.Sprintf("state: unknown attribute %q", attr)) // only diff's attributes reach here
}

// AcquireLease takes or extends the named lease (see Store).
func (m *Memory) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (Lease, error) {
	if err := checkLeaseArgs(name, holder, ttl); err != nil {
		return Lease{}, fmt.Errorf("acquire lease: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.leases[name]; ok && cur.Holder != holder && !cur.ExpiresAt.Before(now) {
		return Lease{}, leaseHeldError(name, holder, cur)
	}
	l := Lease{Name: name, Holder: holder, ExpiresAt: leaseExpiry(now, ttl)}
	m.leases[name] = l
	return l, nil
}

// ReleaseLease drops the lease if l.Holder still has it (see Store).
func (m *Memory) ReleaseLease(ctx context.Context, l Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.leases[l.Name]; ok && cur.Holder == l.Holder {
		delete(m.leases, l.Name)
	}
	return nil
}
