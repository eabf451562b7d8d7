package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// errForeignAction marks a lifecycle action this deployment has no part in:
// another hook's, or one of an Auto Scaling Group it does not manage (another
// cluster's, in the same account and region). Nothing is called for it.
var errForeignAction = errors.New("not this deployment's lifecycle action")

// Lifecycle states of a machine a termination hook holds (as AWS spells
// them): in service, or in the group's warm pool.
const (
	stateTerminatingWait       = "Terminating:Wait"
	stateWarmedTerminatingWait = "Warmed:Terminating:Wait"
)

// asgGroup is a node group behind an Auto Scaling Group (the aws provider's).
type asgGroup interface {
	AutoScalingGroupName() string
	LifecycleState(instanceID string) (string, bool)
}

// lifecycleOwner checks that a lifecycle action is this deployment's to act
// on and that its group owns the machine: the hook is this deployment's
// (Steps.Hook, when set), the action's Auto Scaling Group is one it manages
// (a named group, or one carrying this cluster's discovery tags: the
// provider lists no other), and that group lists the machine. It returns
// the group and the machine's lifecycle state in it, as described now.
//
// A foreign action is a NotManaged error wrapping errForeignAction; a
// machine the action's group does not own is a NotManaged error naming
// both groups.
func (d *Steps) lifecycleOwner(ctx context.Context, in *state.Interruption) (providers.NodeGroup, string, error) {
	if d.Hook != "" && in.Hook != d.Hook {
		return nil, "", &StepError{Name: ErrNameNotManaged, Err: fmt.Errorf("%w: lifecycle hook %s is not this deployment's (%s)", errForeignAction, in.Hook, d.Hook)}
	}
	groups, err := d.Groups(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("node groups: %w", err)
	}
	var named providers.NodeGroup
	holder := ""
	for _, g := range groups {
		a, ok := providers.Own(g).(asgGroup)
		if !ok {
			continue
		}
		lc, listed := a.LifecycleState(in.InstanceID)
		if a.AutoScalingGroupName() == in.AutoScalingGroup {
			if listed {
				return g, lc, nil
			}
			named = g
		} else if listed {
			holder = a.AutoScalingGroupName()
		}
	}
	switch {
	case named == nil:
		return nil, "", &StepError{Name: ErrNameNotManaged, Err: fmt.Errorf("%w: Auto Scaling group %s is not one this deployment manages", errForeignAction, in.AutoScalingGroup)}
	case holder != "":
		return nil, "", stepErr(ErrNameNotManaged, "machine %s is in Auto Scaling group %s, not in group %s its lifecycle action names", in.InstanceID, holder, in.AutoScalingGroup)
	}
	return nil, "", stepErr(ErrNameNotManaged, "machine %s is not in Auto Scaling group %s its lifecycle action names (nor in any other group this deployment manages)", in.InstanceID, in.AutoScalingGroup)
}

// proveAction proves, before anything moves, that a lifecycle action is
// open and this deployment's: its group owns the machine (lifecycleOwner),
// the action takes a heartbeat with its token (AWS refuses a token no open
// action holds: made up, completed or timed out), and the group shows the
// machine held by the hook (Terminating:Wait). Only such a drain skips the
// do-not-disrupt rules and the minimum; an action not proven is refused.
func (d *Steps) proveAction(ctx context.Context, in *state.Interruption) (providers.NodeGroup, error) {
	g, lc, err := d.lifecycleOwner(ctx, in)
	if err != nil {
		return nil, err
	}
	if d.Lifecycle == nil {
		return nil, stepErr(ErrNameInvalidInput, "the lifecycle action of machine %s cannot be proven here (no Auto Scaling client): nothing is drained for it", in.InstanceID)
	}
	_, err = d.Lifecycle.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: aws.String(in.AutoScalingGroup), LifecycleHookName: aws.String(in.Hook),
		LifecycleActionToken: aws.String(in.Token), InstanceId: aws.String(in.InstanceID),
	})
	var api smithy.APIError
	switch {
	case noActiveAction(err):
		return nil, stepErr(ErrNameInvalidInput, "no open lifecycle action of hook %s in Auto Scaling group %s holds token %s for machine %s (made up, completed or timed out): nothing is drained for it",
			in.Hook, in.AutoScalingGroup, in.Token, in.InstanceID)
	case errors.As(err, &api) && api.ErrorCode() == "ValidationError":
		return nil, stepErr(ErrNameInvalidInput, "lifecycle action of machine %s (group %s, hook %s) not proven: %s", in.InstanceID, in.AutoScalingGroup, in.Hook, api.ErrorMessage())
	case err != nil:
		return nil, fmt.Errorf("prove the lifecycle action of machine %s (group %s, hook %s): heartbeat: %w", in.InstanceID, in.AutoScalingGroup, in.Hook, err)
	}
	if lc != stateTerminatingWait && lc != stateWarmedTerminatingWait {
		// The action is open, so the group's description may lag: worth a
		// retry, never a drain yet.
		return nil, stepErr(ErrNameTransient, "machine %s is %s in Auto Scaling group %s, not yet held by its termination hook (%s)", in.InstanceID, lc, in.AutoScalingGroup, stateTerminatingWait)
	}
	return g, nil
}

// proveLifecycle is the drain function's gate for a lifecycle event: a
// foreign action is ignored and nothing is called for it; one this
// deployment cannot prove (wrong group, made-up or stale token) is refused
// with the reason, changing nothing; a failure to ask is an error, so the
// event is delivered again. done reports that res is final.
func (h *Handler) proveLifecycle(ctx context.Context, in *Interruption, res InterruptResult, log *slog.Logger) (InterruptResult, bool, error) {
	g, err := h.Steps.proveAction(ctx, &in.Interruption)
	var se *StepError
	switch {
	case err == nil:
		res.NodeGroup = g.Name()
		return res, false, nil
	case errors.As(err, &se) && errors.Is(err, errForeignAction):
		res.Action, res.Reason = "ignored", se.Err.Error()
		log.Info("lifecycle action ignored", "autoScalingGroup", in.AutoScalingGroup, "hook", in.Hook, "reason", res.Reason)
		return res, true, nil
	case errors.As(err, &se) && se.Name != ErrNameTransient:
		res.Action, res.Reason = "refused", se.Err.Error()
		log.Warn("lifecycle action refused", "autoScalingGroup", in.AutoScalingGroup, "hook", in.Hook, "reason", res.Reason)
		return res, true, nil
	}
	return res, true, err
}

// proveFor is Prepare's check of a lifecycle drain: the action is proven
// (proveAction) and its group is the node's.
func (d *Steps) proveFor(ctx context.Context, in *state.Interruption, node string, g providers.NodeGroup) error {
	owner, err := d.proveAction(ctx, in)
	if err != nil {
		return err
	}
	if owner.Name() != g.Name() {
		return stepErr(ErrNameNotManaged, "node %s is of node group %s, not %s of Auto Scaling group %s its lifecycle action names", node, g.Name(), owner.Name(), in.AutoScalingGroup)
	}
	return nil
}
