package scaleway

import (
	"context"
	"fmt"
	"strconv"

	"github.com/scaleway/scaleway-sdk-go/scw"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// SourceCatalogue names where a pool's price came from, as the snapshot
// does.
const SourceCatalogue = "scaleway-catalogue"

var _ providers.Pricer = (*Group)(nil)

// Price is what one node of the pool costs per hour, in EUR: its node
// type's hourly_price in the Instance API's server-type catalogue of the
// pool's zone (ListServersTypes), through cache. A Kapsule node is billed
// as the Instance it runs on; the control plane and volumes are not in the
// figure. (The SDK's product catalogue, product_catalog/v2alpha1, is still
// an alpha API; the Instance catalogue is the one the templates read
// already.)
func (g *Group) Price(ctx context.Context, cache *state.PriceCache) (state.Quote, error) {
	zone := g.pool.Zone
	if zone == "" {
		zone = scw.Zone(g.p.region.String() + "-1")
	}
	typ := normaliseType(g.pool.NodeType)
	key := state.PriceKey{Provider: ProviderName, Region: zone.String(), Type: typ, Lifecycle: state.LifecycleOnDemand}
	q, err := cache.Get(ctx, key, func(ctx context.Context) (state.Price, error) {
		catalog, err := g.p.refreshServerTypes(ctx, zone)
		if err != nil {
			return state.Price{}, err
		}
		nt, ok := catalog[typ]
		if !ok {
			return state.Price{}, fmt.Errorf("node type %q is not in zone %s's Instance catalogue", g.pool.NodeType, zone)
		}
		// The API's figure is a float32: its shortest decimal form is the
		// price as published (0.0198, not 0.019800000265).
		v, err := strconv.ParseFloat(strconv.FormatFloat(float64(nt.spec.HourlyPrice), 'g', -1, 32), 64)
		if err != nil {
			return state.Price{}, fmt.Errorf("node type %s: hourly price: %w", nt.name, err)
		}
		return state.Price{PerHour: v, Currency: "EUR", Source: SourceCatalogue, RetrievedAt: cache.Clock()}, nil
	})
	if err != nil {
		return state.Quote{}, fmt.Errorf("scaleway pool %s: price: %w", g.pool.Name, err)
	}
	return q, nil
}

// refreshServerTypes reads a zone's catalogue again, so a price is as new
// as its retrieval time says (the templates' copy lives as long as the
// process).
func (p *Provider) refreshServerTypes(ctx context.Context, zone scw.Zone) (map[string]nodeType, error) {
	p.mu.Lock()
	delete(p.catalog, zone)
	p.mu.Unlock()
	return p.serverTypes(ctx, zone)
}
