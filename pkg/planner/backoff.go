package planner

import (
	"maps"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// AfterScaleUpFailure is the state after the plan's scale-up of group
// failed at now. next is the plan's State, prev the snapshot's. The group is
// backed off for Settings.ScaleUp.Backoff, so the next cycles try another
// group (or report BackedOff) instead of asking the provider again at once;
// and the scale-up is not remembered: the group's last scale-up is prev's,
// since a scale-up that did not happen must not start the provision clock
// or delay scale-down. A backoff already running longer is kept. next is
// not modified.
func AfterScaleUpFailure(next, prev snapshot.State, group string, now time.Time, set Settings) snapshot.State {
	out := snapshot.State{
		UnneededSince: next.UnneededSince,
		LastScaleUp:   maps.Clone(next.LastScaleUp),
		BackoffUntil:  maps.Clone(next.BackoffUntil),
	}
	if out.LastScaleUp == nil {
		out.LastScaleUp = map[string]time.Time{}
	}
	if t, ok := prev.LastScaleUp[group]; ok {
		out.LastScaleUp[group] = t
	} else {
		delete(out.LastScaleUp, group)
	}
	if out.BackoffUntil == nil {
		out.BackoffUntil = map[string]time.Time{}
	}
	out.BackoffUntil[group] = backOff(out.BackoffUntil[group], now, set)
	// A replacement this cycle started in the group has no new nodes
	// coming: it goes, and its old nodes stay. Those under way before stay.
	for id, r := range next.Replacing {
		if _, before := prev.Replacing[id]; before || r.NodeGroup != group {
			if out.Replacing == nil {
				out.Replacing = map[string]snapshot.Replacement{}
			}
			out.Replacing[id] = r
		}
	}
	return out
}

// backOff is when a group backed off at now may grow again: Backoff after
// now, or until, when that is later.
func backOff(until, now time.Time, set Settings) time.Time {
	if u := now.Add(set.ScaleUp.Backoff).UTC(); u.After(until) {
		return u
	}
	return until
}
