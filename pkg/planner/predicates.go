package planner

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Taints a node carries while it starts. A node that is still booting will
// lose them, so pending pods are simulated onto it as if they were gone.
var startupTaints = [...]string{
	corev1.TaintNodeNotReady,
	corev1.TaintNodeUnreachable,
	"node.cloudprovider.kubernetes.io/uninitialized",
}

func isStartupTaint(key string) bool {
	return slices.Contains(startupTaints[:], key)
}

// hardTaints keeps the taints the scheduler enforces (NoSchedule and
// NoExecute); PreferNoSchedule only scores. With booting set, the start-up
// taints are dropped too.
func hardTaints(taints []corev1.Taint, booting bool) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if booting && isStartupTaint(t.Key) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// tolerates mirrors the scheduler's Toleration.ToleratesTaint, including the
// numeric Gt/Lt operators (the API only accepts them where the feature is on).
func tolerates(t *corev1.Toleration, taint *corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		return t.Value == taint.Value
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpGt, corev1.TolerationOpLt:
		tv, err1 := strconv.ParseInt(t.Value, 10, 64)
		nv, err2 := strconv.ParseInt(taint.Value, 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if t.Operator == corev1.TolerationOpGt {
			return nv > tv
		}
		return nv < tv
	}
	return false
}

// untolerated returns the first hard taint none of tols tolerates, or nil.
func untolerated(tols []corev1.Toleration, taints []corev1.Taint) *corev1.Taint {
	for i := range taints {
		ok := false
		for j := range tols {
			if tolerates(&tols[j], &taints[i]) {
				ok = true
				break
			}
		}
		if !ok {
			return &taints[i]
		}
	}
	return nil
}

// selectorMismatch returns the first (by key) nodeSelector entry the labels
// do not satisfy.
func selectorMismatch(sel, labels map[string]string) (string, bool) {
	var bad []string
	for k, v := range sel {
		if lv, ok := labels[k]; !ok || lv != v {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return "", false
	}
	slices.Sort(bad)
	return bad[0], true
}

// fieldMode says how a term's matchFields (only metadata.name exists) are
// evaluated.
type fieldMode uint8

const (
	// fieldsOfNode: against a real node's name.
	fieldsOfNode fieldMode = iota
	// fieldsNewNode: a node that does not exist yet has no name, so a term
	// pinned to a node name cannot select it.
	fieldsNewNode
	// fieldsIgnored: DaemonSet pods are pinned to their node by name; to ask
	// whether the DaemonSet would run on a template the pin is ignored.
	fieldsIgnored
)

// affinityMatches evaluates required node affinity: terms are ORed, the
// requirements inside a term ANDed. As in the scheduler, an empty term
// selects nothing and an invalid requirement fails its term.
func affinityMatches(ns *corev1.NodeSelector, labels map[string]string, nodeName string, mode fieldMode) bool {
	if ns == nil {
		return true
	}
	for i := range ns.NodeSelectorTerms {
		t := &ns.NodeSelectorTerms[i]
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue
		}
		if termMatches(t, labels, nodeName, mode) {
			return true
		}
	}
	return false
}

func termMatches(t *corev1.NodeSelectorTerm, labels map[string]string, nodeName string, mode fieldMode) bool {
	for i := range t.MatchExpressions {
		if !requirementMatches(&t.MatchExpressions[i], labels) {
			return false
		}
	}
	if len(t.MatchFields) == 0 {
		return true
	}
	switch mode {
	case fieldsIgnored:
		return true
	case fieldsNewNode:
		return false
	}
	for i := range t.MatchFields {
		r := &t.MatchFields[i]
		if r.Key != "metadata.name" || len(r.Values) != 1 {
			return false
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			if nodeName != r.Values[0] {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if nodeName == r.Values[0] {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func requirementMatches(r *corev1.NodeSelectorRequirement, labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return len(r.Values) > 0 && ok && slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return len(r.Values) > 0 && (!ok || !slices.Contains(r.Values, v))
	case corev1.NodeSelectorOpExists:
		return len(r.Values) == 0 && ok
	case corev1.NodeSelectorOpDoesNotExist:
		return len(r.Values) == 0 && !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(r.Values) != 1 || !ok {
			return false
		}
		want, err1 := strconv.ParseInt(r.Values[0], 10, 64)
		have, err2 := strconv.ParseInt(v, 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

// requiredAffinity is the pod's required node affinity, or nil.
func requiredAffinity(p *corev1.Pod) *corev1.NodeSelector {
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// sameConstraints reports whether two pods are interchangeable for
// placement (requests compared separately).
func sameConstraints(a, b *corev1.Pod) bool {
	if len(a.Spec.NodeSelector) != len(b.Spec.NodeSelector) {
		return false
	}
	for k, v := range a.Spec.NodeSelector {
		if w, ok := b.Spec.NodeSelector[k]; !ok || w != v {
			return false
		}
	}
	if !sameNodeSelector(requiredAffinity(a), requiredAffinity(b)) {
		return false
	}
	ta, tb := a.Spec.Tolerations, b.Spec.Tolerations
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		// TolerationSeconds only matters for eviction, not placement.
		if ta[i].Key != tb[i].Key || ta[i].Operator != tb[i].Operator || ta[i].Value != tb[i].Value || ta[i].Effect != tb[i].Effect {
			return false
		}
	}
	return true
}

func sameNodeSelector(a, b *corev1.NodeSelector) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.NodeSelectorTerms) != len(b.NodeSelectorTerms) {
		return false
	}
	for i := range a.NodeSelectorTerms {
		x, y := &a.NodeSelectorTerms[i], &b.NodeSelectorTerms[i]
		if !sameRequirements(x.MatchExpressions, y.MatchExpressions) || !sameRequirements(x.MatchFields, y.MatchFields) {
			return false
		}
	}
	return true
}

func sameRequirements(a, b []corev1.NodeSelectorRequirement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Operator != b[i].Operator || !slices.Equal(a[i].Values, b[i].Values) {
			return false
		}
	}
	return true
}

// hasher is FNV-1a; it only buckets candidate classes (equality is always
// checked), so its quality matters little and its cost a lot.
type hasher uint64

const fnvOffset hasher = 14695981039346656037

func (h hasher) str(s string) hasher {
	for i := 0; i < len(s); i++ {
		h ^= hasher(s[i])
		h *= 1099511628211
	}
	h ^= 0xff // separator, so "ab","c" differs from "a","bc"
	h *= 1099511628211
	return h
}

func (h hasher) int(v int64) hasher {
	for i := 0; i < 8; i++ {
		h ^= hasher(byte(v >> (8 * i)))
		h *= 1099511628211
	}
	return h
}

// classHash buckets pods by requests and placement constraints.
func classHash(req res, p *corev1.Pod) uint64 {
	h := fnvOffset.int(req.cpu).int(req.mem).int(req.gpu)
	// Map order is random: combine the entries order-independently.
	var sel uint64
	for k, v := range p.Spec.NodeSelector {
		sel += uint64(fnvOffset.str(k).str(v))
	}
	h = h.int(int64(sel))
	if ns := requiredAffinity(p); ns != nil {
		for _, t := range ns.NodeSelectorTerms {
			for _, r := range t.MatchExpressions {
				h = h.str(r.Key).str(string(r.Operator))
				for _, v := range r.Values {
					h = h.str(v)
				}
			}
			for _, r := range t.MatchFields {
				h = h.str(r.Key)
				for _, v := range r.Values {
					h = h.str(v)
				}
			}
			h = h.int(-1)
		}
	}
	for _, t := range p.Spec.Tolerations {
		h = h.str(t.Key).str(t.Value).str(string(t.Effect)).str(string(t.Operator))
	}
	return uint64(h)
}
