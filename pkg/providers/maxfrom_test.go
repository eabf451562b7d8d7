package providers_test

import (
	"testing"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestMaxFrom: each narrowing reports itself as what set the maximum only
// when it lowered it, through the guard too; a group nothing narrowed has
// the provider's.
func TestMaxFrom(t *testing.T) {
	narrow := func(t *testing.T, g providers.NodeGroup, b *providers.Bounds) providers.NodeGroup {
		t.Helper()
		n, err := b.Narrow(g)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	cases := []struct {
		name   string
		bounds []*providers.Bounds // innermost first
		want   snapshot.BoundSource
	}{
		{"nothing narrows", nil, snapshot.BoundProvider},
		{"config lowers the max", []*providers.Bounds{providers.NewBounds(nil, ptr(8))}, snapshot.BoundConfig},
		{"config keeps the provider's max", []*providers.Bounds{providers.NewBounds(ptr(1), ptr(10))}, snapshot.BoundProvider},
		{"a schedule lowers the config's max", []*providers.Bounds{providers.NewBounds(nil, ptr(8)), {Max: ptr(2), From: "schedule night"}}, snapshot.BoundSchedule},
		{"a schedule keeps the config's max", []*providers.Bounds{providers.NewBounds(nil, ptr(8)), {Max: ptr(8), From: "schedule night"}}, snapshot.BoundConfig},
		{"a schedule's min only", []*providers.Bounds{{Min: ptr(2), From: "schedule day"}}, snapshot.BoundProvider},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var g providers.NodeGroup = &fixedGroup{}
			for _, b := range tc.bounds {
				g = narrow(t, g, b)
			}
			if got := providers.MaxFrom(g); got != tc.want {
				t.Errorf("MaxFrom = %q, want %q", got, tc.want)
			}
			if got := providers.MaxFrom(providers.Guarded(g, nil)); got != tc.want {
				t.Errorf("guarded: MaxFrom = %q, want %q", got, tc.want)
			}
		})
	}
}
