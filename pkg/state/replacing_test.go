package state_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

func replacement(group string, since time.Time, nodes ...string) snapshot.Replacement {
	return snapshot.Replacement{NodeGroup: group, Delta: 1, Nodes: nodes, Since: since}
}

// TestReplacingRoundTrip: a replacement started, kept, and done reads back
// as written at every step, beside the other state, and apart per cluster.
func TestReplacingRoundTrip(t *testing.T) {
	since := time.Date(2026, 12, 4, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := context.Background()
		s, other := open("c1"), open("c2")
		prev, err := s.LoadState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(prev.Replacing) != 0 {
			t.Fatalf("new store replacing = %+v", prev.Replacing)
		}
		next := prev.Normal()
		next.LastScaleUp["small"] = since
		next.Replacing = map[string]snapshot.Replacement{"r1": replacement("small", since, "big-1", "big-2")}
		if err := s.SaveState(ctx, prev, next); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := got.Replacing["r1"]
		if !ok || len(got.Replacing) != 1 || r.NodeGroup != "small" || r.Delta != 1 ||
			strings.Join(r.Nodes, ",") != "big-1,big-2" || !r.Since.Equal(since) || r.Since.Location() != time.UTC {
			t.Fatalf("loaded replacing = %+v, want r1 as saved (in UTC)", got.Replacing)
		}
		if !got.LastScaleUp["small"].Equal(since) {
			t.Errorf("lastScaleUp = %v", got.LastScaleUp)
		}
		if o, err := other.LoadState(ctx); err != nil || len(o.Replacing) != 0 {
			t.Errorf("another cluster sees replacing %+v (err %v)", o.Replacing, err)
		}

		// Saving what was loaded unchanged writes nothing and fails nothing.
		if err := s.SaveState(ctx, got, got.Normal()); err != nil {
			t.Fatal(err)
		}
		// Done: the replacement goes.
		done := got.Normal()
		delete(done.Replacing, "r1")
		if err := s.SaveState(ctx, got, done); err != nil {
			t.Fatal(err)
		}
		if after, err := s.LoadState(ctx); err != nil || len(after.Replacing) != 0 {
			t.Errorf("after done replacing = %+v (err %v)", after.Replacing, err)
		}
	})
}

// TestReplacingDrainedRoundTrip: a replacement goes through every stored
// form it has: started, drained (with the nodes its old nodes' pods moved
// onto), drained again later while its old nodes still drain, and gone once
// its hold ends. Each reads back as written, times in UTC, and saving what
// was loaded unchanged writes nothing.
func TestReplacingDrainedRoundTrip(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	since := time.Date(2026, 12, 4, 10, 0, 0, 123456789, cet)
	started := replacement("small", since, "big-1", "big-2")
	drained := started
	drained.Drained, drained.Receivers = since.Add(4*time.Minute), []string{"mid-1", "small-0"}
	later := drained
	later.Drained = since.Add(6 * time.Minute)
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := context.Background()
		s := open("c1")
		prev, err := s.LoadState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			name string
			r    *snapshot.Replacement
		}{{"started", &started}, {"drained", &drained}, {"drained later", &later}, {"hold over", nil}} {
			next := prev.Normal()
			delete(next.Replacing, "r1")
			if step.r != nil {
				if next.Replacing == nil {
					next.Replacing = map[string]snapshot.Replacement{}
				}
				next.Replacing["r1"] = *step.r
			}
			if err := s.SaveState(ctx, prev, next); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			got, err := s.LoadState(ctx)
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			r, ok := got.Replacing["r1"]
			switch {
			case step.r == nil:
				if len(got.Replacing) != 0 {
					t.Fatalf("%s: replacing = %+v, want none", step.name, got.Replacing)
				}
			case !ok || len(got.Replacing) != 1 || !r.Since.Equal(step.r.Since) || !r.Drained.Equal(step.r.Drained) ||
				r.Since.Location() != time.UTC || r.Drained.Location() != time.UTC ||
				!slices.Equal(r.Nodes, step.r.Nodes) || !slices.Equal(r.Receivers, step.r.Receivers):
				t.Fatalf("%s: loaded %+v, want %+v (in UTC)", step.name, got.Replacing, *step.r)
			}
			if err := s.SaveState(ctx, got, got.Normal()); err != nil {
				t.Fatalf("%s: saving what was loaded: %v", step.name, err)
			}
			prev = got
		}
	})
}

// TestReplacingStoredBeforeDrain: an item stored as a replacement was
// before it could be drained (no drained, no receivers) reads back, and a
// save from it that drains the replacement matches it whole: the stored
// form of a replacement not drained is unchanged.
func TestReplacingStoredBeforeDrain(t *testing.T) {
	client, table := replaceItemTable(t, &types.AttributeValueMemberS{Value: `{"nodeGroup":"g","delta":1,"nodes":["n"],"since":"2026-12-04T10:00:00Z"}`})
	s := state.NewDynamoDB(client, table, "c")
	loaded, err := s.LoadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := loaded.Replacing["r1"]
	if !r.Drained.IsZero() || r.Receivers != nil {
		t.Fatalf("loaded %+v, want it not drained", r)
	}
	next := loaded.Normal()
	r.Drained, r.Receivers = r.Since.Add(3*time.Minute), []string{"m"}
	next.Replacing["r1"] = r
	if err := s.SaveState(t.Context(), loaded, next); err != nil {
		t.Fatalf("drain a replacement stored without drained: %v", err)
	}
	got, err := s.LoadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if g := got.Replacing["r1"]; !g.Drained.Equal(r.Drained) || !slices.Equal(g.Receivers, []string{"m"}) {
		t.Errorf("loaded %+v, want it drained", g)
	}
}

// TestReplacingConflict: two runs that loaded the same state cannot both
// decide a replacement's fate; the second is told, and what the first wrote
// stays. A retry of the same save succeeds.
func TestReplacingConflict(t *testing.T) {
	since := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := context.Background()
		s := open("c")
		empty, _ := s.LoadState(ctx)
		started := empty.Normal()
		started.Replacing = map[string]snapshot.Replacement{"r1": replacement("small", since, "big-1")}
		if err := s.SaveState(ctx, empty, started); err != nil {
			t.Fatal(err)
		}
		loaded, _ := s.LoadState(ctx)

		// Run A gives it up; run B, from the same load, restarts it later.
		gaveUp := loaded.Normal()
		delete(gaveUp.Replacing, "r1")
		if err := s.SaveState(ctx, loaded, gaveUp); err != nil {
			t.Fatal(err)
		}
		restarted := loaded.Normal()
		restarted.Replacing["r1"] = replacement("small", since.Add(time.Minute), "big-1")
		err := s.SaveState(ctx, loaded, restarted)
		if !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "REPLACE#r1") {
			t.Fatalf("second save: %v, want a conflict naming REPLACE#r1", err)
		}
		if now, _ := s.LoadState(ctx); len(now.Replacing) != 0 {
			t.Errorf("replacing = %+v, want the first run's removal kept", now.Replacing)
		}
		// A replacement started from a state that already had another one
		// by the same ID is a conflict too.
		other := empty.Normal()
		other.Replacing = map[string]snapshot.Replacement{"r1": replacement("small", since, "big-9")}
		if err := s.SaveState(ctx, empty, other); err != nil {
			t.Fatalf("start on an empty store: %v", err)
		}
		again := empty.Normal()
		again.Replacing = map[string]snapshot.Replacement{"r1": replacement("small", since, "big-2")}
		if err := s.SaveState(ctx, empty, again); !errors.Is(err, state.ErrConflict) {
			t.Errorf("second start of r1: %v, want a conflict", err)
		}
		// The same save twice (a retry) is not a conflict.
		if err := s.SaveState(ctx, empty, other); err != nil {
			t.Errorf("retry of the same save: %v", err)
		}
		// Two runs from one load both drain it, at different times: the
		// item is compared whole, so the second is told.
		loaded, _ = s.LoadState(ctx)
		drainedAt := func(d time.Duration) snapshot.State {
			next := loaded.Normal()
			r := next.Replacing["r1"]
			r.Drained, r.Receivers = since.Add(d), []string{"small-0"}
			next.Replacing["r1"] = r
			return next
		}
		if err := s.SaveState(ctx, loaded, drainedAt(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveState(ctx, loaded, drainedAt(2*time.Minute)); !errors.Is(err, state.ErrConflict) {
			t.Errorf("second drain of r1: %v, want a conflict", err)
		}
		if now, _ := s.LoadState(ctx); !now.Replacing["r1"].Drained.Equal(since.Add(time.Minute)) {
			t.Errorf("replacing = %+v, want the first run's drain kept", now.Replacing)
		}
	})
}

// TestReplacingInvalidChangesNothing: a state with an invalid replacement
// is refused whole, before any item is written.
func TestReplacingInvalidChangesNothing(t *testing.T) {
	since := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		id   string
		r    snapshot.Replacement
		want string
	}{
		{"empty id", "", replacement("g", since, "n"), "ID is empty"},
		{"no group", "r", replacement("", since, "n"), "nodeGroup"},
		{"no nodes", "r", replacement("g", since), "nodes"},
		{"node twice", "r", replacement("g", since, "n", "n"), "listed twice"},
		{"no start", "r", replacement("g", time.Time{}, "n"), "since"},
		{"delta zero", "r", snapshot.Replacement{NodeGroup: "g", Nodes: []string{"n"}, Since: since}, "delta"},
		{"receivers undrained", "r", snapshot.Replacement{NodeGroup: "g", Delta: 1, Nodes: []string{"n"}, Since: since, Receivers: []string{"m"}}, "receivers"},
		{"receiver twice", "r", snapshot.Replacement{NodeGroup: "g", Delta: 1, Nodes: []string{"n"}, Since: since, Drained: since, Receivers: []string{"m", "m"}}, "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
				ctx := context.Background()
				s := open("c")
				prev, _ := s.LoadState(ctx)
				next := prev.Normal()
				next.LastScaleUp["g"] = since
				next.Replacing = map[string]snapshot.Replacement{tt.id: tt.r}
				err := s.SaveState(ctx, prev, next)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("save: %v, want an error naming %q", err, tt.want)
				}
				after, _ := s.LoadState(ctx)
				if len(after.LastScaleUp) != 0 || len(after.Replacing) != 0 {
					t.Errorf("state after a refused save = %+v, want nothing written", after)
				}
			})
		})
	}
}

// TestReplacingDamagedItem: a REPLACE# item that is not a valid
// replacement (written by hand, or by another version) fails the load with
// an error naming the item, rather than acting on a guess.
func TestReplacingDamagedItem(t *testing.T) {
	tests := []struct {
		name  string
		value types.AttributeValue
		want  string
	}{
		{"number", &types.AttributeValueMemberN{Value: "1"}, "not a string"},
		{"unknown key", &types.AttributeValueMemberS{Value: `{"nodeGroup":"g","delta":1,"nodes":["n"],"since":"2026-12-04T10:00:00Z","extra":1}`}, "extra"},
		{"key twice", &types.AttributeValueMemberS{Value: `{"nodeGroup":"g","nodeGroup":"h","delta":1,"nodes":["n"],"since":"2026-12-04T10:00:00Z"}`}, "nodeGroup"},
		{"trailing data", &types.AttributeValueMemberS{Value: `{"nodeGroup":"g","delta":1,"nodes":["n"],"since":"2026-12-04T10:00:00Z"} {}`}, "after"},
		{"delta too large", &types.AttributeValueMemberS{Value: `{"nodeGroup":"g","delta":101,"nodes":["n"],"since":"2026-12-04T10:00:00Z"}`}, "delta"},
		{"drained not a time", &types.AttributeValueMemberS{Value: `{"nodeGroup":"g","delta":1,"nodes":["n"],"since":"2026-12-04T10:00:00Z","drained":"soon"}`}, "drained"},
		{"receivers undrained", &types.AttributeValueMemberS{Value: `{"nodeGroup":"g","delta":1,"nodes":["n"],"since":"2026-12-04T10:00:00Z","receivers":["m"]}`}, "receivers"},
		{"receivers not a list", &types.AttributeValueMemberS{Value: `{"nodeGroup":"g","delta":1,"nodes":["n"],"since":"2026-12-04T10:00:00Z","drained":"2026-12-04T10:03:00Z","receivers":"m"}`}, "receivers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, table := replaceItemTable(t, tt.value)
			_, err := state.NewDynamoDB(client, table, "c").LoadState(t.Context())
			if err == nil || !strings.Contains(err.Error(), "REPLACE#r1") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("load: %v, want an error naming REPLACE#r1 and %q", err, tt.want)
			}
		})
	}
}

// replaceItemTable is a fresh table holding cluster c's item REPLACE#r1 as
// written by hand, its replacement attribute value.
func replaceItemTable(t *testing.T, value types.AttributeValue) (*dynamodb.Client, string) {
	t.Helper()
	client, table := newTable(t)
	_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"pk":          &types.AttributeValueMemberS{Value: "CLUSTER#c"},
			"sk":          &types.AttributeValueMemberS{Value: "REPLACE#r1"},
			"replacement": value,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return client, table
}
