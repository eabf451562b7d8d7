package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// ExecutionAPI is the part of the Step Functions client recovery uses.
type ExecutionAPI interface {
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, optFns ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
	StopExecution(ctx context.Context, in *sfn.StopExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error)
}

// DefaultRecoveryGrace is how long a drain record whose execution cannot be
// found is left alone after it began, in case the execution is not visible
// yet. The record is written by the execution's own Prepare step, after
// StartExecution returned, so a few seconds would do; the grace is also
// what a node can stay cordoned beyond one evaluate interval (see Recovery).
const DefaultRecoveryGrace = 15 * time.Second

// Recovery finishes the drains whose execution is no longer running: failed
// (RollbackFailed), aborted (StopExecution), timed out, or gone. Such a drain
// would otherwise hold its node cordoned, its claim on the group's minimum
// and a surged Deployment's extra replica for ever. From the drain record
// alone it completes a drain whose machine is already gone, and rolls back
// every other one. Every evaluate cycle runs it, and so does the drain
// function when Step Functions reports an execution ended badly, so the
// bound is one evaluate interval after the execution ends; for a drain whose
// execution does not exist at all, the grace after the drain began plus one
// interval.
type Recovery struct {
	Steps           *Steps
	SFN             ExecutionAPI
	StateMachineArn string
	// Grace: see DefaultRecoveryGrace (used when zero).
	Grace time.Duration
}

// Recovered is what one recovery pass did.
type Recovered struct {
	// RolledBack and Completed list the drains finished, as node/drainId.
	RolledBack []string `json:"rolledBack"`
	Completed  []string `json:"completed"`
	// Untainted lists nodes that carried the draining taint with no drain
	// holding them.
	Untainted []string `json:"untainted,omitempty"`
}

func (r *Recovery) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return DefaultRecoveryGrace
}

// Run recovers every drain whose execution has ended, and takes the draining
// taint off nodes no drain holds (listing the nodes for it). A drain that
// cannot be recovered now is reported in the error and tried again on the
// next run; the others are still recovered.
func (r *Recovery) Run(ctx context.Context) (Recovered, error) {
	res, err := r.Drains(ctx)
	nodes, lerr := r.Steps.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if lerr != nil {
		return res, errors.Join(err, fmt.Errorf("recover drains: list nodes: %w", lerr))
	}
	untainted, uerr := r.Untaint(ctx, nodes.Items)
	res.Untainted = untainted
	return res, errors.Join(err, uerr)
}

// Drains recovers every drain whose execution has ended: one query of the
// drain marks and one DescribeExecution per drain in flight, so it is cheap
// enough for every evaluate cycle.
func (r *Recovery) Drains(ctx context.Context) (Recovered, error) {
	res := Recovered{RolledBack: []string{}, Completed: []string{}}
	running, err := r.Steps.Store.RunningDrains(ctx)
	if err != nil {
		return res, fmt.Errorf("recover drains: %w", err)
	}
	var errs []error
	for _, rd := range running {
		status, err := r.executionStatus(ctx, rd.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if status == sfntypes.ExecutionStatusRunning {
			continue
		}
		rec, err := r.Steps.Store.GetDrain(ctx, rd.Node, rd.ID)
		if errors.Is(err, state.ErrNoDrain) {
			// A mark without a record: BeginDrain stopped half-way. Nothing
			// was changed in the cluster (Cordon needs the record).
			rec = state.DrainRecord{Node: rd.Node, ID: rd.ID, NodeGroup: rd.NodeGroup, Status: state.DrainRunning}
		} else if err != nil {
			errs = append(errs, err)
			continue
		}
		if status == "" && r.Steps.now().Sub(rec.StartedAt) < r.grace() {
			continue // not visible yet
		}
		if status == "" {
			status = "not found"
		}
		done, err := r.Steps.end(ctx, rec, "recovered: execution "+string(status))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if done {
			res.Completed = append(res.Completed, rd.Node+"/"+rd.ID)
		} else {
			res.RolledBack = append(res.RolledBack, rd.Node+"/"+rd.ID)
		}
	}
	if len(res.RolledBack)+len(res.Completed) > 0 {
		r.Steps.log().Warn("drains recovered", "rolledBack", res.RolledBack, "completed", res.Completed)
		m := metrics.From(ctx)
		m.Add(metrics.DrainsRecovered, float64(len(res.RolledBack)+len(res.Completed)), nil)
		if len(res.Completed) > 0 {
			m.Add(metrics.NodesRemoved, float64(len(res.Completed)), nil)
		}
	}
	return res, errors.Join(errs...)
}

// Force ends the drain holding node whatever its execution is doing: a
// running execution is stopped first, then the drain is finished from its
// record as Run would. It is for a person who knows the drain is stuck.
func (r *Recovery) Force(ctx context.Context, node string) (Recovered, error) {
	res := Recovered{RolledBack: []string{}, Completed: []string{}}
	active, _, err := r.Steps.Store.NodeDrain(ctx, node)
	if err != nil || active == "" {
		return res, err
	}
	status, err := r.executionStatus(ctx, active)
	if err != nil {
		return res, err
	}
	if status == sfntypes.ExecutionStatusRunning {
		_, err := r.SFN.StopExecution(ctx, &sfn.StopExecutionInput{
			ExecutionArn: aws.String(executionArn(r.StateMachineArn, active)),
			Error:        aws.String("ForcedEnable"), Cause: aws.String("enable --force of node " + node),
		})
		if err != nil {
			return res, fmt.Errorf("stop drain %s of node %s: %w", active, node, err)
		}
	}
	rec, err := r.Steps.Store.GetDrain(ctx, node, active)
	if errors.Is(err, state.ErrNoDrain) {
		rec = state.DrainRecord{Node: node, ID: active, Status: state.DrainRunning}
	} else if err != nil {
		return res, err
	}
	done, err := r.Steps.end(ctx, rec, "ended by enable --force")
	if err != nil {
		return res, err
	}
	if done {
		res.Completed = append(res.Completed, node+"/"+active)
	} else {
		res.RolledBack = append(res.RolledBack, node+"/"+active)
	}
	return res, nil
}

// executionStatus is the drain's execution status, "" when it does not
// exist.
func (r *Recovery) executionStatus(ctx context.Context, drainID string) (sfntypes.ExecutionStatus, error) {
	out, err := r.SFN.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(executionArn(r.StateMachineArn, drainID))})
	var missing *sfntypes.ExecutionDoesNotExist
	if errors.As(err, &missing) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("drain %s: describe execution: %w", drainID, err)
	}
	return out.Status, nil
}

// end ends a drain from its record: completed when its machine is gone or
// going (the Node object is deleted, a surge taken back), rolled back
// otherwise. A Terminate that timed out may have reached the cloud: then
// giving the node back would hand pods a machine about to vanish.
func (d *Steps) end(ctx context.Context, rec state.DrainRecord, cause string) (completed bool, err error) {
	// The Auto Scaling Group terminates the machine whatever the drain did:
	// it need not wait for the hook's timeout.
	if err := d.completeHook(ctx, rec.Interruption); err != nil {
		return false, err
	}
	gone := false
	switch endingOf(rec.Phase) {
	case endComplete:
		gone = true
	case endAskMachine:
		if gone, err = d.machineGone(ctx, rec); err != nil {
			return false, err
		}
	}
	if !gone {
		return false, d.undo(ctx, rec, cause)
	}
	for i := range rec.Surged {
		if err := d.shrink(ctx, &rec, i); err != nil {
			return true, err
		}
	}
	if err := d.Client.CoreV1().Nodes().Delete(ctx, rec.Node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return true, fmt.Errorf("delete node %s: %w", rec.Node, err)
	}
	if err := d.Store.EndDrain(ctx, rec.Node, rec.ID, state.DrainSucceeded, cause, d.now()); err != nil {
		return true, err
	}
	d.nodeEvent(ctx, rec.Node, corev1.EventTypeNormal, kubeevents.ReasonScaleDown,
		fmt.Sprintf("node removed: drain %s completed after its machine %s was terminated (%s)", rec.ID, rec.ProviderID, cause))
	return true, nil
}

// machineGone asks the drain's node group whether the machine is gone or
// on its way out.
func (d *Steps) machineGone(ctx context.Context, rec state.DrainRecord) (bool, error) {
	g, err := d.group(ctx, rec.NodeGroup)
	if err != nil {
		return false, err
	}
	insts, err := g.Instances(ctx)
	if err != nil {
		return false, fmt.Errorf("node group %s: instances: %w", g.Name(), err)
	}
	return !slices.ContainsFunc(insts, func(in providers.Instance) bool {
		return in.ProviderID == rec.ProviderID && in.State != providers.StateDeleting
	}), nil
}

// goingMachine handles a cordoned node whose last drain was the cloud's
// (its rollback kept the cordon, since the machine goes anyway): while the
// group or EC2 says the machine is going the cordon stays, and once EC2
// says it is gone the Node is deleted (clusters without a cloud controller
// keep it). It reports whether it dealt with the node; a node whose machine
// is not the record's, or whose group is no longer managed, is left to the
// sweep.
func (r *Recovery) goingMachine(ctx context.Context, n *corev1.Node, last state.DrainRecord) (bool, error) {
	d := r.Steps
	if last.Interruption == nil || last.ProviderID == "" || last.ProviderID != n.Spec.ProviderID {
		return false, nil
	}
	going, gone, err := d.machineFate(ctx, last)
	if ErrorName(err) == ErrNameNotManaged {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node %s: machine of drain %s: %w", n.Name, last.ID, err)
	}
	switch {
	case gone:
		// Only this Node object, as it was read: a Node registered anew
		// under the name since (another UID) is left alone.
		err := d.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return true, fmt.Errorf("delete node %s: %w", n.Name, err)
		}
		d.log().Warn("node removed: its machine is gone", "node", n.Name, "providerID", last.ProviderID, "drainId", last.ID)
		d.nodeEvent(ctx, n.Name, corev1.EventTypeNormal, kubeevents.ReasonScaleDown,
			fmt.Sprintf("node removed: machine %s is gone (the cloud took it; drain %s %s)", last.ProviderID, last.ID, last.Status))
		metrics.From(ctx).Add(metrics.NodesRemoved, 1, nil)
		return true, nil
	case going:
		d.log().Info("node kept cordoned: its machine is going", "node", n.Name, "providerID", last.ProviderID, "drainId", last.ID)
		return true, nil
	}
	return false, nil
}

// Untaint takes the draining taint off those of nodes (a list the caller
// has, e.g. evaluate's snapshot) that no drain holds (a late step of a drain
// that had already ended) and uncordons them: the taint is nodetide's alone,
// so it proves the cordon was too, unless the node's last drain found it
// cordoned already. A node whose machine the cloud is taking keeps its
// cordon, and is deleted once the machine is gone (goingMachine).
func (r *Recovery) Untaint(ctx context.Context, nodes []corev1.Node) ([]string, error) {
	d := r.Steps
	var out []string
	var errs []error
	for i := range nodes {
		n := &nodes[i]
		if !hasTaint(n, TaintKey) {
			continue
		}
		// The mark, read now: only a node no drain holds is stray.
		active, _, err := d.Store.NodeDrain(ctx, n.Name)
		if err != nil || active != "" {
			errs = append(errs, err)
			continue
		}
		keepCordon := false
		last, err := d.Store.LastDrain(ctx, n.Name)
		switch {
		case err == nil:
			keepCordon = last.WasUnschedulable
			if held, err := r.goingMachine(ctx, n, last); err != nil || held {
				errs = append(errs, err)
				continue
			}
		case !errors.Is(err, state.ErrNoDrain):
			errs = append(errs, err)
			continue
		}
		if keepCordon {
			err = k8s.RemoveTaint(ctx, d.Client, n.Name, TaintKey)
		} else {
			err = k8s.Uncordon(ctx, d.Client, n.Name, TaintKey)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		out = append(out, n.Name)
	}
	if len(out) > 0 {
		d.log().Warn("draining taint removed from nodes no drain holds", "nodes", out)
		metrics.From(ctx).Add(metrics.StrayCordonsRecovered, float64(len(out)), nil)
	}
	return out, errors.Join(errs...)
}
