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

// initTopology builds the pod sets when some pod has pod-dependent rules
// (newModel set topoOn).
func (m *model) initTopology() {
	if !m.topoOn {
		return
	}
	// Pods of one controller nearly always share their rules: its UID is a
	// far cheaper bucket than hashing labels and terms.
	byHash := map[uint64][]int32{}
	byOwner := map[string][]int32{}
	for i := range m.pods {
		pi := &m.pods[i]
		if pi.node < 0 && !pi.unsched {
			continue
		}
		p := &m.snap.Pods[i]
		_, uid, owned := controllerOf(p)
		var bucket []int32
		var h uint64
		if owned {
			bucket = byOwner[uid]
		} else {
			h = podRulesHash(p)
			bucket = byHash[h]
		}
		set := int32(-1)
		for _, s := range bucket {
			if samePodRules(m.sets[s].rep, p) {
				set = s
				break
			}
		}
		if set < 0 {
			set = int32(len(m.sets))
			m.sets = append(m.sets, podSet{rep: p, feat: newFeatures(p)})
			if owned {
				byOwner[uid] = append(byOwner[uid], set)
			} else {
				byHash[h] = append(byHash[h], set)
			}
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
	l := make(map[string]string, len(gr.labels)+1)
	for k, v := range gr.labels {
		l[k] = v
	}
	// Each node is its own hostname domain.
	l[labelHostname] = gr.ng.Name + "-" + kind + "-" + strconv.Itoa(len(m.sims))
	m.sims = append(m.sims, simNode{group: g, labels: l, free: gr.cap})
	s := m.slotCount() - 1
	for _, d := range m.domains {
		d.add(l)
	}
	for _, t := range m.active {
		t.addSlot(s)
	}
	return s
}

// addProbe opens a node of group g that takes no pod and has no hostname:
// only its zone counts, as the spread domain the group's first new node
// will make it (see probeZones).
func (m *model) addProbe(g int) {
	gr := &m.groups[g]
	l := make(map[string]string, len(gr.labels))
	for k, v := range gr.labels {
		if k != labelHostname {
			l[k] = v
		}
	}
	m.sims = append(m.sims, simNode{group: g, labels: l})
	s := m.slotCount() - 1
	for _, d := range m.domains {
		d.add(l)
	}
	for _, t := range m.active {
		t.addSlot(s)
	}
}

// dropSims removes the simulated nodes from slot `from` on, with what was
// placed on them.
func (m *model) dropSims(from int32) {
	for s := m.slotCount() - 1; s >= from; s-- {
		for _, t := range m.active {
			t.removeSlot(s)
		}
		m.sims = m.sims[:len(m.sims)-1]
		for _, d := range m.domains {
			d.of = d.of[:s]
		}
	}
}

// place records n pods of class c on slot s (free capacity is the caller's).
func (m *model) place(s, c int32, n int64) {
	if !m.topoOn || n == 0 {
		return
	}
	pl := m.slotPlaced(s)
	*pl = addClassCount(*pl, c, n)
	for _, t := range m.active {
		t.apply(s, t.matchOfClass(c), n)
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
	for _, t := range m.active {
		t.apply(s, t.matchOfClass(c), -n)
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

// domains numbers the values of one topology key: of[slot] is the
// slot's domain, -1 when it lacks the key. Counting by number keeps the
// per-node checks free of map lookups.
type domains struct {
	key string
	of  []int32
	ids map[string]int32
	n   int32
}

func (d *domains) add(l map[string]string) {
	v, ok := l[d.key]
	if !ok {
		d.of = append(d.of, -1)
		return
	}
	id, seen := d.ids[v]
	if !seen {
		id = d.n
		d.ids[v] = id
		d.n++
	}
	d.of = append(d.of, id)
}

// domainsOf returns the numbering of key over all slots, built on first use.
func (m *model) domainsOf(key string) *domains {
	if d, ok := m.domains[key]; ok {
		return d
	}
	d := &domains{key: key, of: make([]int32, 0, m.slotCount()), ids: map[string]int32{}}
	for s := int32(0); s < m.slotCount(); s++ {
		d.add(m.slotLabels(s))
	}
	if m.domains == nil {
		m.domains = map[string]*domains{}
	}
	m.domains[key] = d
	return d
}

// counter counts pods by domain.
type counter struct {
	d *domains
	c []int64
}

func (c *counter) at(s int32) (int64, bool) {
	id := c.d.of[s]
	if id < 0 {
		return 0, false
	}
	if int(id) >= len(c.c) {
		return 0, true
	}
	return c.c[id], true
}

func (c *counter) add(s int32, n int64) {
	id := c.d.of[s]
	if id < 0 {
		return
	}
	for int(id) >= len(c.c) {
		c.c = append(c.c, 0)
	}
	c.c[id] += n
}

// matchInfo is how pods like one representative count for a topo.
type matchInfo struct {
	affAll bool  // matches all of the pod's affinity terms
	anti   []int // the pod's anti-affinity terms it matches
	exAnti []int // t.ex entries: its own anti-affinity terms that match the pod
	spread []int // spread constraints whose selector it matches
	any    bool
}

type spreadState struct {
	t      *spreadTerm
	d      *domains
	elig   []bool // by slot: counted for this constraint
	nodes  []int  // by domain: eligible slots
	ndom   int    // domains with eligible slots
	counts []int64
	min    int64
	atMin  int
	dirty  bool
}

func (st *spreadState) grow(id int32) {
	for int(id) >= len(st.nodes) {
		st.nodes = append(st.nodes, 0)
		st.counts = append(st.counts, 0)
	}
}

// topo is what the scheduler's PodTopologySpread, InterPodAffinity and
// NodePorts plugins would compute for one class, kept up to date.
type topo struct {
	m         *model
	rep       *corev1.Pod
	f         *features
	aff       []counter
	affTotal  int64
	anti      []counter
	ex        []counter // existing pods' anti-affinity against the class, by key
	spread    []spreadState
	spreadKey []*domains // every constraint's key: a counted node has them all
	match     map[*corev1.Pod]*matchInfo
	bySet     []*matchInfo // match of each podSet, filled on use
	byClass   []*matchInfo // match of each class, filled on use
}

func newTopo(m *model, c int32) *topo {
	cl := &m.classes[c]
	f := cl.feat
	if f == nil {
		f = &features{}
	}
	t := &topo{m: m, rep: cl.rep, f: f, match: map[*corev1.Pod]*matchInfo{}}
	for k := range f.aff {
		t.aff = append(t.aff, counter{d: m.domainsOf(f.aff[k].key)})
	}
	for k := range f.anti {
		t.anti = append(t.anti, counter{d: m.domainsOf(f.anti[k].key)})
	}
	for k := range f.spread {
		d := m.domainsOf(f.spread[k].key)
		t.spreadKey = append(t.spreadKey, d)
		t.spread = append(t.spread, spreadState{t: &f.spread[k], d: d, dirty: true})
	}
	for s := int32(0); s < m.slotCount(); s++ {
		t.addDomain(s)
	}
	for si := range m.sets {
		set := &m.sets[si]
		mi := t.matchOfSet(int32(si))
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
				t.apply(s, t.matchOfClass(cc.class), cc.n)
			}
		}
	}
	return t
}

func (t *topo) exIndex(key string) int {
	for i := range t.ex {
		if t.ex[i].d.key == key {
			return i
		}
	}
	t.ex = append(t.ex, counter{d: t.m.domainsOf(key)})
	return len(t.ex) - 1
}

// matchOfClass is matchOf for the pods of class c.
func (t *topo) matchOfClass(c int32) *matchInfo {
	for int(c) >= len(t.byClass) {
		t.byClass = append(t.byClass, nil)
	}
	if mi := t.byClass[c]; mi != nil {
		return mi
	}
	cl := &t.m.classes[c]
	mi := t.matchOf(cl.rep, cl.feat)
	t.byClass[c] = mi
	return mi
}

// matchOfSet is matchOf for the pods of podSet si.
func (t *topo) matchOfSet(si int32) *matchInfo {
	if t.bySet == nil {
		t.bySet = make([]*matchInfo, len(t.m.sets))
	}
	if mi := t.bySet[si]; mi != nil {
		return mi
	}
	set := &t.m.sets[si]
	mi := t.matchOf(set.rep, set.feat)
	t.bySet[si] = mi
	return mi
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
				mi.exAnti = append(mi.exAnti, t.exIndex(pf.anti[k].key))
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
	if mi.affAll {
		t.affTotal += n
		for k := range t.aff {
			t.aff[k].add(s, n)
		}
	}
	for _, k := range mi.anti {
		t.anti[k].add(s, n)
	}
	for _, k := range mi.exAnti {
		t.ex[k].add(s, n)
	}
	for _, k := range mi.spread {
		st := &t.spread[k]
		if int(s) < len(st.elig) && st.elig[s] {
			st.add(st.d.of[s], n)
		}
	}
}

// eligible: the scheduler counts a node for a spread constraint when it has
// every constraint's key and passes the inclusion policies.
func (t *topo) eligible(s int32, st *spreadTerm) bool {
	for _, d := range t.spreadKey {
		if d.of[s] < 0 {
			return false
		}
	}
	if st.honorAffinity && (len(t.rep.Spec.NodeSelector) > 0 || requiredAffinity(t.rep) != nil) && !t.m.slotFitsStatic(t.rep, s, false) {
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

// addDomain notes slot s (new, or back) as a node of its domains.
func (t *topo) addDomain(s int32) {
	for k := range t.spread {
		st := &t.spread[k]
		for int(s) >= len(st.elig) {
			st.elig = append(st.elig, false)
		}
		st.elig[s] = t.eligible(s, st.t)
		if !st.elig[s] || t.m.slotGone(s) {
			continue
		}
		id := st.d.of[s]
		st.grow(id)
		st.nodes[id]++
		if st.nodes[id] > 1 {
			continue
		}
		st.ndom++
		if !st.dirty {
			if c := st.counts[id]; c < st.min {
				st.min, st.atMin = c, 1
			} else if c == st.min {
				st.atMin++
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
		id := st.d.of[s]
		st.nodes[id]--
		if st.nodes[id] > 0 {
			continue
		}
		st.ndom--
		if !st.dirty && st.counts[id] == st.min {
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
				t.apply(s, t.matchOfSet(set), sign)
			}
		}
	}
	for _, cc := range *m.slotPlaced(s) {
		if cc.n != 0 {
			t.apply(s, t.matchOfClass(cc.class), sign*cc.n)
		}
	}
}

func (st *spreadState) add(id int32, n int64) {
	st.grow(id)
	old := st.counts[id]
	now := old + n
	st.counts[id] = now
	if st.dirty || st.nodes[id] == 0 {
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
	if st.ndom < st.t.minDomains {
		return 0
	}
	if st.dirty {
		first := true
		for id, nodes := range st.nodes {
			if nodes == 0 {
				continue
			}
			c := st.counts[id]
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

// refusal is why a topo keeps a pod off a slot; the zero value admits it.
// Reasons are only spelled out (explain) when a plan reports them.
type refusal struct {
	kind refusalKind
	term int
	port hostPort
}

type refusalKind uint8

const (
	admitted refusalKind = iota
	refusedPort
	refusedAffinityLabel
	refusedAffinity
	refusedAnti
	refusedExAnti
	refusedSpreadLabel
	refusedSpread
)

func (r refusal) ok() bool { return r.kind == admitted }

// code is the GroupReason code of a refusal.
func (r refusal) code() string {
	switch r.kind {
	case refusedPort:
		return ReasonHostPort
	case refusedAffinityLabel, refusedAffinity, refusedAnti, refusedExAnti:
		return ReasonPodAffinity
	case refusedSpreadLabel, refusedSpread:
		return ReasonTopologySpread
	}
	return ReasonOther
}

// explain spells out a refusal.
func (t *topo) explain(r refusal) string {
	switch r.kind {
	case refusedPort:
		return "host port " + r.port.String() + " already in use"
	case refusedAffinityLabel:
		return "pod affinity on " + t.f.aff[r.term].key + ": node has no such label"
	case refusedAffinity:
		return "pod affinity on " + t.f.aff[r.term].key + " not satisfied"
	case refusedAnti:
		return "pod anti-affinity on " + t.f.anti[r.term].key
	case refusedExAnti:
		return "anti-affinity of pods already placed (on " + t.ex[r.term].d.key + ")"
	case refusedSpreadLabel:
		return "topology spread on " + t.f.spread[r.term].key + ": node has no such label"
	case refusedSpread:
		return "topology spread on " + t.f.spread[r.term].key + " (maxSkew " + strconv.FormatInt(t.f.spread[r.term].maxSkew, 10) + ")"
	}
	return ""
}

// fits says why one more pod of the class may not go to slot s (ok when it
// may); lasting when the reason lies in the slot's labels or in the pods
// on the slot itself (host ports, per-hostname anti-affinity), which only
// placing pods there or removing the slot changes.
func (t *topo) fits(s int32) (r refusal, lasting bool) {
	if len(t.f.ports) > 0 {
		if h, bad := t.portsTaken(s); bad {
			return refusal{kind: refusedPort, port: h}, true
		}
	}
	if len(t.aff) > 0 {
		exist := true
		for k := range t.aff {
			c, ok := t.aff[k].at(s)
			if !ok {
				return refusal{kind: refusedAffinityLabel, term: k}, true
			}
			if c <= 0 {
				exist = false
			}
		}
		if !exist && (t.affTotal > 0 || !t.f.affSelf) {
			return refusal{kind: refusedAffinity}, false
		}
	}
	for k := range t.anti {
		if c, _ := t.anti[k].at(s); c > 0 {
			return refusal{kind: refusedAnti, term: k}, t.f.anti[k].key == labelHostname
		}
	}
	for k := range t.ex {
		if c, _ := t.ex[k].at(s); c > 0 {
			return refusal{kind: refusedExAnti, term: k}, t.ex[k].d.key == labelHostname
		}
	}
	for k := range t.spread {
		st := &t.spread[k]
		id := st.d.of[s]
		if id < 0 {
			return refusal{kind: refusedSpreadLabel, term: k}, true
		}
		var c int64
		if int(id) < len(st.counts) {
			c = st.counts[id]
		}
		if c+st.t.self-st.minMatch() > st.t.maxSkew {
			return refusal{kind: refusedSpread, term: k}, false
		}
	}
	return refusal{}, false
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
