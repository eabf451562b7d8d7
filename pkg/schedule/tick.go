package schedule

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Record is a stored schedule with what the store remembers about it.
type Record struct {
	Schedule Schedule `json:"schedule"`
	// Version counts writes of the definition; firing and skipping don't
	// change it, so an edit based on a read isn't refused because a tick
	// ran in between.
	Version int64 `json:"version"`
	// CreatedAt is when the schedule was first stored (again, after a
	// delete); it never fires for a time at or before it.
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// LastFiredAt is the latest fire time dealt with, fired or skipped;
	// zero until the first.
	LastFiredAt time.Time `json:"lastFiredAt,omitzero"`
	// LastSkippedAt is the latest fire time skipped as too late, and
	// LastSkipReason why.
	LastSkippedAt  time.Time `json:"lastSkippedAt,omitzero"`
	LastSkipReason string    `json:"lastSkipReason,omitzero"`
	// LastResult is what the schedule did when it last fired or was run:
	// each change with the replica count or size it had before, so they
	// can be told (and set back) later.
	LastResult *Result `json:"lastResult,omitzero"`
}

// DefaultMaxLateness is how late a tick may still fire a schedule when the
// caller gives no limit: long enough for EventBridge's retries of a failed
// run and a cold start or two, short enough that a capacity change doesn't
// land in the middle of the next period.
const DefaultMaxLateness = 15 * time.Minute

// Action is what a tick does about a due schedule.
type Action string

const (
	// ActionFire applies the schedule; claim the fire time first.
	ActionFire Action = "fire"
	// ActionSkip records the fire time as dealt with without applying it:
	// it is more than the maximum lateness in the past.
	ActionSkip Action = "skip"
	// ActionLost: another tick claimed the fire time first, so nothing
	// was applied here.
	ActionLost Action = "lost"
)

// Decision is one due schedule and what to do about it.
type Decision struct {
	Name   string
	Action Action
	// FireAt is the fire time acted on: the store's claim is on it.
	FireAt time.Time
	// Late is how long after FireAt the tick runs.
	Late time.Duration
	// Reason says why a skip is one.
	Reason string
}

// Decide returns the schedules due at now and what to do about each,
// earliest fire time first (by name among equals), so that applying them in
// order leaves each group as its latest schedule says.
//
// A schedule is due when it has a fire time in (since, now], where since
// is its LastFiredAt, or its CreatedAt when that is later (a new schedule
// doesn't fire for times before it existed). Only the latest such fire
// time counts: a tick that comes late, or after missed ticks, fires a
// schedule once, not once per missed time. It fires if it is at most
// maxLateness old (DefaultMaxLateness when maxLateness is not positive),
// and is skipped otherwise; both move LastFiredAt to it, so neither
// happens twice.
//
// Schedules whose cron or time zone doesn't parse are left out and
// reported, joined, in the error; the others are still decided.
func Decide(records []Record, now time.Time, maxLateness time.Duration) ([]Decision, error) {
	if maxLateness <= 0 {
		maxLateness = DefaultMaxLateness
	}
	var out []Decision
	var errs []error
	for _, r := range records {
		c, err := r.Schedule.ParseCron()
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %q: %w", r.Schedule.Name, err))
			continue
		}
		since := r.LastFiredAt
		if r.CreatedAt.After(since) {
			since = r.CreatedAt
		}
		fireAt, due := c.Due(since, now)
		if !due {
			continue
		}
		d := Decision{Name: r.Schedule.Name, Action: ActionFire, FireAt: fireAt, Late: now.Sub(fireAt)}
		if d.Late > maxLateness {
			d.Action = ActionSkip
			d.Reason = fmt.Sprintf("missed: due at %s, %s ago, more than the maximum lateness of %s",
				fireAt.Format(time.RFC3339), d.Late.Round(time.Second), maxLateness)
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Decision) int {
		return cmp.Or(a.FireAt.Compare(b.FireAt), cmp.Compare(a.Name, b.Name))
	})
	return out, errors.Join(errs...)
}
