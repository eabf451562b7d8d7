package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// InstancesAPI is the part of the EC2 client that checks what an event or
// a drain record says of a machine; *ec2.Client satisfies it.
type InstancesAPI interface {
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeSpotInstanceRequests(ctx context.Context, in *ec2.DescribeSpotInstanceRequestsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSpotInstanceRequestsOutput, error)
}

// MaxEventSkew bounds how far ahead of this function's clock an event's
// time may be: EventBridge stamps the time AWS saw the change, so a later
// one is forged or from a clock gone wrong.
const MaxEventSkew = time.Minute

// machine is what EC2 says of one instance.
type machine struct {
	// known: EC2 describes the ID (a terminated instance stays described
	// for about an hour, then is not found).
	known bool
	// state is EC2's instance state: pending, running, shutting-down,
	// terminated, stopping or stopped.
	state ec2types.InstanceStateName
	spot  bool
	// spotStatus is the Spot request's status code ("" when not Spot).
	spotStatus string
}

// going: EC2 is taking the machine away or has (a Spot interruption is
// marked on its request, or it is shutting down, stopping or gone).
func (m machine) going() bool {
	switch m.spotStatus {
	case "marked-for-termination", "marked-for-stop", "marked-for-hibernation":
		return true
	}
	return !m.known || slices.Contains([]ec2types.InstanceStateName{ec2types.InstanceStateNameShuttingDown,
		ec2types.InstanceStateNameTerminated, ec2types.InstanceStateNameStopping, ec2types.InstanceStateNameStopped}, m.state)
}

// gone: the machine no longer exists.
func (m machine) gone() bool {
	return !m.known || m.state == ec2types.InstanceStateNameTerminated
}

// describeMachine asks EC2 about one instance, and about its Spot request
// when it is a Spot instance.
func (d *Steps) describeMachine(ctx context.Context, id string) (machine, error) {
	out, err := d.Machines.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "InvalidInstanceID.NotFound" {
		return machine{}, nil
	}
	if err != nil {
		return machine{}, fmt.Errorf("describe EC2 instance %s: %w", id, err)
	}
	var m machine
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if in.InstanceId == nil || *in.InstanceId != id {
				continue
			}
			m.known = true
			if in.State != nil {
				m.state = in.State.Name
			}
			m.spot = in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot
			if m.spot && in.SpotInstanceRequestId != nil {
				if m.spotStatus, err = d.spotStatus(ctx, *in.SpotInstanceRequestId); err != nil {
					return m, err
				}
			}
		}
	}
	return m, nil
}

func (d *Steps) spotStatus(ctx context.Context, request string) (string, error) {
	out, err := d.Machines.DescribeSpotInstanceRequests(ctx, &ec2.DescribeSpotInstanceRequestsInput{SpotInstanceRequestIds: []string{request}})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "InvalidSpotInstanceRequestID.NotFound" {
		return "", nil // old requests are purged; the instance state still tells
	}
	if err != nil {
		return "", fmt.Errorf("describe Spot request %s: %w", request, err)
	}
	for _, r := range out.SpotInstanceRequests {
		if r.SpotInstanceRequestId != nil && *r.SpotInstanceRequestId == request && r.Status != nil && r.Status.Code != nil {
			return *r.Status.Code, nil
		}
	}
	return "", nil
}

// unproven says why an event about a machine of a managed group must not
// act ("" when it may), asking EC2 what the event claims:
//
//   - a Spot warning acts only for a Spot instance; one whose deadline has
//     passed, or that EventBridge replayed, only when EC2 says the machine
//     is really going (and Interrupted then makes it an ordinary drain);
//   - a rebalance recommendation acts only for a Spot instance that still
//     exists, and never when replayed (old advice proves no present risk);
//   - a scheduled-maintenance event only for a machine that still exists.
//
// Lifecycle actions prove themselves with their token (the group holds the
// machine), so EC2 is not asked about them.
func (h *Handler) unproven(ctx context.Context, in Interruption) (string, error) {
	if in.Kind == state.InterruptLifecycle {
		return "", nil
	}
	if h.Steps.Machines == nil {
		return "", fmt.Errorf("cannot check the %s event with EC2: no EC2 client here", in.Kind)
	}
	m, err := h.Steps.describeMachine(ctx, in.InstanceID)
	if err != nil {
		return "", err
	}
	switch {
	case !m.known:
		return "EC2 does not know the machine", nil
	case in.Kind == state.InterruptMaintenance:
		if m.gone() {
			return "EC2 says the machine is terminated", nil
		}
		return "", nil
	case !m.spot:
		return fmt.Sprintf("EC2 says the machine is not a Spot instance (a %s event names only Spot instances)", in.Kind), nil
	case in.Kind == state.InterruptRebalance && in.Replay:
		return "a replayed rebalance recommendation is old advice", nil
	case in.Kind == state.InterruptRebalance && m.gone():
		return "EC2 says the machine is terminated", nil
	case in.Kind == state.InterruptSpot && h.late(in) && !m.going():
		return fmt.Sprintf("a %s Spot warning, and EC2 says the machine is not going (state %s, Spot request %s)", lateWord(in), m.state, m.spotStatus), nil
	}
	return "", nil
}

// proveSpot is Prepare's check of a Spot drain, whatever started it: EC2
// must say the machine is a Spot instance that still exists, and once the
// drain's deadline has passed (only a forged or replayed input reaches
// Prepare then: Interrupted gives a late warning an ordinary drain's
// deadline), that it is really going.
func (d *Steps) proveSpot(ctx context.Context, in *state.Interruption, deadline time.Time) error {
	if d.Machines == nil {
		return stepErr(ErrNameInvalidInput, "step Prepare: a Spot drain of machine %s cannot be checked with EC2 here (no EC2 client): refused, nothing changed", in.InstanceID)
	}
	m, err := d.describeMachine(ctx, in.InstanceID)
	if err != nil {
		return &StepError{Name: ErrNameTransient, Err: fmt.Errorf("step Prepare: check Spot machine %s with EC2: %w", in.InstanceID, err)}
	}
	switch {
	case !m.known || m.gone():
		return stepErr(ErrNameInvalidInput, "step Prepare: a Spot drain of machine %s, which EC2 does not know or says is terminated: refused, nothing changed", in.InstanceID)
	case !m.spot:
		return stepErr(ErrNameInvalidInput, "step Prepare: a Spot drain of machine %s, which EC2 says is not a Spot instance: refused, nothing changed", in.InstanceID)
	case !deadline.After(d.now()) && !m.going():
		return stepErr(ErrNameInvalidInput, "step Prepare: a Spot drain of machine %s past its deadline %s, and EC2 says the machine is not going (state %s, Spot request %s): refused, nothing changed",
			in.InstanceID, deadline.UTC().Format(time.RFC3339), m.state, m.spotStatus)
	}
	return nil
}

// late: a Spot warning past its deadline, or replayed.
func (h *Handler) late(in Interruption) bool {
	return in.Replay || !in.At.Add(SpotDrainTime).After(h.Steps.now())
}

func lateWord(in Interruption) string {
	if in.Replay {
		return "replayed"
	}
	return "stale"
}

// checkSkew refuses events stamped further ahead than MaxEventSkew.
func checkSkew(ins []Interruption, now time.Time) error {
	for _, in := range ins {
		if in.At.After(now.Add(MaxEventSkew)) {
			return stepErr(ErrNameInvalidInput, "EventBridge event %q: \"time\" %s is %s ahead of this function's clock (at most %s): refused, nothing changed",
				in.Event, in.At.UTC().Format(time.RFC3339), in.At.Sub(now).Round(time.Second), MaxEventSkew)
		}
	}
	return nil
}

// machineFate is what the group and EC2 say of a drained node's machine:
// going (taken away, not yet gone) or gone (no longer exists). The group
// alone says going (an instance it is deleting); gone needs EC2 too (the
// group no longer listing a machine can also mean it was detached).
func (d *Steps) machineFate(ctx context.Context, rec state.DrainRecord) (going, gone bool, err error) {
	g, err := d.group(ctx, rec.NodeGroup)
	if err != nil {
		return false, false, err
	}
	insts, err := g.Instances(ctx)
	if err != nil {
		return false, false, fmt.Errorf("node group %s: instances: %w", g.Name(), err)
	}
	listed, live := false, false
	for _, in := range insts {
		if in.ProviderID == rec.ProviderID {
			listed, live = true, in.State != providers.StateDeleting
		}
	}
	going = listed && !live
	id := instanceOf(rec.ProviderID)
	if d.Machines == nil || id == "" {
		return going, false, nil
	}
	m, err := d.describeMachine(ctx, id)
	if err != nil {
		return going, false, err
	}
	// A Spot machine marked for interruption is still InService in its
	// group until EC2 takes it.
	return going || m.going(), m.gone() && !live, nil
}
