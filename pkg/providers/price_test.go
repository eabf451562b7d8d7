package providers_test

import (
	"slices"
	"testing"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// catalogued is a provider group that knows its own price, as one with a
// price catalogue reports it.
type catalogued struct {
	providers.NodeGroup
	price *snapshot.Price
}

func (c catalogued) Bounds() providers.Bounds {
	b := c.NodeGroup.Bounds()
	b.Price = c.price
	return b
}

// TestPriced: the config's price replaces the provider's in Bounds, and
// the narrowings and the guard wrapped around it pass it on by embedding,
// their bounds intact; without a config price the provider's stays, and a
// group that knows none has none.
func TestPriced(t *testing.T) {
	fromList := &snapshot.Price{PerHour: 0.1, Currency: "USD", Source: snapshot.PriceAWSPriceList}
	fromConfig := &snapshot.Price{PerHour: 0.096, Currency: "USD", Source: snapshot.PriceConfig}
	cases := []struct {
		name     string
		provider *snapshot.Price
		config   *snapshot.Price
		want     *snapshot.Price
	}{
		{"neither", nil, nil, nil},
		{"the provider's", fromList, nil, fromList},
		{"the config's", nil, fromConfig, fromConfig},
		{"the config's over the provider's", fromList, fromConfig, fromConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var g providers.NodeGroup = catalogued{&fixedGroup{}, tc.provider}
			g, err := providers.Narrow(g, nil, ptr(8))
			if err != nil {
				t.Fatal(err)
			}
			g = providers.Priced(g, tc.config)
			g, err = (&providers.Narrowing{Max: ptr(2), From: "schedule night"}).Narrow(g)
			if err != nil {
				t.Fatal(err)
			}
			b := providers.Guarded(g, nil).Bounds()
			if !samePrice(b.Price, tc.want) {
				t.Errorf("price %+v, want %+v", b.Price, tc.want)
			}
			if b.Max != 2 || b.MaxFrom != snapshot.BoundSchedule || b.MaxSchedule != "schedule night" {
				t.Errorf("bounds %+v, want max 2 from schedule night", b)
			}
		})
	}
}

func samePrice(a, b *snapshot.Price) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// TestPricedKeepsZones: a priced group still answers with its provider's
// zones (Zones looks beneath it).
func TestPricedKeepsZones(t *testing.T) {
	g := providers.Priced(kwok.New(nil, "g", 0, 5, snapshot.Template{}).WithZones([]string{"b", "a"}),
		&snapshot.Price{PerHour: 1, Currency: "EUR", Source: snapshot.PriceConfig})
	if got := providers.Zones(g, snapshot.Template{}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("zones through a price = %v, want [a b]", got)
	}
}
