package drain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/lambdaevent"
	"github.com/nodetide/nodetide/pkg/strictjson"
)

// Handler is the drain function: the state machine's task steps, and the
// hand-made actions shutdown and enable.
type Handler struct {
	Steps   *Steps
	Starter *Starter
	// Recovery finishes drains whose execution ended (nil without a state
	// machine: recover and enable --force then say so).
	Recovery *Recovery
	// Rebalance drains the machines EC2 recommends rebalancing; they are
	// ignored otherwise.
	Rebalance bool
}

// Event is every shape the drain function accepts.
type Event struct {
	// A state machine task: {"step": "Evict", "state": {...}}.
	Step  string          `json:"step,omitempty"`
	State json.RawMessage `json:"state,omitempty"`
	// By hand: {"action": "shutdown"|"enable"|"recover", ...}. Node is nil
	// when absent: for enable that, and only that, means every node.
	Action   string  `json:"action,omitempty"`
	Node     *string `json:"node,omitempty"`
	Policy   string  `json:"policy,omitempty"`
	Timeout  string  `json:"timeout,omitempty"`
	BelowMin bool    `json:"belowMin,omitempty"`
	// Force: with shutdown, drain a node that must not be disrupted; with
	// enable of one node, end the drain holding it first, whatever its
	// execution is doing.
	Force bool `json:"force,omitempty"`

	// interruptions: an EventBridge event saying the cloud takes machines.
	interruptions []Interruption
}

// Interruptions are the machines an EventBridge event says the cloud
// takes (an ASG's termination lifecycle action, a Spot interruption, ...).
func (e Event) Interruptions() []Interruption { return e.interruptions }

// MaxShutdownTimeout bounds a shutdown's "timeout": a drain is meant to end
// within minutes, and a longer one would hold the node for good.
const MaxShutdownTimeout = 24 * time.Hour

// minShutdownTimeout leaves room for at least a few eviction rounds.
const minShutdownTimeout = 30 * time.Second

// EnableResult lists the nodes an enable made schedulable again.
type EnableResult struct {
	Enabled []string `json:"enabled"`
	// Skipped nodes are held by a running drain.
	Skipped []string `json:"skipped,omitempty"`
}

// ParseEvent decodes an event strictly (pkg/strictjson: exact field names,
// none twice, nothing after the object): unknown fields, a step together
// with an action, or a bad value are errors that name the field.
func ParseEvent(payload []byte) (Event, error) {
	trimmed, err := lambdaevent.Object(payload)
	if err != nil {
		return Event{}, err
	}
	env, err := lambdaevent.EventBridge(trimmed)
	if err != nil {
		return Event{}, err
	}
	if env != nil {
		// Only a trigger: Recovery asks Step Functions itself, so a forged
		// event costs one recovery pass and changes nothing else.
		if env.Source == statusChangeSource && env.DetailType == statusChangeDetailType {
			return Event{Action: ActionRecover}, nil
		}
		ins, err := parseInterruptions(env)
		if err != nil {
			return Event{}, err
		}
		for i := range ins {
			ins[i].Replay = env.ReplayName != ""
		}
		return Event{interruptions: ins}, nil
	}
	var ev Event
	if err := strictjson.Decode(trimmed, &ev); err != nil {
		return Event{}, fmt.Errorf("bad event: %w (fields: step, state; or action, node, policy, timeout, belowMin, force)", err)
	}
	switch {
	case ev.Step != "" && ev.Action != "":
		return Event{}, errors.New(`an event has either "step" (from the state machine) or "action" (by hand), not both`)
	case ev.Step != "":
		if len(ev.State) == 0 {
			return Event{}, fmt.Errorf("step %s: \"state\" is required", ev.Step)
		}
		if ev.Node != nil || ev.Policy != "" || ev.Timeout != "" || ev.BelowMin || ev.Force {
			return Event{}, errors.New(`a step event carries only "step" and "state"`)
		}
	case ev.Action == "shutdown":
		if ev.Node == nil {
			return Event{}, errors.New(`action "shutdown" needs "node"`)
		}
		if err := CheckNodeName(*ev.Node); err != nil {
			return Event{}, fmt.Errorf(`action "shutdown": "node": %w`, err)
		}
		if ev.Policy != "" && ev.Policy != PolicyAbort && ev.Policy != PolicyForce {
			return Event{}, fmt.Errorf(`action "shutdown": "policy" must be abort or force, got %q`, ev.Policy)
		}
		if ev.Timeout != "" {
			if _, err := ShutdownTimeout(ev.Timeout); err != nil {
				return Event{}, fmt.Errorf(`action "shutdown": "timeout" %w`, err)
			}
		}
	case ev.Action == "enable":
		if ev.Policy != "" || ev.Timeout != "" || ev.BelowMin {
			return Event{}, errors.New(`action "enable" takes only "node" (or nothing, for all nodes) and "force"`)
		}
		if ev.Force && ev.Node == nil {
			return Event{}, errors.New(`action "enable": "force" ends the drain holding one node: give "node"`)
		}
		if ev.Node != nil {
			if err := CheckNodeName(*ev.Node); err != nil {
				return Event{}, fmt.Errorf(`action "enable": "node": %w (leave "node" out to enable every node)`, err)
			}
		}
	case ev.Action == ActionRecover:
		if ev.Node != nil || ev.Policy != "" || ev.Timeout != "" || ev.BelowMin || ev.Force {
			return Event{}, errors.New(`action "recover" takes nothing else`)
		}
	case ev.Action == "":
		return Event{}, errors.New(`missing "action" (shutdown, enable or recover) or "step"`)
	default:
		return Event{}, fmt.Errorf("unknown action %q (shutdown, enable or recover)", ev.Action)
	}
	return ev, nil
}

// ActionRecover finishes every drain whose execution has ended (Recovery).
// Step Functions' status-change events for the drain state machine ask for
// it too.
const ActionRecover = "recover"

// statusChange is the EventBridge event Step Functions sends when an
// execution changes status; the stack routes the drain state machine's
// failed, aborted and timed-out ones here.
const (
	statusChangeSource     = "aws.states"
	statusChangeDetailType = "Step Functions Execution Status Change"
)

// CheckNodeName refuses what cannot be a Node's name (a DNS subdomain), so
// that an empty or mistyped name is never taken for "every node".
func CheckNodeName(name string) error {
	if name == "" {
		return errors.New("empty node name")
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%q is not a node name: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// ShutdownTimeout parses a drain deadline: a duration from 30s to
// MaxShutdownTimeout.
func ShutdownTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("must be a duration from %s to %s (e.g. \"10m\"), got %q", minShutdownTimeout, MaxShutdownTimeout, s)
	}
	return d, CheckShutdownTimeout(d)
}

// CheckShutdownTimeout refuses a drain deadline outside 30s to
// MaxShutdownTimeout.
func CheckShutdownTimeout(d time.Duration) error {
	if d < minShutdownTimeout || d > MaxShutdownTimeout {
		return fmt.Errorf("must be a duration from %s to %s (e.g. \"10m\"), got %s", minShutdownTimeout, MaxShutdownTimeout, d)
	}
	return nil
}

// Handle serves one invocation. Step failures come back with the error name
// the state machine's Retry and Catch match on.
func (h *Handler) Handle(ctx context.Context, payload json.RawMessage) (any, error) {
	ev, err := ParseEvent(payload)
	if err != nil {
		return nil, typed(&StepError{Name: ErrNameInvalidInput, Err: err})
	}
	switch {
	case len(ev.interruptions) > 0:
		return typedResult(h.Interrupt(ctx, ev.interruptions))
	case ev.Step != "":
		var s State
		if err := strictjson.Decode(ev.State, &s); err != nil {
			return nil, typed(stepErr(ErrNameInvalidInput, "step %s: state: %v", ev.Step, err))
		}
		out, err := h.Steps.Run(ctx, ev.Step, s)
		if err != nil {
			return nil, typed(err)
		}
		return out, nil
	case ev.Action == "shutdown":
		var timeout time.Duration
		if ev.Timeout != "" {
			timeout, _ = ShutdownTimeout(ev.Timeout) // checked by ParseEvent
		}
		node := *ev.Node
		if _, err := h.Steps.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, typed(stepErr(ErrNameNodeNotFound, "shutdown: node %s does not exist", node))
			}
			return nil, typed(fmt.Errorf("shutdown: node %s: %w", node, err))
		}
		return h.Starter.Shutdown(ctx, ShutdownRequest{Node: node, Policy: ev.Policy, Timeout: timeout, BelowMin: ev.BelowMin, Force: ev.Force})
	case ev.Action == ActionRecover:
		if h.Recovery == nil {
			return nil, typed(stepErr(ErrNameFailed, "recover: no drain state machine is configured (NODETIDE_DRAIN_STATE_MACHINE_ARN)"))
		}
		res, err := h.Recovery.Run(ctx)
		if err != nil {
			return nil, typed(fmt.Errorf("recover: %w", err))
		}
		return res, nil
	case ev.Node == nil:
		return typedResult(h.EnableAll(ctx))
	case ev.Force:
		if h.Recovery == nil {
			return nil, typed(stepErr(ErrNameFailed, "enable --force: no drain state machine is configured (NODETIDE_DRAIN_STATE_MACHINE_ARN)"))
		}
		if _, err := h.Recovery.Force(ctx, *ev.Node); err != nil {
			return nil, typed(fmt.Errorf("enable --force %s: %w", *ev.Node, err))
		}
		return typedResult(h.Enable(ctx, *ev.Node))
	default:
		return typedResult(h.Enable(ctx, *ev.Node))
	}
}

// Enable makes one node schedulable again (scalerd's enable); a node a
// running drain holds is an error. An empty or invalid name is an error,
// never "every node": that is EnableAll.
func (h *Handler) Enable(ctx context.Context, node string) (EnableResult, error) {
	if err := CheckNodeName(node); err != nil {
		return EnableResult{Enabled: []string{}}, &StepError{Name: ErrNameInvalidInput, Err: fmt.Errorf("enable: %w", err)}
	}
	if _, err := h.Steps.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return EnableResult{Enabled: []string{}}, stepErr(ErrNameNodeNotFound, "enable: node %s does not exist", node)
		}
		return EnableResult{Enabled: []string{}}, fmt.Errorf("enable: node %s: %w", node, err)
	}
	return h.enable(ctx, []string{node}, false)
}

// EnableAll makes every cordoned node schedulable again; nodes a running
// drain holds are left to it and listed as skipped.
func (h *Handler) EnableAll(ctx context.Context) (EnableResult, error) {
	nodes, err := h.Steps.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return EnableResult{Enabled: []string{}}, fmt.Errorf("enable: list nodes: %w", err)
	}
	var names []string
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable || hasTaint(&n, TaintKey) {
			names = append(names, n.Name)
		}
	}
	return h.enable(ctx, names, true)
}

func (h *Handler) enable(ctx context.Context, names []string, skipDraining bool) (EnableResult, error) {
	res := EnableResult{Enabled: []string{}}
	for _, n := range names {
		active, _, err := h.Steps.Store.NodeDrain(ctx, n)
		if err != nil {
			return res, err
		}
		if active != "" {
			if !skipDraining {
				return res, fmt.Errorf("enable: node %s is being drained by %s; let it finish or roll back", n, active)
			}
			res.Skipped = append(res.Skipped, n)
			continue
		}
		if err := k8s.Uncordon(ctx, h.Steps.Client, n, TaintKey); err != nil {
			return res, fmt.Errorf("enable: %w", err)
		}
		res.Enabled = append(res.Enabled, n)
	}
	return res, nil
}

// typedResult is typed for a result and its error.
func typedResult[T any](v T, err error) (any, error) {
	if err != nil {
		return nil, typed(err)
	}
	return v, nil
}

// typed gives an error the errorType the state machine matches on.
func typed(err error) error {
	return messages.InvokeResponse_Error{Message: err.Error(), Type: ErrorName(err)}
}
