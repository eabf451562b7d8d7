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

// Bounds are config bounds for the groups of one config entry. Groups are
// listed anew on every run; the wrappers of the same Bounds share one lock,
// so concurrent size changes cannot pass the narrowed bounds together.
type Bounds struct {
	Min, Max *int
	// From names the schedule that set the bounds ("schedule night"),
	// empty for the config; errors, BoundsFrom and MaxFrom report it.
	From string
	mu   sync.Mutex
}

// NewBounds returns bounds; nil keeps the provider's own.
func NewBounds(minSize, maxSize *int) *Bounds { return &Bounds{Min: minSize, Max: maxSize} }

// Narrow applies config bounds to a group with a lock of its own (see
// Bounds.Narrow for groups listed more than once).
func Narrow(g NodeGroup, minSize, maxSize *int) (NodeGroup, error) {
	return NewBounds(minSize, maxSize).Narrow(g)
}

// Narrow applies the bounds to a group: they may narrow what the provider
// reports, never widen it (a config asking for more than the cloud allows is
// an error naming both numbers).
func (b *Bounds) Narrow(g NodeGroup) (NodeGroup, error) {
	minSize, maxSize := b.Min, b.Max
	if minSize == nil && maxSize == nil {
		return g, nil
	}
	lo, hi := g.MinSize(), g.MaxSize()
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

// BoundsSource is implemented by groups whose bounds something other than
// the provider set; BoundsFrom names it ("" for the config).
type BoundsSource interface {
	BoundsFrom() string
}

// BoundsFrom returns what set g's maximum, when g reports it.
func BoundsFrom(g NodeGroup) string {
	if s, ok := g.(BoundsSource); ok {
		return s.BoundsFrom()
	}
	return ""
}

// MaxSource is implemented by groups that know what set their maximum.
type MaxSource interface {
	MaxFrom() snapshot.BoundSource
}

// MaxFrom returns what set g's maximum: what g reports, else the provider.
func MaxFrom(g NodeGroup) snapshot.BoundSource {
	if s, ok := g.(MaxSource); ok {
		return s.MaxFrom()
	}
	return snapshot.BoundProvider
}

// MinSource is implemented by groups whose minimum something other than
// the provider set.
type MinSource interface {
	MinFrom() string
}

// MinFrom returns what set g's minimum, when g reports it.
func MinFrom(g NodeGroup) string {
	if s, ok := g.(MinSource); ok {
		return s.MinFrom()
	}
	return ""
}

// narrowed checks the narrowed bounds before the provider checks its own.
type narrowed struct {
	NodeGroup
	min, max int
	from     string
	mu       *sync.Mutex
}

func (n *narrowed) MinSize() int { return n.min }
func (n *narrowed) MaxSize() int { return n.max }

// BoundsFrom names what set the maximum, the bound that stops growth: this
// narrowing when it lowered it, else what the group inside reports.
func (n *narrowed) BoundsFrom() string {
	if n.from != "" && n.max < n.NodeGroup.MaxSize() {
		return n.from
	}
	return BoundsFrom(n.NodeGroup)
}

// MaxFrom is what set the maximum: this narrowing when it lowered it (the
// config, or a schedule when From names one), else the group inside.
func (n *narrowed) MaxFrom() snapshot.BoundSource {
	switch {
	case n.max >= n.NodeGroup.MaxSize():
		return MaxFrom(n.NodeGroup)
	case n.from != "":
		return snapshot.BoundSchedule
	}
	return snapshot.BoundConfig
}

// MinFrom names what set the minimum: this narrowing when it raised it.
func (n *narrowed) MinFrom() string {
	if n.from != "" && n.min > n.NodeGroup.MinSize() {
		return n.from
	}
	return MinFrom(n.NodeGroup)
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
// bounds, a schedule's): its MinSize is the minimum the provider itself
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

// PriceSource is implemented by groups that know a node's price.
type PriceSource interface {
	Price() *snapshot.Price
}

// PriceOf returns g's price per node-hour; nil when unknown.
func PriceOf(g NodeGroup) *snapshot.Price {
	if s, ok := g.(PriceSource); ok {
		return s.Price()
	}
	return nil
}

// Priced gives g the price its config entry sets; nil leaves g as it is.
// It wraps a group after its bounds are narrowed (see Narrow), so that the
// bound sources it forwards are the narrowed ones.
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

func (p *priced) Price() *snapshot.Price        { return p.price }
func (p *priced) BoundsFrom() string            { return BoundsFrom(p.NodeGroup) }
func (p *priced) MinFrom() string               { return MinFrom(p.NodeGroup) }
func (p *priced) MaxFrom() snapshot.BoundSource { return MaxFrom(p.NodeGroup) }
