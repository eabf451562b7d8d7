package state_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// backend opens stores of one implementation. Stores that open returns for
// the same test share one backing (one table, for DynamoDB), so two clusters
// live side by side and two stores of one cluster see each other's writes.
type backend struct {
	name string
	open func(t *testing.T) func(cluster string) state.Store
}

func backends() []backend {
	return []backend{
		{name: "memory", open: func(t *testing.T) func(string) state.Store {
			var mu sync.Mutex
			stores := map[string]*state.Memory{}
			return func(cluster string) state.Store {
				mu.Lock()
				defer mu.Unlock()
				if stores[cluster] == nil {
					stores[cluster] = state.NewMemory(cluster)
				}
				return stores[cluster]
			}
		}},
		{name: "dynamodb", open: func(t *testing.T) func(string) state.Store {
			client := dynamoClient(t)
			table := tableName(t)
			if err := state.CreateTable(t.Context(), client, table); err != nil {
				t.Fatal(err)
			}
			return func(cluster string) state.Store { return state.NewDynamoDB(client, table, cluster) }
		}},
	}
}

// dynamoClient is a client of the test binary's shared dynalite.
func dynamoClient(t *testing.T) *dynamodb.Client {
	t.Helper()
	return testbed.DynamoDB(t).Client(t)
}

var notTableChar = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// tableName gives each test its own table in the shared dynalite.
func tableName(t *testing.T) string {
	name := notTableChar.ReplaceAllString(t.Name(), "-")
	if len(name) > 255 {
		name = name[len(name)-255:]
	}
	return name
}

// forEachBackend runs the same test against every implementation.
func forEachBackend(t *testing.T, test func(t *testing.T, open func(cluster string) state.Store)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.open(t))
		})
	}
}

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func times(kv ...any) map[string]time.Time {
	m := map[string]time.Time{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(time.Time)
	}
	return m
}

// sample is a State with every kind of entry.
func sample() snapshot.State {
	return snapshot.State{
		UnneededSince: times("node-a", at(-15*time.Minute), "node-b", at(-time.Minute)),
		LastScaleUp:   times("workers", at(-time.Hour), "gpu", at(-2*time.Hour)),
		BackoffUntil:  times("gpu", at(5*time.Minute)),
	}
}

// with returns a copy of s changed by edit.
func with(s snapshot.State, edit func(*snapshot.State)) snapshot.State {
	c := snapshot.State{
		UnneededSince: maps.Clone(s.UnneededSince),
		LastScaleUp:   maps.Clone(s.LastScaleUp),
		BackoffUntil:  maps.Clone(s.BackoffUntil),
	}
	for _, m := range []*map[string]time.Time{&c.UnneededSince, &c.LastScaleUp, &c.BackoffUntil} {
		if *m == nil {
			*m = map[string]time.Time{}
		}
	}
	edit(&c)
	return c
}

// describe prints a State in a stable form for comparisons: nil and empty
// maps read the same, and times are compared as instants.
func describe(s snapshot.State) string {
	var b strings.Builder
	for _, f := range []struct {
		name string
		m    map[string]time.Time
	}{{"unneededSince", s.UnneededSince}, {"lastScaleUp", s.LastScaleUp}, {"backoffUntil", s.BackoffUntil}} {
		fmt.Fprintf(&b, "%s:", f.name)
		for _, k := range slices.Sorted(maps.Keys(f.m)) {
			fmt.Fprintf(&b, " %s=%s", k, f.m[k].UTC().Format(time.RFC3339Nano))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func load(t *testing.T, s state.Store) snapshot.State {
	t.Helper()
	got, err := s.LoadState(t.Context())
	if err != nil {
		t.Fatalf("LoadState: %v", err)
	}
	if got.UnneededSince == nil || got.LastScaleUp == nil || got.BackoffUntil == nil {
		t.Errorf("LoadState returned nil maps: %+v", got)
	}
	return got
}

func save(t *testing.T, s state.Store, prev, next snapshot.State) {
	t.Helper()
	if err := s.SaveState(t.Context(), prev, next); err != nil {
		t.Fatalf("SaveState: %v", err)
	}
}

func wantState(t *testing.T, s state.Store, want snapshot.State) {
	t.Helper()
	if got := load(t, s); describe(got) != describe(want) {
		t.Errorf("stored state:\n%swant:\n%s", describe(got), describe(want))
	}
}

func TestRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		s := open("prod")
		wantState(t, s, snapshot.State{})

		amsterdam, err := time.LoadLocation("Europe/Amsterdam")
		if err != nil {
			amsterdam = time.FixedZone("CET", 3600)
		}
		want := with(sample(), func(s *snapshot.State) {
			// Nanoseconds and zones survive as the same instant.
			s.UnneededSince["node-c"] = time.Date(2026, 11, 30, 11, 0, 0, 123456789, amsterdam)
			s.LastScaleUp["tiny"] = time.Unix(1, 1)
		})
		save(t, s, snapshot.State{}, want)
		got := load(t, s)
		wantState(t, s, want)
		for node, ts := range got.UnneededSince {
			if ts.Location() != time.UTC {
				t.Errorf("unneededSince of %s is in %v, want UTC", node, ts.Location())
			}
		}
		// What was loaded saves back as no change at all.
		save(t, s, got, got)
		wantState(t, s, want)
	})
}

func TestSaveStateWritesDifferences(t *testing.T) {
	base := sample()
	tests := []struct {
		name string
		next snapshot.State
	}{
		{"nothing changed", base},
		{"node dropped", with(base, func(s *snapshot.State) { delete(s.UnneededSince, "node-a") })},
		{"node added", with(base, func(s *snapshot.State) { s.UnneededSince["node-z"] = at(0) })},
		{"node time changed", with(base, func(s *snapshot.State) { s.UnneededSince["node-b"] = at(time.Second) })},
		{"backoff cleared", with(base, func(s *snapshot.State) { delete(s.BackoffUntil, "gpu") })},
		{"scale-up recorded", with(base, func(s *snapshot.State) { s.LastScaleUp["workers"] = at(0) })},
		{"new group backed off", with(base, func(s *snapshot.State) { s.BackoffUntil["spot"] = at(time.Minute) })},
		{"group forgotten", with(base, func(s *snapshot.State) {
			delete(s.LastScaleUp, "gpu")
			delete(s.BackoffUntil, "gpu")
		})},
		{"everything cleared", snapshot.State{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
				s := open("prod")
				save(t, s, snapshot.State{}, base)
				// Someone else records a scale-up of a group this run
				// leaves unchanged; writing only differences keeps it.
				outside := with(base, func(s *snapshot.State) { s.LastScaleUp["batch"] = at(-time.Second) })
				save(t, open("prod"), base, outside)

				save(t, s, base, tt.next)
				want := with(tt.next, func(s *snapshot.State) { s.LastScaleUp["batch"] = at(-time.Second) })
				wantState(t, s, want)
			})
		})
	}
}

func TestSaveStateConflicts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := t.Context()
		s, other := open("prod"), open("prod")
		base := sample()
		save(t, s, snapshot.State{}, base)

		// Another writer moves workers' scale-up and drops node-b after we
		// loaded base.
		theirs := with(base, func(s *snapshot.State) {
			s.LastScaleUp["workers"] = at(time.Minute)
			delete(s.UnneededSince, "node-b")
		})
		save(t, other, base, theirs)

		ours := with(base, func(s *snapshot.State) {
			s.LastScaleUp["workers"] = at(2 * time.Minute) // conflicts
			s.UnneededSince["node-b"] = at(0)              // conflicts: gone meanwhile
			s.UnneededSince["node-c"] = at(0)              // independent
			delete(s.BackoffUntil, "gpu")                  // independent
		})
		err := s.SaveState(ctx, base, ours)
		if !errors.Is(err, state.ErrConflict) {
			t.Fatalf("SaveState over another writer's change: %v, want ErrConflict", err)
		}
		for _, item := range []string{"GROUP#workers", "NODE#node-b"} {
			if !strings.Contains(err.Error(), item) {
				t.Errorf("conflict error %q does not name %s", err, item)
			}
		}
		// Their changes stay, ours that did not collide are written.
		wantState(t, s, with(theirs, func(s *snapshot.State) {
			s.UnneededSince["node-c"] = at(0)
			delete(s.BackoffUntil, "gpu")
		}))

		// Saving again what is already stored is not a conflict, so a
		// SaveState cut short can be retried.
		save(t, other, base, theirs)
	})
}

func TestClustersShareNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := t.Context()
		prod, staging := open("prod"), open("staging")
		prodState := sample()
		stagingState := snapshot.State{
			UnneededSince: times("node-a", at(-3*time.Minute)),
			LastScaleUp:   times("workers", at(-5*time.Minute)),
		}
		save(t, prod, snapshot.State{}, prodState)
		save(t, staging, snapshot.State{}, stagingState)
		wantState(t, prod, prodState)
		wantState(t, staging, stagingState)

		// Clearing one cluster leaves the other alone.
		save(t, staging, stagingState, snapshot.State{})
		wantState(t, staging, snapshot.State{})
		wantState(t, prod, prodState)

		// Leases of the same name are separate per cluster.
		if _, err := prod.AcquireLease(ctx, "evaluate", "prod-run", time.Minute, t0); err != nil {
			t.Fatalf("prod lease: %v", err)
		}
		if _, err := staging.AcquireLease(ctx, "evaluate", "staging-run", time.Minute, t0); err != nil {
			t.Fatalf("staging lease with prod's held: %v", err)
		}
	})
}

func TestLease(t *testing.T) {
	const ttl = time.Minute
	// step is one call in a sequence against one store; acquire unless
	// release is set.
	type step struct {
		release bool
		holder  string
		now     time.Duration // after t0
		wantErr error         // for acquire
		wantExp time.Duration // after t0, for a successful acquire
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first acquire wins, second holder is refused", []step{
			{holder: "a", now: 0, wantExp: ttl},
			{holder: "b", now: 10 * time.Second, wantErr: state.ErrLeaseHeld},
		}},
		{"same holder re-acquires and extends", []step{
			{holder: "a", now: 0, wantExp: ttl},
			{holder: "a", now: 30 * time.Second, wantExp: 30*time.Second + ttl},
			{holder: "b", now: ttl + time.Second, wantErr: state.ErrLeaseHeld},
		}},
		{"held at its expiry, taken over after", []step{
			{holder: "a", now: 0, wantExp: ttl},
			{holder: "b", now: ttl, wantErr: state.ErrLeaseHeld},
			{holder: "b", now: ttl + time.Nanosecond, wantExp: 2*ttl + time.Second},
			{holder: "a", now: ttl + 2*time.Second, wantErr: state.ErrLeaseHeld},
		}},
		{"release frees it", []step{
			{holder: "a", now: 0, wantExp: ttl},
			{release: true, holder: "a"},
			{holder: "b", now: time.Second, wantExp: time.Second + ttl},
		}},
		{"release by another holder changes nothing", []step{
			{holder: "a", now: 0, wantExp: ttl},
			{release: true, holder: "b"},
			{holder: "b", now: time.Second, wantErr: state.ErrLeaseHeld},
		}},
		{"release after a takeover changes nothing", []step{
			{holder: "a", now: 0, wantExp: ttl},
			{holder: "b", now: 2 * ttl, wantExp: 3 * ttl},
			{release: true, holder: "a"},
			{holder: "a", now: 2*ttl + time.Second, wantErr: state.ErrLeaseHeld},
		}},
		{"release of a lease never taken", []step{
			{release: true, holder: "a"},
			{holder: "b", now: 0, wantExp: ttl},
		}},
		{"expiry rounds up to whole seconds", []step{
			{holder: "a", now: 1500 * time.Millisecond, wantExp: ttl + 2*time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
				ctx := t.Context()
				s := open("prod")
				for i, st := range tt.steps {
					if st.release {
						err := s.ReleaseLease(ctx, state.Lease{Name: "evaluate", Holder: st.holder, ExpiresAt: at(ttl)})
						if err != nil {
							t.Fatalf("step %d: release by %s: %v", i, st.holder, err)
						}
						continue
					}
					l, err := s.AcquireLease(ctx, "evaluate", st.holder, ttl, at(st.now))
					if st.wantErr != nil {
						if !errors.Is(err, st.wantErr) {
							t.Fatalf("step %d: acquire by %s: %v, want %v", i, st.holder, err, st.wantErr)
						}
						continue
					}
					if err != nil {
						t.Fatalf("step %d: acquire by %s: %v", i, st.holder, err)
					}
					want := state.Lease{Name: "evaluate", Holder: st.holder, ExpiresAt: at(st.wantExp)}
					if l.Name != want.Name || l.Holder != want.Holder || !l.ExpiresAt.Equal(want.ExpiresAt) {
						t.Fatalf("step %d: acquire by %s = %+v, want %+v", i, st.holder, l, want)
					}
				}
			})
		})
	}
}

func TestLeaseHeldErrorNamesHolder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := t.Context()
		s := open("prod")
		if _, err := s.AcquireLease(ctx, "drain", "run-1", time.Minute, t0); err != nil {
			t.Fatal(err)
		}
		_, err := s.AcquireLease(ctx, "drain", "run-2", time.Minute, t0)
		if !errors.Is(err, state.ErrLeaseHeld) {
			t.Fatalf("second holder: %v, want ErrLeaseHeld", err)
		}
		for _, part := range []string{`"run-1"`, at(time.Minute).Format(time.RFC3339)} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q does not name %s", err, part)
			}
		}
		// Another lease name is independent.
		if _, err := s.AcquireLease(ctx, "schedule", "run-2", time.Minute, t0); err != nil {
			t.Errorf("other lease: %v", err)
		}
	})
}

func TestLeaseRejectsBadArguments(t *testing.T) {
	tests := []struct {
		name, lease, holder string
		ttl                 time.Duration
	}{
		{"no name", "", "a", time.Minute},
		{"no holder", "evaluate", "", time.Minute},
		{"zero ttl", "evaluate", "a", 0},
		{"negative ttl", "evaluate", "a", -time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
				_, err := open("prod").AcquireLease(t.Context(), tt.lease, tt.holder, tt.ttl, t0)
				if err == nil || errors.Is(err, state.ErrLeaseHeld) {
					t.Fatalf("AcquireLease(%q, %q, %v) = %v, want an argument error", tt.lease, tt.holder, tt.ttl, err)
				}
			})
		})
	}
}

func TestLeaseRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		const racers = 20
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := make(chan struct{})
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			s := open("prod") // DynamoDB: a store each, as separate runs have
			wg.Go(func() {
				<-start
				_, errs[i] = s.AcquireLease(ctx, "evaluate", fmt.Sprintf("run-%02d", i), time.Minute, t0)
			})
		}
		close(start)
		wg.Wait()
		var winners []int
		for i, err := range errs {
			switch {
			case err == nil:
				winners = append(winners, i)
			case !errors.Is(err, state.ErrLeaseHeld):
				t.Errorf("racer %d: %v", i, err)
			}
		}
		if len(winners) != 1 {
			t.Errorf("winners %v, want exactly one", winners)
		}
	})
}
