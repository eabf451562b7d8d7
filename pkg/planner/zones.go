package planner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// Zones. A group in one zone gets that zone as its template's zone label,
// so zonal pods are matched exactly. A group over several zones cannot say
// where the cloud starts its next node, so a pod is promised one of its new
// nodes only when it fits whichever zone the node lands in:
//
//   - node selector and required node affinity (and any other rule written
//     as node-label requirements) are evaluated with each zone's label, and
//     all must pass;
//   - topology spread, pod affinity and pod anti-affinity keyed on the zone
//     (the pod's own, or other pods' anti-affinity against it) are refused:
//     even when one pod would fit every zone now, the next one's fit
//     depends on where the first landed, which the plan cannot know.

const labelZone = corev1.LabelTopologyZone

// groupLabels returns the labels of a group's new node and, for a group over
// several zones, the same labels once per zone (variants). A group in one
// zone carries it even when the provider's template left it out; a group
// over several carries none, since any may come.
func groupLabels(ng *snapshot.NodeGroup) (labels map[string]string, variants []map[string]string) {
	labels = ng.Template.Labels
	switch {
	case len(ng.Zones) == 1 && labels[labelZone] != ng.Zones[0]:
		labels = maps.Clone(labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[labelZone] = ng.Zones[0]
	case len(ng.Zones) > 1:
		if _, ok := labels[labelZone]; ok {
			labels = maps.Clone(labels)
			delete(labels, labelZone)
		}
		for _, z := range ng.Zones {
			v := maps.Clone(labels)
			if v == nil {
				v = map[string]string{}
			}
			v[labelZone] = z
			variants = append(variants, v)
		}
	}
	return labels, variants
}

// zoneRule names class c's first pod-dependent rule keyed on the zone, ""
// when it has none. Computed once per class.
func (m *model) zoneRule(c int32) string {
	cl := &m.classes[c]
	if cl.zoneDone {
		return cl.zoneRule
	}
	cl.zoneDone = true
	if f := cl.feat; f != nil {
		for _, s := range f.spread {
			if s.key == labelZone {
				cl.zoneRule = fmt.Sprintf("topology spread maxSkew %d on %s", s.maxSkew, labelZone)
				return cl.zoneRule
			}
		}
		for _, t := range f.aff {
			if t.key == labelZone {
				cl.zoneRule = "pod affinity on " + labelZone
				return cl.zoneRule
			}
		}
		for _, t := range f.anti {
			if t.key == labelZone {
				cl.zoneRule = "pod anti-affinity on " + labelZone
				return cl.zoneRule
			}
		}
	}
	if cl.set >= 0 {
		for si := range m.sets {
			f := m.sets[si].feat
			if f == nil {
				continue
			}
			for k := range f.anti {
				if f.anti[k].key == labelZone && f.anti[k].matches(cl.rep) {
					cl.zoneRule = "anti-affinity of other pods on " + labelZone
					return cl.zoneRule
				}
			}
		}
	}
	return ""
}

// staticZoneRule names class c's node-label rule on the zone ("" for none),
// for scale-up reasons.
func staticZoneRule(p *corev1.Pod) string {
	if v, ok := p.Spec.NodeSelector[labelZone]; ok {
		return "node selector " + labelZone + "=" + v
	}
	if ns := requiredAffinity(p); ns != nil {
		for _, t := range ns.NodeSelectorTerms {
			for _, r := range t.MatchExpressions {
				if r.Key == labelZone {
					return "node affinity on " + labelZone
				}
			}
		}
	}
	return ""
}

func (m *model) spansZones(g int) string {
	gr := &m.groups[g]
	return fmt.Sprintf("group %q spans zones %s and the cloud picks a new node's zone", gr.ng.Name, strings.Join(gr.ng.Zones, ", "))
}

// zonesAdmitting lists the zones where one more pod of class c would pass
// its zone-keyed pod rules, with the counts as the plan leaves them.
func (m *model) zonesAdmitting(c int32, zones []string) []string {
	if !m.topoOn || m.classes[c].set < 0 {
		return zones
	}
	t := m.topoOf(c)
	var out []string
	for _, z := range zones {
		if t.zoneAdmits(z) {
			out = append(out, z)
		}
	}
	return out
}

// zoneAdmits: a new node in zone z would take one more pod of the class as
// far as its zone-keyed rules go.
func (t *topo) zoneAdmits(z string) bool {
	for k := range t.spread {
		st := &t.spread[k]
		if st.d.key != labelZone {
			continue
		}
		var c int64
		if id, ok := st.d.ids[z]; ok && int(id) < len(st.counts) {
			c = st.counts[id]
		}
		if c+st.t.self-st.minMatch() > st.t.maxSkew {
			return false
		}
	}
	for k := range t.aff {
		if t.aff[k].d.key == labelZone && t.aff[k].inDomain(z) <= 0 && (t.affTotal > 0 || !t.f.affSelf) {
			return false
		}
	}
	for k := range t.anti {
		if t.anti[k].d.key == labelZone && t.anti[k].inDomain(z) > 0 {
			return false
		}
	}
	for k := range t.ex {
		if t.ex[k].d.key == labelZone && t.ex[k].inDomain(z) > 0 {
			return false
		}
	}
	return true
}

// inDomain is the count in the domain whose label value is v.
func (c *counter) inDomain(v string) int64 {
	id, ok := c.d.ids[v]
	if !ok || int(id) >= len(c.c) {
		return 0
	}
	return c.c[id]
}

// zoneReason says which zone a scale-up's zonal pods need, and under which
// rule ("" when none of its pods depends on the zone).
func (m *model) zoneReason(g int, placed []classCount) string {
	z := m.groups[g].labels[labelZone]
	if z == "" {
		return ""
	}
	var n int64
	var rules []string
	for _, cc := range placed {
		cl := &m.classes[cc.class]
		r := staticZoneRule(cl.rep)
		if r == "" {
			r = m.zoneRule(cc.class)
		}
		if r == "" {
			continue
		}
		n += cc.n
		if !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	if n == 0 {
		return ""
	}
	verb := "need"
	if n == 1 {
		verb = "needs"
	}
	return fmt.Sprintf("%s %s zone %s (%s)", plural(int(n), "pod"), verb, z, strings.Join(rules, ", "))
}
