package drain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/ec2health"
	"github.com/nodetide/nodetide/pkg/lambdaevent"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/strictjson"
)

// LifecycleAPI is the part of the Auto Scaling client a drain held by a
// termination lifecycle hook uses.
type LifecycleAPI interface {
	CompleteLifecycleAction(ctx context.Context, in *autoscaling.CompleteLifecycleActionInput, optFns ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error)
	RecordLifecycleActionHeartbeat(ctx context.Context, in *autoscaling.RecordLifecycleActionHeartbeatInput, optFns ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error)
}

// The EventBridge events that say the cloud takes a machine.
const (
	lifecycleSource     = "aws.autoscaling"
	lifecycleDetailType = "EC2 Instance-terminate Lifecycle Action"
	ec2Source           = "aws.ec2"
	spotDetailType      = "EC2 Spot Instance Interruption Warning"
	rebalanceDetailType = "EC2 Instance Rebalance Recommendation"
	healthSource        = "aws.health"
	healthDetailType    = "AWS Health Event"

	terminatingTransition = "autoscaling:EC2_INSTANCE_TERMINATING"
)

// SpotDrainTime is how long a drain of a Spot machine has after EC2's
// warning, which comes two minutes before the machine is reclaimed: the
// rest is left for the last pods' graceful shutdown.
const SpotDrainTime = 90 * time.Second

// DefaultHeartbeatEvery is how often a drain held by a lifecycle hook tells
// the hook it is still going; a hook's heartbeat timeout must be longer.
const DefaultHeartbeatEvery = time.Minute

var (
	instanceIDPattern = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)
	tokenPattern      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	hookNamePattern   = regexp.MustCompile(`^[A-Za-z0-9\-_/]{1,255}$`)
)

// Interruption is one machine the cloud takes, read from its event.
type Interruption struct {
	state.Interruption
	// At is the event's time (a Spot machine goes two minutes after it).
	At time.Time `json:"at"`
	// Event names what was received, for logs and results.
	Event string `json:"event"`
	// Over says the change the event announced is over (AWS Health's
	// closed status): nothing to drain for.
	Over bool `json:"over,omitempty"`
	// Replay: EventBridge replayed the event from an archive (its
	// envelope's replay-name): it proves nothing about now.
	Replay bool `json:"replay,omitempty"`
}

// parseInterruptions reads the EventBridge events nodetide drains for. The
// envelope's other fields and the detail's unread ones are accepted (AWS
// adds fields); what is read is checked: source and detail-type together,
// instance IDs, the lifecycle hook's token, group and hook names. An event
// with nothing to act on is an error naming the field.
func parseInterruptions(env *lambdaevent.Envelope) ([]Interruption, error) {
	var detail map[string]json.RawMessage
	if len(env.Detail) == 0 {
		return nil, errors.New(`EventBridge event: "detail" is required`)
	}
	if err := strictjson.Decode(env.Detail, &detail); err != nil {
		return nil, fmt.Errorf("EventBridge event %q: detail: %w", env.DetailType, err)
	}
	if env.Time.IsZero() {
		return nil, fmt.Errorf("EventBridge event %q: \"time\" is required", env.DetailType)
	}
	str := func(key string) (string, error) {
		raw, ok := detail[key]
		if !ok {
			return "", fmt.Errorf("detail.%s is required", key)
		}
		var v string
		if err := strictjson.Decode(raw, &v); err != nil {
			return "", fmt.Errorf("detail.%s: %w", key, err)
		}
		return v, nil
	}
	instance := func(key string) (string, error) {
		id, err := str(key)
		if err == nil && !instanceIDPattern.MatchString(id) {
			err = fmt.Errorf("detail.%s: %q is not an EC2 instance ID (i- and 8 or 17 hex digits)", key, id)
		}
		return id, err
	}
	one := func(in state.Interruption, err error) ([]Interruption, error) {
		if err != nil {
			return nil, fmt.Errorf("EventBridge event %q: %w", env.DetailType, err)
		}
		return []Interruption{{Interruption: in, At: env.Time, Event: env.DetailType}}, nil
	}
	switch {
	case env.Source == lifecycleSource && env.DetailType == lifecycleDetailType:
		return one(parseLifecycle(str, instance))
	case env.Source == ec2Source && env.DetailType == spotDetailType:
		id, err := instance("instance-id")
		if err == nil {
			var action string
			if action, err = str("instance-action"); err == nil && action != "terminate" && action != "stop" && action != "hibernate" {
				err = fmt.Errorf("detail.instance-action: %q is not terminate, stop or hibernate", action)
			}
		}
		return one(state.Interruption{Kind: state.InterruptSpot, InstanceID: id}, err)
	case env.Source == ec2Source && env.DetailType == rebalanceDetailType:
		id, err := instance("instance-id")
		return one(state.Interruption{Kind: state.InterruptRebalance, InstanceID: id}, err)
	case env.Source == healthSource && env.DetailType == healthDetailType:
		return parseHealth(env, detail, str)
	}
	return nil, fmt.Errorf("unsupported EventBridge event: source %q, detail-type %q (want %s %s; %s %s, %s; %s %s; or %s %s)",
		env.Source, env.DetailType, statusChangeSource, statusChangeDetailType, ec2Source, spotDetailType, rebalanceDetailType,
		lifecycleSource, lifecycleDetailType, healthSource, healthDetailType)
}

func parseLifecycle(str func(string) (string, error), instance func(string) (string, error)) (state.Interruption, error) {
	in := state.Interruption{Kind: state.InterruptLifecycle}
	var err error
	if in.InstanceID, err = instance("EC2InstanceId"); err != nil {
		return in, err
	}
	transition, err := str("LifecycleTransition")
	if err != nil {
		return in, err
	}
	if transition != terminatingTransition {
		return in, fmt.Errorf("detail.LifecycleTransition: %q is not %s", transition, terminatingTransition)
	}
	if in.Token, err = str("LifecycleActionToken"); err != nil {
		return in, err
	}
	if !tokenPattern.MatchString(in.Token) {
		return in, errors.New("detail.LifecycleActionToken: not a lifecycle action token (a lower-case UUID)")
	}
	if in.Hook, err = str("LifecycleHookName"); err != nil {
		return in, err
	}
	if !hookNamePattern.MatchString(in.Hook) {
		return in, fmt.Errorf("detail.LifecycleHookName: %q is not a lifecycle hook name (1 to 255 of A-Z a-z 0-9 - _ /)", in.Hook)
	}
	if in.AutoScalingGroup, err = str("AutoScalingGroupName"); err != nil {
		return in, err
	}
	if g := in.AutoScalingGroup; g == "" || len(g) > 255 || strings.ContainsFunc(g, func(r rune) bool { return r < 0x20 }) {
		return in, fmt.Errorf("detail.AutoScalingGroupName: %q is not an Auto Scaling group name (1 to 255 printable characters)", g)
	}
	return in, nil
}

// parseHealth reads an AWS Health event scheduling a change that stops,
// retires or reboots EC2 machines (one of ec2health.Codes, category
// scheduledChange): one interruption per machine. A reboot is drained too:
// it kills the node's pods without their graceful shutdown.
func parseHealth(env *lambdaevent.Envelope, detail map[string]json.RawMessage, str func(string) (string, error)) ([]Interruption, error) {
	fail := func(err error) ([]Interruption, error) {
		return nil, fmt.Errorf("EventBridge event %q: %w", env.DetailType, err)
	}
	if svc, err := str("service"); err != nil || svc != "EC2" {
		return fail(fmt.Errorf("detail.service must be EC2 (%q, %v)", svc, err))
	}
	code, err := str("eventTypeCode")
	if err != nil {
		return fail(err)
	}
	if _, ok := ec2health.Of(code); !ok {
		return fail(fmt.Errorf("detail.eventTypeCode: %q is not a scheduled stop, retirement or reboot of EC2 instances (%s)", code, strings.Join(ec2health.Codes(), ", ")))
	}
	if cat, err := str("eventTypeCategory"); err != nil || cat != "scheduledChange" {
		return fail(fmt.Errorf("detail.eventTypeCategory must be scheduledChange (%q, %v)", cat, err))
	}
	var ids []string
	raw, ok := detail["affectedEntities"]
	if !ok {
		return fail(errors.New("detail.affectedEntities is required"))
	}
	// Entities carry more fields than the value; read only that.
	var loose []map[string]json.RawMessage
	if err := strictjson.Decode(raw, &loose); err != nil {
		return fail(fmt.Errorf("detail.affectedEntities: %w", err))
	}
	for i, e := range loose {
		var v string
		if err := strictjson.Decode(e["entityValue"], &v); err != nil || !instanceIDPattern.MatchString(v) {
			return fail(fmt.Errorf("detail.affectedEntities[%d].entityValue: not an EC2 instance ID", i))
		}
		ids = append(ids, v)
	}
	if len(ids) == 0 {
		return fail(errors.New("detail.affectedEntities names no machine"))
	}
	over := false
	if _, ok := detail["statusCode"]; ok {
		status, err := str("statusCode")
		if err != nil {
			return fail(err)
		}
		over = status == "closed"
	}
	out := make([]Interruption, 0, len(ids))
	for _, id := range ids {
		out = append(out, Interruption{Interruption: state.Interruption{Kind: state.InterruptMaintenance, InstanceID: id},
			At: env.Time, Event: code, Over: over})
	}
	return out, nil
}

// InterruptResult is what the drain function did about one machine.
type InterruptResult struct {
	InstanceID string `json:"instanceId"`
	Event      string `json:"event"`
	// Action: "drain" (an execution started, or running already), "joined"
	// (a lifecycle action handed to the drain already holding the node),
	// "completed" (a lifecycle action completed at once: no node has the
	// machine), "ignored" (with Reason: nothing to do, or not this
	// deployment's) or "refused" (with Reason: a lifecycle action that did
	// not prove itself; nothing was changed).
	Action      string     `json:"action"`
	Node        string     `json:"node,omitempty"`
	NodeGroup   string     `json:"nodeGroup,omitempty"`
	Execution   *Execution `json:"execution,omitempty"`
	Replacement bool       `json:"replacement,omitempty"`
	Reason      string     `json:"reason,omitempty"`
}

// Interrupt acts on machines the cloud takes: each one's node is drained by
// the state machine (one execution per machine and event, so a repeated
// event finds the running one). A machine no node has is ignored, but a
// lifecycle hook holding it is completed at once; a machine of no managed
// group is ignored, changing nothing. A lifecycle action must first prove
// itself this deployment's and open (see proveAction): a foreign one is
// ignored and nothing is called on it, an unproven one refused.
func (h *Handler) Interrupt(ctx context.Context, ins []Interruption) ([]InterruptResult, error) {
	if err := checkSkew(ins, h.Steps.now()); err != nil {
		return []InterruptResult{}, err
	}
	out := make([]InterruptResult, 0, len(ins))
	var errs []error
	for _, in := range ins {
		res, err := h.interruptOne(ctx, in)
		out = append(out, res)
		if err != nil {
			errs = append(errs, fmt.Errorf("instance %s: %w", in.InstanceID, err))
		}
	}
	return out, errors.Join(errs...)
}

func (h *Handler) interruptOne(ctx context.Context, in Interruption) (InterruptResult, error) {
	res := InterruptResult{InstanceID: in.InstanceID, Event: in.Event}
	log := h.Steps.log().With("event", in.Event, "instanceId", in.InstanceID)
	if in.Over {
		res.Action, res.Reason = "ignored", "the scheduled change is over (status closed)"
		log.Info("interruption ignored", "reason", res.Reason)
		return res, nil
	}
	if in.Kind == state.InterruptRebalance && !h.Rebalance {
		res.Action, res.Reason = "ignored", "rebalance recommendations are not acted on (drain.rebalance: ignore)"
		log.Info("interruption ignored", "reason", res.Reason)
		return res, nil
	}
	if in.Kind == state.InterruptLifecycle {
		// Nothing is called for an action before it proves itself ours.
		if res, done, err := h.proveLifecycle(ctx, &in, res, log); done || err != nil {
			return res, err
		}
	}
	node, err := h.Steps.nodeOfInstance(ctx, in.InstanceID)
	if err != nil {
		return res, err
	}
	if node == nil {
		if in.Kind == state.InterruptLifecycle && h.Steps.Lifecycle != nil {
			// Never registered (or already gone): nothing to drain, so the
			// machine need not wait for the hook's timeout.
			if err := h.Steps.completeHook(ctx, &in.Interruption); err != nil {
				return res, err
			}
			res.Action, res.Reason = "completed", "no node has this machine"
			log.Info("lifecycle action completed: no node has the machine", "autoScalingGroup", in.AutoScalingGroup)
			return res, nil
		}
		res.Action, res.Reason = "ignored", "no node has this machine"
		log.Info("interruption ignored", "reason", res.Reason)
		return res, nil
	}
	res.Node = node.Name
	g, err := h.Steps.groupOf(ctx, node.Spec.ProviderID)
	if err != nil {
		return res, err
	}
	if g == nil {
		res.Action, res.Reason = "ignored", "the machine belongs to no managed node group"
		log.Info("interruption ignored", "node", node.Name, "reason", res.Reason)
		return res, nil
	}
	res.NodeGroup = g.Name()
	// The event must prove itself with EC2 before anything changes.
	if reason, err := h.unproven(ctx, in); err != nil || reason != "" {
		if err == nil {
			res.Action, res.Reason = "ignored", reason
			log.Warn("interruption ignored", "node", node.Name, "reason", reason, "replay", in.Replay)
		}
		return res, err
	}
	if in.Kind == state.InterruptLifecycle {
		joined, err := h.joinRunning(ctx, node.Name, in)
		if err != nil {
			return res, err
		}
		if joined != "" {
			res.Action, res.Reason = "joined", "drain "+joined+" already holds the node: it completes the lifecycle action"
			log.Info("lifecycle action joined the running drain", "node", node.Name, "drainId", joined)
			return res, nil
		}
	}
	exec, err := h.Starter.Interrupted(ctx, node.Name, g.Name(), in)
	if err != nil {
		return res, err
	}
	res.Action, res.Execution = "drain", &exec
	log.Info("drain for interruption", "node", node.Name, "nodeGroup", g.Name(), "execution", exec.Name, "alreadyStarted", exec.AlreadyStarted)
	if exec.AlreadyStarted || in.Kind == state.InterruptLifecycle {
		// The ASG itself launches what keeps its desired capacity.
		return res, nil
	}
	res.Replacement, err = h.replace(ctx, g, node.Name)
	return res, err
}

// joinRunning hands a lifecycle action to a drain that already holds the
// node (a scale-down under way): recorded on its drain record, the action
// gets that drain's heartbeats, and its Terminate (or rollback) completes
// the action instead of terminating the machine again. It returns the
// drain's ID, or "" when no other running drain holds the node (or it ended
// meanwhile: then the action gets a drain of its own).
func (h *Handler) joinRunning(ctx context.Context, node string, in Interruption) (string, error) {
	for try := 0; ; try++ {
		id, err := h.tryJoin(ctx, node, in)
		if !errors.Is(err, state.ErrDrainChanged) || try == saveTries-1 {
			return id, err
		}
	}
}

// tryJoin is one try of joinRunning; ErrDrainChanged means a step wrote the
// record between the read and the write, and the join reads it again.
func (h *Handler) tryJoin(ctx context.Context, node string, in Interruption) (string, error) {
	active, _, err := h.Steps.Store.NodeDrain(ctx, node)
	if err != nil || active == "" || groupLowered(active) {
		return "", err
	}
	rec, err := h.Steps.Store.GetDrain(ctx, node, active)
	if errors.Is(err, state.ErrNoDrain) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if rec.Status != state.DrainRunning || rec.Interruption != nil || rec.Phase.AtLeast(state.PhaseTerminating) {
		return "", nil
	}
	rec.Interruption = &in.Interruption
	err = h.Steps.Store.UpdateDrain(ctx, &rec)
	if errors.Is(err, state.ErrDrainEnded) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return active, nil
}

// replace asks the group for one more machine at once when the interrupted
// node carries pods that must move (as Karpenter does): they then need not
// wait for the machine to go and the group to notice. The drain's Terminate
// lowers the target again as it removes the interrupted machine.
func (h *Handler) replace(ctx context.Context, g providers.NodeGroup, node string) (bool, error) {
	pods, err := h.Steps.podsOn(ctx, node)
	if err != nil {
		return false, err
	}
	carries := false
	for i := range pods {
		if movable(&pods[i]) && pods[i].DeletionTimestamp == nil {
			carries = true
			break
		}
	}
	if !carries {
		return false, nil
	}
	err = g.IncreaseSize(ctx, 1)
	if errors.Is(err, providers.ErrAboveMax) {
		h.Steps.log().Warn("no replacement for an interrupted node: its group is at its max size", "node", node, "nodeGroup", g.Name(), "error", err.Error())
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("node group %s: replacement: %w", g.Name(), err)
	}
	return true, nil
}

// nodeListPage bounds the nodes held at once while looking for a machine's
// node (Node objects are large; a cluster may have thousands).
const nodeListPage = 500

// nodeOfInstance finds the node whose providerID names the EC2 machine
// (aws:///<az>/<id>), nil if none does.
func (d *Steps) nodeOfInstance(ctx context.Context, id string) (*corev1.Node, error) {
	opts := metav1.ListOptions{Limit: nodeListPage}
	for {
		list, err := d.Client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("find the node of machine %s: list nodes: %w", id, err)
		}
		for i := range list.Items {
			if instanceOf(list.Items[i].Spec.ProviderID) == id {
				return &list.Items[i], nil
			}
		}
		if list.Continue == "" {
			return nil, nil
		}
		opts.Continue = list.Continue
	}
}

// instanceOf is the EC2 machine a providerID names ("" for another form).
func instanceOf(providerID string) string {
	if !strings.HasPrefix(providerID, "aws:///") {
		return ""
	}
	return providerID[strings.LastIndex(providerID, "/")+1:]
}

// groupLowered reports whether a drain's group lowered its target for the
// machine before the drain began: an Auto Scaling Group terminating a
// machine under its lifecycle hook (drains named by Interrupted). Such a
// drain does not count against the minimum again.
func groupLowered(drainID string) bool {
	return strings.HasPrefix(drainID, state.InterruptLifecycle+"-")
}

// Interrupted starts the drain of a node the cloud takes; the execution is
// named from the machine and the event (the lifecycle action's token), and
// a repeated event returns the execution the first one started, whether it
// still runs or not.
func (st *Starter) Interrupted(ctx context.Context, node, group string, in Interruption) (Execution, error) {
	s := State{Node: node, NodeGroup: group, Surge: st.Surge, Policy: PolicyForce,
		Deadline: st.now().Add(st.Timeout), Interruption: &in.Interruption, HeartbeatAt: st.now(),
		Reason: "interrupted by the cloud: " + in.Event}
	suffix := in.Kind
	switch in.Kind {
	case state.InterruptLifecycle:
		suffix = shortHash(in.Token)
	case state.InterruptSpot:
		// EC2 reclaims it two minutes after its warning, whatever the drain
		// does: force what is left at the deadline. A warning past that
		// deadline, or replayed, forces nothing: the machine is going (the
		// handler asked EC2), but PodDisruptionBudgets are kept as in any
		// drain.
		s.Deadline = in.At.Add(SpotDrainTime)
		if in.Replay || !s.Deadline.After(st.now()) {
			s.Policy, s.Deadline = st.Policy, st.now().Add(st.Timeout)
			s.Reason += " (late: an ordinary drain)"
		}
	case state.InterruptRebalance, state.InterruptMaintenance:
		// Advice, or a change scheduled days ahead: an ordinary drain.
		s.Policy = st.Policy
		suffix = shortHash(in.Event)
	}
	name := executionName(in.Kind, in.InstanceID, suffix)
	s.DrainID = name
	return st.startAttempt(ctx, name, s, maxStartAttempts)
}

// completeHook lets the Auto Scaling Group go on terminating the machine.
// An action no longer waiting (completed before, or past its timeout) is
// done already.
func (d *Steps) completeHook(ctx context.Context, in *state.Interruption) error {
	if in == nil || in.Kind != state.InterruptLifecycle {
		return nil
	}
	if d.Lifecycle == nil {
		// Evaluate's recovery pass has no Auto Scaling client (nor the
		// grant): the hook's own timeout lets the machine go.
		d.log().Warn("lifecycle action left to the hook's timeout: no Auto Scaling client here", "instanceId", in.InstanceID, "autoScalingGroup", in.AutoScalingGroup, "hook", in.Hook)
		return nil
	}
	_, err := d.Lifecycle.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String(in.AutoScalingGroup), LifecycleHookName: aws.String(in.Hook),
		LifecycleActionToken: aws.String(in.Token), InstanceId: aws.String(in.InstanceID),
		LifecycleActionResult: aws.String("CONTINUE"),
	})
	if noActiveAction(err) {
		d.log().Info("lifecycle action was no longer waiting", "instanceId", in.InstanceID, "autoScalingGroup", in.AutoScalingGroup, "hook", in.Hook)
		return nil
	}
	if err != nil {
		return fmt.Errorf("complete lifecycle action of %s (group %s, hook %s): %w", in.InstanceID, in.AutoScalingGroup, in.Hook, err)
	}
	d.log().Info("lifecycle action completed", "instanceId", in.InstanceID, "autoScalingGroup", in.AutoScalingGroup, "hook", in.Hook)
	return nil
}

func noActiveAction(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationError" && strings.Contains(api.ErrorMessage(), "No active Lifecycle Action")
}

func (d *Steps) heartbeatEvery() time.Duration {
	if d.HeartbeatEvery > 0 {
		return d.HeartbeatEvery
	}
	return DefaultHeartbeatEvery
}

// heartbeat keeps the lifecycle hook holding the machine from timing out
// while the drain goes on. A failed heartbeat does not fail the step: the
// next one tries again, and a hook that timed out has let the machine go,
// which the drain can no longer change.
func (d *Steps) heartbeat(ctx context.Context, s *State) {
	in := s.Interruption
	if in == nil || in.Kind != state.InterruptLifecycle || d.Lifecycle == nil || d.now().Sub(s.HeartbeatAt) < d.heartbeatEvery() {
		return
	}
	_, err := d.Lifecycle.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: aws.String(in.AutoScalingGroup), LifecycleHookName: aws.String(in.Hook),
		LifecycleActionToken: aws.String(in.Token), InstanceId: aws.String(in.InstanceID),
	})
	if err != nil {
		d.log().Warn("lifecycle hook heartbeat failed", "node", s.Node, "instanceId", in.InstanceID, "error", err.Error())
		return
	}
	s.HeartbeatAt = d.now()
}
