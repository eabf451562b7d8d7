package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/state"
)

// forEachScheduleStore runs a test against every ScheduleStore. Stores
// open returns for the same test share one backing, so two stores of one
// cluster see each other's writes.
func forEachScheduleStore(t *testing.T, test func(t *testing.T, open func(cluster string) state.ScheduleStore)) {
	backends := []struct {
		name string
		open func(t *testing.T) func(cluster string) state.ScheduleStore
	}{
		{"memory", func(t *testing.T) func(string) state.ScheduleStore {
			var mu sync.Mutex
			stores := map[string]*state.MemorySchedules{}
			return func(cluster string) state.ScheduleStore {
				mu.Lock()
				defer mu.Unlock()
				if stores[cluster] == nil {
					stores[cluster] = state.NewMemorySchedules(cluster)
				}
				return stores[cluster]
			}
		}},
		{"dynamodb", func(t *testing.T) func(string) state.ScheduleStore {
			client, table := newTable(t)
			return func(cluster string) state.ScheduleStore { return state.NewDynamoDB(client, table, cluster) }
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.open(t))
		})
	}
}

func intPtr(v int) *int       { return &v }
func int32Ptr(v int32) *int32 { return &v }

// daytime is scalerd's example, read from its file unchanged.
func daytime(t *testing.T) (schedule.Schedule, []byte) {
	t.Helper()
	data, err := os.ReadFile("../schedule/testdata/daytime.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := schedule.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return s, data
}

func daily(name, cron string) schedule.Schedule {
	return schedule.Schedule{Name: name, Cron: cron, DesiredCapacity: intPtr(1)}
}

func putSchedule(t *testing.T, s state.ScheduleStore, sch schedule.Schedule, expected int64, now time.Time) schedule.Record {
	t.Helper()
	rec, err := s.PutSchedule(t.Context(), sch, expected, now)
	if err != nil {
		t.Fatalf("PutSchedule(%s, %d): %v", sch.Name, expected, err)
	}
	return rec
}

func getSchedule(t *testing.T, s state.ScheduleStore, name string) schedule.Record {
	t.Helper()
	rec, err := s.GetSchedule(t.Context(), name)
	if err != nil {
		t.Fatalf("GetSchedule(%s): %v", name, err)
	}
	return rec
}

func recordsEqual(a, b schedule.Record) bool {
	return reflect.DeepEqual(a.Schedule, b.Schedule) && a.Version == b.Version &&
		a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) && a.LastFiredAt.Equal(b.LastFiredAt) &&
		a.LastSkippedAt.Equal(b.LastSkippedAt) && a.LastSkipReason == b.LastSkipReason
}

func TestSchedulesRoundTripScalerdFile(t *testing.T) {
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		s := open("prod")
		sch, data := daytime(t)
		put := putSchedule(t, s, sch, 0, at(0))
		got := getSchedule(t, s, "daytime")
		if !recordsEqual(put, got) {
			t.Errorf("GetSchedule = %+v, PutSchedule returned %+v", got, put)
		}
		if !reflect.DeepEqual(got.Schedule, sch) {
			t.Errorf("stored schedule = %+v, want %+v", got.Schedule, sch)
		}
		enc, err := json.Marshal(got.Schedule)
		if err != nil {
			t.Fatal(err)
		}
		var want, have any
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(enc, &have); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(have, want) {
			t.Errorf("stored document encodes as %s, want the file's document", enc)
		}
	})
}

func TestSchedulesRoundTripEveryField(t *testing.T) {
	full := schedule.Schedule{
		Name: "daytime", Cron: "0 0 8 * * 1-5", Timezone: "Europe/Amsterdam",
		Description:       "Switch to full capacity during day time — \"quoted\", ünïcode",
		DesiredCapacity:   intPtr(0),
		NodeGroups:        []schedule.NodeGroup{{Name: "workers", Desired: intPtr(5), Min: intPtr(3), Max: intPtr(10)}, {Name: "gpu", Max: intPtr(0)}},
		AppScaleTemplates: []schedule.AppScaleTemplate{{App: "todo", Replicas: int32Ptr(0)}},
		Apps:              []schedule.App{{Namespace: "default", Kind: "StatefulSet", Name: "db", Replicas: int32Ptr(3)}},
	}
	empty := schedule.Schedule{Name: "empty-lists", Cron: "@daily", DesiredCapacity: intPtr(2),
		NodeGroups: []schedule.NodeGroup{}, AppScaleTemplates: []schedule.AppScaleTemplate{}, Apps: []schedule.App{}}
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		s := open("prod")
		for _, sch := range []schedule.Schedule{full, empty} {
			putSchedule(t, s, sch, 0, at(0))
			if got := getSchedule(t, s, sch.Name); !reflect.DeepEqual(got.Schedule, sch) {
				t.Errorf("stored %+v, got back %+v", sch, got.Schedule)
			}
		}
	})
}

func TestSchedulesPutGetListDelete(t *testing.T) {
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		ctx := t.Context()
		s := open("prod")
		if list, err := s.ListSchedules(ctx); err != nil || len(list) != 0 {
			t.Fatalf("ListSchedules on an empty store = %+v, %v", list, err)
		}
		night := putSchedule(t, s, daily("night", "0 20 * * *"), 0, at(0))
		if night.Version != 1 || !night.CreatedAt.Equal(at(0)) || !night.UpdatedAt.Equal(at(0)) || !night.LastFiredAt.IsZero() {
			t.Errorf("created = %+v, want version 1 created and updated at %s, never fired", night, at(0))
		}
		putSchedule(t, s, daily("day", "0 8 * * *"), 0, at(time.Minute))

		list, err := s.ListSchedules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Schedule.Name != "day" || list[1].Schedule.Name != "night" {
			t.Fatalf("ListSchedules = %+v, want day and night, by name", list)
		}
		if !recordsEqual(list[1], night) {
			t.Errorf("listed %+v, want %+v", list[1], night)
		}

		changed := daily("night", "0 21 * * *")
		v2 := putSchedule(t, s, changed, 1, at(time.Hour))
		if v2.Version != 2 || !v2.CreatedAt.Equal(at(0)) || !v2.UpdatedAt.Equal(at(time.Hour)) || v2.Schedule.Cron != "0 21 * * *" {
			t.Errorf("replaced = %+v, want version 2, created at %s, updated at %s", v2, at(0), at(time.Hour))
		}

		if err := s.DeleteSchedule(ctx, "night"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetSchedule(ctx, "night"); !errors.Is(err, state.ErrScheduleNotFound) {
			t.Errorf("GetSchedule after delete: err = %v, want ErrScheduleNotFound", err)
		}
		if err := s.DeleteSchedule(ctx, "night"); !errors.Is(err, state.ErrScheduleNotFound) {
			t.Errorf("DeleteSchedule again: err = %v, want ErrScheduleNotFound", err)
		}
		if list, err := s.ListSchedules(ctx); err != nil || len(list) != 1 {
			t.Errorf("ListSchedules after delete = %+v, %v; want day only", list, err)
		}

		// Created again: a new schedule, version 1, nothing fired.
		again := putSchedule(t, s, daily("night", "0 20 * * *"), 0, at(2*time.Hour))
		if again.Version != 1 || !again.CreatedAt.Equal(at(2*time.Hour)) {
			t.Errorf("recreated = %+v, want version 1 created at %s", again, at(2*time.Hour))
		}
	})
}

func TestSchedulesVersionConflicts(t *testing.T) {
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		ctx := t.Context()
		s := open("prod")
		putSchedule(t, s, daily("day", "0 8 * * *"), 0, at(0))
		tests := []struct {
			name     string
			expected int64
			want     string
			notFound bool
		}{
			{"create an existing schedule", 0, "it already exists, at version 1", false},
			{"stale version", 2, "expected version 2, stored version is 1", false},
			{"replace a missing schedule", 3, "expected version 3, but no such schedule", true},
		}
		for _, tt := range tests {
			sch := daily("day", "0 9 * * *")
			if tt.notFound {
				sch.Name = "missing"
			}
			_, err := s.PutSchedule(ctx, sch, tt.expected, at(time.Minute))
			if !errors.Is(err, state.ErrVersionConflict) || errors.Is(err, state.ErrScheduleNotFound) != tt.notFound {
				t.Errorf("%s: err = %v, want ErrVersionConflict (ErrScheduleNotFound: %v)", tt.name, err, tt.notFound)
			}
			if err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: err = %q, want it to contain %q", tt.name, err, tt.want)
			}
		}
		if got := getSchedule(t, s, "day"); got.Version != 1 || got.Schedule.Cron != "0 8 * * *" {
			t.Errorf("after refused writes: %+v, want version 1 unchanged", got)
		}
		if _, err := s.GetSchedule(ctx, "missing"); !errors.Is(err, state.ErrScheduleNotFound) {
			t.Errorf("a refused replace created the schedule: err = %v", err)
		}

		// Two editors read version 1; the first write wins, the second is
		// refused and can retry from version 2.
		a, b := open("prod"), open("prod")
		if _, err := a.PutSchedule(ctx, daily("day", "0 7 * * *"), 1, at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.PutSchedule(ctx, daily("day", "0 6 * * *"), 1, at(time.Hour)); !errors.Is(err, state.ErrVersionConflict) {
			t.Errorf("second editor: err = %v, want ErrVersionConflict", err)
		}
		if rec, err := b.PutSchedule(ctx, daily("day", "0 6 * * *"), 2, at(time.Hour)); err != nil || rec.Version != 3 {
			t.Errorf("retry = %+v, %v; want version 3", rec, err)
		}
	})
}

func TestSchedulesPutRefusesInvalid(t *testing.T) {
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		ctx := t.Context()
		s := open("prod")
		for _, sch := range []schedule.Schedule{
			{Name: "bad cron", Cron: "0 8 * *", DesiredCapacity: intPtr(1)},
			{Name: "nothing", Cron: "0 8 * * *"},
			{Name: "", Cron: "0 8 * * *", DesiredCapacity: intPtr(1)},
		} {
			_, err := s.PutSchedule(ctx, sch, 0, at(0))
			var ve *schedule.ValidationError
			if !errors.As(err, &ve) {
				t.Errorf("PutSchedule(%+v): err = %v, want a *schedule.ValidationError", sch, err)
			}
		}
		if _, err := s.PutSchedule(ctx, daily("day", "0 8 * * *"), -1, at(0)); err == nil {
			t.Errorf("PutSchedule with version -1 succeeded")
		}
		if list, err := s.ListSchedules(ctx); err != nil || len(list) != 0 {
			t.Errorf("ListSchedules = %+v, %v; want nothing stored", list, err)
		}
	})
}

func TestSchedulesClaimFire(t *testing.T) {
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		ctx := t.Context()
		s := open("prod")
		putSchedule(t, s, daily("day", "0 8 * * *"), 0, at(0))
		claims := []struct {
			fireAt time.Time
			want   bool
		}{
			{at(time.Hour), true},
			{at(time.Hour), false},                               // the same fire time again
			{at(30 * time.Minute), false},                        // an earlier one
			{at(time.Hour + 500*time.Millisecond), true},         // later, by a fraction…
			{at(time.Hour + time.Second), true},                  // …ordered right against whole seconds
			{at(time.Hour + 500*time.Millisecond), false},        // and not back
			{at(time.Hour).In(time.FixedZone("X", 7200)), false}, // the same instant in another zone
			{at(48 * time.Hour), true},
		}
		for i, c := range claims {
			got, err := s.ClaimFire(ctx, "day", c.fireAt)
			if err != nil {
				t.Fatalf("claim %d: %v", i, err)
			}
			if got != c.want {
				t.Errorf("claim %d of %s = %v, want %v", i, c.fireAt.Format(time.RFC3339Nano), got, c.want)
			}
		}
		rec := getSchedule(t, s, "day")
		if !rec.LastFiredAt.Equal(at(48*time.Hour)) || rec.Version != 1 || !rec.LastSkippedAt.IsZero() {
			t.Errorf("after claims: %+v, want lastFiredAt %s, version still 1, no skip", rec, at(48*time.Hour))
		}

		// Replacing the definition keeps the fire record.
		v2 := putSchedule(t, s, daily("day", "0 9 * * *"), 1, at(49*time.Hour))
		if !v2.LastFiredAt.Equal(at(48 * time.Hour)) {
			t.Errorf("after replace: lastFiredAt %s, want %s", v2.LastFiredAt, at(48*time.Hour))
		}

		if _, err := s.ClaimFire(ctx, "missing", at(time.Hour)); !errors.Is(err, state.ErrScheduleNotFound) {
			t.Errorf("ClaimFire of a missing schedule: err = %v, want ErrScheduleNotFound", err)
		}
		if _, err := s.RecordSkip(ctx, "missing", at(time.Hour), "x"); !errors.Is(err, state.ErrScheduleNotFound) {
			t.Errorf("RecordSkip of a missing schedule: err = %v, want ErrScheduleNotFound", err)
		}
		if _, err := s.ClaimFire(ctx, "day", time.Time{}.Add(-time.Hour)); err == nil {
			t.Errorf("ClaimFire before year 1 succeeded")
		}
	})
}

// tick is the schedule function's cycle on a store: list, decide, and claim
// or skip each due schedule. It returns the schedules it fired and skipped,
// which are only those whose claim it won.
func tick(ctx context.Context, s state.ScheduleStore, now time.Time, maxLateness time.Duration) (fired, skipped []string, err error) {
	recs, err := s.ListSchedules(ctx)
	if err != nil {
		return nil, nil, err
	}
	decisions, err := schedule.Decide(recs, now, maxLateness)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range decisions {
		var won bool
		switch d.Action {
		case schedule.ActionFire:
			won, err = s.ClaimFire(ctx, d.Name, d.FireAt)
		case schedule.ActionSkip:
			won, err = s.RecordSkip(ctx, d.Name, d.FireAt, d.Reason)
		}
		if err != nil {
			return nil, nil, err
		}
		if won && d.Action == schedule.ActionFire {
			fired = append(fired, d.Name+"@"+d.FireAt.UTC().Format(time.RFC3339))
		} else if won {
			skipped = append(skipped, d.Name+"@"+d.FireAt.UTC().Format(time.RFC3339))
		}
	}
	return fired, skipped, nil
}

func TestSchedulesConcurrentTicksFireOnce(t *testing.T) {
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		ctx := t.Context()
		dueAt := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
		putSchedule(t, open("prod"), daily("day", "0 8 * * *"), 0, dueAt.Add(-time.Hour))
		putSchedule(t, open("prod"), daily("often", "* * * * *"), 0, dueAt.Add(-time.Second))
		now := dueAt.Add(2 * time.Second)

		const ticks = 20
		var (
			wg         sync.WaitGroup
			start      = make(chan struct{})
			mu         sync.Mutex
			allFired   []string
			directWins atomic.Int64
			errs       = make(chan error, 2*ticks)
		)
		// 20 whole ticks at once (each its own store value, as 20 Lambda
		// invocations would have)...
		for range ticks {
			wg.Go(func() {
				<-start
				fired, _, err := tick(ctx, open("prod"), now, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				allFired = append(allFired, fired...)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		// ...and then 20 bare claims of one fire time at once.
		start = make(chan struct{})
		next := dueAt.Add(time.Minute)
		for range ticks {
			wg.Go(func() {
				<-start
				won, err := open("prod").ClaimFire(ctx, "often", next)
				if err != nil {
					errs <- err
				} else if won {
					directWins.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := fmt.Sprint(slices.Sorted(slices.Values(allFired))); got != "[day@2026-11-30T08:00:00Z often@2026-11-30T08:00:00Z]" {
			t.Errorf("20 concurrent ticks fired %s, want each due schedule exactly once", got)
		}
		if n := directWins.Load(); n != 1 {
			t.Errorf("20 concurrent claims of one fire time: %d won, want 1", n)
		}
	})
}

func TestSchedulesLateTickFiresOnce(t *testing.T) {
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		ctx := t.Context()
		s := open("prod")
		eight := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
		putSchedule(t, s, daily("day", "0 8 * * *"), 0, eight.Add(-10*time.Minute))
		putSchedule(t, s, daily("often", "* * * * *"), 0, eight.Add(-10*time.Minute))
		mustTick := func(now time.Time) ([]string, []string) {
			t.Helper()
			fired, skipped, err := tick(ctx, s, now, 15*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return fired, skipped
		}
		// Ticks stopped at 07:59:30 and resume five minutes late.
		if fired, _ := mustTick(eight.Add(-30 * time.Second)); fmt.Sprint(fired) != "[often@2026-11-30T07:59:00Z]" {
			t.Errorf("07:59:30 tick fired %v", fired)
		}
		fired, skipped := mustTick(eight.Add(5*time.Minute + 10*time.Second))
		if fmt.Sprint(fired) != "[day@2026-11-30T08:00:00Z often@2026-11-30T08:05:00Z]" || len(skipped) != 0 {
			t.Errorf("late tick fired %v, skipped %v; want day once (for 08:00) and often once (for 08:05)", fired, skipped)
		}
		// The same late tick delivered again, and the next one.
		if fired, skipped := mustTick(eight.Add(5*time.Minute + 20*time.Second)); len(fired)+len(skipped) != 0 {
			t.Errorf("repeated tick fired %v, skipped %v; want nothing", fired, skipped)
		}
		if fired, _ := mustTick(eight.Add(6 * time.Minute)); fmt.Sprint(fired) != "[often@2026-11-30T08:06:00Z]" {
			t.Errorf("next tick fired %v, want often at 08:06 only", fired)
		}
		if got := getSchedule(t, s, "day"); !got.LastFiredAt.Equal(eight) || !got.LastSkippedAt.IsZero() {
			t.Errorf("day = %+v, want lastFiredAt 08:00 and no skip", got)
		}
	})
}

func TestSchedulesSkipPastMaxLateness(t *testing.T) {
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		ctx := t.Context()
		s := open("prod")
		eight := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
		putSchedule(t, s, daily("day", "0 8 * * *"), 0, eight.Add(-24*time.Hour))

		fired, skipped, err := tick(ctx, s, eight.Add(40*time.Minute), 15*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(fired) != 0 || fmt.Sprint(skipped) != "[day@2026-11-30T08:00:00Z]" {
			t.Errorf("tick 40m late fired %v, skipped %v; want day skipped", fired, skipped)
		}
		rec := getSchedule(t, s, "day")
		if !rec.LastFiredAt.Equal(eight) || !rec.LastSkippedAt.Equal(eight) ||
			!strings.Contains(rec.LastSkipReason, "40m0s ago, more than the maximum lateness of 15m0s") {
			t.Errorf("after the skip: %+v, want lastFiredAt and lastSkippedAt 08:00 with the reason", rec)
		}
		// Recorded once: later ticks leave it, and the next day fires.
		if won, err := s.RecordSkip(ctx, "day", eight, "again"); err != nil || won {
			t.Errorf("RecordSkip again = %v, %v; want false", won, err)
		}
		if fired, skipped, err := tick(ctx, s, eight.Add(41*time.Minute), 15*time.Minute); err != nil || len(fired)+len(skipped) != 0 {
			t.Errorf("next tick fired %v, skipped %v, %v; want nothing", fired, skipped, err)
		}
		if fired, _, err := tick(ctx, s, eight.Add(24*time.Hour+time.Second), 15*time.Minute); err != nil || fmt.Sprint(fired) != "[day@2026-12-01T08:00:00Z]" {
			t.Errorf("next day fired %v, %v", fired, err)
		}
		rec = getSchedule(t, s, "day")
		if !rec.LastSkippedAt.Equal(eight) || rec.LastSkipReason == "" {
			t.Errorf("a fire cleared the skip record: %+v", rec)
		}
	})
}

func TestSchedulesNewScheduleDoesNotFireForThePast(t *testing.T) {
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		s := open("prod")
		eight := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
		putSchedule(t, s, daily("day", "0 8 * * *"), 0, eight.Add(30*time.Second))
		if fired, skipped, err := tick(t.Context(), s, eight.Add(time.Minute), 15*time.Minute); err != nil || len(fired)+len(skipped) != 0 {
			t.Errorf("tick after creation fired %v, skipped %v, %v; want nothing", fired, skipped, err)
		}
	})
}

func TestSchedulesClustersApart(t *testing.T) {
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		ctx := t.Context()
		prod, stage := open("prod"), open("stage")
		putSchedule(t, prod, daily("day", "0 8 * * *"), 0, at(0))
		if list, err := stage.ListSchedules(ctx); err != nil || len(list) != 0 {
			t.Errorf("stage lists %+v, %v; want nothing", list, err)
		}
		putSchedule(t, stage, daily("day", "0 9 * * *"), 0, at(0))
		if won, err := stage.ClaimFire(ctx, "day", at(time.Hour)); err != nil || !won {
			t.Fatalf("stage claim = %v, %v", won, err)
		}
		if got := getSchedule(t, prod, "day"); got.Schedule.Cron != "0 8 * * *" || !got.LastFiredAt.IsZero() {
			t.Errorf("prod's schedule = %+v, changed by stage", got)
		}
	})
}

func TestSchedulesDynamoDBItem(t *testing.T) {
	client, table := newTable(t)
	rec := &recorder{DynamoDBAPI: client, pageSize: 2}
	s := state.NewDynamoDB(rec, table, "prod")
	sch, data := daytime(t)
	putSchedule(t, s, sch, 0, at(0))
	if _, err := s.ClaimFire(t.Context(), "daytime", at(90*time.Minute)); err != nil {
		t.Fatal(err)
	}
	item := getItem(t, client, table, "CLUSTER#prod", "SCHEDULE#daytime")
	def, ok := item["definition"].(*types.AttributeValueMemberS)
	if !ok {
		t.Fatalf("item %v has no string definition", item)
	}
	var want, have any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(def.Value), &have); err != nil {
		t.Fatalf("definition %q is not JSON: %v", def.Value, err)
	}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("definition = %s, want scalerd's document", def.Value)
	}
	for attr, want := range map[string]types.AttributeValue{
		"version":     &types.AttributeValueMemberN{Value: "1"},
		"createdAt":   &types.AttributeValueMemberS{Value: "2026-11-30T10:00:00.000000000Z"},
		"updatedAt":   &types.AttributeValueMemberS{Value: "2026-11-30T10:00:00.000000000Z"},
		"lastFiredAt": &types.AttributeValueMemberS{Value: "2026-11-30T11:30:00.000000000Z"},
	} {
		if !reflect.DeepEqual(item[attr], want) {
			t.Errorf("attribute %s = %#v, want %#v", attr, item[attr], want)
		}
	}

	// Listing follows pages, and skips other kinds of items.
	for i := range 4 {
		putSchedule(t, s, daily(fmt.Sprintf("s%d", i), "0 8 * * *"), 0, at(0))
	}
	if _, err := state.NewDynamoDB(client, table, "prod").AcquireLease(t.Context(), "schedule", "me", time.Minute, at(0)); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListSchedules(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list {
		names = append(names, r.Schedule.Name)
	}
	if fmt.Sprint(names) != "[daytime s0 s1 s2 s3]" {
		t.Errorf("listed %v", names)
	}
	if rec.queries.Load() < 3 {
		t.Errorf("%d queries for 5 items in pages of 2, want 3 or more", rec.queries.Load())
	}
}

// TestRecordResult: the last result is kept with the schedule, survives a
// definition update, and needs the schedule to exist.
func TestRecordResult(t *testing.T) {
	at := time.Date(2027, 3, 1, 8, 0, 0, 0, time.UTC)
	forEachScheduleStore(t, func(t *testing.T, open func(string) state.ScheduleStore) {
		s := open("prod")
		sch := daily("day", "0 8 * * *")
		putSchedule(t, s, sch, 0, at.Add(-time.Hour))
		from := 1
		res := schedule.Result{Schedule: "day", Action: "fire", FireAt: at, Changes: []schedule.Change{
			{Kind: schedule.KindDeployment, Namespace: "shop", Name: "web", From: &from, To: 3, Outcome: schedule.OutcomeScaled},
		}}
		if err := s.RecordResult(t.Context(), "day", res); err != nil {
			t.Fatal(err)
		}
		sch.Description = "edited"
		putSchedule(t, s, sch, 1, at.Add(time.Hour))
		got := getSchedule(t, s, "day").LastResult
		if got == nil || len(got.Changes) != 1 || *got.Changes[0].From != 1 || got.Changes[0].To != 3 || !got.FireAt.Equal(at) {
			t.Fatalf("last result %+v, want web 1 -> 3 at %v", got, at)
		}
		*got.Changes[0].From = 7 // must not reach the store
		if again := getSchedule(t, s, "day").LastResult; *again.Changes[0].From != 1 {
			t.Errorf("a caller changed the stored result: from %d", *again.Changes[0].From)
		}
		if err := s.RecordResult(t.Context(), "nope", res); !errors.Is(err, state.ErrScheduleNotFound) {
			t.Errorf("RecordResult of a missing schedule: %v, want ErrScheduleNotFound", err)
		}
	})
}
