package providers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// pricedGroup is a group that prices itself (or fails to).
type pricedGroup struct {
	providers.NodeGroup
	name, provider string
	price          float64
	err            error
}

func (g *pricedGroup) Name() string     { return g.name }
func (g *pricedGroup) Provider() string { return g.provider }

func (g *pricedGroup) Price(_ context.Context, c *state.PriceCache) (state.Quote, error) {
	if g.err != nil {
		return state.Quote{}, g.err
	}
	return state.Quote{Price: state.Price{PerHour: g.price, Currency: "USD", Source: "aws-price-list", RetrievedAt: c.Clock()}}, nil
}

type guard struct{}

func (guard) LockGroup(context.Context, string) (func(), error)   { return func() {}, nil }
func (guard) DrainsInFlight(context.Context, string) (int, error) { return 0, nil }

// Prices asks each group's own group beneath the wrappers, and reports a
// group without a price (a failed source, a provider with none) as an
// error naming it: never as a zero.
func TestPrices(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cache := &state.PriceCache{Store: state.NewMemory("c1"), Now: func() time.Time { return now }}
	ok := &pricedGroup{name: "workers", provider: "aws", price: 0.096}
	failing := &pricedGroup{name: "gpu", provider: "aws", err: errors.New("aws group gpu: price: the Price List is down")}
	// A group with the NodeGroup methods alone, as kwok's.
	local := struct{ providers.NodeGroup }{&pricedGroup{name: "local", provider: "kwok"}}
	got := providers.Prices(t.Context(), []providers.NodeGroup{providers.Guarded(ok, guard{}), failing, local}, cache)
	if p := got["workers"]; p.Err != nil || p.Quote == nil || p.Quote.PerHour != 0.096 {
		t.Errorf("workers = %+v", p)
	}
	if p := got["gpu"]; p.Quote != nil || p.Err == nil || !strings.Contains(p.Err.Error(), "Price List is down") {
		t.Errorf("gpu = %+v", p)
	}
	if p := got["local"]; p.Quote != nil || p.Err == nil || !strings.Contains(p.Err.Error(), "provider kwok has no price source") {
		t.Errorf("local = %+v", p)
	}
}
