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

// Cost is what the groups cost at the target sizes this plan leaves them
// at, counted only over groups with a price: a group without one is listed
// under NoPrice, never counted as free.
type Cost struct {
	NodeGroups []GroupCost `json:"nodeGroups"`
	// Totals are per currency, sorted by currency.
	Totals  []CostTotal `json:"totals"`
	NoPrice []string    `json:"noPrice,omitempty"`
}

// GroupCost is one priced group's cost: Nodes (its target after the plan)
// × PerNodeHour.
type GroupCost struct {
	NodeGroup   string               `json:"nodeGroup"`
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

// planCost is the cost of the groups at the targets the plan leaves them
// at; nil when no group has a price (so plans of unpriced snapshots read
// as they did).
func planCost(groups []snapshot.NodeGroup, p *Plan) *Cost {
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
	c := &Cost{NodeGroups: []GroupCost{}, Totals: []CostTotal{}}
	totals := map[string]float64{}
	for _, g := range groups {
		if g.Price == nil {
			c.NoPrice = append(c.NoPrice, g.Name)
			continue
		}
		n := target[g.Name]
		perHour := float64(n) * g.Price.PerHour
		totals[g.Price.Currency] += perHour
		c.NodeGroups = append(c.NodeGroups, GroupCost{
			NodeGroup: g.Name, Nodes: n, PerNodeHour: g.Price.PerHour, Currency: g.Price.Currency, Source: g.Price.Source,
			PerHour: round4(perHour), PerMonth: roundCents(perHour * HoursPerMonth),
		})
	}
	if len(c.NodeGroups) == 0 {
		return nil
	}
	for cur, perHour := range totals {
		c.Totals = append(c.Totals, CostTotal{Currency: cur, PerHour: round4(perHour), PerMonth: roundCents(perHour * HoursPerMonth)})
	}
	slices.SortFunc(c.Totals, func(a, b CostTotal) int { return strings.Compare(a.Currency, b.Currency) })
	slices.SortFunc(c.NodeGroups, func(a, b GroupCost) int { return strings.Compare(a.NodeGroup, b.NodeGroup) })
	slices.Sort(c.NoPrice)
	return c
}

func roundCents(f float64) float64 { return math.Round(f*100) / 100 }
