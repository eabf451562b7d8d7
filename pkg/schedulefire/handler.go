// Package schedulefire carries schedules out: the schedule function's handler (put,
// list, get, delete, run, and the tick that claims each due fire once in the
// store) and the applier, which scales the workloads a schedule names and
// sets or shrinks its node groups. The schedules themselves, their cron
// and the pure decision of what a tick fires are pkg/schedule's.
package schedulefire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nodetide/nodetide/pkg/lambdaevent"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/strictjson"
)

// Store is where the schedule function keeps schedules: the state
// package's ScheduleStore (DynamoDB, or in memory), all of which the
// handler uses.
type Store = state.ScheduleStore

// The actions of the schedule function; ActionTick is what an EventBridge
// scheduled event asks for.
const (
	ActionTick   = "tick"
	ActionPut    = "put"
	ActionList   = "list"
	ActionGet    = "get"
	ActionDelete = "delete"
	ActionRun    = "run"
)

// Request is one invocation of the schedule function, parsed.
type Request struct {
	Action   string             `json:"action"`
	Name     string             `json:"name,omitzero"`
	Schedule *schedule.Schedule `json:"schedule,omitzero"`
}

// ParseEvent tells an EventBridge scheduled event (a tick) from a
// hand-made request and parses it strictly: an unknown field (also inside
// the schedule), a field given twice, an unknown action or a field the
// action doesn't take is an error naming it.
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
		return Request{Action: ActionTick}, nil
	}
	var req Request
	if err := strictjson.Decode(trimmed, &req); err != nil {
		return Request{}, fmt.Errorf("bad request: %w (fields: action, name, schedule)", err)
	}
	const actions = "put, list, get, delete or run"
	switch req.Action {
	case ActionPut:
		if req.Schedule == nil {
			return Request{}, errors.New(`action "put" needs "schedule"`)
		}
		if req.Name != "" {
			return Request{}, errors.New(`action "put" takes no "name": the schedule names itself`)
		}
		if err := schedule.Validate(*req.Schedule, nil); err != nil {
			return Request{}, fmt.Errorf("schedule: %w", err)
		}
	case ActionList:
		if req.Name != "" || req.Schedule != nil {
			return Request{}, errors.New(`action "list" takes no "name" or "schedule"`)
		}
	case ActionGet, ActionDelete, ActionRun:
		if req.Name == "" {
			return Request{}, fmt.Errorf("action %q needs %q", req.Action, "name")
		}
		if req.Schedule != nil {
			return Request{}, fmt.Errorf("action %q takes no %q", req.Action, "schedule")
		}
	case "":
		return Request{}, fmt.Errorf(`missing "action" (%s), and not an EventBridge scheduled event`, actions)
	default:
		return Request{}, fmt.Errorf("unknown action %q (%s)", req.Action, actions)
	}
	return req, nil
}

// Handler is the schedule function: it fires due schedules once per fire
// time and serves the hand-made requests.
type Handler struct {
	Store Store
	// Applier carries out fired schedules; nil serves only the store
	// actions (put, list, get, delete).
	Applier *Applier
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// MaxLateness is how late a fire time may still be applied
	// (DefaultMaxLateness when not positive).
	MaxLateness time.Duration
	Log         *slog.Logger
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}

// TickResult is what one tick did.
type TickResult struct {
	Now       time.Time         `json:"now"`
	Schedules []schedule.Result `json:"schedules"`
	// Errors are schedules that could not be decided (a stored cron or
	// time zone that no longer parses); the others were still dealt with.
	Errors []string `json:"errors,omitzero"`
}

// Handle serves one invocation: the payload is parsed before anything is
// read or changed.
func (h *Handler) Handle(ctx context.Context, payload json.RawMessage) (any, error) {
	req, err := ParseEvent(payload)
	if err != nil {
		return nil, err
	}
	switch req.Action {
	case ActionTick:
		return h.Tick(ctx)
	case ActionPut:
		return h.Put(ctx, *req.Schedule)
	case ActionList:
		return h.Store.ListSchedules(ctx)
	case ActionGet:
		return h.Store.GetSchedule(ctx, req.Name)
	case ActionDelete:
		return h.Delete(ctx, req.Name)
	default:
		res, err := h.Run(ctx, req.Name)
		if err != nil {
			return nil, err
		}
		return res, res.Err()
	}
}

// Put validates s and stores it: created when new, otherwise replacing the
// stored definition (its fire history is kept). With node groups to apply
// schedules to, a nodeGroups entry must name one of them.
func (h *Handler) Put(ctx context.Context, s schedule.Schedule) (schedule.Record, error) {
	if err := schedule.Validate(s, nil); err != nil {
		return schedule.Record{}, err
	}
	if len(s.NodeGroups) > 0 && h.Applier != nil && h.Applier.Groups != nil {
		groups, err := h.Applier.Groups(ctx)
		if err != nil {
			return schedule.Record{}, fmt.Errorf("check the schedule's node groups: %w", err)
		}
		known := make([]string, 0, len(groups))
		for _, g := range groups {
			known = append(known, g.Name())
		}
		if err := schedule.Validate(s, known); err != nil {
			return schedule.Record{}, err
		}
	}
	list, err := h.Store.ListSchedules(ctx)
	if err != nil {
		return schedule.Record{}, err
	}
	var version int64
	for _, r := range list {
		if r.Schedule.Name == s.Name {
			version = r.Version
		}
	}
	return h.Store.PutSchedule(ctx, s, version, h.now())
}

// Deleted is what deleting a schedule did.
type Deleted struct {
	Deleted string `json:"deleted"`
	// ClearedOverrides are the groups whose sizes the schedule had set;
	// they are back to their configured bounds.
	ClearedOverrides []string `json:"clearedOverrides"`
}

// Delete removes a schedule and the node-group overrides it set, so its
// sizes stop applying with it. The overrides go first: a delete that fails
// half-way leaves the schedule, to be deleted again, not orphan overrides.
func (h *Handler) Delete(ctx context.Context, name string) (Deleted, error) {
	if _, err := h.Store.GetSchedule(ctx, name); err != nil {
		return Deleted{}, err
	}
	cleared, err := h.Store.ClearOverrides(ctx, name)
	if err != nil {
		return Deleted{}, fmt.Errorf("delete schedule %q: clear its node-group overrides: %w", name, err)
	}
	if err := h.Store.DeleteSchedule(ctx, name); err != nil {
		return Deleted{}, err
	}
	if len(cleared) > 0 {
		h.log().Info("schedule overrides cleared", "schedule", name, "nodeGroups", cleared)
	}
	return Deleted{Deleted: name, ClearedOverrides: cleared}, nil
}

// Run applies a stored schedule now, by hand: no fire time is claimed, so
// the next due fire time still fires.
func (h *Handler) Run(ctx context.Context, name string) (schedule.Result, error) {
	if h.Applier == nil {
		return schedule.Result{}, errors.New("run: this handler has no cluster to apply schedules to")
	}
	rec, err := h.Store.GetSchedule(ctx, name)
	if err != nil {
		return schedule.Result{}, err
	}
	res := schedule.Result{Schedule: name, Action: ActionRun}
	h.Applier.Apply(ctx, rec.Schedule, h.now(), &res)
	h.recordResult(ctx, &res)
	recordFire(ctx, res)
	return res, nil
}

// recordResult keeps res on the schedule. Failing to is not a failed
// effect: the result says so in a note.
func (h *Handler) recordResult(ctx context.Context, res *schedule.Result) {
	if err := h.Store.RecordResult(ctx, res.Schedule, *res); err != nil {
		h.log().Warn("record schedule result", "schedule", res.Schedule, "error", err.Error())
		res.Notes = append(res.Notes, fmt.Sprintf("the result was not recorded on the schedule: %v", err))
	}
}

// Tick fires the schedules due now: for each fire time it claims it in the
// store first and applies the schedule only if the claim is won, so
// overlapping or repeated ticks apply it once; a fire time too late to
// apply is recorded as skipped.
func (h *Handler) Tick(ctx context.Context) (TickResult, error) {
	if h.Applier == nil {
		return TickResult{}, errors.New("tick: this handler has no cluster to apply schedules to")
	}
	now := h.now()
	records, err := h.Store.ListSchedules(ctx)
	if err != nil {
		return TickResult{}, err
	}
	out := TickResult{Now: now, Schedules: []schedule.Result{}}
	decisions, derr := schedule.Decide(records, now, h.MaxLateness)
	if derr != nil {
		h.log().Error("undecidable schedules", "error", derr.Error())
		metrics.From(ctx).Add(metrics.ScheduleFailures, 1, nil)
		out.Errors = append(out.Errors, derr.Error())
	}
	byName := map[string]schedule.Schedule{}
	for _, r := range records {
		byName[r.Schedule.Name] = r.Schedule
	}
	for _, d := range decisions {
		res := schedule.Result{Schedule: d.Name, Action: d.Action, FireAt: d.FireAt, Reason: d.Reason}
		var won bool
		if d.Action == schedule.ActionSkip {
			won, err = h.Store.RecordSkip(ctx, d.Name, d.FireAt, d.Reason)
		} else {
			won, err = h.Store.ClaimFire(ctx, d.Name, d.FireAt)
		}
		switch {
		case err != nil:
			res.Errors = append(res.Errors, fmt.Sprintf("claim fire time: %v", err))
		case !won:
			res.Action = schedule.ActionLost
			res.Notes = append(res.Notes, "another tick dealt with this fire time")
		case d.Action == schedule.ActionFire:
			h.Applier.Apply(ctx, byName[d.Name], d.FireAt, &res)
			h.recordResult(ctx, &res)
		default:
			h.log().Warn("schedule skipped", "schedule", d.Name, "fireAt", d.FireAt, "reason", d.Reason)
		}
		if err := res.Err(); err != nil {
			h.log().Error("schedule", "schedule", d.Name, "error", err.Error())
		}
		recordFire(ctx, res)
		out.Schedules = append(out.Schedules, res)
	}
	return out, nil
}

// recordFire publishes a schedule applied (fired or run by hand) and one
// with a failed effect or a failed claim (pkg/metrics).
func recordFire(ctx context.Context, res schedule.Result) {
	m := metrics.From(ctx)
	if res.Action == schedule.ActionFire || res.Action == ActionRun {
		m.Add(metrics.ScheduleFires, 1, nil)
	}
	if len(res.Errors) > 0 {
		m.Add(metrics.ScheduleFailures, 1, nil)
	}
}
