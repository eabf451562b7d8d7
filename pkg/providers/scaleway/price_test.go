package scaleway

import (
	"strings"
	"testing"
	"time"

	"github.com/scaleway/scaleway-sdk-go/api/instance/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"

	"github.com/nodetide/nodetide/internal/fake/fakescaleway"
	"github.com/nodetide/nodetide/pkg/state"
)

// A pool's price is its node type's hourly_price in the Instance catalogue
// of the pool's zone, in EUR, as published (no float32 noise); the node type
// is matched however Kapsule spells it; the state table answers it while
// fresh.
func TestPriceFromTheInstanceCatalogue(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	monthly := float32(14.45)
	b.scw.AddServerType(scw.ZoneFrPar2, "DEV1-M", instance.ServerType{Ncpus: 3, RAM: 4 << 30, Arch: instance.ArchX86_64, HourlyPrice: 0.0198, MonthlyPrice: &monthly})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "workers", NodeType: "dev1_m", Zone: scw.ZoneFrPar2, Size: 1})
	g := b.group("workers", nil)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cache := &state.PriceCache{Store: state.NewMemory("c1"), Now: func() time.Time { return now }}

	q, err := g.Price(t.Context(), cache)
	if err != nil {
		t.Fatal(err)
	}
	if q.PerHour != 0.0198 || q.Currency != "EUR" || q.Source != SourceCatalogue || !q.RetrievedAt.Equal(now) {
		t.Fatalf("price = %+v, want 0.0198 EUR from the catalogue", q)
	}
	calls := b.scw.Count(fakescaleway.OpListServersTypes)
	now = now.Add(23 * time.Hour)
	if q, err := g.Price(t.Context(), cache); err != nil || q.Age != 23*time.Hour || b.scw.Count(fakescaleway.OpListServersTypes) != calls {
		t.Fatalf("within the TTL: %+v, %v, %d more calls; want the cached price", q, err, b.scw.Count(fakescaleway.OpListServersTypes)-calls)
	}
	// Past it, the catalogue is read again, not the copy the templates keep.
	b.scw.AddServerType(scw.ZoneFrPar2, "DEV1-M", instance.ServerType{Ncpus: 3, RAM: 4 << 30, Arch: instance.ArchX86_64, HourlyPrice: 0.021})
	now = now.Add(2 * time.Hour)
	if q, err := g.Price(t.Context(), cache); err != nil || q.PerHour != 0.021 {
		t.Fatalf("past the TTL: %+v, %v; want the new price", q, err)
	}
}

// A node type the zone's catalogue lacks has no price, and the error names
// it.
func TestPriceUnknownNodeType(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "odd", NodeType: "XYZ-9", Size: 0})
	g := b.group("odd", nil)
	_, err := g.Price(t.Context(), &state.PriceCache{Store: state.NewMemory("c1")})
	if err == nil || !strings.Contains(err.Error(), `node type "XYZ-9" is not in zone fr-par-1's Instance catalogue`) {
		t.Fatalf("Price error = %v", err)
	}
}
