package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Shrink plans bringing groups down to sizes now (a schedule firing; from
// names it, "schedule night"): each named group's max is capped at its
// size for this decision, so the over-max rule chooses the removals
// (unregistered capacity first, then the emptiest nodes that may be
// disrupted). A size below a group's min stops at the min; a size at or
// above its max changes nothing. The plan holds only the named groups'
// removals, nothing else (no scale-up, no other group's scale-down), and
// its State is the snapshot's with only the chosen nodes' unneeded times
// added: they name the drains, so a cycle deriving the same names cannot
// start a second drain of a node. An unknown group or a negative size is
// an error, and nothing is planned. The snapshot is only read.
func Shrink(s snapshot.Snapshot, set Settings, now time.Time, sizes map[string]int, from string) (Plan, error) {
	groups := slices.Clone(s.NodeGroups)
	known := make(map[string]bool, len(sizes))
	for i := range groups {
		g := &groups[i]
		size, ok := sizes[g.Name]
		if !ok {
			continue
		}
		known[g.Name] = true
		if size < 0 {
			return Plan{}, fmt.Errorf("shrink: node group %s: size %d is negative", g.Name, size)
		}
		if size = max(size, g.MinSize); size < g.MaxSize {
			g.MaxSize, g.MaxFrom, g.BoundsFrom = size, snapshot.BoundSchedule, from
		}
	}
	var unknown []string
	for name := range sizes {
		if !known[name] {
			unknown = append(unknown, fmt.Sprintf("%q", name))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return Plan{}, fmt.Errorf("shrink: unknown node group %s", strings.Join(unknown, ", "))
	}
	s.NodeGroups = groups
	plan := Decide(s, set, now)

	mine := func(group string) bool { _, ok := sizes[group]; return ok }
	only := Plan{
		ScaleUp:        []ScaleUp{},
		ScaleDown:      slices.DeleteFunc(plan.ScaleDown, func(d ScaleDown) bool { return !mine(d.NodeGroup) }),
		DecreaseTarget: slices.DeleteFunc(plan.DecreaseTarget, func(d DecreaseTarget) bool { return !mine(d.NodeGroup) }),
		Unschedulable:  []Unschedulable{},
		NodeGroups:     plan.NodeGroups,
		State:          cloneState(s.State),
	}
	for _, d := range only.ScaleDown {
		only.State.UnneededSince[d.Node] = plan.State.UnneededSince[d.Node]
	}
	return only, nil
}

// cloneState copies a state, replacements under way too, with empty maps
// for missing ones.
func cloneState(s snapshot.State) snapshot.State { return s.Normal() }
