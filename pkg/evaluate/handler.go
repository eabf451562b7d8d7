package evaluate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nodetide/nodetide/pkg/lambdaevent"
	"github.com/nodetide/nodetide/pkg/strictjson"
	"github.com/nodetide/nodetide/pkg/trigger"
)

// Request is a hand-made invocation of the evaluate function.
type Request struct {
	// Action: "run" (one cycle, as the schedule does), "trigger" (a cycle
	// started by the webhook: it waits for pending pods younger than
	// pendingPodMinAge to come of age), "plan" (dry run: the plan, nothing
	// changed) or "add" (grow NodeGroup by Count). A function URL request
	// parses as "webhook", which no hand-made request can name.
	Action    string `json:"action"`
	NodeGroup string `json:"nodeGroup,omitempty"`
	Count     *int   `json:"count,omitempty"`
	// NotBefore delays a "trigger" cycle (the trailing cycle of a window of
	// webhook hints); at most MaxTriggerDelay ahead.
	NotBefore *time.Time `json:"notBefore,omitempty"`
}

// MaxTriggerDelay bounds a trigger request's notBefore: the webhook's
// trailing cycle waits at most its window (trigger.DefaultMinGap, rounded
// up to a second).
const MaxTriggerDelay = 30 * time.Second

// Handler is the evaluate function's entry point: it accepts EventBridge's
// scheduled event and the hand-made requests above, and rejects anything else
// before changing anything.
type Handler struct {
	Evaluator *Evaluator
	// Trigger serves the webhook's calls through the function URL; nil
	// refuses them.
	Trigger *trigger.Trigger
	// WatchFor, when positive, keeps a scheduled run watching for new pending
	// pods that long after its tick (bounded by the invocation's deadline).
	WatchFor time.Duration
}

// actionWebhook is what a function URL request parses as; not a JSON name
// (it cannot be given by hand).
const actionWebhook = "function URL request"

// watchMargin is left of the invocation's time when watching ends.
const watchMargin = 10 * time.Second

// ParseEvent tells a scheduled tick from a hand-made request, strictly.
func ParseEvent(payload []byte) (Request, error) {
	trimmed, err := lambdaevent.Object(payload)
	if err != nil {
		return Request{}, err
	}
	tick, err := lambdaevent.ScheduledTick(trimmed)
	if err != nil {
		return Request{}, err
	}
	if tick {
		return Request{Action: "run"}, nil
	}
	if trigger.IsURLEvent(trimmed) {
		return Request{Action: actionWebhook}, nil
	}
	var req Request
	if err := strictjson.Decode(trimmed, &req); err != nil {
		return Request{}, fmt.Errorf("bad request: %w (fields: action, nodeGroup, count, notBefore)", err)
	}
	switch req.Action {
	case "run", "plan", "trigger":
		if req.NodeGroup != "" || req.Count != nil {
			return Request{}, fmt.Errorf("action %q takes no nodeGroup or count", req.Action)
		}
		if req.NotBefore != nil && req.Action != "trigger" {
			return Request{}, fmt.Errorf(`action %q takes no notBefore (only "trigger" does)`, req.Action)
		}
		if req.NotBefore != nil && time.Until(*req.NotBefore) > MaxTriggerDelay {
			return Request{}, fmt.Errorf(`"notBefore" %s is more than %s ahead`, req.NotBefore.Format(time.RFC3339), MaxTriggerDelay)
		}
	case "add":
		if req.NotBefore != nil {
			return Request{}, errors.New(`action "add" takes no notBefore (only "trigger" does)`)
		}
		if req.NodeGroup == "" {
			return Request{}, errors.New(`action "add" needs "nodeGroup"`)
		}
		if req.Count == nil {
			return Request{}, errors.New(`action "add" needs "count"`)
		}
		if *req.Count < 1 || *req.Count > MaxAdd {
			return Request{}, fmt.Errorf(`action "add": "count" must be from 1 to %d, got %d`, MaxAdd, *req.Count)
		}
	case "":
		return Request{}, errors.New(`missing "action" (run, trigger, plan or add), and not an EventBridge scheduled event`)
	default:
		return Request{}, fmt.Errorf("unknown action %q (run, trigger, plan or add)", req.Action)
	}
	return req, nil
}

// Handle serves one invocation.
func (h *Handler) Handle(ctx context.Context, payload json.RawMessage) (any, error) {
	req, err := ParseEvent(payload)
	if err != nil {
		return nil, err
	}
	switch req.Action {
	case actionWebhook:
		if h.Trigger == nil {
			return nil, errors.New("function URL requests are not served: no trigger configured")
		}
		resp, _ := h.Trigger.Serve(ctx, payload)
		return resp, nil
	case "trigger":
		var notBefore time.Time
		if req.NotBefore != nil {
			notBefore = *req.NotBefore
		}
		return h.Evaluator.RunTriggered(ctx, notBefore)
	case "plan":
		plan, err := h.Evaluator.Plan(ctx)
		if err != nil {
			return nil, err
		}
		return plan, nil
	case "add":
		return h.Evaluator.Add(ctx, req.NodeGroup, *req.Count)
	default:
		start := time.Now()
		res, err := h.Evaluator.Run(ctx)
		if err != nil || h.WatchFor <= 0 {
			return res, err
		}
		until := start.Add(h.WatchFor)
		if dl, ok := ctx.Deadline(); ok && dl.Add(-watchMargin).Before(until) {
			until = dl.Add(-watchMargin)
		}
		more, err := h.Evaluator.Watch(ctx, until)
		res.WatchRuns = len(more)
		return res, err
	}
}
