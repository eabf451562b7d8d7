package schedule

import (
	"context"
	"fmt"
	"time"
)

// Override is what a fired schedule set on one node group: effective
// minimum and maximum sizes, which evaluate and drain keep to, and the
// desired size it asked for when it fired. It holds until another schedule
// that names the group fires (or the schedule is deleted); a schedule that
// names a group without min or max gives it its configured bounds back.
type Override struct {
	Group    string `json:"group"`
	Schedule string `json:"schedule"`
	Min      *int   `json:"min,omitzero"`
	Max      *int   `json:"max,omitzero"`
	// Desired applies once, when the schedule fires: evaluate may move
	// the group away from it afterwards, within Min and Max.
	Desired *int      `json:"desired,omitzero"`
	FiredAt time.Time `json:"firedAt"`
}

// Source names the override in messages ("schedule night").
func (o Override) Source() string { return "schedule " + o.Schedule }

// Bounds reports whether the override limits the group's size at all.
func (o Override) Bounds() bool { return o.Min != nil || o.Max != nil }

// OverrideStore keeps the overrides of a cluster's node groups, one per
// group (on its GROUP# item).
type OverrideStore interface {
	// SetOverride replaces the group's override unless the stored one
	// was set by a later fire (FiredAt, then schedule name, decide ties):
	// false means it was left alone. Writing the same override again
	// succeeds, so a retried fire is harmless.
	SetOverride(ctx context.Context, o Override) (bool, error)
	// Overrides lists the cluster's overrides, by group.
	Overrides(ctx context.Context) ([]Override, error)
	// ClearOverrides removes the overrides the named schedule set and
	// returns the groups they were on.
	ClearOverrides(ctx context.Context, schedule string) ([]string, error)
}

// OverridesOf returns the override s sets on each group it names when it
// fires at firedAt: desiredCapacity reaches every managed group, a
// nodeGroups entry wins for its group.
func OverridesOf(s Schedule, groups []string, firedAt time.Time) []Override {
	var out []Override
	index := map[string]int{}
	set := func(o Override) {
		if i, ok := index[o.Group]; ok {
			out[i] = o
			return
		}
		index[o.Group] = len(out)
		out = append(out, o)
	}
	if s.DesiredCapacity != nil {
		for _, g := range groups {
			set(Override{Group: g, Schedule: s.Name, Desired: clonePtr(s.DesiredCapacity), FiredAt: firedAt})
		}
	}
	for _, g := range s.NodeGroups {
		o := Override{Group: g.Name, Schedule: s.Name, Min: clonePtr(g.Min), Max: clonePtr(g.Max), Desired: clonePtr(g.Desired), FiredAt: firedAt}
		if o.Desired == nil && s.DesiredCapacity != nil {
			o.Desired = clonePtr(s.DesiredCapacity)
		}
		set(o)
	}
	return out
}

// EffectiveBounds narrows a group's bounds [lo, hi] by an override. A
// schedule may narrow, never widen: a min or max outside the group's
// bounds is clamped into them (the note says so), so a schedule written for
// a larger group still applies what it can.
func EffectiveBounds(o Override, lo, hi int) (minSize, maxSize int, note string) {
	minSize, maxSize = lo, hi
	if o.Min != nil {
		minSize = min(max(*o.Min, lo), hi)
		if minSize != *o.Min {
			note = fmt.Sprintf("min %d is outside the node group's bounds %d..%d; using %d", *o.Min, lo, hi, minSize)
		}
	}
	if o.Max != nil {
		maxSize = min(max(*o.Max, minSize), hi)
		if maxSize != *o.Max {
			n := fmt.Sprintf("max %d is outside the node group's bounds %d..%d; using %d", *o.Max, minSize, hi, maxSize)
			if note != "" {
				n = note + "; " + n
			}
			note = n
		}
	}
	return minSize, maxSize, note
}
