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

// checkID names a check of placementChecks.
type checkID uint8

const (
	checkSelector checkID = iota + 1
	checkNodeAffinity
	checkTaints
	checkVolumes
	checkZoneRules
	checkRoom
)

// check is one entry of placementChecks. A node check reads one node's
// labels and taints, so a new node of a group over several zones must pass
// it in each zone; a group check (group set) reads a new node of a group as
// a whole, and runs once the node checks pass in every zone.
type check struct {
	id     checkID
	name   string
	fields []podField
	group  bool
}

// placementChecks: the node checks first, then the group checks. It is
// read only.
var placementChecks = [...]check{
	{id: checkSelector, name: "node selector", fields: []podField{fieldNodeSelector}},
	{id: checkNodeAffinity, name: "node affinity", fields: []podField{fieldNodeAffinity}},
	{id: checkTaints, name: "taints", fields: []podField{fieldTolerations}},
	{id: checkVolumes, name: "volumes", fields: []podField{fieldVolumes}},
	{id: checkZoneRules, name: "zone rules", fields: []podField{fieldPodAffinity, fieldTopologySpread, fieldLabels}, group: true},
	{id: checkRoom, name: "room", fields: []podField{fieldContainerRequests, fieldInitContainers, fieldOverhead, fieldPodResources}, group: true},
}

// runGroup runs group check id on a new node of group g.
func (m *model) runGroup(id checkID, s *subject, g int) misfit {
	switch id {
	case checkZoneRules:
		// A group over several zones cannot promise a pod whose
		// pod-dependent rules are keyed on the zone (zones.go).
		if len(m.groups[g].variants) > 0 && s.class >= 0 && m.zoneRule(s.class) != "" {
			return misfitZoneRule
		}
	case checkRoom:
		if s.class >= 0 && fitCount(m.groups[g].cap, m.classes[s.class].req) == 0 {
			return misfitRoom
		}
	}
	return misfitNone
}

func nodeAffinityMisfit(ns *corev1.NodeSelector, at *place) misfit {
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

// nodeMisfit runs the node checks against one node: the first failing
// one's reason, or misfitNone. It dispatches with a switch rather than func
// values in the table, and keeps the common case (nothing to check) in
// this one function: it runs for every class against every node, and its
// pointer arguments must not escape.
func nodeMisfit(s *subject, at *place) misfit {
	for i := range placementChecks {
		r := misfitNone
		switch placementChecks[i].id {
		case checkSelector:
			for k, v := range s.pod.Spec.NodeSelector {
				if lv, ok := at.labels[k]; !ok || lv != v {
					r = misfitSelector
					break
				}
			}
		case checkNodeAffinity:
			if ns := requiredAffinity(s.pod); ns != nil {
				r = nodeAffinityMisfit(ns, at)
			}
		case checkTaints:
			if len(at.taints) > 0 && untolerated(s.pod.Spec.Tolerations, at.taints) != nil {
				r = misfitTaint
			}
		case checkVolumes:
			if s.vol != nil {
				r, _ = s.vol.misfitAt(at.labels)
			}
		}
		if r != misfitNone {
			return r
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
// of group g, in their order: the node checks in every zone the group may
// start it in, then the group checks.
func (m *model) templateVerdict(c int32, g int) verdict {
	s := m.subjectOf(c)
	if v := m.zonesVerdict(&s, g); v.why != misfitNone {
		return v
	}
	for i := range placementChecks {
		if ck := &placementChecks[i]; ck.group {
			if r := m.runGroup(ck.id, &s, g); r != misfitNone {
				return verdict{why: r}
			}
		}
	}
	return verdict{}
}

// zonesVerdict runs the node checks on a new node of group g in each of its
// zones: a split when some zones pass and others not, the first zone's
// reason when none does.
func (m *model) zonesVerdict(s *subject, g int) verdict {
	gr := &m.groups[g]
	if len(gr.variants) == 0 {
		at := m.newNodeAt(g, gr.labels)
		return verdict{why: nodeMisfit(s, &at)}
	}
	first := verdict{zone: -1}
	fit := 0
	for z, labels := range gr.variants {
		at := m.newNodeAt(g, labels)
		if r := nodeMisfit(s, &at); r == misfitNone {
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
	s := m.subjectOf(c)
	// Field by field: a composite literal is built in a temporary and
	// copied, which costs this hot path a store-forwarding stall.
	var at place
	at.labels, at.taints, at.name, at.mode = n.node.Labels, n.taints, n.node.Name, fieldsOfNode
	return nodeMisfit(&s, &at) == misfitNone
}

// fitsTemplate reports whether one pod of class c fits a new node of group
// g: templateVerdict finds nothing. Whether it fits does not depend on the
// order, so it stops at the first check that fails, in any zone.
func (m *model) fitsTemplate(c int32, g int) bool {
	s := m.subjectOf(c)
	gr := &m.groups[g]
	if len(gr.variants) == 0 {
		at := m.newNodeAt(g, gr.labels)
		if nodeMisfit(&s, &at) != misfitNone {
			return false
		}
	}
	for _, labels := range gr.variants {
		at := m.newNodeAt(g, labels)
		if nodeMisfit(&s, &at) != misfitNone {
			return false
		}
	}
	for i := range placementChecks {
		if ck := &placementChecks[i]; ck.group && m.runGroup(ck.id, &s, g) != misfitNone {
			return false
		}
	}
	return true
}

// placementFits reports whether a pod's node selector, node affinity and
// tolerations admit a node with these labels and hard taints (its claims
// and resources aside).
func placementFits(p *corev1.Pod, labels map[string]string, taints []corev1.Taint, nodeName string, mode fieldMode) bool {
	s := subject{pod: p, class: -1}
	at := place{labels: labels, taints: taints, name: nodeName, mode: mode}
	return nodeMisfit(&s, &at) == misfitNone
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
		return m.zoneSplitMisfit(&s, g, v)
	case misfitZoneRule:
		return m.zoneRuleMisfit(c, g)
	case misfitRoom:
		return roomMisfit(gr, m.classes[c].req)
	}
	at := m.newNodeAt(g, labels)
	return nodeMisfitText(&s, &at, v.why, "group")
}

// nodeMisfitText explains node check reason r at a node; node names it in
// the explanation ("node", "group").
func nodeMisfitText(s *subject, at *place, r misfit, node string) string {
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
func (m *model) zoneSplitMisfit(s *subject, g int, v verdict) string {
	gr := &m.groups[g]
	var fit []string
	for z, labels := range gr.variants {
		if at := m.newNodeAt(g, labels); nodeMisfit(s, &at) == misfitNone {
			fit = append(fit, gr.ng.Zones[z])
		}
	}
	at := m.newNodeAt(g, gr.variants[v.zone])
	why := nodeMisfitText(s, &at, v.inner, "group")
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
