package planner

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// spare is a group's spare capacity once the pending pods are placed: on
// its schedulable Ready (or booting) nodes, the upcoming nodes and the new
// nodes of this plan. want is the group's headroom; set says it has one.
type spare struct {
	want  snapshot.Headroom
	set   bool
	empty int64 // nodes with no pod that would have to move
	free  res
	// used and alloc give the group's utilisation (requests ÷ allocatable).
	used, alloc res
	// status is how the headroom stood before this plan's nodes for it.
	status *HeadroomStatus
}

// holds reports whether the headroom holds as it is.
func (s *spare) holds() bool {
	h := s.want
	switch {
	case h.Nodes > 0:
		return s.empty >= int64(h.Nodes)
	case h.Utilization > 0:
		return s.util(res{}) < h.Utilization
	}
	return (h.CPUMillis <= 0 || s.free.cpu >= h.CPUMillis) && (h.MemoryBytes <= 0 || s.free.mem >= h.MemoryBytes)
}

// describe is the headroom's status, need being the nodes it lacks.
func (s *spare) describe(need int64) *HeadroomStatus {
	h := s.want
	st := &HeadroomStatus{Met: s.holds(), Need: int(need), FreeNodes: s.empty, FreeCPUMillis: max(s.free.cpu, 0),
		FreeMemoryBytes: max(s.free.mem, 0), Utilization: round4(s.util(res{}))}
	st.Rule = HeadroomWords(h)
	switch {
	case h.Nodes > 0:
		st.Free = fmt.Sprintf("%d free", s.empty)
	case h.Utilization > 0:
		st.Free = fmt.Sprintf("at %d%%", pct(st.Utilization))
	default:
		st.Free = resources(h, st.FreeCPUMillis, st.FreeMemoryBytes) + " free"
	}
	return st
}

// HeadroomWords is the headroom in words: "2 spare nodes", "6 cpu, 8Gi
// memory spare", "utilisation below 80%".
func HeadroomWords(h snapshot.Headroom) string {
	switch {
	case h.Nodes > 0:
		return plural(h.Nodes, "spare node")
	case h.Utilization > 0:
		return fmt.Sprintf("utilisation below %d%%", pct(h.Utilization))
	}
	return resources(h, h.CPUMillis, h.MemoryBytes) + " spare"
}

// resources prints cpu and memory, each only when h asks for it.
func resources(h snapshot.Headroom, cpu, mem int64) string {
	var out []string
	if h.CPUMillis > 0 {
		out = append(out, formatDim("cpu", cpu)+" cpu")
	}
	if h.MemoryBytes > 0 {
		out = append(out, formatDim("memory", mem)+" memory")
	}
	return strings.Join(out, ", ")
}

// util is the larger of cpu and memory utilisation after the removal of
// nodes with allocatable removed in total.
func (s *spare) util(removed res) float64 {
	alloc := s.alloc.sub(removed)
	return max(utilization(s.used.cpu, alloc.cpu), utilization(s.used.mem, alloc.mem))
}

// keeps reports whether the headroom still holds with n more nodes of the
// group gone, removed being their allocatable. It is conservative: the pods
// of a removed node are assumed to move onto the group's spare room.
func (s *spare) keeps(n int64, removed res) bool {
	if !s.set {
		return true
	}
	h := s.want
	switch {
	case h.Nodes > 0:
		return s.empty-n >= int64(h.Nodes)
	case h.Utilization > 0:
		return s.util(removed) < h.Utilization
	}
	free := s.free.sub(removed)
	return free.cpu >= h.CPUMillis && free.mem >= h.MemoryBytes
}

// spareOf works out group gi's spare capacity.
func (m *model) spareOf(gi int) spare {
	g := &m.groups[gi]
	if g.ng.Headroom == nil {
		return spare{}
	}
	s := spare{want: *g.ng.Headroom, set: true}
	for _, ni := range g.nodes {
		n := &m.nodes[ni]
		if !n.schedulable || !(n.ready || n.booting) {
			continue
		}
		s.free = s.free.add(n.free)
		s.used = s.used.add(n.alloc.sub(n.free))
		s.alloc = s.alloc.add(n.alloc)
		if !n.gotPending && !m.hasMovingPods(ni) {
			s.empty++
		}
	}
	up, nw := int64(g.upcoming), g.newNodes
	s.empty += g.upEmpty
	s.free = s.free.add(g.upFree).add(g.cap.mul(nw)).sub(g.newUsed)
	s.alloc = s.alloc.add(g.alloc.mul(up + nw))
	s.used = s.used.add(g.alloc.mul(up)).sub(g.upFree).add(g.overhead.mul(nw)).add(g.newUsed)
	return s
}

// hasMovingPods reports whether node ni runs a pod that is more than
// DaemonSet or mirror pods: an empty node counts as a spare one.
func (m *model) hasMovingPods(ni int32) bool {
	for _, pi := range m.podsOf(ni) {
		if movesWithNode(&m.snap.Pods[pi]) {
			return true
		}
	}
	return false
}

// short is how many template nodes group gi must add for its headroom to
// hold, and why.
func (m *model) short(gi int, s *spare) (int64, string) {
	g := &m.groups[gi]
	h := s.want
	switch {
	case h.Nodes > 0:
		if s.empty >= int64(h.Nodes) {
			return 0, ""
		}
		return int64(h.Nodes) - s.empty, fmt.Sprintf("headroom: %s wanted, %d free", plural(h.Nodes, "spare node"), s.empty)
	case h.Utilization > 0:
		u := s.util(res{})
		if u < h.Utilization {
			return 0, ""
		}
		// k new nodes bring k × (allocatable, DaemonSet requests): the
		// smallest k with used + k·ov < P·(alloc + k·a) in every dimension.
		// When a new node's DaemonSets alone take P of it, no k does.
		var k int64
		for _, d := range []struct{ used, alloc, ov, a int64 }{
			{s.used.cpu, s.alloc.cpu, g.overhead.cpu, g.alloc.cpu},
			{s.used.mem, s.alloc.mem, g.overhead.mem, g.alloc.mem},
		} {
			p := h.Utilization
			if float64(d.used) < p*float64(d.alloc) {
				continue
			}
			per := p*float64(d.a) - float64(d.ov)
			if per <= 0 {
				return 0, ""
			}
			x := (float64(d.used) - p*float64(d.alloc)) / per
			k = max(k, int64(min(math.Floor(x)+1, float64(math.MaxInt32))))
		}
		return k, fmt.Sprintf("headroom: utilisation %d%% at or above %d%%", pct(u), pct(h.Utilization))
	}
	var k int64
	var wanted, free []string
	for _, d := range []struct {
		name             string
		want, have, room int64
	}{
		{"cpu", h.CPUMillis, s.free.cpu, g.cap.cpu},
		{"memory", h.MemoryBytes, s.free.mem, g.cap.mem},
	} {
		if d.want <= 0 {
			continue
		}
		wanted = append(wanted, formatDim(d.name, d.want)+" "+d.name)
		free = append(free, formatDim(d.name, max(d.have, 0))+" "+d.name)
		if d.have >= d.want {
			continue
		}
		if d.room <= 0 {
			return 0, "" // a new node's DaemonSets take it all: nodes cannot help
		}
		// In floats: a headroom near the int64 limit must not wrap.
		x := math.Ceil((float64(d.want) - float64(d.have)) / float64(d.room))
		k = max(k, int64(min(x, math.MaxInt32)))
	}
	if k == 0 {
		return 0, ""
	}
	return k, fmt.Sprintf("headroom: %s spare wanted, %s free", strings.Join(wanted, ", "), strings.Join(free, ", "))
}

// headroom grows the groups whose headroom does not hold once the pending
// pods are placed, within max size, the step's budget and never while
// backed off, and returns every group's spare capacity, these nodes
// included, for scale-down.
func (m *model) headroom(grown map[int]int, budget int64, plan *Plan, next *snapshot.State) []spare {
	spares := make([]spare, len(m.groups))
	for _, gi := range m.byName {
		g := &m.groups[gi]
		s := m.spareOf(gi)
		spares[gi] = s
		if !s.set {
			continue
		}
		k, why := m.short(gi, &s)
		s.status = s.describe(k)
		spares[gi] = s
		room := int64(g.ng.MaxSize - g.target - grown[gi])
		switch {
		case s.status.Met:
			continue
		case k <= 0:
			s.status.Blocked = "out of reach: a new node's DaemonSets take what it would add"
			continue
		case g.backoff.After(m.now):
			s.status.Blocked = "backed off until " + g.backoff.UTC().Format(time.RFC3339)
			continue
		case k > room:
			why += fmt.Sprintf(" (capped at max size %d)", g.ng.MaxSize)
			s.status.Blocked = fmt.Sprintf("max size %d", g.ng.MaxSize)
		case k > budget:
			why += fmt.Sprintf(" (capped by max nodes per step %d)", m.set.ScaleUp.MaxNodesPerStep)
			s.status.Blocked = fmt.Sprintf("max nodes per step %d", m.set.ScaleUp.MaxNodesPerStep)
		}
		k = min(k, room, budget)
		if k <= 0 {
			continue
		}
		budget -= k
		grown[gi] += int(k)
		s.status.Adding = int(k)
		next.LastScaleUp[g.ng.Name] = m.now
		// The nodes added are empty: spare for scale-down's check.
		s.empty += k
		s.free = s.free.add(g.cap.mul(k))
		s.alloc = s.alloc.add(g.alloc.mul(k))
		s.used = s.used.add(g.overhead.mul(k))
		spares[gi] = s
		m.growFor(g, int(k), why, plan)
	}
	return spares
}

// growFor adds k nodes to group g's scale-up for its headroom, joining the
// one for pending pods when there is one.
func (m *model) growFor(g *groupInfo, k int, why string, plan *Plan) {
	for i := range plan.ScaleUp {
		up := &plan.ScaleUp[i]
		if up.NodeGroup == g.ng.Name {
			up.Delta += k
			up.NewTargetSize += k
			up.Reason += fmt.Sprintf("; %s: %s more", why, plural(k, "node"))
			return
		}
	}
	plan.ScaleUp = append(plan.ScaleUp, ScaleUp{
		NodeGroup:     g.ng.Name,
		Delta:         k,
		NewTargetSize: g.target + k,
		Pods:          []string{},
		Reason:        why,
	})
}

// headroomStatus puts each group's headroom status on its plan status
// (groups are in the model's order).
func headroomStatus(groups []GroupStatus, spares []spare) {
	for i := range groups {
		if i < len(spares) {
			groups[i].Headroom = spares[i].status
		}
	}
}
