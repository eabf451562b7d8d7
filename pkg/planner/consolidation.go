package planner

import (
	"fmt"
	"slices"
	"time"

	"github.com/nodetide/nodetide/pkg/schedule"
)

// Consolidation modes (scaleDown.consolidation).
const (
	// ConsolidationDelete removes several under-used nodes in one plan when
	// their pods together fit on the nodes that stay.
	ConsolidationDelete = "delete"
	// ConsolidationReplace is delete, and replaces nodes by fewer or
	// cheaper new ones when that saves enough (replace.go).
	ConsolidationReplace = "replace"
)

// DisruptionBudget is at most Nodes nodes (or Nodes percent, rounded up, of
// a group's registered nodes) of each group it covers disrupted at once,
// counting the drains under way. With a Schedule it holds only for
// Duration after each time the schedule fires; without one, always.
type DisruptionBudget struct {
	Nodes   int
	Percent bool
	// Schedule, in its time zone; nil: always active.
	Schedule *schedule.Cron
	Duration time.Duration
	// NodeGroups it covers; empty: every group.
	NodeGroups []string
}

// defaultBudget is Karpenter's default: 10% of a group's nodes.
var defaultBudget = DisruptionBudget{Nodes: 10, Percent: true}

// activeAt reports whether the budget holds at now: always without a
// schedule, else within Duration of its last fire time at or before now.
func (b DisruptionBudget) activeAt(now time.Time) bool {
	if b.Schedule == nil {
		return true
	}
	// Fire times are whole seconds: the last one at or before now is the
	// last one strictly before the next whole second.
	last := b.Schedule.Prev(now.Truncate(time.Second).Add(time.Second))
	return !last.IsZero() && now.Before(last.Add(b.Duration))
}

// covers reports whether the budget applies to group.
func (b DisruptionBudget) covers(group string) bool {
	return len(b.NodeGroups) == 0 || slices.Contains(b.NodeGroups, group)
}

// limit is how many of nodes the budget lets be disrupted at once.
func (b DisruptionBudget) limit(nodes int) int {
	if !b.Percent {
		return b.Nodes
	}
	return (b.Nodes*nodes + 99) / 100
}

// String is the budget as configured, for plan reasons.
func (b DisruptionBudget) String() string {
	if b.Percent {
		return fmt.Sprintf("%d%%", b.Nodes)
	}
	return fmt.Sprint(b.Nodes)
}

// consolidating reports whether scale-down consolidates (removes several
// nodes of a group at once, within the disruption budgets).
func (m *model) consolidating() bool {
	c := m.set.ScaleDown.Consolidation
	return c == ConsolidationDelete || c == ConsolidationReplace
}

// disruptionLimits is, per group, the most nodes that may be disrupted at
// once under the budgets active now (the strictest one wins), or -1 when
// no budget covers the group now, as Karpenter: budgets that are set but
// inactive leave only min size and PDBs to bound the group.
func (m *model) disruptionLimits() []int {
	budgets := m.set.ScaleDown.DisruptionBudgets
	if len(budgets) == 0 {
		budgets = []DisruptionBudget{defaultBudget}
	}
	limits := make([]int, len(m.groups))
	for gi := range m.groups {
		g := &m.groups[gi]
		limits[gi] = -1
		for _, b := range budgets {
			if !b.covers(g.ng.Name) || !b.activeAt(m.now) {
				continue
			}
			if l := b.limit(len(g.nodes)); limits[gi] < 0 || l < limits[gi] {
				limits[gi] = l
			}
		}
	}
	return limits
}

// young reports whether node n is too new to consolidate: created within
// delayAfterAdd or unneededTime (the longer), so a node a scale-up or a
// replacement just added does not start an unneeded clock, whether or not
// its group's scale-up was recorded. Outside consolidation, never.
func (m *model) young(n *nodeInfo) bool {
	if !m.consolidating() {
		return false
	}
	created := n.node.CreationTimestamp.Time
	window := max(m.set.ScaleDown.DelayAfterAdd, m.set.ScaleDown.UnneededTime)
	return !created.IsZero() && m.now.Sub(created) < window
}
