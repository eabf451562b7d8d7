package evaluate

import (
	"context"
	"errors"
	"time"

	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/shadowcompare"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// Observer reads what cluster-autoscaler did in (since, now]
// (shadowcompare.Reader). Its failures are problems in what it returns.
type Observer interface {
	Read(ctx context.Context, since, now time.Time) shadowcompare.Observed
}

// The window of a comparison: since the last cycle, but never longer than
// maxCompareWindow; firstCompareWindow when no earlier cycle is known.
const (
	firstCompareWindow = time.Minute
	maxCompareWindow   = 10 * time.Minute
)

// The bounds of a comparison in the status: its groups, the node names of
// each side's removals and of the unattributed ones.
const (
	maxCompareGroups = maxStatusGroups
	maxCompareNames  = 3
)

// compare compares a shadow cycle's plan with what cluster-autoscaler did
// since the last cycle.
func (e *Evaluator) compare(ctx context.Context, snap snapshot.Snapshot, res Result) *shadowcompare.Comparison {
	// Up to the read, not the snapshot: the next window starts where this
	// cycle's status is stamped, after both.
	now := e.now()
	since := now.Add(-firstCompareWindow)
	if store, ok := e.Store.(state.StatusStore); ok {
		prev, err := ReadStatus(ctx, store)
		switch {
		case err == nil && prev.CycleAt.Before(now) && now.Sub(prev.CycleAt) <= maxCompareWindow:
			since = prev.CycleAt
		case err == nil && prev.CycleAt.Before(now):
			since = now.Add(-maxCompareWindow)
		case err != nil && !errors.Is(err, state.ErrNoStatus):
			e.log().Warn("shadow compare: read previous status", "error", err.Error())
		}
	}
	obs := e.Compare.Read(ctx, since, now)
	c := shadowcompare.Compare(plannedGroups(snap, *res.Plan, res.caNames), obs, nodeGroupOf(snap), since)
	e.log().Info("shadow compare", "agree", c.Agree, "since", since, "groups", len(c.Groups), "problems", c.Problems)
	bound(&c)
	return &c
}

// plannedGroups is the shadow plan per group: the target read, the target
// it would have set, the nodes it would have drained.
func plannedGroups(snap snapshot.Snapshot, plan planner.Plan, caNames map[string]string) []shadowcompare.Planned {
	out := make([]shadowcompare.Planned, 0, len(snap.NodeGroups))
	for _, g := range snap.NodeGroups {
		p := shadowcompare.Planned{NodeGroup: g.Name, CAName: caNames[g.Name], Target: g.TargetSize, NewTarget: g.TargetSize}
		for _, up := range plan.ScaleUp {
			if up.NodeGroup == g.Name {
				p.NewTarget = up.NewTargetSize
			}
		}
		for _, d := range plan.DecreaseTarget {
			if d.NodeGroup == g.Name {
				p.NewTarget = d.NewTargetSize
			}
		}
		for _, down := range plan.ScaleDown {
			if down.NodeGroup == g.Name {
				p.Drains = append(p.Drains, down.Node)
			}
		}
		out = append(out, p)
	}
	return out
}

// nodeGroupOf maps every node the cycle read to its group, "" for a node
// of no group.
func nodeGroupOf(snap snapshot.Snapshot) map[string]string {
	groupOf, _, _ := countNodes(snap)
	out := make(map[string]string, len(snap.Nodes))
	for i := range snap.Nodes {
		out[snap.Nodes[i].Name] = groupOf[snap.Nodes[i].Name]
	}
	return out
}

// caNames is cluster-autoscaler's name of each group whose provider names
// it otherwise than nodetide: an Auto Scaling Group's name (nodetide's may
// be the config's), a Kapsule pool's ID. Other groups go by their name.
func caNames(groups []providers.NodeGroup) map[string]string {
	out := map[string]string{}
	for _, g := range groups {
		switch id := g.(type) {
		case interface{ AutoScalingGroupName() string }:
			out[g.Name()] = id.AutoScalingGroupName()
		case interface{ PoolID() string }:
			out[g.Name()] = id.PoolID()
		}
	}
	return out
}

// bound caps the comparison's lists for the status; the counts stand.
func bound(c *shadowcompare.Comparison) {
	if n := len(c.Groups); n > maxCompareGroups {
		c.Groups, c.GroupsOmitted = c.Groups[:maxCompareGroups], n-maxCompareGroups
	}
	for i := range c.Groups {
		for _, s := range []*shadowcompare.Side{&c.Groups[i].Nodetide, &c.Groups[i].CA} {
			if n := len(s.Removals); n > maxCompareNames {
				s.Removals, s.RemovalsOmitted = s.Removals[:maxCompareNames], n-maxCompareNames
			}
		}
	}
	if n := len(c.Unattributed); n > maxCompareNames {
		c.Unattributed, c.UnattributedOmitted = c.Unattributed[:maxCompareNames], n-maxCompareNames
	}
	for i := range c.Problems {
		c.Problems[i] = clip(c.Problems[i])
	}
}

// recordComparison publishes the cycle's agreement: 1 or 0 under Cluster,
// and per group under Cluster and NodeGroup.
func recordComparison(ctx context.Context, c *shadowcompare.Comparison) {
	if c == nil {
		return
	}
	m := metrics.From(ctx)
	m.Gauge(metrics.ShadowAgreement, metrics.Count, oneIf(c.Agree), nil)
	for _, g := range c.Groups {
		m.Gauge(metrics.ShadowAgreement, metrics.Count, oneIf(g.Agree), metrics.Dims{metrics.DimNodeGroup: g.NodeGroup})
	}
}

func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
