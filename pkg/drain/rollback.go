package drain

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/state"
)

// rollback undoes what the drain did (see undo) and records the failure;
// a drain whose Terminate already reached the cloud is completed instead
// (see end).
func (d *Steps) rollback(ctx context.Context, s State, rec state.DrainRecord) (State, error) {
	cause := "rolled back"
	if s.Error != nil {
		cause = s.Error.Error + ": " + s.Error.Cause
	}
	completed, err := d.end(ctx, rec, cause)
	if completed && err == nil {
		d.log().Warn("drain failed after its machine was terminated: the removal was completed instead of rolled back", "node", s.Node, "drainId", s.DrainID, "cause", cause)
	}
	if err == nil {
		d.recordEnd(ctx, rec, completed)
	}
	return s, err
}

// ending is how a drain its steps will not finish ends (see end).
type ending int

const (
	// endRollBack: the machine stays: what the drain did is undone.
	endRollBack ending = iota
	// endAskMachine: Terminate was under way and may have reached the
	// cloud: the group is asked whether the machine is gone.
	endAskMachine
	// endComplete: the machine was terminated: the removal is completed.
	endComplete
)

// endingOf decides how a drain at phase ends outside its steps.
func endingOf(phase state.Phase) ending {
	switch phase {
	case state.PhaseTerminated:
		return endComplete
	case state.PhaseTerminating:
		return endAskMachine
	}
	return endRollBack
}

// cordonUndo is what undoing a drain does to its node's cordon.
type cordonUndo int

const (
	// keepCordon: the cloud takes the machine anyway: no pod should land
	// on it meanwhile.
	keepCordon cordonUndo = iota
	// removeTaintOnly: a person cordoned the node before the drain: only
	// the drain's taint goes.
	removeTaintOnly
	// uncordonNode: the node is made schedulable again.
	uncordonNode
)

// cordonUndoOf decides what undoing rec's drain does to the cordon.
func cordonUndoOf(rec state.DrainRecord) cordonUndo {
	switch {
	case rec.Interruption.Terminal():
		return keepCordon
	case rec.WasUnschedulable:
		return removeTaintOnly
	}
	return uncordonNode
}

// undo puts back what a drain changed, from its record alone (the
// execution's state may be lost): the taint goes, the node is uncordoned
// unless it was cordoned before the drain, surged Deployments lose the
// drain's delta, old pods lose their deletion cost; then the drain ends as
// rolled back, freeing the node and its claim on the group.
func (d *Steps) undo(ctx context.Context, rec state.DrainRecord, cause string) error {
	var errs []error
	var err error
	switch cordonUndoOf(rec) {
	case keepCordon: // left as it is
	case removeTaintOnly:
		err = k8s.RemoveTaint(ctx, d.Client, rec.Node, TaintKey)
	case uncordonNode:
		err = k8s.Uncordon(ctx, d.Client, rec.Node, TaintKey)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	for i := range rec.Surged {
		if err := d.shrink(ctx, &rec, i); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
		w := rec.Surged[i]
		for _, pod := range w.Pods {
			if err := d.annotatePod(ctx, w.Namespace, pod, DeletionCostAnnotation, ""); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return &StepError{Name: ErrNameTransient, Err: fmt.Errorf("rollback of drain %s: %w", rec.ID, errors.Join(errs...))}
	}
	if err := d.Store.EndDrain(ctx, rec.Node, rec.ID, state.DrainRolledBack, cause, d.now()); err != nil {
		return err
	}
	d.log().Warn("drain rolled back", "node", rec.Node, "drainId", rec.ID, "cause", cause)
	left := "node schedulable again"
	if rec.WasUnschedulable {
		left = "node left cordoned, as it was before the drain"
	}
	d.nodeEvent(ctx, rec.Node, corev1.EventTypeWarning, kubeevents.ReasonDrainRolledBack,
		fmt.Sprintf("drain %s rolled back, %s: %s", rec.ID, left, cause))
	return nil
}
