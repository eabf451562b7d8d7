package snapshot_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
)

// TestPriceRoundTrips: a group's price survives both forms (the compact one
// is the Trimmer's), and a group without one stays unknown.
func TestPriceRoundTrips(t *testing.T) {
	priced := snapshottest.Group("a", 0, 3, 1, "4", "16Gi")
	priced.Price = &snapshot.Price{PerHour: 0.096, Currency: "USD", Source: snapshot.PriceConfig}
	unpriced := snapshottest.Group("b", 0, 3, 0, "4", "16Gi")
	s := snapshottest.Cluster([]snapshot.NodeGroup{priced, unpriced}, nil, nil)
	for name, write := range map[string]func(*bytes.Buffer) error{
		"full":    func(b *bytes.Buffer) error { return snapshot.WriteSnapshot(b, s) },
		"compact": func(b *bytes.Buffer) error { return snapshot.WriteCompactSnapshot(b, s) },
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := write(&b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), `"perHour": 0.096`) && !strings.Contains(b.String(), `"perHour":0.096`) {
				t.Errorf("document lacks the price:\n%s", b.String())
			}
			got, err := snapshot.ReadSnapshot(&b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.NodeGroups[0].Price, priced.Price) {
				t.Errorf("price = %+v, want %+v", got.NodeGroups[0].Price, priced.Price)
			}
			if got.NodeGroups[1].Price != nil {
				t.Errorf("unpriced group read back with price %+v", got.NodeGroups[1].Price)
			}
		})
	}
}

func TestReadPrice(t *testing.T) {
	doc := func(price string) string {
		return `{"capturedAt": "2026-11-30T10:00:00Z", "nodeGroups": [{"name": "g", "maxSize": 3, "price": ` + price + `}]}`
	}
	ok := []struct {
		price string
		want  *snapshot.Price
	}{
		{`{"perHour": 0.096, "currency": "USD", "source": "config"}`, &snapshot.Price{PerHour: 0.096, Currency: "USD", Source: "config"}},
		{`{"perHour": "0.0960", "currency": "EUR", "source": "scaleway-catalogue"}`, &snapshot.Price{PerHour: 0.096, Currency: "EUR", Source: "scaleway-catalogue"}},
		{`{"perHour": 0, "currency": "USD", "source": "aws-spot-history"}`, &snapshot.Price{Currency: "USD", Source: "aws-spot-history"}},
		{`null`, nil},
	}
	for _, tc := range ok {
		s, err := snapshot.ReadSnapshot(strings.NewReader(doc(tc.price)))
		if err != nil {
			t.Errorf("%s: %v", tc.price, err)
			continue
		}
		if !reflect.DeepEqual(s.NodeGroups[0].Price, tc.want) {
			t.Errorf("%s: price = %+v, want %+v", tc.price, s.NodeGroups[0].Price, tc.want)
		}
	}
	bad := []struct{ name, price, want string }{
		{"negative", `{"perHour": -0.1, "currency": "USD", "source": "config"}`, "nodeGroups[0].price.perHour: must not be negative (got -0.1)"},
		{"too large", `{"perHour": 1e6, "currency": "USD", "source": "config"}`, "nodeGroups[0].price.perHour: must be at most 10000 per node-hour"},
		{"NaN string", `{"perHour": "NaN", "currency": "USD", "source": "config"}`, `nodeGroups[0].price.perHour: must be a number or a decimal string (got "NaN")`},
		{"Inf string", `{"perHour": "+Inf", "currency": "USD", "source": "config"}`, `nodeGroups[0].price.perHour: must be a number or a decimal string`},
		{"hex string", `{"perHour": "0x1p-2", "currency": "USD", "source": "config"}`, `nodeGroups[0].price.perHour: must be a number or a decimal string`},
		{"past float64", `{"perHour": 1e400, "currency": "USD", "source": "config"}`, `nodeGroups[0].price.perHour: must be a finite number (got 1e400)`},
		{"empty string", `{"perHour": "", "currency": "USD", "source": "config"}`, `nodeGroups[0].price.perHour: must be a number or a decimal string`},
		{"boolean", `{"perHour": true, "currency": "USD", "source": "config"}`, `nodeGroups[0].price.perHour: must be a number or a decimal string (got true)`},
		{"missing perHour", `{"currency": "USD", "source": "config"}`, "nodeGroups[0].price.perHour: must be set"},
		{"missing currency", `{"perHour": 1, "source": "config"}`, "nodeGroups[0].price.currency: must be set"},
		{"lowercase currency", `{"perHour": 1, "currency": "usd", "source": "config"}`, `nodeGroups[0].price.currency: must be a three-letter uppercase currency code such as USD or EUR (got "usd")`},
		{"long currency", `{"perHour": 1, "currency": "EURO", "source": "config"}`, `nodeGroups[0].price.currency: must be a three-letter`},
		{"symbol", `{"perHour": 1, "currency": "$", "source": "config"}`, `nodeGroups[0].price.currency: must be a three-letter`},
		{"unknown source", `{"perHour": 1, "currency": "USD", "source": "guess"}`, `nodeGroups[0].price.source: must be one of [config aws-price-list aws-spot-history scaleway-catalogue kamatera-api] (got "guess")`},
		{"no source", `{"perHour": 1, "currency": "USD"}`, `nodeGroups[0].price.source: must be one of`},
		{"unknown key", `{"perHour": 1, "currency": "USD", "source": "config", "perMonth": 700}`, "nodeGroups[0].price.perMonth: unknown key (known: perHour, currency, source)"},
		{"duplicate key", `{"perHour": 1, "perHour": 2, "currency": "USD", "source": "config"}`, "nodeGroups[0].price.perHour: duplicate key"},
		{"not an object", `0.096`, "nodeGroups[0].price (line 1:92): expected an object, got a number"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := snapshot.ReadSnapshot(strings.NewReader(doc(tc.price)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, tc.want)
			}
			var de *snapshot.DocumentError
			if !errors.As(err, &de) {
				t.Errorf("error %T is not a *DocumentError", err)
			}
		})
	}
}

// TestWriteSnapshotValidatesPrice: a price the reader would refuse is never
// written.
func TestWriteSnapshotValidatesPrice(t *testing.T) {
	g := snapshottest.Group("a", 0, 3, 0, "4", "16Gi")
	g.Price = &snapshot.Price{PerHour: 1, Currency: "usd", Source: snapshot.PriceConfig}
	err := snapshot.WriteSnapshot(&bytes.Buffer{}, snapshottest.Cluster([]snapshot.NodeGroup{g}, nil, nil))
	if err == nil || !strings.Contains(err.Error(), "nodeGroups[0].price.currency") {
		t.Errorf("error = %v", err)
	}
}
