package drain_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/state"
)

// countingStore counts the drain record reads and writes of the steps.
type countingStore struct {
	*state.Memory
	reads, writes atomic.Int32
}

func (c *countingStore) GetDrain(ctx context.Context, node, id string) (state.DrainRecord, error) {
	c.reads.Add(1)
	return c.Memory.GetDrain(ctx, node, id)
}

func (c *countingStore) UpdateDrain(ctx context.Context, rec *state.DrainRecord) error {
	c.writes.Add(1)
	return c.Memory.UpdateDrain(ctx, rec)
}

// The runner reads a step's drain record once and hands it to the step:
// Terminate, RemoveNode and Finish read it once each, and Terminate writes
// only its two phases (terminating before the cloud's call, terminated
// after it).
func TestStepsReadTheirRecordOnce(t *testing.T) {
	b := newBed(t, 0, 2)
	ctx := context.Background()
	victim := b.nodes(t)[0].Name
	s := b.start(victim, time.Minute, drain.PolicyAbort)
	counted := &countingStore{Memory: b.store}
	steps := *b.steps
	steps.Store = counted
	var err error
	for _, c := range []struct {
		step          string
		reads, writes int32
	}{
		{"Prepare", 0, 0}, // a new drain: its record is begun, not read
		{"Cordon", 2, 0},  // and again after the cordon: ended meanwhile?
		{"Surge", 1, 0},
		{"Evict", 2, 1}, // the phase, on the record as it is then
		{"Terminate", 1, 2},
		{"RemoveNode", 1, 0},
		{"Finish", 1, 0},
	} {
		counted.reads.Store(0)
		counted.writes.Store(0)
		if s, err = steps.Run(ctx, c.step, s); err != nil {
			t.Fatalf("%s: %v", c.step, err)
		}
		if r, w := counted.reads.Load(), counted.writes.Load(); r != c.reads || w != c.writes {
			t.Errorf("%s read the drain record %d times and wrote it %d times, want %d and %d", c.step, r, w, c.reads, c.writes)
		}
	}
	if !s.Terminated || !s.Evicted {
		t.Errorf("drain did not complete: %+v", s)
	}
}
