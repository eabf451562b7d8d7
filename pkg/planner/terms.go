package planner

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Labels the scheduler puts on nodes and namespaces by itself.
const (
	labelHostname      = corev1.LabelHostname
	labelNamespaceName = "kubernetes.io/metadata.name"
)

// hostPort is one host port a pod binds. An empty host IP is 0.0.0.0.
type hostPort struct {
	proto corev1.Protocol
	ip    string
	port  int32
}

func (h hostPort) String() string {
	s := strconv.Itoa(int(h.port)) + "/" + string(h.proto)
	if h.ip != "0.0.0.0" {
		s = h.ip + ":" + s
	}
	return s
}

// podHostPorts lists the host ports of the pod's containers and of its
// sidecars (restartable init containers), as the NodePorts plugin does.
func podHostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for i := range cs {
			c := &cs[i]
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, cp := range c.Ports {
				if cp.HostPort <= 0 {
					continue
				}
				h := hostPort{proto: cp.Protocol, ip: cp.HostIP, port: cp.HostPort}
				if h.proto == "" {
					h.proto = corev1.ProtocolTCP
				}
				if h.ip == "" {
					h.ip = "0.0.0.0"
				}
				out = append(out, h)
			}
		}
	}
	add(p.Spec.InitContainers, true)
	add(p.Spec.Containers, false)
	return out
}

// portConflict returns a port of want that one of have already binds.
func portConflict(want, have []hostPort) (hostPort, bool) {
	for _, w := range want {
		for _, h := range have {
			if w.port == h.port && w.proto == h.proto && (w.ip == h.ip || w.ip == "0.0.0.0" || h.ip == "0.0.0.0") {
				return w, true
			}
		}
	}
	return hostPort{}, false
}

// podTerm is a required (anti-)affinity term, parsed for matching.
type podTerm struct {
	key   string
	sel   labels.Selector
	nsAll bool
	ns    []string
	nsSel labels.Selector // nil: no namespace selector
}

// newPodTerm parses term of pod owner. As in the scheduler, a missing label
// selector selects no pod and an invalid one is treated alike.
func newPodTerm(owner *corev1.Pod, t *corev1.PodAffinityTerm) podTerm {
	pt := podTerm{key: t.TopologyKey}
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil {
		sel = labels.Nothing()
	}
	if t.LabelSelector != nil && err == nil {
		sel = withLabelKeys(sel, owner, t.MatchLabelKeys, selection.In)
		sel = withLabelKeys(sel, owner, t.MismatchLabelKeys, selection.NotIn)
	}
	pt.sel = sel
	switch {
	case len(t.Namespaces) == 0 && t.NamespaceSelector == nil:
		pt.ns = []string{owner.Namespace}
	default:
		pt.ns = t.Namespaces
		if t.NamespaceSelector != nil {
			if len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
				pt.nsAll = true
			} else if ns, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector); err == nil {
				pt.nsSel = ns
			}
		}
	}
	return pt
}

// withLabelKeys adds "key op (owner's value)" for each key the owner has.
func withLabelKeys(sel labels.Selector, owner *corev1.Pod, keys []string, op selection.Operator) labels.Selector {
	for _, k := range keys {
		v, ok := owner.Labels[k]
		if !ok {
			continue
		}
		r, err := labels.NewRequirement(k, op, []string{v})
		if err != nil {
			continue
		}
		sel = sel.Add(*r)
	}
	return sel
}

// namespaceMatches: the snapshot carries no Namespace objects, so a
// namespace selector sees only the label every namespace has, its name.
func (t *podTerm) namespaceMatches(ns string) bool {
	if t.nsAll || slices.Contains(t.ns, ns) {
		return true
	}
	return t.nsSel != nil && t.nsSel.Matches(labels.Set{labelNamespaceName: ns})
}

func (t *podTerm) matches(p *corev1.Pod) bool {
	return t.namespaceMatches(p.Namespace) && t.sel.Matches(labels.Set(p.Labels))
}

// spreadTerm is a DoNotSchedule topology spread constraint.
type spreadTerm struct {
	key           string
	sel           labels.Selector
	maxSkew       int64
	minDomains    int
	honorAffinity bool
	honorTaints   bool
	self          int64 // 1 when the pod matches its own selector
}

func newSpreadTerms(p *corev1.Pod) []spreadTerm {
	var out []spreadTerm
	for i := range p.Spec.TopologySpreadConstraints {
		c := &p.Spec.TopologySpreadConstraints[i]
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			sel = labels.Nothing()
		}
		if c.LabelSelector != nil && err == nil {
			sel = withLabelKeys(sel, p, c.MatchLabelKeys, selection.In)
		}
		st := spreadTerm{
			key: c.TopologyKey, sel: sel, maxSkew: int64(c.MaxSkew), minDomains: 1,
			honorAffinity: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor,
			honorTaints:   c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor,
		}
		if c.MinDomains != nil && *c.MinDomains > 0 {
			st.minDomains = int(*c.MinDomains)
		}
		if sel.Matches(labels.Set(p.Labels)) {
			st.self = 1
		}
		out = append(out, st)
	}
	return out
}

// features are the placement rules that depend on other pods: they make a
// pod's class leave the fast path.
type features struct {
	ports  []hostPort
	aff    []podTerm
	anti   []podTerm
	spread []spreadTerm
	// affSelf: the pod matches all its own affinity terms, so it may be the
	// first of a series that has affinity to itself.
	affSelf bool
}

func requiredPodAffinity(p *corev1.Pod) (aff, anti []corev1.PodAffinityTerm) {
	a := p.Spec.Affinity
	if a == nil {
		return nil, nil
	}
	if a.PodAffinity != nil {
		aff = a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	if a.PodAntiAffinity != nil {
		anti = a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return aff, anti
}

// hasFeatures is the cheap test for newFeatures != nil.
func hasFeatures(p *corev1.Pod) bool {
	aff, anti := requiredPodAffinity(p)
	if len(aff) > 0 || len(anti) > 0 {
		return true
	}
	for i := range p.Spec.TopologySpreadConstraints {
		if p.Spec.TopologySpreadConstraints[i].WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	for i := range p.Spec.Containers {
		for _, cp := range p.Spec.Containers[i].Ports {
			if cp.HostPort > 0 {
				return true
			}
		}
	}
	for i := range p.Spec.InitContainers {
		for _, cp := range p.Spec.InitContainers[i].Ports {
			if cp.HostPort > 0 {
				return true
			}
		}
	}
	return false
}

func newFeatures(p *corev1.Pod) *features {
	if !hasFeatures(p) {
		return nil
	}
	f := &features{ports: podHostPorts(p), spread: newSpreadTerms(p)}
	aff, anti := requiredPodAffinity(p)
	for i := range aff {
		f.aff = append(f.aff, newPodTerm(p, &aff[i]))
	}
	for i := range anti {
		f.anti = append(f.anti, newPodTerm(p, &anti[i]))
	}
	f.affSelf = true
	for i := range f.aff {
		if !f.aff[i].matches(p) {
			f.affSelf = false
		}
	}
	return f
}

// describe names the pod's rules for plan reasons.
func (f *features) describe() []string {
	var out []string
	for _, s := range f.spread {
		out = append(out, fmt.Sprintf("topology spread on %s (maxSkew %d)", s.key, s.maxSkew))
	}
	for _, t := range f.aff {
		out = append(out, "pod affinity on "+t.key)
	}
	for _, t := range f.anti {
		out = append(out, "pod anti-affinity on "+t.key)
	}
	for _, h := range f.ports {
		out = append(out, "host port "+h.String())
	}
	return out
}

// samePodRules reports whether two pods carry the same pod-dependent rules
// and labels (namespace included), so one can stand for the other.
func samePodRules(a, b *corev1.Pod) bool {
	if a.Namespace != b.Namespace || (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) || !maps.Equal(a.Labels, b.Labels) {
		return false
	}
	aa, an := requiredPodAffinity(a)
	ba, bn := requiredPodAffinity(b)
	if !slices.EqualFunc(aa, ba, sameAffinityTerm) || !slices.EqualFunc(an, bn, sameAffinityTerm) {
		return false
	}
	if !slices.EqualFunc(a.Spec.TopologySpreadConstraints, b.Spec.TopologySpreadConstraints, sameSpread) {
		return false
	}
	return slices.Equal(podHostPorts(a), podHostPorts(b))
}

func sameAffinityTerm(a, b corev1.PodAffinityTerm) bool {
	return a.TopologyKey == b.TopologyKey && slices.Equal(a.Namespaces, b.Namespaces) &&
		sameLabelSelector(a.LabelSelector, b.LabelSelector) && sameLabelSelector(a.NamespaceSelector, b.NamespaceSelector) &&
		slices.Equal(a.MatchLabelKeys, b.MatchLabelKeys) && slices.Equal(a.MismatchLabelKeys, b.MismatchLabelKeys)
}

func sameSpread(a, b corev1.TopologySpreadConstraint) bool {
	return a.TopologyKey == b.TopologyKey && a.MaxSkew == b.MaxSkew && a.WhenUnsatisfiable == b.WhenUnsatisfiable &&
		sameLabelSelector(a.LabelSelector, b.LabelSelector) && slices.Equal(a.MatchLabelKeys, b.MatchLabelKeys) &&
		equalPtr(a.MinDomains, b.MinDomains) && equalPtr(a.NodeAffinityPolicy, b.NodeAffinityPolicy) &&
		equalPtr(a.NodeTaintsPolicy, b.NodeTaintsPolicy)
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameLabelSelector(a, b *metav1.LabelSelector) bool {
	if a == nil || b == nil {
		return a == b
	}
	return maps.Equal(a.MatchLabels, b.MatchLabels) && slices.EqualFunc(a.MatchExpressions, b.MatchExpressions,
		func(x, y metav1.LabelSelectorRequirement) bool {
			return x.Key == y.Key && x.Operator == y.Operator && slices.Equal(x.Values, y.Values)
		})
}

// podRulesHash buckets pods for samePodRules.
func podRulesHash(p *corev1.Pod) uint64 {
	h := fnvOffset.str(p.Namespace)
	var l uint64
	for k, v := range p.Labels {
		l += uint64(fnvOffset.str(k).str(v))
	}
	h = h.int(int64(l))
	aff, anti := requiredPodAffinity(p)
	for _, terms := range [][]corev1.PodAffinityTerm{aff, anti} {
		for i := range terms {
			h = h.str(terms[i].TopologyKey)
			if s := terms[i].LabelSelector; s != nil {
				var ml uint64
				for k, v := range s.MatchLabels {
					ml += uint64(fnvOffset.str(k).str(v))
				}
				h = h.int(int64(ml))
				for _, r := range s.MatchExpressions {
					h = h.str(r.Key)
				}
			}
		}
		h = h.int(-1)
	}
	for _, c := range p.Spec.TopologySpreadConstraints {
		h = h.str(c.TopologyKey).int(int64(c.MaxSkew))
	}
	return uint64(h)
}
