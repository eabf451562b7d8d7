package planner

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Names the planner reads from objects.
const (
	// TaintDraining marks a node nodetide is draining.
	TaintDraining = podfacts.TaintDraining

	annotationScaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	annotationSafeToEvict       = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	annotationSafeLocalVolumes  = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
	annotationDoNotDisrupt      = "karpenter.sh/do-not-disrupt"
	annotationMirror            = corev1.MirrorPodAnnotationKey
)

// nodeInfo is a registered node as the simulation sees it.
type nodeInfo struct {
	node  *corev1.Node
	group int // index into model.groups, -1 for nodes of no group
	alloc res
	used  res // requests of the non-terminal pods bound to it
	free  res // alloc - used, consumed by simulated placements
	// taints are the hard taints; a booting node's start-up taints are left out.
	taints []corev1.Taint

	ready       bool
	booting     bool // not Ready, but created within the provision time
	schedulable bool // not cordoned, not draining, not being deleted
	draining    bool
	// gotPending: stage (a) placed a pending pod here; it is about to get work.
	gotPending bool
	// receiving: the pods of nodes a replacement drains move here in this
	// plan; it is not removed with them.
	receiving bool
	// received: a replacement drained earlier moved its old nodes' pods
	// here (or it is one of the replacement's new nodes), and holds it for
	// a while (model.heldBy says which and until when).
	received bool
	// placed are the simulated placements (only kept when model.topoOn).
	placed []classCount
	gone   bool // removed by the scale-down simulation
	// replacing: a consolidation replacement under way holds it until its
	// new nodes are Ready; leaving: this plan removes it for one.
	replacing, leaving bool
}

// podInfo is what the planner derives from one pod of the snapshot.
type podInfo struct {
	req  res
	node int32 // bound node, -1 when unbound or bound to an unknown node
	// class is the equivalence class, -1 until the pod needs one.
	class    int32
	set      int32 // podSet, -1 when model.topoOn is off or the pod counts nowhere
	terminal bool
	unsched  bool // nodeName empty, not terminal, not deleted, PodScheduled=False/Unschedulable
	pending  bool // unsched and old enough
	// Once noted (model.noteDrains) for a bound pod: stays when it goes
	// with its node, blocks when it keeps the node, else covers is the
	// budgets covering it, in model.covers.
	noted, stays, blocks bool
	covers               span

	// expendable: below the priority cutoff, left out of the simulation
	// (neither bound nor unsched).
	expendable bool
}

// span is covers[from:to] of a slice.
type span struct{ from, to int32 }

// groupInfo is a node group with what the decision derives from it.
type groupInfo struct {
	ng *snapshot.NodeGroup
	// labels are a new node's labels; variants, for a group over several
	// zones, the same once per zone (zones.go).
	labels   map[string]string
	variants []map[string]string
	alloc    res // template allocatable
	overhead res // DaemonSet pods a new node would run
	cap      res // alloc - overhead: room for pending pods on a new node
	taints   []corev1.Taint
	nodes    []int32 // registered nodes

	// target is the size the plan works from: TargetSize, minus what a
	// DecreaseTarget gives back.
	target   int
	upcoming int // target - registered nodes, when still counted
	backoff  time.Time
	draining int // registered nodes carrying the draining taint
	// shrinking: above a schedule's max; overMax removes the surplus and
	// the utilisation-based scale-down leaves the group alone.
	shrinking bool

	// What the pending pods left of the capacity on the way, for headroom:
	// free room and untouched nodes among the upcoming ones, and the new
	// nodes this plan adds with the requests placed on them.
	upFree   res
	upEmpty  int64
	newNodes int64
	newUsed  res

	// With pod-dependent rules, a group may grow in several rounds of one
	// plan (scaleup.go): its new nodes so far, the pods placed on them by
	// class, the rounds and what balancing added to the reason.
	planned []int32
	placed  []classCount
	rounds  int
	extra   []string
	// note is what the expanders passed over when the group was first
	// chosen, for its reason.
	note string
}

// podClass is a set of pending pods that are interchangeable for packing:
// same requests, node selector, required affinity and tolerations.
type podClass struct {
	rep     *corev1.Pod
	req     res
	pods    []int32 // pending pods, by "ns/name"
	pending int     // len(pods) once pendingClasses has filled them
	next    int     // pods[:next] are placed
	// feat are the rep's pod-dependent rules; set its podSet. A class with
	// either (set >= 0) is placed pod by pod against its topo.
	feat *features
	set  int32
	// why is, by group, the last pod-dependent rule that kept a pod of the
	// class off a planned node.
	why map[int]refused
	// zoneRule is the class's first pod-dependent rule keyed on the zone,
	// once zoneDone (zones.go).
	zoneRule string
	zoneDone bool
	// vol is what the rep's claims require of a node; nil for none.
	vol *volumeRule
}

type model struct {
	snap *snapshot.Snapshot
	set  Settings
	now  time.Time

	groups     []groupInfo
	byName     []int // group indices by name, so choices among groups are stable
	nodes      []nodeInfo
	nodeByName map[string]int32
	pods       []podInfo
	// podsOn[nodeStart[i]:nodeStart[i+1]] are the pods bound to node i.
	podsOn    []int32
	nodeStart []int32

	classes   []podClass
	classByID map[uint64][]int32

	// Pod-dependent placement (topology.go).
	topoOn  bool
	sets    []podSet
	sims    []simNode
	topos   []*topo
	active  []*topo
	domains map[string]*domains
	log     *[]placement

	budgets *pdbSet // built by budgetIndex
	// spent is what this plan's replacements take of the budgets.
	spent  map[int32]int32
	covers []int32
	kept   []keptRec // nodes scale-down keeps, and why (kept.go)
	// heldBy is the drained replacement that holds each received node.
	heldBy map[int32]drainedHold

	vols *volumeIndex // nil when the snapshot has no volume objects
}

func podKey(p *corev1.Pod) string {
	return p.Namespace + "/" + p.Name
}

func comparePods(a, b *corev1.Pod) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// The pod predicates are facts' (one answer for the planner, the drain and
// the evaluate cycle); these names keep the planner's code short.
func isTerminal(p *corev1.Pod) bool      { return podfacts.IsTerminal(p) }
func isUnschedulable(p *corev1.Pod) bool { return podfacts.IsUnschedulable(p) }
func isDaemonSetPod(p *corev1.Pod) bool  { return podfacts.IsDaemonSetPod(p) }
func isMirrorPod(p *corev1.Pod) bool     { return podfacts.IsMirrorPod(p) }
func controllerOf(p *corev1.Pod) (kind, uid string, ok bool) {
	return podfacts.ControllerOf(p)
}

func nodeReady(n *corev1.Node) bool {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return n.Status.Conditions[i].Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == key {
			return true
		}
	}
	return false
}

func newModel(s *snapshot.Snapshot, set Settings, now time.Time) *model {
	m := &model{snap: s, set: set, now: now, classByID: map[uint64][]int32{}, vols: newVolumeIndex(s), spent: map[int32]int32{}}
	instanceGroup := m.indexGroups()
	m.indexNodes(instanceGroup)
	counts := m.indexPods()
	m.layOutPods(counts)
	m.daemonSetOverhead()
	m.initTopology()
	m.markReplacing()
	return m
}

// indexGroups fills m.groups and m.byName, and returns the group index of
// each instance ID (the first group that lists it).
func (m *model) indexGroups() map[string]int {
	s := m.snap
	instanceGroup := map[string]int{}
	m.groups = make([]groupInfo, len(s.NodeGroups))
	for gi := range s.NodeGroups {
		ng := &s.NodeGroups[gi]
		alloc := templateAllocatable(ng.Template.Allocatable)
		taints := m.set.ScaleUp.IgnoredTaints.Without(ng.Template.Taints)
		m.groups[gi] = groupInfo{ng: ng, alloc: alloc, taints: hardTaints(taints, false), target: ng.TargetSize}
		m.groups[gi].labels, m.groups[gi].variants = groupLabels(ng)
		for _, id := range ng.Instances {
			if _, dup := instanceGroup[id]; !dup {
				instanceGroup[id] = gi
			}
		}
	}

	m.byName = make([]int, len(m.groups))
	for i := range m.byName {
		m.byName[i] = i
	}
	slices.SortStableFunc(m.byName, func(a, b int) int {
		return strings.Compare(m.groups[a].ng.Name, m.groups[b].ng.Name)
	})
	return instanceGroup
}

// indexNodes fills m.nodes and m.nodeByName, placing each node in the group
// that lists its provider ID.
func (m *model) indexNodes(instanceGroup map[string]int) {
	s := m.snap
	m.nodes = make([]nodeInfo, len(s.Nodes))
	m.nodeByName = make(map[string]int32, len(s.Nodes))
	for i := range s.Nodes {
		n := &s.Nodes[i]
		ni := &m.nodes[i]
		ni.node = n
		ni.group = -1
		if gi, ok := instanceGroup[n.Spec.ProviderID]; ok && n.Spec.ProviderID != "" {
			ni.group = gi
			m.groups[gi].nodes = append(m.groups[gi].nodes, int32(i))
		}
		ni.alloc = resourceList(n.Status.Allocatable)
		// A node with a startup taint is not ready yet, whatever its
		// condition says: it boots, as cluster-autoscaler counts it.
		_, starting := m.set.ScaleUp.IgnoredTaints.Starting(n)
		ni.ready = nodeReady(n) && !starting
		ni.booting = !ni.ready && m.now.Sub(n.CreationTimestamp.Time) <= m.set.ScaleUp.MaxNodeProvisionTime
		ni.draining = hasTaint(n, TaintDraining)
		ni.schedulable = !n.Spec.Unschedulable && !ni.draining && n.DeletionTimestamp == nil
		// A Ready node's start-up taints are about to be cleared by the node
		// lifecycle controller; a booting node's will be once it is Ready.
		// So are the startup taints of a starting one (never Ready here).
		ni.taints = hardTaints(m.set.ScaleUp.IgnoredTaints.WithoutStartup(n.Spec.Taints), ni.booting || ni.ready)
		if ni.group >= 0 && ni.draining {
			m.groups[ni.group].draining++
		}
		if _, dup := m.nodeByName[n.Name]; !dup {
			m.nodeByName[n.Name] = int32(i)
		}
	}
}

// indexPods fills m.pods: requests of bound pods, added to their node's use,
// and which pending pods are unschedulable. It returns, at index i+1, how
// many live pods node i holds.
func (m *model) indexPods() []int32 {
	s := m.snap
	m.pods = make([]podInfo, len(s.Pods))
	counts := make([]int32, len(m.nodes)+1)
	for i := range s.Pods {
		p := &s.Pods[i]
		pi := &m.pods[i]
		pi.node, pi.class, pi.set = -1, -1, -1
		pi.terminal = isTerminal(p)
		if !pi.terminal && m.expendable(p) {
			// The scheduler would preempt it for any pod that needs its
			// room, and it may go with its node: it counts nowhere.
			pi.expendable = true
			continue
		}
		if p.Spec.NodeName != "" {
			if ni, ok := m.nodeByName[p.Spec.NodeName]; ok && !pi.terminal {
				pi.node = ni
				pi.req = podRequests(p)
				m.nodes[ni].used = m.nodes[ni].used.add(pi.req)
				counts[ni+1]++
				// Checked here, while the pod is in cache: it decides
				// whether the topology bookkeeping runs at all.
				m.topoOn = m.topoOn || hasFeatures(p)
			}
			continue
		}
		if isUnschedulable(p) {
			m.topoOn = m.topoOn || hasFeatures(p)
			pi.unsched = true
			pi.req = podRequests(p)
			pi.pending = m.now.Sub(p.CreationTimestamp.Time) >= m.set.ScaleUp.PendingPodMinAge
		}
	}
	return counts
}

// layOutPods lays the pods of each node out in one slice (a counting sort
// over counts from indexPods), which is far cheaper than a slice per node,
// and sets each node's free resources.
func (m *model) layOutPods(counts []int32) {
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	m.nodeStart = counts
	m.podsOn = make([]int32, counts[len(counts)-1])
	fill := make([]int32, len(m.nodes))
	for i := range m.pods {
		if ni := m.pods[i].node; ni >= 0 {
			m.podsOn[counts[ni]+fill[ni]] = int32(i)
			fill[ni]++
		}
	}
	for i := range m.nodes {
		m.nodes[i].free = m.nodes[i].alloc.sub(m.nodes[i].used)
	}
}

// podsOf returns the pods bound to node i.
func (m *model) podsOf(i int32) []int32 {
	return m.podsOn[m.nodeStart[i]:m.nodeStart[i+1]]
}

// daemonSetOverhead charges every template with the DaemonSets that would
// run on a new node of it: one pod per DaemonSet (the first by name), if its
// own selector, affinity (minus the pin to its current node) and
// tolerations admit the template.
func (m *model) daemonSetOverhead() {
	first := map[string]int{}
	var order []string
	for i := range m.snap.Pods {
		p := &m.snap.Pods[i]
		// A pod bound to a node the snapshot lacks (a deleted Node's, not
		// yet collected) is planned as if it were not there (UnplacedPods).
		if m.pods[i].terminal || (p.Spec.NodeName != "" && m.pods[i].node < 0) {
			continue
		}
		kind, uid, ok := controllerOf(p)
		if !ok || kind != "DaemonSet" {
			continue
		}
		j, seen := first[uid]
		if !seen {
			order = append(order, uid)
			first[uid] = i
		} else if comparePods(p, &m.snap.Pods[j]) < 0 {
			first[uid] = i
		}
	}
	for gi := range m.groups {
		g := &m.groups[gi]
		for _, uid := range order {
			p := &m.snap.Pods[first[uid]]
			if m.daemonSetRuns(p, gi) {
				g.overhead = g.overhead.add(podRequests(p))
			}
		}
		g.cap = g.alloc.sub(g.overhead)
	}
}

// daemonSetRuns: DaemonSet pod p would run on a new node of group g (in
// some zone of it: counting its requests where it may not run only errs
// towards more nodes).
func (m *model) daemonSetRuns(p *corev1.Pod, g int) bool {
	gr := &m.groups[g]
	if len(gr.variants) == 0 {
		return placementFits(p, gr.labels, gr.taints, "", fieldsIgnored)
	}
	for _, v := range gr.variants {
		if placementFits(p, v, gr.taints, "", fieldsIgnored) {
			return true
		}
	}
	return false
}

// classOf interns pod i into an equivalence class.
func (m *model) classOf(i int32) int32 {
	pi := &m.pods[i]
	if pi.class >= 0 {
		return pi.class
	}
	h, set, vol := m.classIdentity(i)
	for _, c := range m.classByID[h] {
		if m.inClass(c, i, set, vol) {
			pi.class = c
			return c
		}
	}
	c := int32(len(m.classes))
	cl := podClass{rep: &m.snap.Pods[i], req: pi.req, set: set, vol: vol}
	if set >= 0 {
		cl.feat = m.sets[set].feat
	}
	m.classes = append(m.classes, cl)
	m.classByID[h] = append(m.classByID[h], c)
	pi.class = c
	return c
}

// classIdentity is what puts pod i in a class besides its constraints: its
// bucket (classHash, with the podSet and claims mixed in), its podSet when
// pod-dependent rules make it interchangeable only within it (-1 for none),
// and its claims' rule.
func (m *model) classIdentity(i int32) (h uint64, set int32, vol *volumeRule) {
	pi := &m.pods[i]
	p := &m.snap.Pods[i]
	// A pod with pod-dependent rules, or one such rules target, is
	// interchangeable only with pods of its own podSet.
	set = -1
	if pi.set >= 0 && (m.sets[pi.set].feat != nil || m.sets[pi.set].targeted) {
		set = pi.set
	}
	h = classHash(pi.req, p)
	if set >= 0 {
		h = uint64(hasher(h).int(int64(set)))
	}
	if m.vols != nil {
		// Pods with the same claims share one rule: a StatefulSet's pods
		// each have their own, pods sharing a claim do not.
		if vol = m.vols.rule(p); vol != nil {
			h = uint64(hasher(h).str(vol.key))
		}
	}
	return h, set, vol
}

// inClass reports whether pod i, of the given podSet and claims' rule,
// belongs to class c.
func (m *model) inClass(c, i int32, set int32, vol *volumeRule) bool {
	cl := &m.classes[c]
	return cl.req == m.pods[i].req && cl.set == set && sameVolumes(cl.vol, vol) && sameConstraints(cl.rep, &m.snap.Pods[i])
}

func sameVolumes(a, b *volumeRule) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.key == b.key
}
