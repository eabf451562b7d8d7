package kamatera

import (
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/fake/fakekamatera"
	"github.com/nodetide/nodetide/pkg/state"
)

// A group's price is read off a running server of the group that has the
// group's cpu and ram (server info's priceHourlyOn; priceMonthlyOn / 730
// when billed monthly), in USD, and cached under the group's server
// configuration: a group whose servers are gone is still priced while the
// cached figure is fresh.
func TestPriceFromServerInfo(t *testing.T) {
	b := newBed(t, twoGroups, nil)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cache := &state.PriceCache{Store: state.NewMemory("c1"), Now: func() time.Time { return now }}
	// w-a was made with another size: its price is not a new server's.
	b.d.AddServer(fakekamatera.Server{Name: "w-a", Power: true, Tags: tagged("workers"), CPU: "4A", RAM: "8192", PriceHourlyOn: "0.0600", PriceHourlyOff: "0.0040", PriceMonthlyOn: "40.00"})
	b.d.AddServer(fakekamatera.Server{Name: "w-b", Power: true, Tags: tagged("workers"), CPU: "2A", RAM: "4096", PriceHourlyOn: "0.0310", PriceHourlyOff: "0.0040", PriceMonthlyOn: "20.00"})
	b.d.AddServer(fakekamatera.Server{Name: "o-a", Power: true, Tags: tagged("other"), CPU: "2A", RAM: "4096", Billing: "monthly", PriceHourlyOn: "0.0310", PriceHourlyOff: "0.0040", PriceMonthlyOn: "14.60"})

	q, err := b.group("workers").Price(t.Context(), cache)
	if err != nil {
		t.Fatal(err)
	}
	if q.PerHour != 0.031 || q.Currency != "USD" || q.Source != SourceAPI {
		t.Fatalf("workers: %+v, want 0.031 USD from the API", q)
	}
	q, err = b.group("other").Price(t.Context(), &state.PriceCache{Store: state.NewMemory("c1"), Now: cache.Now})
	if err != nil || math.Abs(q.PerHour-14.6/730) > 1e-12 {
		t.Fatalf("other (monthly): %+v, %v; want 14.60 / 730", q, err)
	}

	// Gone servers: the cache still answers within the TTL, then no price.
	b.d.RemoveServer("w-a")
	b.d.RemoveServer("w-b")
	calls := b.d.RequestCount(http.MethodPost, "/service/server/info")
	now = now.Add(time.Hour)
	if q, err := b.group("workers").Price(t.Context(), cache); err != nil || q.PerHour != 0.031 || b.d.RequestCount(http.MethodPost, "/service/server/info") != calls {
		t.Fatalf("within the TTL: %+v, %v", q, err)
	}
	now = now.Add(8 * 24 * time.Hour)
	_, err = b.group("workers").Price(t.Context(), cache)
	if err == nil || !strings.Contains(err.Error(), "set nodeGroups[].price in the config") {
		t.Fatalf("no server, nothing cached: %v; want the config named", err)
	}
}
