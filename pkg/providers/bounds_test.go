package providers_test

import (
	"testing"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestBounds: each narrowing reports itself as what set a bound only when
// it changed that bound, naming the schedule when one did, through the
// guard too; a group nothing narrowed has the provider's.
func TestBounds(t *testing.T) {
	narrow := func(t *testing.T, g providers.NodeGroup, b *providers.Narrowing) providers.NodeGroup {
		t.Helper()
		n, err := b.Narrow(g)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	cases := []struct {
		name       string
		narrowings []*providers.Narrowing // innermost first
		want       providers.Bounds
	}{
		{"nothing narrows", nil, providers.Bounds{Max: 10}},
		{"config lowers the max", []*providers.Narrowing{providers.NewNarrowing(nil, ptr(8))},
			providers.Bounds{Max: 8, MaxFrom: snapshot.BoundConfig}},
		{"config keeps the provider's max", []*providers.Narrowing{providers.NewNarrowing(ptr(1), ptr(10))},
			providers.Bounds{Min: 1, Max: 10, MinFrom: snapshot.BoundConfig}},
		{"a schedule lowers the config's max", []*providers.Narrowing{providers.NewNarrowing(nil, ptr(8)), {Max: ptr(2), From: "schedule night"}},
			providers.Bounds{Max: 2, MaxFrom: snapshot.BoundSchedule, MaxSchedule: "schedule night"}},
		{"a schedule keeps the config's max", []*providers.Narrowing{providers.NewNarrowing(nil, ptr(8)), {Max: ptr(8), From: "schedule night"}},
			providers.Bounds{Max: 8, MaxFrom: snapshot.BoundConfig}},
		{"a schedule's min only", []*providers.Narrowing{{Min: ptr(2), From: "schedule day"}},
			providers.Bounds{Min: 2, Max: 10, MinFrom: snapshot.BoundSchedule, MinSchedule: "schedule day"}},
		{"a schedule raises the config's min", []*providers.Narrowing{providers.NewNarrowing(ptr(1), nil), {Min: ptr(3), Max: ptr(10), From: "schedule day"}},
			providers.Bounds{Min: 3, Max: 10, MinFrom: snapshot.BoundSchedule, MinSchedule: "schedule day"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var g providers.NodeGroup = &fixedGroup{}
			for _, b := range tc.narrowings {
				g = narrow(t, g, b)
			}
			if got := g.Bounds(); got != tc.want {
				t.Errorf("Bounds = %+v, want %+v", got, tc.want)
			}
			if got := providers.Guarded(g, nil).Bounds(); got != tc.want {
				t.Errorf("guarded: Bounds = %+v, want %+v", got, tc.want)
			}
		})
	}
}
