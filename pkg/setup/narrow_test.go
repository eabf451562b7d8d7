package setup

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// tenGroup is a provider group of bounds 0..10.
type tenGroup struct{ providers.NodeGroup }

func (tenGroup) Name() string             { return "g" }
func (tenGroup) Bounds() providers.Bounds { return providers.Bounds{Min: 0, Max: 10} }

// TestNarrow: a listed group's bounds are narrowed in one place, by its
// config entry and then by the schedule that last named it, and each
// bound says what set it.
func TestNarrow(t *testing.T) {
	ptr := func(i int) *int { return &i }
	cases := []struct {
		name             string
		config           *providers.Narrowing
		override         *schedule.Override
		wantMin, wantMax int
		wantMaxFrom      snapshot.BoundSource
		wantBoundsFrom   string
		wantErr          string
	}{
		{name: "provider's own", config: providers.NewNarrowing(nil, nil), wantMax: 10},
		{name: "config", config: providers.NewNarrowing(ptr(1), ptr(8)), wantMin: 1, wantMax: 8, wantMaxFrom: snapshot.BoundConfig},
		{name: "schedule within the config", config: providers.NewNarrowing(ptr(1), ptr(8)),
			override: &schedule.Override{Group: "g", Schedule: "night", Max: ptr(2)},
			wantMin:  1, wantMax: 2, wantMaxFrom: snapshot.BoundSchedule, wantBoundsFrom: "schedule night"},
		{name: "a schedule's max above the config's is clamped to it", config: providers.NewNarrowing(nil, ptr(8)),
			override: &schedule.Override{Group: "g", Schedule: "day", Min: ptr(3), Max: ptr(20)},
			wantMin:  3, wantMax: 8, wantMaxFrom: snapshot.BoundConfig},
		{name: "a schedule without bounds gives the config's back", config: providers.NewNarrowing(nil, ptr(8)),
			override: &schedule.Override{Group: "g", Schedule: "day", Desired: ptr(4)},
			wantMax:  8, wantMaxFrom: snapshot.BoundConfig},
		{name: "another group's schedule", config: providers.NewNarrowing(nil, nil),
			override: &schedule.Override{Group: "other", Schedule: "night", Max: ptr(1)}, wantMax: 10},
		{name: "config wider than the provider", config: providers.NewNarrowing(nil, ptr(11)),
			wantErr: "nodeGroups[0]: node group g: maxSize 11 is above the provider's maximum 10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			overrides := map[string]schedule.Override{}
			if tc.override != nil {
				overrides[tc.override.Group] = *tc.override
			}
			g, err := narrow(tenGroup{}, &entryProvider{path: "nodeGroups[0]", bounds: tc.config}, overrides)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Bounds().Min != tc.wantMin || g.Bounds().Max != tc.wantMax {
				t.Errorf("bounds %d..%d, want %d..%d", g.Bounds().Min, g.Bounds().Max, tc.wantMin, tc.wantMax)
			}
			if from, words := g.Bounds().MaxFrom, g.Bounds().MaxSchedule; from != tc.wantMaxFrom || words != tc.wantBoundsFrom {
				t.Errorf("max from %q (%q), want %q (%q)", from, words, tc.wantMaxFrom, tc.wantBoundsFrom)
			}
		})
	}
}

// TestReadOverridesFailureFailsTheListing: without the overrides a group
// could grow past a schedule's max, so not reading them is an error.
func TestReadOverridesFailureFailsTheListing(t *testing.T) {
	_, err := readOverrides(context.Background(), func(context.Context) ([]schedule.Override, error) {
		return nil, errors.New("table unreachable")
	})
	if err == nil || err.Error() != "schedule overrides: table unreachable" {
		t.Errorf("err %v, want the overrides' failure", err)
	}
	if got, err := readOverrides(context.Background(), nil); got != nil || err != nil {
		t.Errorf("no overrides: %v, %v", got, err)
	}
}
