package planner

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Pod-dependent placement: topology spread constraints, required inter-pod
// (anti-)affinity and host ports. These only switch on when some pod uses
// one of them (model.topoOn); otherwise classes keep the count-based fast
// path. When on, every placement, removal and simulated node goes through
// place/unplace/addSim/dropSlot so the counts of each class that needs them
// (a topo) stay those the scheduler would compute.
//
// Nodes are addressed as slots: the snapshot's nodes first, then the
// simulated ones (upcoming and planned new nodes of the groups).

// podSet is pods with the same namespace, labels and pod-dependent rules:
// one stands for all of them when counting.
type podSet struct {
	rep  *corev1.Pod
	feat *features
	pods []int32 // those bound to a node of the snapshot
	// targeted: the required anti-affinity of some pod matches these pods.
	targeted bool
}

// simNode is a node the plan expects: upcoming or new.
type simNode struct {
	group  int
	labels map[string]string
	free   res
	placed []classCount
}

// placement is one step of the undo log of a hypothetical estimate.
type placement struct {
	slot, class int32
	n           int64
}

// initTopology builds the pod sets when some pod has pod-dependent rules.
func (m *model) initTopology() {
	for i := range m.pods {
		pi := &m.pods[i]
		pi.set = -1
		if !m.topoOn && (pi.node >= 0 || pi.unsched) && hasFeatures(&m.snap.Pods[i]) {
			m.topoOn = true
		}
	}
	if !m.topoOn {
		return
	}
	byHash := map[uint64][]int32{}
	for i := range m.pods {
		pi := &m.pods[i]
		if pi.node < 0 && !pi.unsched {
			continue
		}
		p := &m.snap.Pods[i]
		h := podRulesHash(p)
		set := int32(-1)
		for _, s := range byHash[h] {
			if samePodRules(m.sets[s].rep, p) {
				set = s
				break
			}
		}
		if set < 0 {
			set = int32(len(m.sets))
			m.sets = append(m.sets, podSet{rep: p, feat: newFeatures(p)})
			byHash[h] = append(byHash[h], set)
		}
		pi.set = set
		if pi.node >= 0 {
			m.sets[set].pods = append(m.sets[set].pods, int32(i))
		}
	}
	var anti []*podTerm
	for s := range m.sets {
		if f := m.sets[s].feat; f != nil {
			for k := range f.anti {
				anti = append(anti, &f.anti[k])
			}
		}
	}
	if len(anti) == 0 {
		return
	}
	for s := range m.sets {
		for _, t := range anti {
			if t.matches(m.sets[s].rep) {
				m.sets[s].targeted = true
				break
			}
		}
	}
}

func (m *model) slotCount() int32 { return int32(len(m.nodes) + len(m.sims)) }

func (m *model) slotLabels(s int32) map[string]string {
	if int(s) < len(m.nodes) {
		return m.nodes[s].node.Labels
	}
	return m.sims[int(s)-len(m.nodes)].labels
}

func (m *model) slotGone(s int32) bool { return int(s) < len(m.nodes) && m.nodes[s].gone }

func (m *model) slotPlaced(s int32) *[]classCount {
	if int(s) < len(m.nodes) {
		return &m.nodes[s].placed
	}
	return &m.sims[int(s)-len(m.nodes)].placed
}

func (m *model) slotFree(s int32) *res {
	if int(s) < len(m.nodes) {
		return &m.nodes[s].free
	}
	return &m.sims[int(s)-len(m.nodes)].free
}

// slotFitsStatic: the pod's node selector, node affinity and tolerations
// admit the slot (resources and pod-dependent rules aside).
func (m *model) slotFitsStatic(p *corev1.Pod, s int32, taints bool) bool {
	var t []corev1.Taint
	if int(s) < len(m.nodes) {
		n := &m.nodes[s]
		if taints {
			t = n.taints
		}
		return placementFits(p, n.node.Labels, t, n.node.Name, fieldsOfNode)
	}
	sim := &m.sims[int(s)-len(m.nodes)]
	if taints {
		t = m.groups[sim.group].taints
	}
	return placementFits(p, sim.labels, t, "", fieldsNewNode)
}

// addSim opens a simulated node of group g and returns its slot.
func (m *model) addSim(g int, kind string) int32 {
	gr := &m.groups[g]
	l := make(map[string]string, len(gr.ng.Template.Labels)+1)
	for k, v := range gr.ng.Template.Labels {
		l[k] = v
	}
	// Each node is its own hostname domain.
	l[labelHostname] = gr.ng.Name + "-" + kind + "-" + strconv.Itoa(len(m.sims))
	m.sims = append(m.sims, simNode{group: g, labels: l, free: gr.cap})
	s := m.slotCount() - 1
	for _, t := range m.active {
		t.addSlot(s)
	}
	return s
}

// dropSims removes the simulated nodes from slot `from` on, with what was
// placed on them.
func (m *model) dropSims(from int32) {
	for s := m.slotCount() - 1; s >= from; s-- {
		for _, t := range m.active {
			t.removeSlot(s)
		}
		m.sims = m.sims[:len(m.sims)-1]
	}
}

// place records n pods of class c on slot s (free capacity is the caller's).
func (m *model) place(s, c int32, n int64) {
	if !m.topoOn || n == 0 {
		return
	}
	pl := m.slotPlaced(s)
	*pl = addClassCount(*pl, c, n)
	cl := &m.classes[c]
	for _, t := range m.active {
		t.apply(s, t.matchOf(cl.rep, cl.feat), n)
	}
	if m.log != nil {
		*m.log = append(*m.log, placement{s, c, n})
	}
}

// unplace takes back a place.
func (m *model) unplace(s, c int32, n int64) {
	if !m.topoOn || n == 0 {
		return
	}
	pl := m.slotPlaced(s)
	*pl = addClassCount(*pl, c, -n)
	cl := &m.classes[c]
	for _, t := range m.active {
		t.apply(s, t.matchOf(cl.rep, cl.feat), -n)
	}
}

// undo takes back the placements of the log from mark on.
func (m *model) undo(log []placement) {
	for i := len(log) - 1; i >= 0; i-- {
		p := log[i]
		m.unplace(p.slot, p.class, p.n)
		*m.slotFree(p.slot) = m.slotFree(p.slot).add(m.classes[p.class].req.mul(p.n))
	}
}

// removeNode takes real node s out of the cluster (scale-down simulation).
func (m *model) removeNode(s int32) {
	if !m.topoOn {
		return
	}
	for _, t := range m.active {
		t.removeSlot(s)
	}
	m.nodes[s].gone = true
}

// restoreNode puts back a node removeNode took out.
func (m *model) restoreNode(s int32) {
	if !m.topoOn {
		return
	}
	m.nodes[s].gone = false
	for _, t := range m.active {
		t.addSlot(s)
	}
}

// topoOf returns class c's counts, building them on first use.
func (m *model) topoOf(c int32) *topo {
	for int(c) >= len(m.topos) {
		m.topos = append(m.topos, nil)
	}
	if t := m.topos[c]; t != nil {
		return t
	}
	t := newTopo(m, c)
	m.topos[c] = t
	m.active = append(m.active, t)
	return t
}

// matchInfo is how pods like one representative count for a topo.
type matchInfo struct {
	affAll bool     // matches all of the pod's affinity terms
	anti   []int    // the pod's anti-affinity terms it matches
	exAnti []string // topology keys of its own anti-affinity terms that match the pod
	spread []int    // spread constraints whose selector it matches
	any    bool
}

type spreadState struct {
	t      *spreadTerm
	elig   []bool         // by slot: counted for this constraint
	nodes  map[string]int // eligible slots per domain
	counts map[string]int64
	min    int64
	atMin  int
	dirty  bool
}

// topo is what the scheduler's PodTopologySpread, InterPodAffinity and
// NodePorts plugins would compute for one class, kept up to date.
type topo struct {
	m          *model
	rep        *corev1.Pod
	f          *features
	affCounts  []map[string]int64
	affTotal   int64
	antiCounts []map[string]int64
	exAnti     map[string]map[string]int64
	spread     []spreadState
	match      map[*corev1.Pod]*matchInfo
}

func newTopo(m *model, c int32) *topo {
	cl := &m.classes[c]
	f := cl.feat
	if f == nil {
		f = &features{}
	}
	t := &topo{m: m, rep: cl.rep, f: f, exAnti: map[string]map[string]int64{}, match: map[*corev1.Pod]*matchInfo{}}
	for range f.aff {
		t.affCounts = append(t.affCounts, map[string]int64{})
	}
	for range f.anti {
		t.antiCounts = append(t.antiCounts, map[string]int64{})
	}
	for k := range f.spread {
		t.spread = append(t.spread, spreadState{t: &f.spread[k], nodes: map[string]int{}, counts: map[string]int64{}, dirty: true})
	}
	for s := int32(0); s < m.slotCount(); s++ {
		t.addDomain(s)
	}
	for si := range m.sets {
		set := &m.sets[si]
		mi := t.matchOf(set.rep, set.feat)
		if !mi.any {
			continue
		}
		for _, pi := range set.pods {
			if s := m.pods[pi].node; !m.nodes[s].gone {
				t.apply(s, mi, 1)
			}
		}
	}
	for s := int32(0); s < m.slotCount(); s++ {
		if m.slotGone(s) {
			continue
		}
		for _, cc := range *m.slotPlaced(s) {
			if cc.n != 0 {
				ocl := &m.classes[cc.class]
				t.apply(s, t.matchOf(ocl.rep, ocl.feat), cc.n)
			}
		}
	}
	return t
}

func (t *topo) matchOf(p *corev1.Pod, pf *features) *matchInfo {
	if mi, ok := t.match[p]; ok {
		return mi
	}
	mi := &matchInfo{}
	if len(t.f.aff) > 0 {
		mi.affAll = true
		for k := range t.f.aff {
			if !t.f.aff[k].matches(p) {
				mi.affAll = false
				break
			}
		}
	}
	for k := range t.f.anti {
		if t.f.anti[k].matches(p) {
			mi.anti = append(mi.anti, k)
		}
	}
	if pf != nil {
		for k := range pf.anti {
			if pf.anti[k].matches(t.rep) {
				mi.exAnti = append(mi.exAnti, pf.anti[k].key)
			}
		}
	}
	// Terminating pods do not count for spreading.
	if p.DeletionTimestamp == nil && p.Namespace == t.rep.Namespace {
		for k := range t.spread {
			if t.spread[k].t.sel.Matches(labels.Set(p.Labels)) {
				mi.spread = append(mi.spread, k)
			}
		}
	}
	mi.any = mi.affAll || len(mi.anti) > 0 || len(mi.exAnti) > 0 || len(mi.spread) > 0
	t.match[p] = mi
	return mi
}

// apply counts n more (or fewer) pods matching mi on slot s.
func (t *topo) apply(s int32, mi *matchInfo, n int64) {
	if !mi.any {
		return
	}
	l := t.m.slotLabels(s)
	if mi.affAll {
		t.affTotal += n
		for k := range t.f.aff {
			if v, ok := l[t.f.aff[k].key]; ok {
				t.affCounts[k][v] += n
			}
		}
	}
	for _, k := range mi.anti {
		if v, ok := l[t.f.anti[k].key]; ok {
			t.antiCounts[k][v] += n
		}
	}
	for _, key := range mi.exAnti {
		if v, ok := l[key]; ok {
			d := t.exAnti[key]
			if d == nil {
				d = map[string]int64{}
				t.exAnti[key] = d
			}
			d[v] += n
		}
	}
	for _, k := range mi.spread {
		st := &t.spread[k]
		if int(s) < len(st.elig) && st.elig[s] {
			st.add(l[st.t.key], n)
		}
	}
}

// eligible: the scheduler counts a node for a spread constraint when it has
// every constraint's key and passes the inclusion policies.
func (t *topo) eligible(s int32, st *spreadTerm) bool {
	l := t.m.slotLabels(s)
	for k := range t.f.spread {
		if _, ok := l[t.f.spread[k].key]; !ok {
			return false
		}
	}
	if st.honorAffinity && !t.m.slotFitsStatic(&corev1.Pod{Spec: corev1.PodSpec{NodeSelector: t.rep.Spec.NodeSelector, Affinity: t.rep.Spec.Affinity}}, s, false) {
		return false
	}
	if st.honorTaints {
		var taints []corev1.Taint
		if int(s) < len(t.m.nodes) {
			taints = t.m.nodes[s].taints
		} else {
			taints = t.m.groups[t.m.sims[int(s)-len(t.m.nodes)].group].taints
		}
		if untolerated(t.rep.Spec.Tolerations, taints) != nil {
			return false
		}
	}
	return true
}

// addDomain notes slot s (new, or just created) as a node of its domains.
func (t *topo) addDomain(s int32) {
	for k := range t.spread {
		st := &t.spread[k]
		for int(s) >= len(st.elig) {
			st.elig = append(st.elig, false)
		}
		st.elig[s] = t.eligible(s, st.t)
		if st.elig[s] && !t.m.slotGone(s) {
			v := t.m.slotLabels(s)[st.t.key]
			st.nodes[v]++
			if st.nodes[v] == 1 && !st.dirty {
				c := st.counts[v]
				if c < st.min {
					st.min, st.atMin = c, 1
				} else if c == st.min {
					st.atMin++
				}
			}
		}
	}
}

// addSlot brings slot s (and its pods) into the counts.
func (t *topo) addSlot(s int32) {
	t.addDomain(s)
	t.slotPods(s, 1)
}

// removeSlot takes slot s and its pods out of the counts.
func (t *topo) removeSlot(s int32) {
	t.slotPods(s, -1)
	for k := range t.spread {
		st := &t.spread[k]
		if int(s) >= len(st.elig) || !st.elig[s] {
			continue
		}
		v := t.m.slotLabels(s)[st.t.key]
		st.nodes[v]--
		if st.nodes[v] > 0 {
			continue
		}
		delete(st.nodes, v)
		if !st.dirty && st.counts[v] == st.min {
			st.atMin--
			if st.atMin == 0 {
				st.dirty = true
			}
		}
	}
	if int(s) >= len(t.m.nodes) {
		for k := range t.spread {
			if st := &t.spread[k]; int(s) < len(st.elig) {
				st.elig = st.elig[:s]
			}
		}
	}
}

// slotPods counts the pods on slot s sign times.
func (t *topo) slotPods(s int32, sign int64) {
	m := t.m
	if int(s) < len(m.nodes) {
		for _, pi := range m.podsOf(s) {
			if set := m.pods[pi].set; set >= 0 {
				ps := &m.sets[set]
				t.apply(s, t.matchOf(ps.rep, ps.feat), sign)
			}
		}
	}
	for _, cc := range *m.slotPlaced(s) {
		if cc.n != 0 {
			cl := &m.classes[cc.class]
			t.apply(s, t.matchOf(cl.rep, cl.feat), sign*cc.n)
		}
	}
}

func (st *spreadState) add(v string, n int64) {
	old := st.counts[v]
	now := old + n
	st.counts[v] = now
	if st.dirty || st.nodes[v] == 0 {
		return
	}
	switch {
	case n > 0 && old == st.min:
		st.atMin--
		if st.atMin == 0 {
			st.dirty = true
		}
	case n < 0 && now < st.min:
		st.min, st.atMin = now, 1
	case n < 0 && now == st.min:
		st.atMin++
	}
}

// minMatch is the scheduler's global minimum: the smallest count over the
// eligible domains, or 0 while there are fewer domains than minDomains.
func (st *spreadState) minMatch() int64 {
	if len(st.nodes) < st.t.minDomains {
		return 0
	}
	if st.dirty {
		first := true
		for v := range st.nodes {
			c := st.counts[v]
			switch {
			case first || c < st.min:
				st.min, st.atMin, first = c, 1, false
			case c == st.min:
				st.atMin++
			}
		}
		st.dirty = false
	}
	return st.min
}

// fits says why one more pod of the class may not go to slot s ("" when it
// may); lasting when placing more pods of the class cannot change that.
func (t *topo) fits(s int32) (why string, lasting bool) {
	m := t.m
	l := m.slotLabels(s)
	if len(t.f.ports) > 0 {
		if h, bad := t.portsTaken(s); bad {
			return "host port " + h.String() + " already in use", true
		}
	}
	if len(t.f.aff) > 0 {
		exist := true
		for k := range t.f.aff {
			v, ok := l[t.f.aff[k].key]
			if !ok {
				return "pod affinity on " + t.f.aff[k].key + ": node has no such label", true
			}
			if t.affCounts[k][v] <= 0 {
				exist = false
			}
		}
		if !exist && (t.affTotal > 0 || !t.f.affSelf) {
			return "pod affinity on " + t.f.aff[0].key + " not satisfied", false
		}
	}
	for k := range t.f.anti {
		if v, ok := l[t.f.anti[k].key]; ok && t.antiCounts[k][v] > 0 {
			return "pod anti-affinity on " + t.f.anti[k].key, true
		}
	}
	for key, d := range t.exAnti {
		if v, ok := l[key]; ok && d[v] > 0 {
			return "anti-affinity of pods already placed (on " + key + ")", true
		}
	}
	for k := range t.spread {
		st := &t.spread[k]
		v, ok := l[st.t.key]
		if !ok {
			return "topology spread on " + st.t.key + ": node has no such label", true
		}
		if st.counts[v]+st.t.self-st.minMatch() > st.t.maxSkew {
			return "topology spread on " + st.t.key + " (maxSkew " + strconv.FormatInt(st.t.maxSkew, 10) + ")", false
		}
	}
	return "", false
}

func (t *topo) portsTaken(s int32) (hostPort, bool) {
	m := t.m
	if int(s) < len(m.nodes) {
		for _, pi := range m.podsOf(s) {
			if h, bad := portConflict(t.f.ports, podHostPorts(&m.snap.Pods[pi])); bad {
				return h, true
			}
		}
	}
	for _, cc := range *m.slotPlaced(s) {
		if f := m.classes[cc.class].feat; cc.n > 0 && f != nil {
			if h, bad := portConflict(t.f.ports, f.ports); bad {
				return h, true
			}
		}
	}
	return hostPort{}, false
}
