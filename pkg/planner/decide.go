package planner

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Decide plans one cycle: which groups grow and by how much, which nodes go,
// which pending pods stay pending and why, and the State for the next cycle.
// now is the decision instant (the snapshot's capturedAt when replaying).
// The snapshot is only read.
func Decide(s snapshot.Snapshot, set Settings, now time.Time) Plan {
	p, _ := decide(&s, set, now, false)
	return p
}

func decide(s *snapshot.Snapshot, set Settings, now time.Time, traced bool) (Plan, *trace) {
	now = now.UTC()
	var tr *trace
	if traced {
		tr = &trace{existing: map[string]string{}, upcoming: map[string]string{}, hops: map[string][]string{}}
	}
	plan := Plan{
		ScaleUp:       []ScaleUp{},
		ScaleDown:     []ScaleDown{},
		Unschedulable: []Unschedulable{},
		NodeGroups:    []GroupStatus{},
	}
	next := snapshot.State{
		UnneededSince: map[string]time.Time{},
		LastScaleUp:   map[string]time.Time{},
		BackoffUntil:  map[string]time.Time{},
	}
	m := newModel(s, set, now)

	// Remember scale-ups of groups that still exist: they drive the
	// provision time-out and delayAfterAdd.
	for _, g := range m.groups {
		if t, ok := s.State.LastScaleUp[g.ng.Name]; ok {
			next.LastScaleUp[g.ng.Name] = t.UTC()
		}
	}

	m.upcomingCapacity(&plan, &next)
	m.overMax(&plan, &next)
	classes := m.pendingClasses()
	m.onExisting(classes, tr)
	m.onUpcoming(classes, tr)
	grown, budget := m.onNewNodes(classes, &plan, &next)
	m.unschedulable(classes, grown, budget, &plan)
	m.expendablePending(&plan)
	// Pending pods first; headroom takes what the step has left.
	spares := m.headroom(grown, budget, &plan, &next)
	// Scale-down looks at the registered nodes only, as the scheduler will.
	m.dropSims(int32(len(m.nodes)))

	for _, g := range m.groups {
		if g.backoff.After(now) {
			next.BackoffUntil[g.ng.Name] = g.backoff.UTC()
		}
		plan.NodeGroups = append(plan.NodeGroups, m.status(&g))
	}
	headroomStatus(plan.NodeGroups, spares)

	m.scaleDown(&plan, &next, spares, tr)
	slices.SortFunc(plan.ScaleDown, func(a, b ScaleDown) int {
		if c := strings.Compare(a.NodeGroup, b.NodeGroup); c != 0 {
			return c
		}
		return strings.Compare(a.Node, b.Node)
	})
	for k, t := range next.UnneededSince {
		next.UnneededSince[k] = t.UTC()
	}
	plan.State = next
	plan.Cost = planCost(s.NodeGroups, &plan, m.replacedPerGroup(&plan))
	return plan, tr
}

// status is a group's size and the utilisation of its registered nodes.
func (m *model) status(g *groupInfo) GroupStatus {
	var used, alloc res
	for _, ni := range g.nodes {
		used = used.add(m.nodes[ni].used)
		alloc = alloc.add(m.nodes[ni].alloc)
	}
	return GroupStatus{
		Name:              g.ng.Name,
		Nodes:             len(g.nodes),
		TargetSize:        g.ng.TargetSize,
		TemplateFrom:      g.ng.TemplateFrom,
		CPUUtilization:    round4(utilization(used.cpu, alloc.cpu)),
		MemoryUtilization: round4(utilization(used.mem, alloc.mem)),
	}
}

// round4 keeps plans readable and stable across float formatting.
func round4(f float64) float64 { return math.Round(f*10000) / 10000 }
