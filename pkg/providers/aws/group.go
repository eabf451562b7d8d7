package aws

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// ProviderIDPrefix starts every provider ID of an EC2 instance.
const ProviderIDPrefix = "aws:///"

// placeholderPrefix marks the instance IDs Instances makes up for launches
// AWS reported as failed (as CA does), so the failure has somewhere to show.
const placeholderPrefix = "i-placeholder-"

// Group is one Auto Scaling Group.
type Group struct {
	p        *Provider
	name     string
	asgName  string
	min, max int
	// minFrom and maxFrom: the config where its bound narrowed the ASG's.
	minFrom, maxFrom snapshot.BoundSource

	mu  sync.Mutex
	asg astypes.AutoScalingGroup // as last described, plus this group's own changes
	tpl *snapshot.Template       // built on first use; instance types and tags rarely change
}

var _ providers.NodeGroup = (*Group)(nil)

func (p *Provider) newGroup(asg astypes.AutoScalingGroup) (*Group, error) {
	lo, hi, err := p.bounds(asg)
	if err != nil {
		return nil, err
	}
	asgName := awssdk.ToString(asg.AutoScalingGroupName)
	name := asgName
	if p.opts.DisplayName != "" {
		name = p.opts.DisplayName
	}
	g := &Group{p: p, name: name, asgName: asgName, min: lo, max: hi, asg: asg}
	if lo > int(awssdk.ToInt32(asg.MinSize)) {
		g.minFrom = snapshot.BoundConfig
	}
	if hi < int(awssdk.ToInt32(asg.MaxSize)) {
		g.maxFrom = snapshot.BoundConfig
	}
	return g, nil
}

// Name implements providers.NodeGroup.
func (g *Group) Name() string { return g.name }

// AutoScalingGroupName is the ASG behind the group.
func (g *Group) AutoScalingGroupName() string { return g.asgName }

// Provider implements providers.NodeGroup.
func (g *Group) Provider() string { return ProviderName }

// Bounds implements providers.NodeGroup: the ASG's MinSize and MaxSize,
// narrowed by config; a bound the config lowered or raised says so.
func (g *Group) Bounds() providers.Bounds {
	return providers.Bounds{Min: g.min, Max: g.max, MinFrom: g.minFrom, MaxFrom: g.maxFrom}
}

// label names the group in errors, with its ASG when the two differ.
func (g *Group) label() string {
	if g.name == g.asgName {
		return "aws group " + g.name
	}
	return "aws group " + g.name + " (Auto Scaling Group " + g.asgName + ")"
}

func (g *Group) snapshot() astypes.AutoScalingGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asg
}

func (g *Group) setSnapshot(asg astypes.AutoScalingGroup) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asg = asg
}

// Zones implements providers.Zoner: the ASG's Availability Zones, any of
// which it may start a new instance in.
func (g *Group) Zones() []string { return g.snapshot().AvailabilityZones }

// TargetSize implements providers.NodeGroup: the ASG's desired capacity.
func (g *Group) TargetSize(context.Context) (int, error) {
	return int(awssdk.ToInt32(g.snapshot().DesiredCapacity)), nil
}

// State maps an ASG lifecycle state to an instance state.
//
//   - creating: Pending, Pending:Wait, Pending:Proceed, and Warmed:* (a
//     warm-pool machine is not yet part of the group's capacity; Instances
//     leaves warm-pool machines out altogether).
//   - deleting: Terminating*, Terminated, Detaching, Detached,
//     Warmed:Terminating*, Warmed:Terminated.
//   - running: InService, and also Standby and EnteringStandby (a machine
//     that exists; but standby machines are out of service, and Instances
//     leaves them out, see standby). Quarantined and the ReplacingRootVolume
//     states are machines that exist too, so running, as is any state AWS
//     adds later.
func State(lifecycle string) providers.InstanceState {
	switch {
	case strings.Contains(lifecycle, "Terminat"), strings.HasPrefix(lifecycle, "Detach"):
		return providers.StateDeleting
	case strings.HasPrefix(lifecycle, "Pending"), strings.HasPrefix(lifecycle, "Warmed:"):
		return providers.StateCreating
	default:
		return providers.StateRunning
	}
}

// counts reports whether a machine in this lifecycle state is part of the
// group's capacity (what desired capacity counts).
func counts(lifecycle string) bool {
	return State(lifecycle) != providers.StateDeleting && !outOfService(lifecycle)
}

// standby reports whether a machine was put in standby (by hand, for
// maintenance): AWS takes it out of service and out of desired capacity
// (launching a replacement unless desired capacity was lowered), and gives
// it back only when someone calls ExitStandby. Like a warm-pool machine it
// is not one of the group's instances, nor capacity; removing it is refused
// (taking a unit of desired capacity would remove a machine in service).
func standby(lifecycle string) bool {
	return lifecycle == string(astypes.LifecycleStateStandby) || lifecycle == string(astypes.LifecycleStateEnteringStandby)
}

// outOfService: in the warm pool or in standby.
func outOfService(lifecycle string) bool { return warm(lifecycle) || standby(lifecycle) }

// warm reports whether a machine is in the group's warm pool: stopped,
// hibernated or running in reserve, outside desired capacity until AWS
// moves it into service. Such a machine is not one of the group's
// instances: counting it would misplace a Node it registered, and
// removing it with a decrement would take a machine in service instead.
func warm(lifecycle string) bool { return strings.HasPrefix(lifecycle, "Warmed:") }

// ProviderID is the Kubernetes provider ID of an instance.
func ProviderID(az, instanceID string) string {
	return ProviderIDPrefix + az + "/" + instanceID
}

// instanceID takes the instance ID out of aws:///<az>/<id> (or aws:///<id>).
func instanceID(providerID string) (string, bool) {
	rest, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok {
		return "", false
	}
	id := rest[strings.LastIndex(rest, "/")+1:]
	return id, strings.HasPrefix(id, "i-")
}

func existing(asg astypes.AutoScalingGroup) int {
	n := 0
	for _, in := range asg.Instances {
		if counts(string(in.LifecycleState)) {
			n++
		}
	}
	return n
}

// LifecycleState is the ASG's lifecycle state of one of its machines, as
// last described (Terminating:Wait while a termination lifecycle hook holds
// it); false when the ASG does not list the machine, warm pool included.
func (g *Group) LifecycleState(instanceID string) (string, bool) {
	for _, in := range g.snapshot().Instances {
		if awssdk.ToString(in.InstanceId) == instanceID {
			return string(in.LifecycleState), true
		}
	}
	return "", false
}

// Instances implements providers.NodeGroup. When the group is short of its
// desired capacity and the newest launch activity failed (no capacity, a
// bad launch template, a quota), the missing machines are reported as
// placeholder instances in state creating carrying AWS's message as Error.
func (g *Group) Instances(ctx context.Context) ([]providers.Instance, error) {
	asg := g.snapshot()
	out := make([]providers.Instance, 0, len(asg.Instances))
	for _, in := range asg.Instances {
		if outOfService(string(in.LifecycleState)) {
			continue
		}
		out = append(out, providers.Instance{
			ProviderID: ProviderID(awssdk.ToString(in.AvailabilityZone), awssdk.ToString(in.InstanceId)),
			State:      State(string(in.LifecycleState)),
		})
	}
	missing := int(awssdk.ToInt32(asg.DesiredCapacity)) - existing(asg)
	if missing <= 0 {
		return out, nil
	}
	msg, err := g.failedLaunch(ctx)
	if err != nil {
		return nil, err
	}
	if msg == "" {
		return out, nil
	}
	az := "unknown"
	if len(asg.AvailabilityZones) > 0 {
		az = asg.AvailabilityZones[0]
	}
	for i := range missing {
		out = append(out, providers.Instance{
			ProviderID: ProviderID(az, placeholderPrefix+g.asgName+"-"+strconv.Itoa(i)),
			State:      providers.StateCreating,
			Error:      msg,
		})
	}
	return out, nil
}

// failedLaunch is AWS's message when the newest launch activity of the group
// failed, "" otherwise. Termination activities are skipped: only whether
// the last attempt to add a machine worked matters here.
func (g *Group) failedLaunch(ctx context.Context) (string, error) {
	out, err := g.p.as.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{
		AutoScalingGroupName: awssdk.String(g.asgName),
		MaxRecords:           awssdk.Int32(20),
	})
	if err != nil {
		return "", fmt.Errorf("%s: describe scaling activities: %w", g.label(), err)
	}
	for _, a := range out.Activities {
		if strings.HasPrefix(awssdk.ToString(a.Description), "Terminating") {
			continue
		}
		switch a.StatusCode {
		case astypes.ScalingActivityStatusCodeFailed, astypes.ScalingActivityStatusCodeCancelled:
			if m := awssdk.ToString(a.StatusMessage); m != "" {
				return m, nil
			}
			return awssdk.ToString(a.Description), nil
		}
		return "", nil
	}
	return "", nil
}

// limits are the group's bounds against a fresh description: the config's
// narrowing still applies, and so does a change made to the ASG since
// NodeGroups read it.
func (g *Group) limits(asg astypes.AutoScalingGroup) (lo, hi int) {
	return max(g.min, int(awssdk.ToInt32(asg.MinSize))), min(g.max, int(awssdk.ToInt32(asg.MaxSize)))
}

// refresh describes the ASG again; callers hold the ASG's lock.
func (g *Group) refresh(ctx context.Context) (astypes.AutoScalingGroup, error) {
	asg, err := g.p.describeOne(ctx, g.asgName)
	if err != nil {
		return asg, fmt.Errorf("%s: %w", g.label(), err)
	}
	return asg, nil
}

// setDesired calls SetDesiredCapacity; HonorCooldown=false because the
// planner has its own delays and a cooldown would silently drop the change.
func (g *Group) setDesired(ctx context.Context, asg astypes.AutoScalingGroup, n int) error {
	_, err := g.p.as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: awssdk.String(g.asgName),
		DesiredCapacity:      awssdk.Int32(int32(n)),
		HonorCooldown:        awssdk.Bool(false),
	})
	if err != nil {
		return fmt.Errorf("%s: set desired capacity %d: %w", g.label(), n, classify(err))
	}
	asg.DesiredCapacity = awssdk.Int32(int32(n))
	g.setSnapshot(asg)
	return nil
}

// classify adds the providers sentinel to AWS's own limit errors, which can
// still happen when someone changes the ASG between our read and our write.
func classify(err error) error {
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationError" {
		return err
	}
	msg := api.ErrorMessage()
	switch {
	case strings.Contains(msg, "above max"):
		return fmt.Errorf("%w: %w", providers.ErrAboveMax, err)
	case strings.Contains(msg, "below min"), strings.Contains(msg, "min size constraint"):
		return fmt.Errorf("%w: %w", providers.ErrBelowMin, err)
	}
	return err
}

// IncreaseSize implements providers.NodeGroup.
//
// SetDesiredCapacity sets an absolute number, so two concurrent "+1"s could
// both read 3 and both write 4. Within this process the ASG's lock makes each
// increase read the current desired capacity and write it plus delta, so
// none is lost and MaxSize is checked against what is really there; across
// processes the evaluate lease does the same. AWS refuses anything above the
// ASG's own MaxSize whatever happens, so the one thing no race can do is grow
// the group past its maximum.
func (g *Group) IncreaseSize(ctx context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("%s: increase must be positive, got %d", g.label(), delta)
	}
	mu := g.p.lock(g.asgName)
	mu.Lock()
	defer mu.Unlock()
	asg, err := g.refresh(ctx)
	if err != nil {
		return err
	}
	cur := int(awssdk.ToInt32(asg.DesiredCapacity))
	_, hi := g.limits(asg)
	if err := providers.CheckIncrease("desired capacity", cur, delta, hi); err != nil {
		return fmt.Errorf("%s: %w", g.label(), err)
	}
	return g.setDesired(ctx, asg, cur+delta)
}

// DeleteInstance implements providers.NodeGroup: it terminates the instance
// and decrements the desired capacity in one call, so AWS does not replace it.
func (g *Group) DeleteInstance(ctx context.Context, providerID string) error {
	id, ok := instanceID(providerID)
	if !ok {
		return fmt.Errorf("%s: %q is not an EC2 provider ID: %w", g.label(), providerID, providers.ErrUnknownInstance)
	}
	mu := g.p.lock(g.asgName)
	mu.Lock()
	defer mu.Unlock()
	asg, err := g.refresh(ctx)
	if err != nil {
		return err
	}
	desired := int(awssdk.ToInt32(asg.DesiredCapacity))
	if strings.HasPrefix(id, placeholderPrefix) {
		return g.deletePlaceholder(ctx, asg, id)
	}
	idx := -1
	for i, in := range asg.Instances {
		if awssdk.ToString(in.InstanceId) == id {
			idx = i
			break
		}
	}
	if idx < 0 {
		return fmt.Errorf("%s: instance %s: %w", g.label(), id, providers.ErrUnknownInstance)
	}
	if lc := string(asg.Instances[idx].LifecycleState); warm(lc) {
		return fmt.Errorf("%s: instance %s is in the warm pool (%s), not in service: %w", g.label(), id, lc, providers.ErrUnknownInstance)
	}
	if lc := string(asg.Instances[idx].LifecycleState); standby(lc) {
		return fmt.Errorf("%s: instance %s is in standby (%s), not in service: %w", g.label(), id, lc, providers.ErrUnknownInstance)
	}
	if State(string(asg.Instances[idx].LifecycleState)) == providers.StateDeleting {
		return nil // already on its way out: removal is idempotent
	}
	if lo, _ := g.limits(asg); desired-1 < lo {
		return fmt.Errorf("%s: instance %s: desired capacity %d - 1: %w (%d)", g.label(), id, desired, providers.ErrBelowMin, lo)
	}
	_, err = g.p.as.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId:                     awssdk.String(id),
		ShouldDecrementDesiredCapacity: awssdk.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("%s: terminate instance %s: %w", g.label(), id, classify(err))
	}
	asg.DesiredCapacity = awssdk.Int32(int32(desired - 1))
	asg.Instances = append([]astypes.Instance(nil), asg.Instances...)
	asg.Instances[idx].LifecycleState = astypes.LifecycleStateTerminating
	g.setSnapshot(asg)
	return nil
}

// deletePlaceholder gives back one unit of capacity that never launched.
func (g *Group) deletePlaceholder(ctx context.Context, asg astypes.AutoScalingGroup, id string) error {
	if !strings.HasPrefix(id, placeholderPrefix+g.asgName+"-") {
		return fmt.Errorf("%s: instance %s: %w", g.label(), id, providers.ErrUnknownInstance)
	}
	desired := int(awssdk.ToInt32(asg.DesiredCapacity))
	if desired-existing(asg) <= 0 {
		return nil // the capacity it stood for is gone already
	}
	if lo, _ := g.limits(asg); desired-1 < lo {
		return fmt.Errorf("%s: instance %s: desired capacity %d - 1: %w (%d)", g.label(), id, desired, providers.ErrBelowMin, lo)
	}
	return g.setDesired(ctx, asg, desired-1)
}

// DecreaseTargetSize implements providers.NodeGroup: it lowers the desired
// capacity by -delta, but only over capacity AWS has not started a machine
// for (desired minus the machines that exist, Pending ones included); a
// machine that exists is removed with DeleteInstance instead.
func (g *Group) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("%s: decrease must be negative, got %d", g.label(), delta)
	}
	mu := g.p.lock(g.asgName)
	mu.Lock()
	defer mu.Unlock()
	asg, err := g.refresh(ctx)
	if err != nil {
		return err
	}
	desired, have := int(awssdk.ToInt32(asg.DesiredCapacity)), existing(asg)
	if unstarted := desired - have; -delta > unstarted {
		return fmt.Errorf("%s: decrease by %d: desired capacity %d with %d machines leaves %d not started: %w",
			g.label(), -delta, desired, have, max(unstarted, 0), providers.ErrNothingToDecrease)
	}
	if lo, _ := g.limits(asg); desired+delta < lo {
		return fmt.Errorf("%s: desired capacity %d - %d: %w (%d)", g.label(), desired, -delta, providers.ErrBelowMin, lo)
	}
	return g.setDesired(ctx, asg, desired+delta)
}
