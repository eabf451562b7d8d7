package drain

import (
	"math"
	"testing"

	"github.com/nodetide/nodetide/pkg/state"
)

// A surged Deployment moves grow, (wait,) hand over, and is then done; a
// raise whose answer was lost is told from the count it left.
func TestNextSurgeMove(t *testing.T) {
	for _, c := range []struct {
		name         string
		w            state.SurgedWorkload
		found, ready int32
		want         surgeMove
	}{
		{"not yet grown", state.SurgedWorkload{Delta: 1}, 1, 0, surgeGrow},
		{"raise recorded, not landed", state.SurgedWorkload{Delta: 1, Growing: true, GrowFrom: 1}, 1, 0, surgeGrow},
		{"raise recorded and landed", state.SurgedWorkload{Delta: 1, Growing: true, GrowFrom: 1}, 2, 0, surgeGrown},
		{"raise of two landed", state.SurgedWorkload{Delta: 2, Growing: true, GrowFrom: 3}, 5, 0, surgeGrown},
		{"a person changed the count too", state.SurgedWorkload{Delta: 1, Growing: true, GrowFrom: 1}, 4, 0, surgeGrow},
		{"raise at the largest count", state.SurgedWorkload{Delta: 1, Growing: true, GrowFrom: math.MaxInt32}, math.MaxInt32, 0, surgeGrown},
		{"grown, no replacement Ready", state.SurgedWorkload{Delta: 1, Grown: true}, 2, 0, surgeWait},
		{"grown, one of two replacements Ready", state.SurgedWorkload{Delta: 2, Grown: true}, 4, 1, surgeWait},
		{"grown, replacement Ready", state.SurgedWorkload{Delta: 1, Grown: true}, 2, 1, surgeHandOver},
		{"grown, more Ready than needed", state.SurgedWorkload{Delta: 1, Grown: true}, 2, 3, surgeHandOver},
		{"grown, then scaled to zero by a person", state.SurgedWorkload{Delta: 1, Grown: true}, 0, 0, surgeHandOver},
		{"taken back", state.SurgedWorkload{Delta: 1, Grown: true, Restored: true}, 2, 0, surgeNone},
		{"left, never grown", state.SurgedWorkload{Delta: 1, Restored: true}, 1, 0, surgeNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := nextSurgeMove(c.w, c.found, c.ready); got != c.want {
				t.Errorf("nextSurgeMove(%+v, found %d, ready %d) = %d, want %d", c.w, c.found, c.ready, got, c.want)
			}
		})
	}
}

// Terminate completes a lifecycle action rather than terminating the
// machine again, keeps to the provider's minimum only where the cloud or
// belowMin said so, and does nothing twice.
func TestRemovalOf(t *testing.T) {
	lifecycle := &state.Interruption{Kind: state.InterruptLifecycle, InstanceID: "i-0123456789abcdef0", Token: "t"}
	spot := &state.Interruption{Kind: state.InterruptSpot, InstanceID: "i-0123456789abcdef0"}
	rebalance := &state.Interruption{Kind: state.InterruptRebalance, InstanceID: "i-0123456789abcdef0"}
	maintenance := &state.Interruption{Kind: state.InterruptMaintenance, InstanceID: "i-0123456789abcdef0"}
	for _, c := range []struct {
		name string
		rec  state.DrainRecord
		want removal
	}{
		{"scale-down", state.DrainRecord{Phase: state.PhaseEvicted}, removalInGroup},
		{"belowMin", state.DrainRecord{Phase: state.PhaseEvicted, BelowMin: true}, removalBelowMin},
		{"retried after the phase terminating", state.DrainRecord{Phase: state.PhaseTerminating}, removalInGroup},
		{"lifecycle action", state.DrainRecord{Phase: state.PhaseEvicted, Interruption: lifecycle}, removalHook},
		{"lifecycle action with belowMin", state.DrainRecord{Phase: state.PhaseEvicted, Interruption: lifecycle, BelowMin: true}, removalHook},
		{"Spot interruption", state.DrainRecord{Phase: state.PhaseEvicted, Interruption: spot}, removalInterrupted},
		{"Spot interruption with belowMin", state.DrainRecord{Phase: state.PhaseEvicted, Interruption: spot, BelowMin: true}, removalInterrupted},
		{"rebalance recommendation", state.DrainRecord{Phase: state.PhaseEvicted, Interruption: rebalance}, removalInGroup},
		{"scheduled maintenance with belowMin", state.DrainRecord{Phase: state.PhaseEvicted, Interruption: maintenance, BelowMin: true}, removalBelowMin},
		{"terminated already", state.DrainRecord{Phase: state.PhaseTerminated}, removalDone},
		{"lifecycle action, terminated already", state.DrainRecord{Phase: state.PhaseTerminated, Interruption: lifecycle}, removalDone},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := removalOf(c.rec); got != c.want {
				t.Errorf("removalOf(%+v) = %d, want %d", c.rec, got, c.want)
			}
		})
	}
}

// A drain ended outside its steps is completed only once its Terminate
// may have reached the cloud; before that it is rolled back.
func TestEndingOf(t *testing.T) {
	for _, c := range []struct {
		phase state.Phase
		want  ending
	}{
		{state.PhaseNone, endRollBack},
		{state.PhasePrepared, endRollBack},
		{state.PhaseEvicted, endRollBack},
		{state.PhaseTerminating, endAskMachine},
		{state.PhaseTerminated, endComplete},
	} {
		if got := endingOf(c.phase); got != c.want {
			t.Errorf("endingOf(%q) = %d, want %d", c.phase, got, c.want)
		}
	}
}

// A rollback leaves a person's cordon, and the cordon of a machine the
// cloud takes anyway; it makes any other node schedulable again.
func TestCordonUndoOf(t *testing.T) {
	for _, c := range []struct {
		name string
		rec  state.DrainRecord
		want cordonUndo
	}{
		{"scale-down", state.DrainRecord{}, uncordonNode},
		{"cordoned before by a person", state.DrainRecord{WasUnschedulable: true}, removeTaintOnly},
		{"lifecycle action", state.DrainRecord{Interruption: &state.Interruption{Kind: state.InterruptLifecycle}}, keepCordon},
		{"Spot interruption of a cordoned node", state.DrainRecord{WasUnschedulable: true, Interruption: &state.Interruption{Kind: state.InterruptSpot}}, keepCordon},
		{"rebalance recommendation", state.DrainRecord{Interruption: &state.Interruption{Kind: state.InterruptRebalance}}, uncordonNode},
		{"maintenance of a cordoned node", state.DrainRecord{WasUnschedulable: true, Interruption: &state.Interruption{Kind: state.InterruptMaintenance}}, removeTaintOnly},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := cordonUndoOf(c.rec); got != c.want {
				t.Errorf("cordonUndoOf(%+v) = %d, want %d", c.rec, got, c.want)
			}
		})
	}
}
