package evaluate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// pricedGroup is a group whose provider has a price source; it counts the
// reads it is asked for.
type pricedGroup struct {
	providers.NodeGroup
	name  string
	price float64
	err   error
	asked *int
}

func (g pricedGroup) Name() string     { return g.name }
func (g pricedGroup) Provider() string { return "test" }
func (g pricedGroup) Price(ctx context.Context, cache *state.PriceCache) (state.Quote, error) {
	*g.asked++
	if g.err != nil {
		return state.Quote{}, g.err
	}
	key := state.PriceKey{Provider: "test", Region: "r", Type: g.name, Lifecycle: "on-demand"}
	return cache.Get(ctx, key, func(context.Context) (state.Price, error) {
		return state.Price{PerHour: g.price, Currency: "USD", Source: string(snapshot.PriceAWSPriceList), RetrievedAt: time.Now()}, nil
	})
}

// plainGroup has no price source.
type plainGroup struct {
	providers.NodeGroup
	name string
}

func (g plainGroup) Name() string     { return g.name }
func (g plainGroup) Provider() string { return "kwok" }

// Groups without a config price take their provider's, only when the
// expanders rank by price; a group whose price cannot be had keeps none,
// never a zero, and a config price is never asked for.
func TestProviderPrices(t *testing.T) {
	config := &snapshot.Price{PerHour: 0.5, Currency: "EUR", Source: snapshot.PriceConfig}
	for _, tc := range []struct {
		name      string
		expanders []string
		want      map[string]float64 // absent: no price
		asked     int
	}{
		{name: "price in the chain", expanders: []string{planner.ExpanderPriority, planner.ExpanderPrice},
			want: map[string]float64{"priced": 0.096, "configured": 0.5}, asked: 2},
		{name: "no price expander", expanders: []string{planner.ExpanderLeastWaste},
			want: map[string]float64{"configured": 0.5}, asked: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := 0
			groups := []providers.NodeGroup{
				pricedGroup{name: "priced", price: 0.096, asked: &asked},
				pricedGroup{name: "failing", err: errors.New("price list: no product"), asked: &asked},
				plainGroup{name: "kwok"},
				pricedGroup{name: "configured", price: 9, asked: &asked},
				pricedGroup{name: "at-zero", price: 1, asked: &asked},
			}
			described := []snapshot.NodeGroup{{Name: "priced", MaxSize: 3}, {Name: "failing", MaxSize: 3},
				{Name: "kwok", MaxSize: 3}, {Name: "configured", MaxSize: 3, Price: config}, {Name: "at-zero", MaxSize: 0}}
			e := &Evaluator{Prices: &state.PriceCache{Store: state.NewMemory("c")}}
			e.Settings.ScaleUp.Expanders = tc.expanders
			e.providerPrices(t.Context(), groups, described)
			for _, d := range described {
				want, ok := tc.want[d.Name]
				switch {
				case !ok && d.Price != nil:
					t.Errorf("%s: price %+v, want none", d.Name, d.Price)
				case ok && (d.Price == nil || d.Price.PerHour != want):
					t.Errorf("%s: price %+v, want %v", d.Name, d.Price, want)
				}
			}
			if asked != tc.asked {
				t.Errorf("price sources asked %d times, want %d", asked, tc.asked)
			}
		})
	}
}
