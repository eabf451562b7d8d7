package schedule

import (
	"errors"
	"fmt"
	"time"
)

// Outcome is what became of one Change.
type Outcome string

// The outcomes of one Change.
const (
	OutcomeScaled    Outcome = "scaled"
	OutcomeUnchanged Outcome = "unchanged"
	// OutcomeDraining: the group shrinks; drains of its surplus nodes
	// were started (Message names them).
	OutcomeDraining Outcome = "draining"
	OutcomeFailed   Outcome = "failed"
)

// Kind is what a Change (or an App) scales: KindDeployment, KindStatefulSet
// or KindNodeGroup.
type Kind string

// KindNodeGroup is the Kind of a Change to a node group.
const KindNodeGroup Kind = "NodeGroup"

// Change is one effect of an applied schedule.
type Change struct {
	Kind      Kind   `json:"kind"`
	Namespace string `json:"namespace,omitzero"`
	Name      string `json:"name"`
	From      *int   `json:"from,omitzero"`
	To        int    `json:"to"`
	// Min and Max are a node group's effective bounds from now on, when
	// the schedule sets any.
	Min     *int    `json:"min,omitzero"`
	Max     *int    `json:"max,omitzero"`
	Outcome Outcome `json:"outcome"`
	Message string  `json:"message,omitzero"`
}

// Result is what one schedule did at one fire time (or by hand).
type Result struct {
	Schedule string `json:"schedule"`
	// Action is ActionFire, ActionSkip, ActionRun (by hand) or ActionLost
	// (another tick claimed the fire time first, so nothing was applied
	// here).
	Action  Action    `json:"action"`
	FireAt  time.Time `json:"fireAt,omitzero"`
	Reason  string    `json:"reason,omitzero"`
	Changes []Change  `json:"changes,omitzero"`
	// Notes tell what was not done and why, without being failures.
	Notes []string `json:"notes,omitzero"`
	// Errors are the effects that failed; the others were still applied.
	Errors []string `json:"errors,omitzero"`
}

// Err joins the result's errors, or is nil.
func (r Result) Err() error {
	if len(r.Errors) == 0 {
		return nil
	}
	errs := make([]error, len(r.Errors))
	for i, e := range r.Errors {
		errs[i] = errors.New(e)
	}
	return fmt.Errorf("schedule %q: %w", r.Schedule, errors.Join(errs...))
}

// Fail records c as failed with err.
func (r *Result) Fail(c Change, err error) {
	c.Outcome, c.Message = OutcomeFailed, err.Error()
	r.Changes = append(r.Changes, c)
	r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", c.Target(), err))
}

// Target names what c scales, e.g. "Deployment shop/web" or "NodeGroup workers".
func (c Change) Target() string {
	if c.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", c.Kind, c.Namespace, c.Name)
	}
	return fmt.Sprintf("%s %s", c.Kind, c.Name)
}
