package state_test

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

func overridesByGroup(t *testing.T, s state.ScheduleStore) map[string]schedule.Override {
	t.Helper()
	list, err := s.Overrides(t.Context())
	if err != nil {
		t.Fatalf("Overrides: %v", err)
	}
	if list == nil {
		t.Fatal("Overrides returned nil, want a list")
	}
	out := map[string]schedule.Override{}
	for _, o := range list {
		if _, dup := out[o.Group]; dup {
			t.Fatalf("group %s listed twice", o.Group)
		}
		out[o.Group] = o
	}
	return out
}

func sameOverride(a, b schedule.Override) bool {
	a.FiredAt, b.FiredAt = a.FiredAt.UTC(), b.FiredAt.UTC()
	return reflect.DeepEqual(a, b)
}

func setOverride(t *testing.T, s state.ScheduleStore, o schedule.Override) bool {
	t.Helper()
	won, err := s.SetOverride(t.Context(), o)
	if err != nil {
		t.Fatalf("SetOverride(%s by %s): %v", o.Group, o.Schedule, err)
	}
	return won
}

func TestOverrides(t *testing.T) {
	t0 := time.Date(2027, 3, 1, 20, 0, 0, 0, time.UTC)
	night := schedule.Override{Group: "workers", Schedule: "night", Max: intPtr(1), Desired: intPtr(1), FiredAt: t0}
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		s := open("prod")
		if got := overridesByGroup(t, s); len(got) != 0 {
			t.Fatalf("new store has overrides %v", got)
		}
		if !setOverride(t, s, night) {
			t.Fatal("first override refused")
		}
		if !setOverride(t, s, night) {
			t.Error("writing the same override again (a retried fire) was refused")
		}
		earlier := schedule.Override{Group: "workers", Schedule: "day", Min: intPtr(3), FiredAt: t0.Add(-time.Hour)}
		if setOverride(t, s, earlier) {
			t.Error("an override fired earlier replaced a later one")
		}
		if got := overridesByGroup(t, s)["workers"]; !sameOverride(got, night) {
			t.Errorf("override %+v, want night's %+v", got, night)
		}

		// Ties in fire time go to the later schedule name, whatever the
		// order of the writes.
		tie := t0.Add(12 * time.Hour)
		a := schedule.Override{Group: "gpu", Schedule: "a", Max: intPtr(2), FiredAt: tie}
		b := schedule.Override{Group: "gpu", Schedule: "b", Max: intPtr(4), FiredAt: tie}
		setOverride(t, s, b)
		if setOverride(t, s, a) {
			t.Error("tie: schedule a replaced schedule b")
		}
		if got := overridesByGroup(t, s)["gpu"]; got.Schedule != "b" {
			t.Errorf("tie: override by %s, want b", got.Schedule)
		}

		// Another cluster in the same table sees none of it.
		if got := overridesByGroup(t, open("staging")); len(got) != 0 {
			t.Errorf("other cluster sees %v", got)
		}

		cleared, err := s.ClearOverrides(t.Context(), "night")
		if err != nil || !reflect.DeepEqual(cleared, []string{"workers"}) {
			t.Fatalf("ClearOverrides(night) = %v, %v; want [workers]", cleared, err)
		}
		got := overridesByGroup(t, s)
		if _, ok := got["workers"]; ok || got["gpu"].Schedule != "b" {
			t.Errorf("after clearing night: %v", got)
		}
		cleared, err = s.ClearOverrides(t.Context(), "night")
		if err != nil || len(cleared) != 0 {
			t.Errorf("clearing again = %v, %v; want nothing", cleared, err)
		}
		// A cleared group takes an override of any age again.
		if !setOverride(t, s, earlier) {
			t.Error("override refused on a cleared group")
		}
	})
}

// TestOverridesConcurrent: the latest fire wins however the writes
// interleave.
func TestOverridesConcurrent(t *testing.T) {
	t0 := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				o := schedule.Override{Group: "workers", Schedule: fmt.Sprintf("s%02d", i), Max: intPtr(i), FiredAt: t0.Add(time.Duration(i) * time.Minute)}
				if _, err := open("prod").SetOverride(t.Context(), o); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := overridesByGroup(t, open("prod"))["workers"]; got.Schedule != "s11" || *got.Max != 11 {
			t.Errorf("override %+v, want s11's", got)
		}
	})
}

func TestOverridesRefuseBadInput(t *testing.T) {
	at := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		o    schedule.Override
		want string
	}{
		{"no group", schedule.Override{Schedule: "n", FiredAt: at}, "node group name is empty"},
		{"no schedule", schedule.Override{Group: "g", FiredAt: at}, "schedule name is empty"},
		{"negative max", schedule.Override{Group: "g", Schedule: "n", Max: intPtr(-1), FiredAt: at}, "max -1 is negative"},
		{"no fire time", schedule.Override{Group: "g", Schedule: "n"}, "fire time is not set"},
	}
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		s := open("prod")
		for _, tc := range cases {
			_, err := s.SetOverride(t.Context(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
			}
		}
		if got := overridesByGroup(t, s); len(got) != 0 {
			t.Errorf("refused writes stored %v", got)
		}
		if _, err := s.ClearOverrides(t.Context(), ""); err == nil {
			t.Error("ClearOverrides with no name: no error")
		}
	})
}

// TestOverrideBesideState: the override and the planner's times share the
// GROUP# item without overwriting each other.
func TestOverrideBesideState(t *testing.T) {
	client, table := newTable(t)
	d := state.NewDynamoDB(client, table, "prod")
	at := time.Date(2027, 3, 1, 20, 0, 0, 0, time.UTC)
	prev, err := d.LoadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	next := snapshot.State{UnneededSince: map[string]time.Time{}, LastScaleUp: map[string]time.Time{"workers": at}, BackoffUntil: map[string]time.Time{}}
	if err := d.SaveState(t.Context(), prev, next); err != nil {
		t.Fatal(err)
	}
	o := schedule.Override{Group: "workers", Schedule: "night", Max: intPtr(1), FiredAt: at}
	if !setOverride(t, d, o) {
		t.Fatal("override refused")
	}
	later := next
	later.LastScaleUp = map[string]time.Time{"workers": at.Add(time.Minute)}
	if err := d.SaveState(t.Context(), next, later); err != nil {
		t.Fatal(err)
	}
	st, err := d.LoadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !st.LastScaleUp["workers"].Equal(at.Add(time.Minute)) {
		t.Errorf("lastScaleUp %v after the override was set", st.LastScaleUp)
	}
	if got := overridesByGroup(t, d)["workers"]; !sameOverride(got, o) {
		t.Errorf("override %+v after SaveState, want %+v", got, o)
	}
}
