package providers

import (
	"context"
	"fmt"

	"github.com/nodetide/nodetide/pkg/state"
)

// Pricer is a provider's group that knows what one of its nodes costs per
// hour (aws, scaleway, kamatera): from its cloud's price source, through the
// cache in the state table.
type Pricer interface {
	Price(ctx context.Context, cache *state.PriceCache) (state.Quote, error)
}

// Prices asks every group (its provider's own, beneath nodetide's
// wrappers) for its price, by group name. A group whose provider has no
// price source, or whose price cannot be had, gets an Err to report: never
// a zero. A price from the config comes first and is the caller's; ask
// only for the groups without one.
func Prices(ctx context.Context, groups []NodeGroup, cache *state.PriceCache) map[string]state.GroupPrice {
	out := make(map[string]state.GroupPrice, len(groups))
	for _, g := range groups {
		p, ok := Own(g).(Pricer)
		if !ok {
			out[g.Name()] = state.GroupPrice{Err: fmt.Errorf("node group %s: provider %s has no price source; set nodeGroups[].price in the config", g.Name(), g.Provider())}
			continue
		}
		q, err := p.Price(ctx, cache)
		if err != nil {
			out[g.Name()] = state.GroupPrice{Err: err}
			continue
		}
		out[g.Name()] = state.GroupPrice{Quote: &q}
	}
	return out
}
