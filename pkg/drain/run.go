package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/state"
)

// StepName names a drain step as the state machine's Task states pass it
// to the drain function ({"step": "Evict", "state": {...}}).
type StepName string

// The drain steps (functions/drain/statemachine.asl.json).
const (
	StepPrepare          StepName = "Prepare"
	StepReleaseHook      StepName = "ReleaseHook"
	StepCordon           StepName = "Cordon"
	StepSurge            StepName = "Surge"
	StepEvict            StepName = "Evict"
	StepForceDelete      StepName = "ForceDelete"
	StepWaitReplacements StepName = "WaitReplacements"
	StepTerminate        StepName = "Terminate"
	StepRemoveNode       StepName = "RemoveNode"
	StepFinish           StepName = "Finish"
	StepRollback         StepName = "Rollback"
)

// step is one entry of the step table: what a step does, and what the
// runner checks and does around it.
type step struct {
	name StepName
	// run acts. rec is the drain record the runner read for a checked
	// step (the zero record for the others); the step decides from it
	// and writes it back as it changes it.
	run func(d *Steps, ctx context.Context, s State, rec state.DrainRecord) (State, error)
	// checked: the step runs only for a drain the record knows (see
	// checked), and takes the record's policy, deadline and flags.
	checked bool
	// endsAgain: on a drain that has ended, the step ends it again (a
	// retried or late last step) instead of being refused.
	endsAgain bool
	// need is the phase the record must show before the step acts.
	need state.Phase
	// heartbeat: after the step, a lifecycle hook holding the machine is
	// told the drain goes on.
	heartbeat bool
	// rejects: a refusal of this step counts as a rejected drain (nothing
	// began), not a failed one.
	rejects bool
	// undoes: the step is the undo; its own failure is not reported as
	// the drain failing again.
	undoes bool
}

// unrecorded adapts a step that reads no drain record before it acts.
func unrecorded(fn func(d *Steps, ctx context.Context, s State) (State, error)) func(*Steps, context.Context, State, state.DrainRecord) (State, error) {
	return func(d *Steps, ctx context.Context, s State, _ state.DrainRecord) (State, error) { return fn(d, ctx, s) }
}

// stepTable is every step the state machine's Task states invoke.
func stepTable() []step {
	return []step{
		{name: StepPrepare, run: unrecorded((*Steps).Prepare), rejects: true},
		{name: StepReleaseHook, run: unrecorded((*Steps).releaseHook)},
		{name: StepCordon, run: (*Steps).cordon, checked: true, heartbeat: true},
		{name: StepSurge, run: (*Steps).surge, checked: true, heartbeat: true},
		{name: StepEvict, run: (*Steps).evict, checked: true, heartbeat: true},
		{name: StepForceDelete, run: (*Steps).forceDelete, checked: true, heartbeat: true},
		{name: StepWaitReplacements, run: (*Steps).waitReplacements, checked: true, heartbeat: true},
		{name: StepTerminate, run: (*Steps).terminate, checked: true, need: state.PhaseEvicted},
		{name: StepRemoveNode, run: (*Steps).removeNode, checked: true, need: state.PhaseTerminated},
		{name: StepFinish, run: (*Steps).finish, checked: true, endsAgain: true, need: state.PhaseTerminated},
		{name: StepRollback, run: (*Steps).rollback, checked: true, endsAgain: true, undoes: true},
	}
}

// lookup finds a step by the name an event gives.
func lookup(name string) (step, bool) {
	for _, st := range stepTable() {
		if string(st.name) == name {
			return st, true
		}
	}
	return step{}, false
}

// stepNames are the table's names, in its order.
func stepNames() []StepName {
	var out []StepName
	for _, st := range stepTable() {
		out = append(out, st.name)
	}
	return out
}

// Run dispatches one step by name.
func (d *Steps) Run(ctx context.Context, name string, s State) (State, error) {
	st, ok := lookup(name)
	if !ok {
		return s, stepErr(ErrNameInvalidInput, "unknown step %q (one of %v)", name, sortedNames())
	}
	if err := s.Validate(); err != nil {
		return s, &StepError{Name: ErrNameInvalidInput, Err: fmt.Errorf("step %s: %w", name, err)}
	}
	start := time.Now()
	out, err := d.runStep(ctx, st, s)
	attrs := []any{"step", name, "node", s.Node, "drainId", s.DrainID, "ms", time.Since(start).Milliseconds()}
	if st.rejects && err != nil && rejected(err) {
		metrics.From(ctx).Add(metrics.DrainsRejected, 1, nil)
	}
	if err != nil {
		errName := ErrorName(err)
		d.log().Warn("drain step failed", append(attrs, "error", err.Error(), "errorName", errName)...)
		if errName != ErrNameTransient && !st.undoes {
			// Transient failures are retried; this one ends the drain.
			d.nodeEvent(ctx, s.Node, corev1.EventTypeWarning, kubeevents.ReasonDrainFailed,
				fmt.Sprintf("drain %s failed at %s: %s: %v", s.DrainID, name, errName, err))
		}
		return s, err
	}
	d.log().Info("drain step", append(attrs, "remaining", len(out.Remaining))...)
	return out, nil
}

// runStep reads the record of a checked step once, checks it and hands it
// to the step.
func (d *Steps) runStep(ctx context.Context, st step, s State) (State, error) {
	if !st.checked {
		return st.run(d, ctx, s, state.DrainRecord{})
	}
	rec, err := d.checked(ctx, st, &s)
	if err != nil || rec.Status != state.DrainRunning {
		return s, err
	}
	if !rec.Phase.AtLeast(st.need) {
		have := rec.Phase.String()
		if have == "" {
			have = "none"
		}
		return s, stepErr(ErrNameInvalidInput, "step %s: drain %s of node %s has not reached %s (it is at %s)", st.name, s.DrainID, s.Node, st.need, have)
	}
	out, err := st.run(d, ctx, s, rec)
	if err == nil && st.heartbeat {
		d.heartbeat(ctx, &out)
	}
	return out, err
}

// checked lets a step after Prepare run only for a drain the record knows:
// the record must exist, name the same node group and machine, and (except
// for the steps that end a drain, which are then no-ops) still be running.
// The record's policy, deadline and flags replace the event's, so a
// hand-made step event can neither start a drain's later steps nor steer
// them elsewhere. A drain that has ended is returned with its status for
// a step that ends it again, which is done here.
func (d *Steps) checked(ctx context.Context, st step, s *State) (state.DrainRecord, error) {
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if errors.Is(err, state.ErrNoDrain) {
		return rec, stepErr(ErrNameInvalidInput, "step %s: no drain %s of node %s was prepared", st.name, s.DrainID, s.Node)
	}
	if err != nil {
		return rec, err
	}
	if rec.NodeGroup != s.NodeGroup || rec.ProviderID != s.ProviderID {
		return rec, stepErr(ErrNameInvalidInput, "step %s: node group %q and providerID %q do not match drain %s of node %s (%q, %q)",
			st.name, s.NodeGroup, s.ProviderID, s.DrainID, s.Node, rec.NodeGroup, rec.ProviderID)
	}
	s.Policy, s.Deadline, s.BelowMin, s.Force, s.Interruption = rec.Policy, rec.Deadline, rec.BelowMin, rec.Force, rec.Interruption
	if rec.Status != state.DrainRunning {
		if st.endsAgain {
			// Ended already: a retried or late last step. Ending again only
			// frees the node if the first end's second write was lost.
			return rec, d.Store.EndDrain(ctx, s.Node, s.DrainID, rec.Status, rec.Error, d.now())
		}
		return rec, stepErr(ErrNameInvalidInput, "step %s: drain %s of node %s has ended (%s)", st.name, s.DrainID, s.Node, rec.Status)
	}
	return rec, nil
}

// sortedNames lists the step names for an error.
func sortedNames() []string {
	var out []string
	for _, n := range stepNames() {
		out = append(out, string(n))
	}
	slices.Sort(out)
	return out
}

// setPhase records how far the drain got, on the record as stored now: a
// step that acted on the cluster for a while first re-reads it, since the
// drain function may have joined a lifecycle action to the drain meanwhile
// (joinRunning), which the step's own copy lacks.
func (d *Steps) setPhase(ctx context.Context, s State, phase state.Phase) error {
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if err != nil {
		return err
	}
	return d.advance(ctx, &rec, phase)
}

// save writes rec, the step's copy of its drain record. The one other
// writer of a running drain's record is the drain function joining a
// lifecycle action to it (joinRunning); when that wrote since rec was read,
// save keeps the joined action and writes again, so the step's write does
// not drop it. Every other field belongs to the running step: Step
// Functions runs one step of an execution at a time.
func (d *Steps) save(ctx context.Context, rec *state.DrainRecord) error {
	for try := 0; ; try++ {
		err := d.Store.UpdateDrain(ctx, rec)
		if !errors.Is(err, state.ErrDrainChanged) || try == saveTries-1 {
			return err
		}
		stored, gerr := d.Store.GetDrain(ctx, rec.Node, rec.ID)
		if gerr != nil {
			return fmt.Errorf("%w (and re-reading it: %w)", err, gerr)
		}
		if rec.Interruption == nil {
			rec.Interruption = stored.Interruption
		}
		rec.Version = stored.Version
	}
}

// saveTries bounds save's writes: each retry follows another writer's
// write, and there is one such writer per lifecycle action.
const saveTries = 3

// advance records phase on rec, the step's copy of the record.
func (d *Steps) advance(ctx context.Context, rec *state.DrainRecord, phase state.Phase) error {
	if rec.Phase == phase {
		return nil
	}
	rec.Phase = phase
	return d.save(ctx, rec)
}
