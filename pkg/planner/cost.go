package planner

import (
	"math"
	"slices"
	"strings"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// HoursPerMonth is the month a monthly cost is counted over (365 × 24 ÷ 12,
// as the clouds' price pages count it).
const HoursPerMonth = 730

// Cost is what the groups cost now (at their target sizes) and once this
// plan is carried out (targets grown or lowered, the nodes it removes
// gone), counted only over groups with a price: a group without one is
// listed under NoPrice, never counted as free.
type Cost struct {
	NodeGroups []GroupCost `json:"nodeGroups"`
	// Totals are after the plan, Now before it, Change the difference
	// (after less now: negative is a saving); each per currency, sorted by
	// currency.
	Totals  []CostTotal `json:"totals"`
	Now     []CostTotal `json:"now"`
	Change  []CostTotal `json:"change"`
	NoPrice []string    `json:"noPrice,omitempty"`
}

// GroupCost is one priced group's cost: Nodes (its target once the plan is
// carried out) × PerNodeHour; NodesNow is its target now.
type GroupCost struct {
	NodeGroup   string               `json:"nodeGroup"`
	NodesNow    int                  `json:"nodesNow"`
	Nodes       int                  `json:"nodes"`
	PerNodeHour float64              `json:"perNodeHour"`
	Currency    string               `json:"currency"`
	Source      snapshot.PriceSource `json:"source"`
	PerHour     float64              `json:"perHour"`
	PerMonth    float64              `json:"perMonth"`
}

// CostTotal is the priced groups' cost in one currency.
type CostTotal struct {
	Currency string  `json:"currency"`
	PerHour  float64 `json:"perHour"`
	PerMonth float64 `json:"perMonth"`
}

// planCost is the cost of the groups now and at the targets the plan
// leaves them at, each removal counted as one node less (its drain lowers
// the target when it terminates the machine), and so each old node of a
// replacement requested or waiting (replaced, per group); nil when no group
// has a price (so plans of unpriced snapshots read as they did).
func planCost(groups []snapshot.NodeGroup, p *Plan, replaced map[string]int) *Cost {
	target := map[string]int{}
	for _, g := range groups {
		target[g.Name] = g.TargetSize
	}
	for _, u := range p.ScaleUp {
		target[u.NodeGroup] = u.NewTargetSize
	}
	for _, d := range p.DecreaseTarget {
		target[d.NodeGroup] = d.NewTargetSize
	}
	for _, d := range p.ScaleDown {
		target[d.NodeGroup] = max(0, target[d.NodeGroup]-1)
	}
	for g, n := range replaced {
		target[g] = max(0, target[g]-n)
	}
	c := &Cost{NodeGroups: []GroupCost{}}
	after, now := map[string]float64{}, map[string]float64{}
	for _, g := range groups {
		if g.Price == nil {
			c.NoPrice = append(c.NoPrice, g.Name)
			continue
		}
		n := target[g.Name]
		perHour := float64(n) * g.Price.PerHour
		after[g.Price.Currency] += perHour
		now[g.Price.Currency] += float64(g.TargetSize) * g.Price.PerHour
		c.NodeGroups = append(c.NodeGroups, GroupCost{
			NodeGroup: g.Name, NodesNow: g.TargetSize, Nodes: n, PerNodeHour: g.Price.PerHour, Currency: g.Price.Currency, Source: g.Price.Source,
			PerHour: round4(perHour), PerMonth: roundCents(perHour * HoursPerMonth),
		})
	}
	if len(c.NodeGroups) == 0 {
		return nil
	}
	change := map[string]float64{}
	for cur := range after {
		change[cur] = after[cur] - now[cur]
	}
	c.Totals, c.Now, c.Change = costTotals(after), costTotals(now), costTotals(change)
	slices.SortFunc(c.NodeGroups, func(a, b GroupCost) int { return strings.Compare(a.NodeGroup, b.NodeGroup) })
	slices.Sort(c.NoPrice)
	return c
}

// costTotals lists per-currency hourly sums with their month, by currency.
func costTotals(perHour map[string]float64) []CostTotal {
	out := make([]CostTotal, 0, len(perHour))
	for cur, h := range perHour {
		out = append(out, CostTotal{Currency: cur, PerHour: round4(h), PerMonth: roundCents(h * HoursPerMonth)})
	}
	slices.SortFunc(out, func(a, b CostTotal) int { return strings.Compare(a.Currency, b.Currency) })
	return out
}

func roundCents(f float64) float64 { return math.Round(f*100) / 100 }

// replacedPerGroup counts, per group, the old nodes of the plan's
// replacements that are requested or waiting: they go once the new nodes
// are Ready. Draining ones are the plan's removals already.
func (m *model) replacedPerGroup(p *Plan) map[string]int {
	out := map[string]int{}
	for _, r := range p.Replace {
		if r.Phase != ReplaceRequested && r.Phase != ReplaceWaiting {
			continue
		}
		for _, name := range r.Nodes {
			if i, ok := m.nodeByName[name]; ok && m.nodes[i].group >= 0 {
				out[m.groups[m.nodes[i].group].ng.Name]++
			}
		}
	}
	return out
}
