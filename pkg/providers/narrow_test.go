package providers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// fixedGroup is a provider group whose own bounds are 0..10.
type fixedGroup struct {
	target    int
	increased int
	deleted   []string
}

func (f *fixedGroup) Name() string                                            { return "g" }
func (f *fixedGroup) Provider() string                                        { return "test" }
func (f *fixedGroup) Bounds() providers.Bounds                                { return providers.Bounds{Min: 0, Max: 10} }
func (f *fixedGroup) TargetSize(context.Context) (int, error)                 { return f.target, nil }
func (f *fixedGroup) Instances(context.Context) ([]providers.Instance, error) { return nil, nil }
func (f *fixedGroup) Template(context.Context) (snapshot.Template, error) {
	return snapshot.Template{}, nil
}
func (f *fixedGroup) IncreaseSize(_ context.Context, d int) error { f.increased += d; return nil }
func (f *fixedGroup) DeleteInstance(_ context.Context, id string) error {
	f.deleted = append(f.deleted, id)
	return nil
}
func (f *fixedGroup) DecreaseTargetSize(context.Context, int) error { return nil }

func ptr(i int) *int { return &i }

func TestNarrow(t *testing.T) {
	cases := []struct {
		name     string
		min, max *int
		wantMin  int
		wantMax  int
		err      string
	}{
		{"no bounds", nil, nil, 0, 10, ""},
		{"narrowed both", ptr(2), ptr(5), 2, 5, ""},
		{"narrowed max only", nil, ptr(3), 0, 3, ""},
		{"max wider than the provider", nil, ptr(11), 0, 0, "maxSize 11 is above the provider's maximum 10"},
		{"min narrower than the provider is fine, wider is not", ptr(-1), nil, 0, 0, "minSize -1 is below the provider's minimum 0"},
		{"crossed", ptr(6), ptr(5), 0, 0, "narrowed minSize 6 is above maxSize 5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := providers.Narrow(&fixedGroup{}, tc.min, tc.max)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Bounds().Min != tc.wantMin || g.Bounds().Max != tc.wantMax {
				t.Errorf("bounds %d..%d, want %d..%d", g.Bounds().Min, g.Bounds().Max, tc.wantMin, tc.wantMax)
			}
		})
	}
}

func TestNarrowEnforcesItsBounds(t *testing.T) {
	ctx := context.Background()
	inner := &fixedGroup{target: 3}
	g, err := providers.Narrow(inner, ptr(3), ptr(4))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.IncreaseSize(ctx, 2); !errors.Is(err, providers.ErrAboveMax) {
		t.Errorf("increase past the narrowed max: %v", err)
	}
	if err := g.DeleteInstance(ctx, "x"); !errors.Is(err, providers.ErrBelowMin) {
		t.Errorf("delete below the narrowed min: %v", err)
	}
	if inner.increased != 0 || len(inner.deleted) != 0 {
		t.Errorf("the provider was called despite the bounds: %+v", inner)
	}
	if err := g.IncreaseSize(ctx, 1); err != nil || inner.increased != 1 {
		t.Errorf("increase within bounds: %v, %+v", err, inner)
	}
}

// TestNarrowFrom: a schedule's narrowing names itself in refusals, and as
// what set the maximum only when it lowered the maximum.
func TestNarrowFrom(t *testing.T) {
	ctx := context.Background()
	inner := &fixedGroup{target: 2}
	cfg, err := providers.Narrow(inner, ptr(1), ptr(8))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Bounds().MaxSchedule; got != "" {
		t.Errorf("config narrowing reports %q, want nothing", got)
	}
	night := &providers.Narrowing{Max: ptr(2), From: "schedule night"}
	g, err := night.Narrow(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Bounds().MaxSchedule; got != "schedule night" {
		t.Errorf("BoundsFrom = %q, want schedule night", got)
	}
	err = g.IncreaseSize(ctx, 1)
	if !errors.Is(err, providers.ErrAboveMax) || !strings.Contains(err.Error(), "(2, set by schedule night)") {
		t.Errorf("IncreaseSize past the schedule's max: %v", err)
	}
	if inner.increased != 0 {
		t.Errorf("the provider grew by %d", inner.increased)
	}

	floor := &providers.Narrowing{Min: ptr(2), From: "schedule day"}
	g, err = floor.Narrow(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Bounds().MaxSchedule; got != "" {
		t.Errorf("a min-only schedule reports %q as what set the max", got)
	}
	if got := g.Bounds().MinSchedule; got != "schedule day" {
		t.Errorf("MinFrom = %q, want schedule day", got)
	}
	err = g.DeleteInstance(ctx, "a")
	if !errors.Is(err, providers.ErrBelowMin) || !strings.Contains(err.Error(), "(2, set by schedule day)") {
		t.Errorf("DeleteInstance below the schedule's min: %v", err)
	}
	if len(inner.deleted) != 0 {
		t.Errorf("the provider deleted %v", inner.deleted)
	}
}
