package config

import (
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// priceDoc is kwokDoc with the group's price on line 8.
func priceDoc(price string) string {
	return strings.Replace(kwokDoc(okTemplate, ""), "    kwok:\n", "    price: "+price+"\n    kwok:\n", 1)
}

func TestGroupPrice(t *testing.T) {
	for _, tc := range []struct {
		price string
		want  snapshot.Price
	}{
		{"{perHour: 0.096, currency: USD}", snapshot.Price{PerHour: 0.096, Currency: "USD", Source: snapshot.PriceConfig}},
		{"{perHour: 2, currency: EUR}", snapshot.Price{PerHour: 2, Currency: "EUR", Source: snapshot.PriceConfig}},
		{"{perHour: 0, currency: USD}", snapshot.Price{Currency: "USD", Source: snapshot.PriceConfig}},
	} {
		t.Run(tc.price, func(t *testing.T) {
			cfg, err := Parse([]byte(priceDoc(tc.price)), "x.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.GroupPrice(0); got == nil || *got != tc.want {
				t.Errorf("price = %+v, want %+v", got, tc.want)
			}
		})
	}
	cfg, err := Parse([]byte(kwokDoc(okTemplate, "")), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.GroupPrice(0); got != nil {
		t.Errorf("price without one configured = %+v, want nil (unknown)", got)
	}
}

func TestGroupPriceErrors(t *testing.T) {
	for _, tc := range []struct {
		name, price, want string
	}{
		{"negative", "{perHour: -0.1, currency: USD}", "x.yaml:8: nodeGroups[0].price.perHour: must not be negative (got -0.1)"},
		{"NaN", "{perHour: .nan, currency: USD}", "x.yaml:8: nodeGroups[0].price.perHour: must be a finite number"},
		{"Inf", "{perHour: .inf, currency: USD}", "x.yaml:8: nodeGroups[0].price.perHour: must be a finite number"},
		{"too large", "{perHour: 50000, currency: USD}", "x.yaml:8: nodeGroups[0].price.perHour: must be at most 10000 per node-hour (got 50000)"},
		{"not a number", "{perHour: cheap, currency: USD}", "x.yaml:8: nodeGroups[0].price.perHour"},
		{"missing perHour", "{currency: USD}", "x.yaml:8: nodeGroups[0].price.perHour: is required"},
		{"missing currency", "{perHour: 0.096}", "x.yaml:8: nodeGroups[0].price.currency: is required (e.g. USD or EUR)"},
		{"lowercase currency", "{perHour: 0.096, currency: usd}", `x.yaml:8: nodeGroups[0].price.currency: must be a three-letter uppercase currency code such as USD or EUR (got "usd")`},
		{"unknown key", "{perHour: 0.096, currency: USD, perMonth: 70}", "x.yaml:8: nodeGroups[0].price.perMonth: unknown field"},
		{"source is not the config's to set", "{perHour: 0.096, currency: USD, source: config}", "x.yaml:8: nodeGroups[0].price.source: unknown field"},
		{"not a map", "0.096", "x.yaml:8: nodeGroups[0].price"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(priceDoc(tc.price)), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
