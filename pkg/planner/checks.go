package planner

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/podfacts"
)

// Placement checks. Every rule of a pod's own spec that decides which node
// may take it is one entry of placementChecks, in the order a plan names the
// first one that fails. The yes/no (fitsNode, fitsTemplate, placementFits)
// and the explanation (templateMisfit) both run this one list: a check
// returns a small reason code, and the text is written from the code only
// when a plan reports it.
//
// A check names the pod fields it reads. Each must survive the snapshot's
// Trimmer and the compact form, and be part of a pod class's identity
// (classHash and sameConstraints, the class's volume rule or its podSet):
// TestCheckFieldsKeptAndClassed proves both for every field listed here.

// podField is a part of a pod a check reads.
type podField uint8

const (
	fieldNodeSelector      podField = iota + 1 // spec.nodeSelector
	fieldNodeAffinity                          // spec.affinity.nodeAffinity, required
	fieldTolerations                           // spec.tolerations
	fieldVolumes                               // spec.volumes: claims and ephemeral volumes
	fieldPodAffinity                           // spec.affinity.podAffinity and podAntiAffinity, required
	fieldTopologySpread                        // spec.topologySpreadConstraints
	fieldLabels                                // metadata.labels: other pods' anti-affinity selects them
	fieldContainerRequests                     // spec.containers[].resources.requests
	fieldInitContainers                        // spec.initContainers[]: requests and restartPolicy
	fieldOverhead                              // spec.overhead
	fieldPodResources                          // spec.resources.requests
)

var podFieldNames = [...]string{
	fieldNodeSelector:      "spec.nodeSelector",
	fieldNodeAffinity:      "spec.affinity.nodeAffinity",
	fieldTolerations:       "spec.tolerations",
	fieldVolumes:           "spec.volumes",
	fieldPodAffinity:       "spec.affinity.podAffinity/podAntiAffinity",
	fieldTopologySpread:    "spec.topologySpreadConstraints",
	fieldLabels:            "metadata.labels",
	fieldContainerRequests: "spec.containers[].resources.requests",
	fieldInitContainers:    "spec.initContainers[]",
	fieldOverhead:          "spec.overhead",
	fieldPodResources:      "spec.resources",
}

func (f podField) String() string {
	if int(f) < len(podFieldNames) && podFieldNames[f] != "" {
		return podFieldNames[f]
	}
	return "podField(" + strconv.Itoa(int(f)) + ")"
}

// misfit is why a check refuses a node; misfitNone: it fits.
type misfit uint8

const (
	misfitNone misfit = iota
	misfitSelector
	misfitAffinity
	misfitPinned // required node affinity names an existing node
	misfitTaint
	misfitVolumeBlocked // no node takes the pod until a claim changes
	misfitVolumeAffinity
	misfitVolumeZone
	misfitVolumeTopology
	// misfitZoneSplit: the node checks pass in some of a group's zones only.
	misfitZoneSplit
	misfitZoneRule
	misfitRoom
)

// code is the GroupReason code of a reason.
func (r misfit) code() string {
	switch r {
	case misfitSelector, misfitAffinity, misfitPinned:
		return ReasonNodeSelector
	case misfitTaint:
		return ReasonTaint
	case misfitVolumeBlocked, misfitVolumeAffinity, misfitVolumeZone, misfitVolumeTopology:
		return ReasonVolume
	case misfitRoom:
		return ReasonInsufficient
	}
	return ReasonOther
}

// subject is what a check reads of the pod: the pod (a class's
// representative), its claims' rule, and its class (-1 for none).
type subject struct {
	pod   *corev1.Pod
	vol   *volumeRule
	class int32
}

// place is the node a node check looks at: a registered node, or a new
// node of a group in one of its zones.
type place struct {
	labels map[string]string
	taints []corev1.Taint // hard taints only
	name   string
	mode   fieldMode
}

// check is one entry of placementChecks. It has either node (it reads one
// node's labels and taints, so a new node of a group over several zones
// must pass it in each zone) or group (it reads a new node of a group as
// a whole, and runs once the node checks pass in every zone).
type check struct {
	name   string
	fields []podField
	node   func(s subject, at place) misfit
	group  func(m *model, s subject, g int) misfit
}

// placementChecks: the node checks first, then the group checks. Arguments
// go by value: a pointer through a func value would escape, and the fit
// path allocates nothing.
var placementChecks = [...]check{
	{name: "node selector", fields: []podField{fieldNodeSelector}, node: checkSelector},
	{name: "node affinity", fields: []podField{fieldNodeAffinity}, node: checkNodeAffinity},
	{name: "taints", fields: []podField{fieldTolerations}, node: checkTaints},
	{name: "volumes", fields: []podField{fieldVolumes}, node: checkVolumes},
	{name: "zone rules", fields: []podField{fieldPodAffinity, fieldTopologySpread, fieldLabels}, group: checkZoneRules},
	{name: "room", fields: []podField{fieldContainerRequests, fieldInitContainers, fieldOverhead, fieldPodResources}, group: checkRoom},
}

func checkSelector(s subject, at place) misfit {
	for k, v := range s.pod.Spec.NodeSelector {
		if lv, ok := at.labels[k]; !ok || lv != v {
			return misfitSelector
		}
	}
	return misfitNone
}

func checkNodeAffinity(s subject, at place) misfit {
	ns := requiredAffinity(s.pod)
	if affinityMatches(ns, at.labels, at.name, at.mode) {
		return misfitNone
	}
	for i := range ns.NodeSelectorTerms {
		if len(ns.NodeSelectorTerms[i].MatchFields) > 0 {
			return misfitPinned
		}
	}
	return misfitAffinity
}

func checkTaints(s subject, at place) misfit {
	if untolerated(s.pod.Spec.Tolerations, at.taints) != nil {
		return misfitTaint
	}
	return misfitNone
}

func checkVolumes(s subject, at place) misfit {
	r, _ := s.vol.misfitAt(at.labels)
	return r
}

// checkZoneRules: a group over several zones cannot promise a pod whose
// pod-dependent rules are keyed on the zone (zones.go).
func checkZoneRules(m *model, s subject, g int) misfit {
	if len(m.groups[g].variants) == 0 || s.class < 0 || m.zoneRule(s.class) == "" {
		return misfitNone
	}
	return misfitZoneRule
}

func checkRoom(m *model, s subject, g int) misfit {
	if s.class < 0 || fitCount(m.groups[g].cap, m.classes[s.class].req) > 0 {
		return misfitNone
	}
	return misfitRoom
}

// nodeMisfit runs the node checks against one node: the first failing
// one's reason, or misfitNone.
func nodeMisfit(s subject, at place) misfit {
	for i := range placementChecks {
		if run := placementChecks[i].node; run != nil {
			if r := run(s, at); r != misfitNone {
				return r
			}
		}
	}
	return misfitNone
}

// verdict is the first check a new node of a group fails.
type verdict struct {
	why misfit
	// For misfitZoneSplit: the first zone (index into the group's
	// variants) that fails, and the reason it fails.
	zone  int
	inner misfit
}

func (v verdict) code() string {
	if v.why == misfitZoneSplit {
		// Named by what splits the zones when that is a node-label rule.
		if c := v.inner.code(); c == ReasonNodeSelector {
			return c
		}
	}
	return v.why.code()
}

// zonal: the group would take the pod if it were in one zone.
func (v verdict) zonal() bool { return v.why == misfitZoneSplit || v.why == misfitZoneRule }

func (m *model) subjectOf(c int32) subject {
	cl := &m.classes[c]
	return subject{pod: cl.rep, vol: cl.vol, class: c}
}

// newNodeAt is a new node of group g with the given labels (the group's,
// or one zone's).
func (m *model) newNodeAt(g int, labels map[string]string) place {
	return place{labels: labels, taints: m.groups[g].taints, mode: fieldsNewNode}
}

// templateVerdict runs placementChecks for one pod of class c on a new node
// of group g: the node checks in every zone the group may start it in, then
// the group checks.
func (m *model) templateVerdict(c int32, g int) verdict {
	s := m.subjectOf(c)
	if v := m.zonesVerdict(s, g); v.why != misfitNone {
		return v
	}
	for i := range placementChecks {
		if run := placementChecks[i].group; run != nil {
			if r := run(m, s, g); r != misfitNone {
				return verdict{why: r}
			}
		}
	}
	return verdict{}
}

// zonesVerdict runs the node checks on a new node of group g in each of its
// zones: a split when some zones pass and others not, the first zone's
// reason when none does.
func (m *model) zonesVerdict(s subject, g int) verdict {
	gr := &m.groups[g]
	if len(gr.variants) == 0 {
		return verdict{why: nodeMisfit(s, m.newNodeAt(g, gr.labels))}
	}
	first := verdict{zone: -1}
	fit := 0
	for z, labels := range gr.variants {
		r := nodeMisfit(s, m.newNodeAt(g, labels))
		if r == misfitNone {
			fit++
		} else if first.zone < 0 {
			first = verdict{why: r, zone: z}
		}
	}
	switch fit {
	case len(gr.variants):
		return verdict{}
	case 0:
		return first
	}
	return verdict{why: misfitZoneSplit, zone: first.zone, inner: first.why}
}

// fitsNode reports whether class c's constraints admit node i (resources
// are checked by the caller).
func (m *model) fitsNode(c int32, i int32) bool {
	n := &m.nodes[i]
	return nodeMisfit(m.subjectOf(c), place{labels: n.node.Labels, taints: n.taints, name: n.node.Name, mode: fieldsOfNode}) == misfitNone
}

// fitsTemplate reports whether one pod of class c fits a new node of group g.
func (m *model) fitsTemplate(c int32, g int) bool {
	return m.templateVerdict(c, g).why == misfitNone
}

// placementFits reports whether a pod's node selector, node affinity and
// tolerations admit a node with these labels and hard taints (its claims
// and resources aside).
func placementFits(p *corev1.Pod, labels map[string]string, taints []corev1.Taint, nodeName string, mode fieldMode) bool {
	return nodeMisfit(subject{pod: p, class: -1}, place{labels: labels, taints: taints, name: nodeName, mode: mode}) == misfitNone
}

// The explanations: written from a verdict, only when a plan reports it.

// templateMisfit explains verdict v of class c on a new node of group g.
func (m *model) templateMisfit(c int32, g int, v verdict) string {
	gr := &m.groups[g]
	s := m.subjectOf(c)
	labels := gr.labels
	if len(gr.variants) > 0 {
		labels = gr.variants[0]
	}
	switch v.why {
	case misfitNone:
		return ""
	case misfitZoneSplit:
		return m.zoneSplitMisfit(s, g, v)
	case misfitZoneRule:
		return m.zoneRuleMisfit(c, g)
	case misfitRoom:
		return roomMisfit(gr, m.classes[c].req)
	}
	return nodeMisfitText(s, m.newNodeAt(g, labels), v.why, "group")
}

// nodeMisfitText explains node check reason r at a node; node names it in
// the explanation ("node", "group").
func nodeMisfitText(s subject, at place, r misfit, node string) string {
	switch r {
	case misfitSelector:
		k, _ := selectorMismatch(s.pod.Spec.NodeSelector, at.labels)
		return "node selector " + k + "=" + s.pod.Spec.NodeSelector[k] + " not matched"
	case misfitAffinity:
		return "required node affinity not matched"
	case misfitPinned:
		return "required node affinity pins the pod to an existing node"
	case misfitTaint:
		return "taint " + taintString(untolerated(s.pod.Spec.Tolerations, at.taints)) + " not tolerated"
	}
	return s.vol.misfitText(at.labels, node)
}

// zoneSplitMisfit names the zones of group g that would take the pod, and
// why the first other one does not.
func (m *model) zoneSplitMisfit(s subject, g int, v verdict) string {
	gr := &m.groups[g]
	var fit []string
	for z, labels := range gr.variants {
		if nodeMisfit(s, m.newNodeAt(g, labels)) == misfitNone {
			fit = append(fit, gr.ng.Zones[z])
		}
	}
	why := nodeMisfitText(s, m.newNodeAt(g, gr.variants[v.zone]), v.inner, "group")
	return m.spansZones(g) + "; pod needs zone " + strings.Join(fit, ", ") + " (" + strings.TrimSuffix(why, " not matched") + ")"
}

// zoneRuleMisfit: class c fits every zone of group g, but its zone-keyed
// pod rules depend on which one a new node lands in.
func (m *model) zoneRuleMisfit(c int32, g int) string {
	zones := m.groups[g].ng.Zones
	rule := m.zoneRule(c)
	need := m.zonesAdmitting(c, zones)
	switch {
	case len(need) == 0:
		return m.spansZones(g) + "; pod fits none of them now (" + rule + ")"
	case len(need) < len(zones):
		return m.spansZones(g) + "; pod needs zone " + strings.Join(need, ", ") + " (" + rule + ")"
	}
	return m.spansZones(g) + "; where the pods may go depends on that zone (" + rule + ")"
}

// roomMisfit names the first resource a new node of the group lacks.
func roomMisfit(gr *groupInfo, req res) string {
	dims := [...]struct {
		name            string
		need, have, use int64
	}{
		{"cpu", req.cpu, gr.alloc.cpu, gr.overhead.cpu},
		{"memory", req.mem, gr.alloc.mem, gr.overhead.mem},
		{string(podfacts.ResourceGPU), req.gpu, gr.alloc.gpu, gr.overhead.gpu},
		{"pods", req.pods, gr.alloc.pods, gr.overhead.pods},
	}
	for _, d := range dims {
		if d.need > 0 && d.need > d.have-d.use {
			s := "insufficient " + d.name + " (needs " + formatDim(d.name, d.need) + ", template has " + formatDim(d.name, d.have)
			if d.use > 0 {
				s += ", DaemonSets use " + formatDim(d.name, d.use)
			}
			return s + ")"
		}
	}
	return ""
}
