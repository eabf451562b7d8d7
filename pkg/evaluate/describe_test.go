package evaluate_test

import (
	"context"
	"testing"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// tenGroup is a provider group of bounds 0..10 and size 4.
type tenGroup struct{ providers.NodeGroup }

func (tenGroup) Name() string                                            { return "g" }
func (tenGroup) Provider() string                                        { return "test" }
func (tenGroup) Bounds() providers.Bounds                                { return providers.Bounds{Min: 0, Max: 10} }
func (tenGroup) TargetSize(context.Context) (int, error)                 { return 4, nil }
func (tenGroup) Instances(context.Context) ([]providers.Instance, error) { return nil, nil }
func (tenGroup) Template(context.Context) (snapshot.Template, error)     { return snapshot.Template{}, nil }

// TestDescribeMaxFrom: the planner is told what set each group's max, so a
// schedule's cap shrinks the group and the config's only stops growth.
func TestDescribeMaxFrom(t *testing.T) {
	two, eight := 2, 8
	config, err := providers.NewNarrowing(nil, &eight).Narrow(tenGroup{})
	if err != nil {
		t.Fatal(err)
	}
	night, err := (&providers.Narrowing{Max: &two, From: "schedule night"}).Narrow(config)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		group      providers.NodeGroup
		wantMax    int
		wantFrom   snapshot.BoundSource
		wantBounds string
	}{
		{"provider", tenGroup{}, 10, snapshot.BoundProvider, ""},
		{"config", config, 8, snapshot.BoundConfig, ""},
		{"schedule", night, 2, snapshot.BoundSchedule, "schedule night"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := evaluate.Describe(t.Context(), []providers.NodeGroup{tc.group})
			if err != nil {
				t.Fatal(err)
			}
			g := got[0]
			if g.MaxSize != tc.wantMax || g.MaxFrom != tc.wantFrom || g.BoundsFrom != tc.wantBounds {
				t.Errorf("max %d from %q (%q), want %d from %q (%q)", g.MaxSize, g.MaxFrom, g.BoundsFrom, tc.wantMax, tc.wantFrom, tc.wantBounds)
			}
		})
	}
}

type noGuard struct{}

func (noGuard) LockGroup(context.Context, string) (func(), error)   { return func() {}, nil }
func (noGuard) DrainsInFlight(context.Context, string) (int, error) { return 0, nil }

// TestDescribePrice: a group's snapshot entry carries its entry's price
// through the wrappers that come after it, its narrowed bounds intact; a
// group without one has none (unknown, not zero).
func TestDescribePrice(t *testing.T) {
	eight := 8
	narrowed, err := providers.NewNarrowing(nil, &eight).Narrow(tenGroup{})
	if err != nil {
		t.Fatal(err)
	}
	price := &snapshot.Price{PerHour: 0.096, Currency: "USD", Source: snapshot.PriceConfig}
	g := providers.Guarded(providers.Priced(narrowed, price), noGuard{})
	got, err := evaluate.Describe(t.Context(), []providers.NodeGroup{g, tenGroup{}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Price == nil || *got[0].Price != *price {
		t.Errorf("price %+v, want %+v", got[0].Price, price)
	}
	if got[0].MaxSize != 8 || got[0].MaxFrom != snapshot.BoundConfig {
		t.Errorf("max %d from %q, want 8 from the config", got[0].MaxSize, got[0].MaxFrom)
	}
	if got[1].Price != nil {
		t.Errorf("unpriced group has price %+v", got[1].Price)
	}
}
