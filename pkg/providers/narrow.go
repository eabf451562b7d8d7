package providers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// Static is a Provider with a fixed set of groups.
type Static []NodeGroup

// NodeGroups implements Provider.
func (s Static) NodeGroups(context.Context) ([]NodeGroup, error) { return s, nil }

// Narrowing is config bounds for the groups of one config entry, or a
// schedule's for one group. Groups are listed anew on every run; the
// wrappers of the same Narrowing share one lock, so concurrent size changes
// cannot pass the narrowed bounds together.
type Narrowing struct {
	Min, Max *int
	// From names the schedule that set the bounds ("schedule night"),
	// empty for the config; errors and Bounds report it.
	From string
	mu   sync.Mutex
}

// NewNarrowing returns config bounds; nil keeps the provider's own.
func NewNarrowing(minSize, maxSize *int) *Narrowing { return &Narrowing{Min: minSize, Max: maxSize} }

// Narrow applies config bounds to a group with a lock of its own (see
// Narrowing.Narrow for groups listed more than once).
func Narrow(g NodeGroup, minSize, maxSize *int) (NodeGroup, error) {
	return NewNarrowing(minSize, maxSize).Narrow(g)
}

// Narrow applies the bounds to a group: they may narrow what the provider
// reports, never widen it (a config asking for more than the cloud allows is
// an error naming both numbers).
func (b *Narrowing) Narrow(g NodeGroup) (NodeGroup, error) {
	minSize, maxSize := b.Min, b.Max
	if minSize == nil && maxSize == nil {
		return g, nil
	}
	own := g.Bounds()
	lo, hi := own.Min, own.Max
	if minSize != nil {
		if *minSize < lo {
			return nil, fmt.Errorf("node group %s: minSize %d is below the provider's minimum %d (config may narrow, not widen)", g.Name(), *minSize, lo)
		}
		lo = *minSize
	}
	if maxSize != nil {
		if *maxSize > hi {
			return nil, fmt.Errorf("node group %s: maxSize %d is above the provider's maximum %d (config may narrow, not widen)", g.Name(), *maxSize, hi)
		}
		hi = *maxSize
	}
	if lo > hi {
		return nil, fmt.Errorf("node group %s: narrowed minSize %d is above maxSize %d", g.Name(), lo, hi)
	}
	return &narrowed{NodeGroup: g, min: lo, max: hi, from: b.From, mu: &b.mu}, nil
}

// narrowed checks the narrowed bounds before the provider checks its own.
type narrowed struct {
	NodeGroup
	min, max int
	from     string
	mu       *sync.Mutex
}

// Bounds are the narrowed bounds; a bound this narrowing changed reports
// it (the config, or the schedule From names) as what set it, one it kept
// reports what the group inside does.
func (n *narrowed) Bounds() Bounds {
	out := n.NodeGroup.Bounds()
	src, schedule := snapshot.BoundConfig, ""
	if n.from != "" {
		src, schedule = snapshot.BoundSchedule, n.from
	}
	if n.min > out.Min {
		out.MinFrom, out.MinSchedule = src, schedule
	}
	if n.max < out.Max {
		out.MaxFrom, out.MaxSchedule = src, schedule
	}
	out.Min, out.Max = n.min, n.max
	return out
}

func (n *narrowed) setBy() string {
	if n.from != "" {
		return "set by " + n.from
	}
	return "set in config"
}

func (n *narrowed) IncreaseSize(ctx context.Context, delta int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	target, err := n.TargetSize(ctx)
	if err != nil {
		return err
	}
	if err := CheckIncrease("size", target, delta, n.max); err != nil {
		if errors.Is(err, ErrAboveMax) {
			return fmt.Errorf("node group %s: size %d + %d: %w (%d, %s)", n.Name(), target, delta, ErrAboveMax, n.max, n.setBy())
		}
		return fmt.Errorf("node group %s: %w", n.Name(), err)
	}
	return n.NodeGroup.IncreaseSize(ctx, delta)
}

func (n *narrowed) DeleteInstance(ctx context.Context, providerID string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	target, err := n.TargetSize(ctx)
	if err != nil {
		return err
	}
	if target-1 < n.min {
		return fmt.Errorf("node group %s: size %d - 1: %w (%d, %s)", n.Name(), target, ErrBelowMin, n.min, n.setBy())
	}
	return n.NodeGroup.DeleteInstance(ctx, providerID)
}

// Unwrap returns the group the narrowing applies to.
func (n *narrowed) Unwrap() NodeGroup { return n.NodeGroup }

// Own returns the provider's group beneath nodetide's narrowings (config
// bounds, a schedule's) and the config's price: its Bounds().Min is the minimum the provider itself
// enforces, which a drain asked to go below nodetide's minimum still keeps.
func Own(g NodeGroup) NodeGroup {
	for {
		u, ok := g.(interface{ Unwrap() NodeGroup })
		if !ok {
			return g
		}
		g = u.Unwrap()
	}
}

// Zoner is implemented by provider groups that know the zones their new
// machines may start in (an ASG's Availability Zones, a kwok group's zones).
type Zoner interface {
	Zones() []string
}

// Zones returns the zones a new machine of g may start in, sorted: the
// provider's own answer when it has one, else the zone label of tpl (a
// Kapsule pool, a Kamatera template that sets it), else none.
func Zones(g NodeGroup, tpl snapshot.Template) []string {
	if z, ok := Own(g).(Zoner); ok {
		zones := slices.Clone(z.Zones())
		slices.Sort(zones)
		return slices.Compact(zones)
	}
	if z := tpl.Labels[corev1.LabelTopologyZone]; z != "" {
		return []string{z}
	}
	return nil
}

// Priced gives g the price its config entry sets, in place of any the
// provider reports (see Bounds.Price); nil leaves g as it is. Only Bounds
// changes, so whatever wraps g passes the price on by embedding.
func Priced(g NodeGroup, p *snapshot.Price) NodeGroup {
	if p == nil {
		return g
	}
	return &priced{NodeGroup: g, price: p}
}

type priced struct {
	NodeGroup
	price *snapshot.Price
}

// Bounds are the group's with the config's price.
func (p *priced) Bounds() Bounds {
	out := p.NodeGroup.Bounds()
	price := *p.price
	out.Price = &price
	return out
}

// Unwrap returns the group the price applies to, so Own and Zones see
// through it.
func (p *priced) Unwrap() NodeGroup { return p.NodeGroup }
