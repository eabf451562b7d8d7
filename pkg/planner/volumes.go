package planner

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Volume topology, as kube-scheduler's VolumeBinding and VolumeZone plugins
// see it: a claim bound to a volume ties the pod to the volume's node
// affinity and zone labels; an unbound claim of a WaitForFirstConsumer class
// to where the class may provision; any other unbound claim keeps the pod
// off every node until something binds it.

// volumeIndex finds the snapshot's claims, volumes and classes by name.
type volumeIndex struct {
	claims  map[string]*corev1.PersistentVolumeClaim // "ns/name"
	volumes map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
}

// newVolumeIndex indexes s's volume objects, or returns nil when s has none:
// a snapshot taken before they were recorded plans as it did then.
func newVolumeIndex(s *snapshot.Snapshot) *volumeIndex {
	if len(s.PersistentVolumeClaims) == 0 && len(s.PersistentVolumes) == 0 && len(s.StorageClasses) == 0 {
		return nil
	}
	x := &volumeIndex{
		claims:  make(map[string]*corev1.PersistentVolumeClaim, len(s.PersistentVolumeClaims)),
		volumes: make(map[string]*corev1.PersistentVolume, len(s.PersistentVolumes)),
		classes: make(map[string]*storagev1.StorageClass, len(s.StorageClasses)),
	}
	for i := range s.PersistentVolumeClaims {
		c := &s.PersistentVolumeClaims[i]
		x.claims[c.Namespace+"/"+c.Name] = c
	}
	for i := range s.PersistentVolumes {
		x.volumes[s.PersistentVolumes[i].Name] = &s.PersistentVolumes[i]
	}
	for i := range s.StorageClasses {
		x.classes[s.StorageClasses[i].Name] = &s.StorageClasses[i]
	}
	return x
}

// volumeRule is what a pod's claims require of a node.
type volumeRule struct {
	// blocked, when set, says why no node takes the pod.
	blocked string
	checks  []volumeCheck
	// key identifies the rule among classes: the pod's claims, which
	// determine everything else.
	key string
}

// volumeCheck is one claim's requirement.
type volumeCheck struct {
	what string // `volume "data" (claim ns/data-0)`
	// A bound claim: its volume's name, required node affinity and zone
	// labels (label → allowed values).
	pv       string
	affinity *corev1.NodeSelector
	zones    []zoneLabel
	// An unbound claim of a WaitForFirstConsumer class: the class and
	// where it may provision (none: anywhere).
	class string
	topo  []corev1.TopologySelectorTerm
}

type zoneLabel struct {
	key    string
	values []string
}

// claimsOf returns the claim names a pod's volumes use, each with its
// volume's name and, for a generic ephemeral volume, its claim template.
type podClaim struct {
	volume, claim string
	ephemeral     *corev1.PersistentVolumeClaimTemplate
}

func podClaims(p *corev1.Pod) []podClaim {
	var out []podClaim
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, podClaim{volume: v.Name, claim: v.PersistentVolumeClaim.ClaimName})
		case v.Ephemeral != nil:
			// The ephemeral volume controller names the claim it creates
			// after the pod and the volume.
			out = append(out, podClaim{volume: v.Name, claim: p.Name + "-" + v.Name, ephemeral: v.Ephemeral.VolumeClaimTemplate})
		}
	}
	return out
}

// claimClass is the claim's storage class name, as the scheduler reads it.
func claimClass(c *corev1.PersistentVolumeClaim) string {
	if v, ok := c.Annotations[podfacts.AnnotationStorageClass]; ok {
		return v
	}
	if c.Spec.StorageClassName != nil {
		return *c.Spec.StorageClassName
	}
	return ""
}

// rule works out a pod's volume rule; nil when it uses no claim.
func (x *volumeIndex) rule(p *corev1.Pod) *volumeRule {
	claims := podClaims(p)
	if len(claims) == 0 {
		return nil
	}
	r := &volumeRule{}
	keys := make([]string, len(claims))
	for i, pc := range claims {
		keys[i] = p.Namespace + "/" + pc.claim
	}
	r.key = strings.Join(keys, ",")
	for _, pc := range claims {
		what := "volume " + strconv.Quote(pc.volume) + " (claim " + p.Namespace + "/" + pc.claim + ")"
		c := x.claims[p.Namespace+"/"+pc.claim]
		if c == nil && pc.ephemeral != nil {
			// Not created yet: it will be, unbound, from the template.
			c = &corev1.PersistentVolumeClaim{Spec: pc.ephemeral.Spec}
			c.Annotations = pc.ephemeral.Annotations
			c.Spec.VolumeName = ""
		}
		if c == nil {
			r.blocked = what + ": the claim does not exist"
			return r
		}
		if c.DeletionTimestamp != nil {
			r.blocked = what + ": the claim is being deleted"
			return r
		}
		if c.Spec.VolumeName != "" {
			pv := x.volumes[c.Spec.VolumeName]
			if pv == nil {
				r.blocked = what + " is bound to PV " + c.Spec.VolumeName + ", which does not exist"
				return r
			}
			ck := volumeCheck{what: what, pv: pv.Name}
			if pv.Spec.NodeAffinity != nil {
				ck.affinity = pv.Spec.NodeAffinity.Required
			}
			for _, key := range podfacts.VolumeZoneLabels() {
				if v, ok := pv.Labels[key]; ok {
					ck.zones = append(ck.zones, zoneLabel{key: key, values: labelZones(v)})
				}
			}
			if ck.affinity != nil || len(ck.zones) > 0 {
				r.checks = append(r.checks, ck)
			}
			continue
		}
		name := claimClass(c)
		if name == "" {
			r.blocked = what + " is not bound and has no StorageClass: the scheduler places the pod only once the claim is bound"
			return r
		}
		sc := x.classes[name]
		if sc == nil {
			r.blocked = what + " is not bound and its StorageClass " + strconv.Quote(name) + " does not exist: the claim cannot be provisioned"
			return r
		}
		if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
			r.blocked = what + " is not bound and its StorageClass " + strconv.Quote(name) +
				" binds immediately: the scheduler places the pod only once the claim is bound"
			return r
		}
		if len(sc.AllowedTopologies) > 0 {
			r.checks = append(r.checks, volumeCheck{what: what, class: name, topo: sc.AllowedTopologies})
		}
	}
	return r
}

// labelZones splits a volume's zone label: "a__b" is a volume in zones a
// and b.
func labelZones(v string) []string {
	var out []string
	for _, z := range strings.Split(v, "__") {
		if z = strings.TrimSpace(z); z != "" {
			out = append(out, z)
		}
	}
	return out
}

// translateZoneLabel is the GA label of a beta zone or region label.
func translateZoneLabel(key string) string {
	switch key {
	case corev1.LabelFailureDomainBetaZone:
		return corev1.LabelTopologyZone
	case corev1.LabelFailureDomainBetaRegion:
		return corev1.LabelTopologyRegion
	}
	return key
}

// misfitAt is the first thing a node with these labels fails of the rule,
// and the index of the failing claim's check (-1 for none or a blocked
// rule); a nil rule always fits. It is on the simulation's hot path: it
// builds no text.
func (r *volumeRule) misfitAt(labels map[string]string) (misfit, int) {
	if r == nil {
		return misfitNone, -1
	}
	if r.blocked != "" {
		return misfitVolumeBlocked, -1
	}
	for i := range r.checks {
		if why := checkFails(&r.checks[i], labels); why != misfitNone {
			return why, i
		}
	}
	return misfitNone, -1
}

func checkFails(ck *volumeCheck, labels map[string]string) misfit {
	switch {
	case ck.affinity != nil && !affinityMatches(ck.affinity, labels, "", fieldsNewNode):
		return misfitVolumeAffinity
	case zoneFails(ck, labels) >= 0:
		return misfitVolumeZone
	case len(ck.topo) > 0 && !topologyMatches(ck.topo, labels):
		return misfitVolumeTopology
	}
	return misfitNone
}

// misfitText explains why a node with these labels does not satisfy the
// rule, or returns "". node names the node in the explanation ("node",
// "group").
func (r *volumeRule) misfitText(labels map[string]string, node string) string {
	why, i := r.misfitAt(labels)
	switch why {
	case misfitVolumeBlocked:
		return r.blocked
	case misfitVolumeAffinity:
		ck := &r.checks[i]
		return ck.what + " is bound to PV " + ck.pv + ", which needs a node where " + describeSelector(ck.affinity)
	case misfitVolumeZone:
		return zoneMisfit(&r.checks[i], labels, node)
	case misfitVolumeTopology:
		ck := &r.checks[i]
		return ck.what + " is not bound yet and its StorageClass " + strconv.Quote(ck.class) +
			" provisions only where " + describeTopology(ck.topo)
	}
	return ""
}

// zoneFails is VolumeZone's check: a node with no zone or region label at
// all takes any volume (a cluster without zones); otherwise each of the
// volume's zone labels must be on the node, with one of its values. It
// returns the index of the first zone label the node fails, or -1.
func zoneFails(ck *volumeCheck, labels map[string]string) int {
	if len(ck.zones) == 0 {
		return -1
	}
	labelled := false
	for _, key := range podfacts.VolumeZoneLabels() {
		if _, ok := labels[key]; ok {
			labelled = true
			break
		}
	}
	if !labelled {
		return -1
	}
	for i, z := range ck.zones {
		v, ok := labels[z.key]
		if !ok {
			v, ok = labels[translateZoneLabel(z.key)]
		}
		if !ok || !slices.Contains(z.values, v) {
			return i
		}
	}
	return -1
}

// zoneMisfit explains the zone label a node fails ("" when none).
func zoneMisfit(ck *volumeCheck, labels map[string]string, node string) string {
	if i := zoneFails(ck, labels); i >= 0 {
		z := ck.zones[i]
		v, ok := labels[z.key]
		if !ok {
			v, ok = labels[translateZoneLabel(z.key)]
		}
		word := "zone"
		if strings.HasSuffix(z.key, "region") {
			word = "region"
		}
		why := ck.what + " is bound to a PV in " + word + " " + strings.Join(z.values, " or ") + " (" + ck.pv + "); "
		if !ok {
			return why + "the " + node + " has no " + z.key + " label"
		}
		return why + "the " + node + " is in " + word + " " + v
	}
	return ""
}

// topologyMatches is the scheduler's MatchTopologySelectorTerms: terms are
// ORed, a term's expressions ANDed, and no terms match every node.
func topologyMatches(terms []corev1.TopologySelectorTerm, labels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, t := range terms {
		ok := true
		for _, e := range t.MatchLabelExpressions {
			if v, has := labels[e.Key]; !has || !slices.Contains(e.Values, v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// describeSelector writes a node selector briefly: "k in (a, b) and l
// exists or …".
func describeSelector(ns *corev1.NodeSelector) string {
	var terms []string
	for _, t := range ns.NodeSelectorTerms {
		var reqs []string
		for _, r := range t.MatchExpressions {
			reqs = append(reqs, describeRequirement(r))
		}
		for _, r := range t.MatchFields {
			reqs = append(reqs, describeRequirement(r))
		}
		if len(reqs) == 0 {
			reqs = append(reqs, "nothing (empty term)")
		}
		terms = append(terms, strings.Join(reqs, " and "))
	}
	if len(terms) == 0 {
		return "nothing (no terms)"
	}
	return strings.Join(terms, " or ")
}

func describeRequirement(r corev1.NodeSelectorRequirement) string {
	switch r.Operator {
	case corev1.NodeSelectorOpExists:
		return r.Key + " exists"
	case corev1.NodeSelectorOpDoesNotExist:
		return r.Key + " does not exist"
	case corev1.NodeSelectorOpIn:
		return r.Key + " in (" + strings.Join(r.Values, ", ") + ")"
	case corev1.NodeSelectorOpNotIn:
		return r.Key + " not in (" + strings.Join(r.Values, ", ") + ")"
	}
	return r.Key + " " + strings.ToLower(string(r.Operator)) + " " + strings.Join(r.Values, ", ")
}

func describeTopology(terms []corev1.TopologySelectorTerm) string {
	var out []string
	for _, t := range terms {
		var reqs []string
		for _, e := range t.MatchLabelExpressions {
			reqs = append(reqs, e.Key+" in ("+strings.Join(e.Values, ", ")+")")
		}
		out = append(out, strings.Join(reqs, " and "))
	}
	return strings.Join(out, " or ")
}
