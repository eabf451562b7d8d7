package planner

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// Balancing similar node groups (cluster-autoscaler's
// --balance-similar-node-groups): when the expander picks a group, the new
// nodes are split across the groups like it, so that groups that differ
// only by zone grow evenly.
//
// Two groups are similar (after cluster-autoscaler's nodegroupset
// comparator, applied to templates, which carry allocatable only):
//   - the same provider;
//   - the same allocatable resources, each equal except memory, which may
//     differ by 1.5 % of the larger (the comparator's capacity rule);
//   - free room for pods (allocatable minus the DaemonSets a new node
//     runs) within 5 % on every resource (its free rule);
//   - the same labels except the zone, region and hostname, the labels
//     that name a group or pool, and the CSI zone labels (its ignored
//     labels, the AWS provider's included);
//   - the same taints (the comparator does not look at taints; groups
//     that differ there do not take the same pods).
//
// Besides, every pod the expander's choice placed must fit each group's
// template, and a group that could host pending pods the choice's group
// cannot is left to grow for them. The new nodes then go one by one to the group with the smallest
// target that is below its max (ties by name), and the pods are packed onto
// that split; if any pod the unbalanced choice placed does not fit it
// (zone-constrained pods fit only some zones), the unbalanced choice stands.

// Similarity tolerances, as cluster-autoscaler's defaults.
const (
	similarMemoryRatio = 0.015
	similarFreeRatio   = 0.05
)

// ignoredForSimilarity: labels that differ between otherwise identical
// groups (zone, region, hostname, group and pool names, CSI zones).
func ignoredForSimilarity(key string) bool {
	switch key {
	case corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
		corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
		"beta.kubernetes.io/fluentd-ds-ready", "kops.k8s.io/instancegroup",
		"topology.ebs.csi.aws.com/zone", "topology.gke.io/zone", "topology.disk.csi.azure.com/zone",
		// cluster-autoscaler's AWS provider adds these.
		"topology.k8s.aws/zone-id", "alpha.eksctl.io/instance-id", "alpha.eksctl.io/nodegroup-name",
		"eks.amazonaws.com/nodegroup", "k8s.amazonaws.com/eniConfig", "lifecycle",
		// The group and pool names nodetide's providers put on nodes.
		"nodetide.io/node-group", "k8s.scaleway.com/pool-name", "k8s.scaleway.com/pool":
		return true
	}
	return false
}

// similar reports whether groups a and b are alike enough to balance.
func (m *model) similar(a, b int) bool {
	ga, gb := &m.groups[a], &m.groups[b]
	if ga.ng.Provider != gb.ng.Provider {
		return false
	}
	la, lb := ga.ng.Template.Allocatable, gb.ng.Template.Allocatable
	if len(la) != len(lb) {
		return false
	}
	for name, qa := range la {
		qb, ok := lb[name]
		if !ok {
			return false
		}
		if name == corev1.ResourceMemory {
			if !withinRatio(qa.MilliValue(), qb.MilliValue(), similarMemoryRatio) {
				return false
			}
		} else if qa.Cmp(qb) != 0 {
			return false
		}
	}
	fa, fb := ga.cap, gb.cap
	for _, d := range [][2]int64{{fa.cpu, fb.cpu}, {fa.mem, fb.mem}, {fa.gpu, fb.gpu}, {fa.pods, fb.pods}} {
		if !withinRatio(d[0], d[1], similarFreeRatio) {
			return false
		}
	}
	if !sameLabels(ga.labels, gb.labels) {
		return false
	}
	return sameTaints(ga.taints, gb.taints)
}

func withinRatio(x, y int64, ratio float64) bool {
	hi, lo := float64(max(x, y)), float64(min(x, y))
	return hi-lo <= hi*ratio
}

func sameLabels(a, b map[string]string) bool {
	kept := func(l map[string]string) map[string]string {
		out := make(map[string]string, len(l))
		for k, v := range l {
			if !ignoredForSimilarity(k) {
				out[k] = v
			}
		}
		return out
	}
	return maps.Equal(kept(a), kept(b))
}

func sameTaints(a, b []corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(t corev1.Taint) string { return t.Key + "=" + t.Value + ":" + string(t.Effect) }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i], kb[i] = key(a[i]), key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// ownWork: group g could host pending pods that best's group cannot (a
// zonal workload of its own). Balancing into it would use up its one
// scale-up of the plan and leave those pods pending, so it is left out.
func (m *model) ownWork(classes []int32, best *estimate, g int) bool {
	for _, c := range classes {
		left := remaining(&m.classes[c])
		for _, cc := range best.placed {
			if cc.class == c {
				left -= cc.n
			}
		}
		if left > 0 && m.fitsTemplate(c, g) && !m.fitsTemplate(c, best.group) {
			return true
		}
	}
	return false
}

// balanceSplit gives n new nodes, one at a time, to the group with the
// smallest target that is below its max (ties by the order of groups).
// It returns the nodes each group gets.
func (m *model) balanceSplit(groups []int, n int64, room []int64) []int64 {
	size := make([]int64, len(groups))
	for i, g := range groups {
		size[i] = int64(m.groups[g].target)
	}
	out := make([]int64, len(groups))
	for ; n > 0; n-- {
		pick := -1
		for i := range groups {
			if out[i] < room[i] && (pick < 0 || size[i] < size[pick]) {
				pick = i
			}
		}
		if pick < 0 {
			break
		}
		out[pick]++
		size[pick]++
	}
	return out
}

// balance splits best, the expander's choice, across the groups similar to
// it and records the split in the plan. It returns false, having changed
// nothing, when there is nothing to balance or the split would leave a pod
// best placed without a node.
func (m *model) balance(classes []int32, best *estimate, plan *Plan, next *snapshot.State, grown map[int]int, budget *int64) bool {
	groups := m.balanceGroups(classes, best, grown)
	if len(groups) < 2 {
		return false
	}
	room := make([]int64, len(groups))
	for i, g := range groups {
		room[i] = int64(m.groups[g].ng.MaxSize - m.groups[g].target)
	}
	split := m.balanceSplit(groups, best.nodes, room)
	if split[0] == best.nodes {
		return false
	}
	ests, ok := m.packSplit(best, groups, split)
	if !ok {
		return false
	}
	extra := m.balanceReason(best, ests)
	for i := range ests {
		if ests[i].nodes > 0 {
			m.record(&ests[i], extra, plan, next, grown, budget)
		}
	}
	return true
}

// balanceGroups returns best's group followed by the groups best can be
// balanced with, by name: similar, not yet grown in this plan, below their
// max, not backing off, fitting every pod best placed, and without pending
// work of their own that best's group cannot take.
func (m *model) balanceGroups(classes []int32, best *estimate, grown map[int]int) []int {
	groups := []int{best.group}
	for _, gi := range m.byName {
		g := &m.groups[gi]
		if _, done := grown[gi]; done || gi == best.group || g.target >= g.ng.MaxSize || g.backoff.After(m.now) {
			continue
		}
		if !m.similar(best.group, gi) {
			continue
		}
		fits := true
		for _, cc := range best.placed {
			if !m.fitsTemplate(cc.class, gi) {
				fits = false
				break
			}
		}
		if fits && !m.ownWork(classes, best, gi) {
			groups = append(groups, gi)
		}
	}
	slices.SortFunc(groups[1:], func(a, b int) int { return cmp.Compare(m.groups[a].ng.Name, m.groups[b].ng.Name) })
	return groups
}

// packSplit packs the pods best placed onto split (new nodes per group),
// committing as it goes so each group sees what the previous ones took.
// It returns false, with the simulation rolled back, when the split leaves
// one of those pods without a node.
func (m *model) packSplit(best *estimate, groups []int, split []int64) ([]estimate, bool) {
	var mine []int32
	saved := map[int32]int{}
	for _, cc := range best.placed {
		mine = append(mine, cc.class)
		saved[cc.class] = m.classes[cc.class].next
	}
	mark := m.slotCount()
	var ests []estimate
	placed := map[int32]int64{}
	for i, g := range groups {
		if split[i] == 0 {
			continue
		}
		e := m.estimate(mine, g, split[i], true)
		for _, cc := range e.placed {
			m.classes[cc.class].next += int(cc.n)
			placed[cc.class] += cc.n
		}
		ests = append(ests, e)
	}
	ok := true
	for _, cc := range best.placed {
		if placed[cc.class] < cc.n {
			ok = false
		}
	}
	for c, n := range saved {
		m.classes[c].next = n
	}
	if !ok {
		if m.topoOn {
			for i := len(ests) - 1; i >= 0; i-- {
				m.undo(ests[i].log)
			}
			m.dropSims(mark)
		}
		return nil, false
	}
	return ests, true
}

// balanceReason says, for the plan, how best was split and across which
// groups (with their zones).
func (m *model) balanceReason(best *estimate, ests []estimate) string {
	var names []string
	for _, e := range ests {
		if e.nodes == 0 {
			continue
		}
		g := &m.groups[e.group]
		s := fmt.Sprintf("%s +%d", g.ng.Name, e.nodes)
		if z := g.labels[labelZone]; z != "" {
			s = fmt.Sprintf("%s (%s) +%d", g.ng.Name, z, e.nodes)
		}
		names = append(names, s)
	}
	return fmt.Sprintf("balanced with similar groups, expander chose %s: %s", m.groups[best.group].ng.Name, strings.Join(names, ", "))
}
