package drain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/lambdaevent"
)

// Handler is the drain function: the state machine's task steps, and the
// hand-made actions shutdown and enable.
type Handler struct {
	Steps   *Steps
	Starter *Starter
}

// Event is every shape the drain function accepts.
type Event struct {
	// A state machine task: {"step": "Evict", "state": {...}}.
	Step  string          `json:"step,omitempty"`
	State json.RawMessage `json:"state,omitempty"`
	// By hand: {"action": "shutdown"|"enable", ...}.
	Action   string `json:"action,omitempty"`
	Node     string `json:"node,omitempty"`
	Policy   string `json:"policy,omitempty"`
	Timeout  string `json:"timeout,omitempty"`
	BelowMin bool   `json:"belowMin,omitempty"`
	// Force drains a node that must not be disrupted.
	Force bool `json:"force,omitempty"`
}

// EnableResult lists the nodes an enable made schedulable again.
type EnableResult struct {
	Enabled []string `json:"enabled"`
	// Skipped nodes are held by a running drain.
	Skipped []string `json:"skipped,omitempty"`
}

// ParseEvent decodes an event strictly: unknown fields, a step together
// with an action, or a bad value are errors that name the field.
func ParseEvent(payload []byte) (Event, error) {
	trimmed, err := lambdaevent.Object(payload)
	if err != nil {
		return Event{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var ev Event
	if err := dec.Decode(&ev); err != nil {
		return Event{}, fmt.Errorf("bad event: %s (fields: step, state; or action, node, policy, timeout, belowMin, force)", strings.TrimPrefix(err.Error(), "json: "))
	}
	switch {
	case ev.Step != "" && ev.Action != "":
		return Event{}, errors.New(`an event has either "step" (from the state machine) or "action" (by hand), not both`)
	case ev.Step != "":
		if len(ev.State) == 0 {
			return Event{}, fmt.Errorf("step %s: \"state\" is required", ev.Step)
		}
		if ev.Node != "" || ev.Policy != "" || ev.Timeout != "" || ev.BelowMin || ev.Force {
			return Event{}, errors.New(`a step event carries only "step" and "state"`)
		}
	case ev.Action == "shutdown":
		if ev.Node == "" {
			return Event{}, errors.New(`action "shutdown" needs "node"`)
		}
		if ev.Policy != "" && ev.Policy != PolicyAbort && ev.Policy != PolicyForce {
			return Event{}, fmt.Errorf(`action "shutdown": "policy" must be abort or force, got %q`, ev.Policy)
		}
		if ev.Timeout != "" {
			d, err := time.ParseDuration(ev.Timeout)
			if err != nil || d < 30*time.Second {
				return Event{}, fmt.Errorf(`action "shutdown": "timeout" must be a duration of at least 30s (e.g. "10m"), got %q`, ev.Timeout)
			}
		}
	case ev.Action == "enable":
		if ev.Policy != "" || ev.Timeout != "" || ev.BelowMin || ev.Force {
			return Event{}, errors.New(`action "enable" takes only "node" (or nothing, for all nodes)`)
		}
	case ev.Action == "":
		return Event{}, errors.New(`missing "action" (shutdown or enable) or "step"`)
	default:
		return Event{}, fmt.Errorf("unknown action %q (shutdown or enable)", ev.Action)
	}
	return ev, nil
}

// Handle serves one invocation. Step failures come back with the error name
// the state machine's Retry and Catch match on.
func (h *Handler) Handle(ctx context.Context, payload json.RawMessage) (any, error) {
	ev, err := ParseEvent(payload)
	if err != nil {
		return nil, typed(&StepError{Name: ErrNameInvalidInput, Err: err})
	}
	switch {
	case ev.Step != "":
		var s State
		dec := json.NewDecoder(bytes.NewReader(ev.State))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
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
			timeout, _ = time.ParseDuration(ev.Timeout)
		}
		if _, err := h.Steps.Client.CoreV1().Nodes().Get(ctx, ev.Node, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("shutdown: node %s: %w", ev.Node, err)
		}
		return h.Starter.Shutdown(ctx, ShutdownRequest{Node: ev.Node, Policy: ev.Policy, Timeout: timeout, BelowMin: ev.BelowMin, Force: ev.Force})
	default:
		return h.Enable(ctx, ev.Node)
	}
}

// Enable makes one node, or every cordoned node, schedulable again
// (scalerd's enable). A node a running drain holds is left to it.
func (h *Handler) Enable(ctx context.Context, node string) (EnableResult, error) {
	res := EnableResult{Enabled: []string{}}
	var names []string
	if node != "" {
		if _, err := h.Steps.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
			return res, fmt.Errorf("enable: node %s: %w", node, err)
		}
		names = []string{node}
	} else {
		nodes, err := h.Steps.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return res, fmt.Errorf("enable: list nodes: %w", err)
		}
		for _, n := range nodes.Items {
			if n.Spec.Unschedulable || hasTaint(&n, TaintKey) {
				names = append(names, n.Name)
			}
		}
	}
	for _, n := range names {
		active, _, err := h.Steps.Store.NodeDrain(ctx, n)
		if err != nil {
			return res, err
		}
		if active != "" {
			if node != "" {
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

// typed gives an error the errorType the state machine matches on.
func typed(err error) error {
	return messages.InvokeResponse_Error{Message: err.Error(), Type: ErrorName(err)}
}
