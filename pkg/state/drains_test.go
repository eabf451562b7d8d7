package state_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// drainStore is what both stores are: the planner's state and the drains.
type drainStore interface {
	state.Store
	state.DrainStore
}

func drains(t *testing.T, s state.Store) drainStore {
	t.Helper()
	ds, ok := s.(drainStore)
	if !ok {
		t.Fatalf("%T does not keep drains", s)
	}
	return ds
}

// drainRec is a drain record with the fields Prepare fills in.
func drainRec(node, id, group string, started time.Duration) state.DrainRecord {
	return state.DrainRecord{
		Node: node, ID: id, NodeGroup: group, StartedAt: at(started),
		ProviderID: "kwok://" + node, Policy: "abort", Deadline: at(started + 10*time.Minute),
		Phase: state.PhasePrepared,
		Surged: []state.SurgedWorkload{{
			Namespace: "shop", Name: "web", OriginalReplicas: 3, Delta: 1, Pods: []string{"web-1"},
		}},
	}
}

func begin(t *testing.T, s drainStore, rec state.DrainRecord) state.DrainRecord {
	t.Helper()
	got, err := s.BeginDrain(t.Context(), rec)
	if err != nil {
		t.Fatalf("BeginDrain %s of %s: %v", rec.ID, rec.Node, err)
	}
	return got
}

// sameRecord compares records by their stored form.
func sameRecord(t *testing.T, got, want state.DrainRecord) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("drain record\n got %s\nwant %s", g, w)
	}
}

func wantRecord(t *testing.T, s drainStore, want state.DrainRecord) {
	t.Helper()
	got, err := s.GetDrain(t.Context(), want.Node, want.ID)
	if err != nil {
		t.Fatalf("GetDrain %s of %s: %v", want.ID, want.Node, err)
	}
	sameRecord(t, got, want)
}

func wantHolder(t *testing.T, s drainStore, node, id string, ended int) {
	t.Helper()
	active, n, err := s.NodeDrain(t.Context(), node)
	if err != nil {
		t.Fatalf("NodeDrain %s: %v", node, err)
	}
	if active != id || n != ended {
		t.Errorf("NodeDrain %s = (%q, %d ended), want (%q, %d ended)", node, active, n, id, ended)
	}
}

func wantRunning(t *testing.T, s drainStore, want ...state.RunningDrain) {
	t.Helper()
	got, err := s.RunningDrains(t.Context())
	if err != nil {
		t.Fatalf("RunningDrains: %v", err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("RunningDrains = %v, want %v", got, want)
	}
}

func TestBeginDrainOnAHeldNode(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		s := drains(t, open("prod"))
		holder := begin(t, s, drainRec("node-a", "drain-1", "workers", 0))
		want := drainRec("node-a", "drain-1", "workers", 0)
		want.Status, want.Version = state.DrainRunning, 1
		sameRecord(t, holder, want)

		// Another drain, of another group as a bad event might claim.
		_, err := s.BeginDrain(t.Context(), drainRec("node-a", "drain-2", "gpu", time.Minute))
		if !errors.Is(err, state.ErrDraining) {
			t.Fatalf("second drain of a held node: %v, want ErrDraining", err)
		}
		for _, part := range []string{"node-a", "drain-1"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q does not name %s", err, part)
			}
		}
		wantRecord(t, s, want)
		wantHolder(t, s, "node-a", "drain-1", 0)
		wantRunning(t, s, state.RunningDrain{Node: "node-a", ID: "drain-1", NodeGroup: "workers"})
		if _, err := s.GetDrain(t.Context(), "node-a", "drain-2"); !errors.Is(err, state.ErrNoDrain) {
			t.Errorf("the refused drain's record: %v, want ErrNoDrain", err)
		}

		// The holder beginning again (a retried Prepare) gets its stored
		// record back, not what the retry carries.
		again := drainRec("node-a", "drain-1", "workers", time.Hour)
		again.Surged = nil
		sameRecord(t, begin(t, s, again), want)
		wantRecord(t, s, want)
		wantHolder(t, s, "node-a", "drain-1", 0)
	})
}

func TestEndDrainWithAStaleID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := t.Context()
		s := drains(t, open("prod"))
		unneeded := snapshot.State{UnneededSince: times("node-a", at(-10*time.Minute))}
		save(t, s, snapshot.State{}, unneeded)

		// drain-1 ran and ended; drain-2 now holds the node.
		begin(t, s, drainRec("node-a", "drain-1", "workers", 0))
		if err := s.EndDrain(ctx, "node-a", "drain-1", state.DrainRolledBack, "PDB", at(time.Minute)); err != nil {
			t.Fatalf("EndDrain drain-1: %v", err)
		}
		save(t, s, snapshot.State{}, unneeded)
		begin(t, s, drainRec("node-a", "drain-2", "workers", 2*time.Minute))
		first := drainRec("node-a", "drain-1", "workers", 0)
		first.Status, first.Error, first.FinishedAt, first.Version = state.DrainRolledBack, "PDB", at(time.Minute), 2
		holder := drainRec("node-a", "drain-2", "workers", 2*time.Minute)
		holder.Status, holder.Version = state.DrainRunning, 1

		for _, stale := range []string{"drain-1", "drain-0"} { // ended before; never held it
			if err := s.EndDrain(ctx, "node-a", stale, state.DrainSucceeded, "", at(3*time.Minute)); err != nil {
				t.Fatalf("EndDrain %s: %v", stale, err)
			}
			wantHolder(t, s, "node-a", "drain-2", 1)
			wantRunning(t, s, state.RunningDrain{Node: "node-a", ID: "drain-2", NodeGroup: "workers"})
			wantRecord(t, s, holder)
			wantRecord(t, s, first)
			if _, err := s.GetDrain(ctx, "node-a", "drain-0"); !errors.Is(err, state.ErrNoDrain) {
				t.Errorf("drain-0's record after its EndDrain: %v, want ErrNoDrain", err)
			}
			// The in-memory store forgets unneededSince on any EndDrain;
			// the DynamoDB one only with the mark it frees.
			if strings.HasSuffix(t.Name(), "/dynamodb") {
				wantState(t, s, unneeded)
			}
		}

		// The holder ending frees the node and counts the drain.
		if err := s.EndDrain(ctx, "node-a", "drain-2", state.DrainSucceeded, "", at(4*time.Minute)); err != nil {
			t.Fatalf("EndDrain drain-2: %v", err)
		}
		wantHolder(t, s, "node-a", "", 2)
		wantRunning(t, s)
		wantState(t, s, snapshot.State{})
	})
}

func TestSaveStateDuringADrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		s := drains(t, open("prod"))
		running := state.RunningDrain{Node: "node-a", ID: "drain-1", NodeGroup: "workers"}
		// The drain marks a node that has no item yet; evaluate then
		// records the node unneeded and, later, needed again.
		begin(t, s, drainRec("node-a", "drain-1", "workers", 0))
		unneeded := snapshot.State{UnneededSince: times("node-a", at(-time.Minute), "node-b", at(-time.Minute))}
		save(t, s, snapshot.State{}, unneeded)
		wantHolder(t, s, "node-a", "drain-1", 0)
		wantRunning(t, s, running)

		save(t, s, unneeded, snapshot.State{})
		wantState(t, s, snapshot.State{})
		wantHolder(t, s, "node-a", "drain-1", 0)
		wantRunning(t, s, running)

		// Again, now that the item holds both.
		save(t, s, snapshot.State{}, unneeded)
		save(t, s, unneeded, snapshot.State{})
		wantHolder(t, s, "node-a", "drain-1", 0)
		wantRunning(t, s, running)

		// The drain still ends normally.
		if err := s.EndDrain(t.Context(), "node-a", "drain-1", state.DrainSucceeded, "", at(time.Minute)); err != nil {
			t.Fatalf("EndDrain: %v", err)
		}
		wantHolder(t, s, "node-a", "", 1)
		wantRunning(t, s)
	})
}

func TestRunningDrainsAndLastDrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := t.Context()
		s, staging := drains(t, open("prod")), drains(t, open("staging"))
		wantRunning(t, s)
		if _, err := s.LastDrain(ctx, "node-a"); !errors.Is(err, state.ErrNoDrain) {
			t.Fatalf("LastDrain with none: %v, want ErrNoDrain", err)
		}

		// A node only unneeded, and another cluster's drain, are not
		// running drains of this cluster.
		save(t, s, snapshot.State{}, snapshot.State{UnneededSince: times("node-c", at(0))})
		begin(t, staging, drainRec("node-a", "staging-1", "workers", 0))

		// IDs sort the other way round from their start times, so only
		// the times can pick the last.
		b := begin(t, s, drainRec("node-b", "drain-9", "gpu", time.Minute))
		begin(t, s, drainRec("node-a", "drain-z", "workers", 0))
		begin(t, s, drainRec("node-a2", "drain-0", "workers", 10*time.Minute))
		wantRunning(t, s,
			state.RunningDrain{Node: "node-a", ID: "drain-z", NodeGroup: "workers"},
			state.RunningDrain{Node: "node-a2", ID: "drain-0", NodeGroup: "workers"},
			state.RunningDrain{Node: "node-b", ID: "drain-9", NodeGroup: "gpu"})

		if err := s.EndDrain(ctx, "node-a", "drain-z", state.DrainRolledBack, "timeout", at(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		wantRunning(t, s,
			state.RunningDrain{Node: "node-a2", ID: "drain-0", NodeGroup: "workers"},
			state.RunningDrain{Node: "node-b", ID: "drain-9", NodeGroup: "gpu"})
		ended := drainRec("node-a", "drain-z", "workers", 0)
		ended.Status, ended.Error, ended.FinishedAt, ended.Version = state.DrainRolledBack, "timeout", at(2*time.Minute), 2
		last, err := s.LastDrain(ctx, "node-a")
		if err != nil {
			t.Fatalf("LastDrain node-a: %v", err)
		}
		sameRecord(t, last, ended)

		next := begin(t, s, drainRec("node-a", "drain-a", "workers", 5*time.Minute))
		for node, want := range map[string]state.DrainRecord{"node-a": next, "node-b": b} {
			last, err := s.LastDrain(ctx, node)
			if err != nil {
				t.Fatalf("LastDrain %s: %v", node, err)
			}
			sameRecord(t, last, want)
		}
		wantRunning(t, staging, state.RunningDrain{Node: "node-a", ID: "staging-1", NodeGroup: "workers"})
	})
}

// A write from a copy read before another write is refused, not lost: the
// step that read the record before the drain function joined a lifecycle
// action to it cannot drop the action. The same write retried after its
// answer was lost lands once.
func TestUpdateDrainFromAStaleCopy(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := t.Context()
		s := drains(t, open("prod"))
		begun := begin(t, s, drainRec("node-a", "drain-1", "workers", 0))
		step, joiner := begun, begun

		joiner.Interruption = &state.Interruption{Kind: state.InterruptLifecycle, InstanceID: "i-1", Hook: "h", Token: "t"}
		if err := s.UpdateDrain(ctx, &joiner); err != nil || joiner.Version != 2 {
			t.Fatalf("first write: %v, version %d; want nil, 2", err, joiner.Version)
		}
		step.Phase = state.PhaseEvicted
		err := s.UpdateDrain(ctx, &step)
		if !errors.Is(err, state.ErrDrainChanged) {
			t.Fatalf("write from the stale copy: %v, want ErrDrainChanged", err)
		}
		for _, part := range []string{"drain-1", "node-a", "version 2", "read at 1"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q does not say %s", err, part)
			}
		}
		if step.Version != 1 {
			t.Errorf("a refused write advanced the copy's version to %d", step.Version)
		}
		wantRecord(t, s, joiner)

		// The joiner's write again, as a retry after a lost answer: the
		// record already is what it writes.
		retry := joiner
		retry.Version = 1
		if err := s.UpdateDrain(ctx, &retry); err != nil || retry.Version != 2 {
			t.Fatalf("retried write: %v, version %d; want nil, 2", err, retry.Version)
		}
		wantRecord(t, s, joiner)

		// Read again, the step's write lands.
		fresh, err := s.GetDrain(ctx, "node-a", "drain-1")
		if err != nil {
			t.Fatal(err)
		}
		fresh.Phase = state.PhaseEvicted
		if err := s.UpdateDrain(ctx, &fresh); err != nil || fresh.Version != 3 {
			t.Fatalf("write from a fresh copy: %v, version %d; want nil, 3", err, fresh.Version)
		}
		wantRecord(t, s, fresh)
	})
}
