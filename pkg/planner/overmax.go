package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// overMax shrinks the groups a schedule has capped below their size: the
// surplus goes at once, whatever the utilisation, unneededTime or
// maxConcurrentDrains say, because the cap is an explicit instruction
// (an Auto Scaling scheduled action lowering max behaves alike). Capacity
// that has not registered is given back first; then the emptiest nodes are
// drained, never a node that must not be disrupted (a pod that blocks
// removal, a node annotation). Nodes whose pods a PodDisruptionBudget
// protects right now come last: their drains wait for the budget. Only a
// max a schedule set does this (MaxSource); a provider's or the config's
// max below the group's size only stops growth, as in cluster-autoscaler.
func (m *model) overMax(plan *Plan, next *snapshot.State) {
	var left []int32
	for _, gi := range m.byName {
		g := &m.groups[gi]
		if g.ng.MaxSource() != snapshot.BoundSchedule || g.target <= g.ng.MaxSize {
			continue
		}
		g.shrinking = true
		capped := fmt.Sprintf("node group %s is above its max size %d (max set by %s)", g.ng.Name, g.ng.MaxSize, cmp.Or(g.ng.BoundsFrom, "a schedule"))
		if back := min(g.target-g.ng.MaxSize, g.upcoming); back > 0 {
			from := g.target
			g.target -= back
			g.upcoming -= back
			plan.DecreaseTarget = append(plan.DecreaseTarget, DecreaseTarget{
				NodeGroup: g.ng.Name, Delta: back, NewTargetSize: g.target,
				Reason: fmt.Sprintf("%s: target %d; giving back %s not registered yet", capped, from, plural(back, "node")),
			})
		}
		surplus := g.target - g.draining - g.ng.MaxSize
		if surplus <= 0 {
			continue
		}
		m.noteDrains(g.nodes)
		if left == nil {
			left = m.budgetIndex().left()
		}
		cands := m.overMaxCandidates(g, left)
		for _, c := range cands[:min(surplus, len(cands))] {
			m.removeOverMax(g, c, capped, plan, next)
		}
	}
}

// overMaxCand is a node that can go to bring its group down to its max.
type overMaxCand struct {
	node      int32
	notReady  bool
	protected bool // a budget allows no disruption of one of its pods now
	util      float64
}

// overMaxCandidates returns the nodes of g that can be drained, in the order
// they should go: not Ready first, then unprotected, then least utilised,
// then by name. left is what each disruption budget still allows.
func (m *model) overMaxCandidates(g *groupInfo, left []int32) []overMaxCand {
	var cands []overMaxCand
	for _, ni := range g.nodes {
		n := &m.nodes[ni]
		if n.draining || n.node.DeletionTimestamp != nil || nodeOptedOut(n.node) {
			continue
		}
		c := overMaxCand{node: ni, notReady: !n.ready}
		blocked := m.eachMoving(ni, func(_ int32, covering []int32) {
			for _, b := range covering {
				if left[b] <= 0 {
					c.protected = true
				}
			}
		})
		if blocked {
			continue
		}
		cpu, mem := n.utilization()
		c.util = max(cpu, mem)
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b overMaxCand) int {
		if a.notReady != b.notReady {
			if a.notReady {
				return -1
			}
			return 1
		}
		if a.protected != b.protected {
			if b.protected {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.util, b.util); c != 0 {
			return c
		}
		return strings.Compare(m.nodes[a.node].node.Name, m.nodes[b.node].node.Name)
	})
	return cands
}

// removeOverMax plans the drain of candidate c of g, capped saying why.
func (m *model) removeOverMax(g *groupInfo, c overMaxCand, capped string, plan *Plan, next *snapshot.State) {
	n := &m.nodes[c.node]
	// Going away: pending pods must not be counted on it.
	n.schedulable = false
	name := n.node.Name
	since, ok := m.snap.State.UnneededSince[name]
	if !ok || since.After(m.now) {
		since = m.now
	}
	// The drain's execution name comes from this time.
	next.UnneededSince[name] = since
	what := fmt.Sprintf("utilisation %d%%", pct(c.util))
	if c.notReady {
		what = "not Ready"
	}
	plan.ScaleDown = append(plan.ScaleDown, ScaleDown{
		NodeGroup: g.ng.Name, Node: name,
		Reason: fmt.Sprintf("%s: target %d, %d draining; %s", capped, g.target, g.draining, what),
	})
}
