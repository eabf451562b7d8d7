package schedule

import (
	"reflect"
	"testing"
	"time"
)

func TestEffectiveBounds(t *testing.T) {
	p := func(v int) *int { return &v }
	cases := []struct {
		name       string
		o          Override
		lo, hi     int
		wantMin    int
		wantMax    int
		noteWanted string
	}{
		{"no bounds", Override{Desired: p(3)}, 1, 10, 1, 10, ""},
		{"narrowed", Override{Min: p(2), Max: p(4)}, 1, 10, 2, 4, ""},
		{"max only", Override{Max: p(1)}, 0, 10, 0, 1, ""},
		{"max above the group's is clamped", Override{Max: p(20)}, 1, 10, 1, 10, "max 20 is outside the node group's bounds 1..10; using 10"},
		{"min below the group's is clamped", Override{Min: p(0)}, 2, 10, 2, 10, "min 0 is outside the node group's bounds 2..10; using 2"},
		{"both outside", Override{Min: p(12), Max: p(15)}, 1, 10, 10, 10,
			"min 12 is outside the node group's bounds 1..10; using 10; max 15 is outside the node group's bounds 10..10; using 10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, note := EffectiveBounds(tc.o, tc.lo, tc.hi)
			if lo != tc.wantMin || hi != tc.wantMax || note != tc.noteWanted {
				t.Errorf("EffectiveBounds = %d..%d %q, want %d..%d %q", lo, hi, note, tc.wantMin, tc.wantMax, tc.noteWanted)
			}
		})
	}
}

// TestOverridesOf: desiredCapacity reaches every managed group; a
// nodeGroups entry replaces it for its group and inherits desiredCapacity
// when it has no desired of its own.
func TestOverridesOf(t *testing.T) {
	p := func(v int) *int { return &v }
	at := time.Date(2027, 3, 1, 20, 0, 0, 0, time.UTC)
	s := Schedule{Name: "night", DesiredCapacity: p(1), NodeGroups: []NodeGroup{
		{Name: "gpu", Max: p(0), Desired: p(0)},
		{Name: "workers", Max: p(2)},
	}}
	got := OverridesOf(s, []string{"workers", "gpu", "batch"}, at)
	want := []Override{
		{Group: "workers", Schedule: "night", Max: p(2), Desired: p(1), FiredAt: at},
		{Group: "gpu", Schedule: "night", Max: p(0), Desired: p(0), FiredAt: at},
		{Group: "batch", Schedule: "night", Desired: p(1), FiredAt: at},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OverridesOf = %+v\nwant %+v", got, want)
	}
	if o := got[0]; o.Source() != "schedule night" || !o.Bounds() || got[2].Bounds() {
		t.Errorf("Source %q, Bounds %v/%v", o.Source(), o.Bounds(), got[2].Bounds())
	}
}
