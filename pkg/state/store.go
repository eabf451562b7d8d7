// Package state keeps what nodetide remembers between runs of its functions:
// the planner's State (when nodes became unneeded, when groups last grew or
// are backed off until) and the leases that keep two runs of one function
// from acting at once.
//
// The DynamoDB layout is one table for any number of clusters: pk is
// CLUSTER#<cluster>, sk is GROUP#<group>, NODE#<node>, REPLACE#<id> or LEASE#<function>
// (SCHEDULE#, DRAIN#, STATUS# and PRICE# items share the table). Every change is a
// single-item conditional write: no transactions, no PartiQL, and nothing
// depends on TTL expiry, so the same code runs against dynalite.
package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Store keeps what the planner remembers between runs (snapshot.State:
// unneededSince per node, lastScaleUp and backoffUntil per group) and the
// leases that keep two runs of a function from acting at once.
type Store interface {
	// LoadState returns the stored State; its maps are never nil.
	LoadState(ctx context.Context) (snapshot.State, error)
	// SaveState writes only what differs between prev (what was loaded)
	// and next. Each changed item is written only if its stored value is
	// still prev's (or already next's, so a retry succeeds); items changed
	// meanwhile by someone else are left alone and reported with
	// ErrConflict after the other items are written.
	SaveState(ctx context.Context, prev, next snapshot.State) error
	// AcquireLease takes the named lease for holder until now+ttl (rounded
	// up to a whole second). It fails with ErrLeaseHeld while another
	// holder's lease has not expired; the same holder re-acquiring extends
	// its lease.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (Lease, error)
	// ReleaseLease gives the lease up if l's holder still has it. A lease
	// another holder has taken over meanwhile is left as it is, without
	// error.
	ReleaseLease(ctx context.Context, l Lease) error
}

// Lease is one function's claim to act alone until ExpiresAt.
type Lease struct {
	Name      string
	Holder    string
	ExpiresAt time.Time
}

var (
	// ErrLeaseHeld means another holder has the lease and it has not
	// expired; the wrapping error names that holder and the expiry.
	ErrLeaseHeld = errors.New("lease held by another holder")
	// ErrConflict means a stored item changed between LoadState and
	// SaveState; the wrapping error names the items.
	ErrConflict = errors.New("state changed since it was loaded")
	// ErrNoTable means the state table does not exist: nothing was deployed
	// yet, or the config names another table.
	ErrNoTable = errors.New("the state table does not exist")
)

// Sort-key prefixes of the item kinds this package owns.
const (
	groupPrefix = "GROUP#"
	nodePrefix  = "NODE#"
	leasePrefix = "LEASE#"
)

// Attribute names of the items, shared by both implementations so their
// conflict messages read the same.
const (
	attrLastScaleUp   = "lastScaleUp"
	attrBackoffUntil  = "backoffUntil"
	attrUnneededSince = "unneededSince"
	attrVersion       = "version"
	attrHolder        = "holder"
	attrExpiresAt     = "expiresAt"
)

func clusterKey(cluster string) string { return "CLUSTER#" + cluster }

// optTime is a stored time that may be absent.
type optTime struct {
	t  time.Time
	ok bool
}

func lookup(m map[string]time.Time, k string) optTime {
	t, ok := m[k]
	return optTime{t: t, ok: ok}
}

func (o optTime) equal(p optTime) bool {
	return o.ok == p.ok && (!o.ok || o.t.Equal(p.t))
}

// fieldChange is one attribute of one item going from prev to next.
type fieldChange struct {
	attr       string
	prev, next optTime
}

// itemChange is what SaveState writes to one item, the one whose sort key is
// prefix+name.
type itemChange struct {
	prefix, name string
	fields       []fieldChange
}

func (c itemChange) sk() string { return c.prefix + c.name }

// diff lists the items whose times differ between prev and next, groups
// first, each kind sorted by name so writes happen in a stable order.
func diff(prev, next snapshot.State) []itemChange {
	var changes []itemChange
	groups := map[string]bool{}
	for _, m := range []map[string]time.Time{prev.LastScaleUp, next.LastScaleUp, prev.BackoffUntil, next.BackoffUntil} {
		for g := range m {
			groups[g] = true
		}
	}
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		c := itemChange{prefix: groupPrefix, name: g}
		for _, f := range []struct {
			attr       string
			prev, next map[string]time.Time
		}{
			{attrLastScaleUp, prev.LastScaleUp, next.LastScaleUp},
			{attrBackoffUntil, prev.BackoffUntil, next.BackoffUntil},
		} {
			p, n := lookup(f.prev, g), lookup(f.next, g)
			if !p.equal(n) {
				c.fields = append(c.fields, fieldChange{attr: f.attr, prev: p, next: n})
			}
		}
		if len(c.fields) > 0 {
			changes = append(changes, c)
		}
	}
	nodes := map[string]bool{}
	for _, m := range []map[string]time.Time{prev.UnneededSince, next.UnneededSince} {
		for n := range m {
			nodes[n] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		p, x := lookup(prev.UnneededSince, n), lookup(next.UnneededSince, n)
		if !p.equal(x) {
			changes = append(changes, itemChange{
				prefix: nodePrefix,
				name:   n,
				fields: []fieldChange{{attr: attrUnneededSince, prev: p, next: x}},
			})
		}
	}
	return changes
}

// conflictError reports the items SaveState left alone because they had
// changed since they were loaded.
func conflictError(cluster string, sks []string) error {
	return fmt.Errorf("save state of cluster %q: %w: %v", cluster, ErrConflict, sks)
}

func emptyState() snapshot.State {
	return snapshot.State{
		UnneededSince: map[string]time.Time{},
		LastScaleUp:   map[string]time.Time{},
		BackoffUntil:  map[string]time.Time{},
	}
}

// leaseExpiry rounds now+ttl up to a whole second: DynamoDB's TTL attribute
// holds epoch seconds, and rounding up never shortens a lease.
func leaseExpiry(now time.Time, ttl time.Duration) time.Time {
	exp := now.Add(ttl)
	if t := exp.Truncate(time.Second); !t.Equal(exp) {
		exp = t.Add(time.Second)
	}
	return exp.UTC()
}

func checkLeaseArgs(name, holder string, ttl time.Duration) error {
	switch {
	case name == "":
		return errors.New("lease name is empty")
	case holder == "":
		return errors.New("lease holder is empty")
	case ttl <= 0:
		return fmt.Errorf("lease ttl %v is not positive", ttl)
	}
	return nil
}

func leaseHeldError(name, holder string, cur Lease) error {
	return fmt.Errorf("acquire lease %q for %q: %w: %q has it until %s",
		name, holder, ErrLeaseHeld, cur.Holder, cur.ExpiresAt.UTC().Format(time.RFC3339))
}
