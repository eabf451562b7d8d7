package state_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/buildinfo"
	"github.com/nodetide/nodetide/pkg/state"
)

// countingStore counts the writes RecordBuild makes.
type countingStore struct {
	state.StatusStore
	puts int
}

func (c *countingStore) PutStatus(ctx context.Context, name string, doc []byte) error {
	c.puts++
	return c.StatusStore.PutStatus(ctx, name, doc)
}

// A function's build is written when it first starts and when a new build
// starts, never again for the same build: a warm restart costs a read.
func TestRecordBuildWritesOnlyWhenTheBuildChanges(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testRecordBuild(t, state.NewMemory("c1")) })
	t.Run("dynamodb", func(t *testing.T) {
		client := dynamoClient(t)
		table := tableName(t)
		if err := state.CreateTable(t.Context(), client, table); err != nil {
			t.Fatal(err)
		}
		testRecordBuild(t, state.NewDynamoDB(client, table, "c1"))
	})
}

func testRecordBuild(t *testing.T, s state.StatusStore) {
	ctx := context.Background()
	store := &countingStore{StatusStore: s}
	v1 := buildinfo.Info{Version: "0.1.0", Commit: "aaa", Date: "2026-11-30T08:00:00Z", GoVersion: "go1.26.8", Platform: "linux/arm64"}
	v2 := v1
	v2.Version, v2.Commit = "0.2.0", "bbb"
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, err := state.ReadBuild(ctx, store, "drain"); !errors.Is(err, state.ErrNoStatus) {
		t.Fatalf("ReadBuild before any start = %v, want ErrNoStatus", err)
	}
	steps := []struct {
		b         buildinfo.Info
		at        time.Time
		wrote     bool
		wantSince time.Time
	}{
		{v1, t0, true, t0},
		{v1, t0.Add(time.Hour), false, t0}, // another cold start of the same build
		{v2, t0.Add(2 * time.Hour), true, t0.Add(2 * time.Hour)},
		{v1, t0.Add(3 * time.Hour), true, t0.Add(3 * time.Hour)}, // rolled back
	}
	for i, s := range steps {
		wrote, err := state.RecordBuild(ctx, store, "drain", s.b, s.at)
		if err != nil || wrote != s.wrote {
			t.Fatalf("start %d: RecordBuild = %v, %v; want %v", i, wrote, err, s.wrote)
		}
		got, err := state.ReadBuild(ctx, store, "drain")
		if err != nil || got.Build != s.b || !got.Since.Equal(s.wantSince) {
			t.Fatalf("start %d: ReadBuild = %+v, %v; want %+v since %v", i, got, err, s.b, s.wantSince)
		}
	}
	if store.puts != 3 {
		t.Errorf("%d writes for 4 starts of 3 builds, want 3", store.puts)
	}
	// Each function has its own document, apart from evaluate's status.
	if _, err := state.ReadBuild(ctx, store, "schedule"); !errors.Is(err, state.ErrNoStatus) {
		t.Errorf("schedule's build = %v, want none recorded", err)
	}
	if _, err := store.GetStatus(ctx, "evaluate"); !errors.Is(err, state.ErrNoStatus) {
		t.Errorf("evaluate's status was written: %v", err)
	}
}

// A stored document that does not decode is replaced by the next start.
func TestRecordBuildReplacesAnUndecodableDocument(t *testing.T) {
	ctx := context.Background()
	store := state.NewMemory("c1")
	if err := store.PutStatus(ctx, state.BuildStatusName("schedule"), []byte(`{"build": 7}`)); err != nil {
		t.Fatal(err)
	}
	b := buildinfo.Info{Version: "0.1.0", GoVersion: "go1.26.8", Platform: "linux/arm64"}
	if wrote, err := state.RecordBuild(ctx, store, "schedule", b, time.Now()); err != nil || !wrote {
		t.Fatalf("RecordBuild = %v, %v", wrote, err)
	}
	if got, err := state.ReadBuild(ctx, store, "schedule"); err != nil || got.Build != b {
		t.Errorf("ReadBuild = %+v, %v", got, err)
	}
}
