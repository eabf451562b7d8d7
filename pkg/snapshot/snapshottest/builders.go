// Package snapshottest builds snapshots for tests: nodes, pods, groups and
// PDBs from a few words, and a deterministic synthetic cluster of any size.
package snapshottest

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// t0 is "now" in the table tests.
var T0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func ProviderID(node string) string { return "kwok://" + node }

func Resources(cpu, mem string, extra ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		l[corev1.ResourceName(extra[i])] = resource.MustParse(extra[i+1])
	}
	return l
}

// group builds a node group whose template is labelled pool=<name> and
// whose instances are the given node names.
func Group(name string, minSize, maxSize, target int, cpu, mem string, nodes ...string) snapshot.NodeGroup {
	g := snapshot.NodeGroup{
		Name: name, Provider: "kwok", MinSize: minSize, MaxSize: maxSize, TargetSize: target,
		Template: snapshot.Template{
			Allocatable: Resources(cpu, mem, "pods", "110"),
			Labels:      map[string]string{"pool": name},
		},
	}
	for _, n := range nodes {
		g.Instances = append(g.Instances, ProviderID(n))
	}
	return g
}

func WithTemplateTaint(g snapshot.NodeGroup, key, value string, effect corev1.TaintEffect) snapshot.NodeGroup {
	g.Template.Taints = append(g.Template.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return g
}

func WithTemplateLabels(g snapshot.NodeGroup, kv ...string) snapshot.NodeGroup {
	for i := 0; i+1 < len(kv); i += 2 {
		g.Template.Labels[kv[i]] = kv[i+1]
	}
	return g
}

type NodeOpt func(*corev1.Node)

// node builds a Ready node created an hour before t0, labelled pool=<pool>.
func Node(name, pool, cpu, mem string, opts ...NodeOpt) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Labels:            map[string]string{"pool": pool, "kubernetes.io/hostname": name},
			CreationTimestamp: metav1.NewTime(T0.Add(-time.Hour)),
		},
		Spec: corev1.NodeSpec{ProviderID: ProviderID(name)},
		Status: corev1.NodeStatus{
			Allocatable: Resources(cpu, mem, "pods", "110"),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func NotReady(created time.Time) NodeOpt {
	return func(n *corev1.Node) {
		n.CreationTimestamp = metav1.NewTime(created)
		n.Status.Conditions[0].Status = corev1.ConditionFalse
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	}
}

func NodeTaint(key, value string, effect corev1.TaintEffect) NodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func Cordoned() NodeOpt { return func(n *corev1.Node) { n.Spec.Unschedulable = true } }

func Draining() NodeOpt { return NodeTaint(podfacts.TaintDraining, "", corev1.TaintEffectNoSchedule) }

func Deleting() NodeOpt {
	return func(n *corev1.Node) { ts := metav1.NewTime(T0.Add(-time.Minute)); n.DeletionTimestamp = &ts }
}

func NodeAnnotation(k, v string) NodeOpt {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[k] = v
	}
}

type PodOpt func(*corev1.Pod)

// pod builds "ns/name" (namespace default when omitted) owned by a
// ReplicaSet, created an hour before t0, with one container requesting cpu
// and memory. Without on() or pending() it is neither bound nor pending.
func Pod(key, cpu, mem string, opts ...PodOpt) corev1.Pod {
	ns, name := "default", key
	if i := strings.IndexByte(key, '/'); i >= 0 {
		ns, name = key[:i], key[i+1:]
	}
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:            map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(T0.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{ControllerRef("ReplicaSet", "rs-web")},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: Resources(cpu, mem)}}}},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func ControllerRef(kind, uid string) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: uid, UID: types.UID(uid), Controller: &t}
}

func On(nodeName string) PodOpt {
	return func(p *corev1.Pod) {
		p.Spec.NodeName = nodeName
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	}
}

func Pending() PodOpt {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	}
}

func Created(t time.Time) PodOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

func Phase(ph corev1.PodPhase) PodOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func PodDeleting() PodOpt {
	return func(p *corev1.Pod) { ts := metav1.NewTime(T0); p.DeletionTimestamp = &ts }
}

func OwnedBy(kind, uid string) PodOpt {
	return func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{ControllerRef(kind, uid)} }
}

func Bare() PodOpt { return func(p *corev1.Pod) { p.OwnerReferences = nil } }

func Daemon(uid string) PodOpt { return OwnedBy("DaemonSet", uid) }

func Mirror() PodOpt {
	return func(p *corev1.Pod) {
		Bare()(p)
		Annotate(corev1.MirrorPodAnnotationKey, "x")(p)
	}
}

// Priority sets spec.priority, as admission resolves it from the pod's
// priority class.
func Priority(v int32) PodOpt { return func(p *corev1.Pod) { p.Spec.Priority = &v } }

func Annotate(k, v string) PodOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func PodLabels(kv ...string) PodOpt {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func Selector(kv ...string) PodOpt {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func Tolerate(key, value string, effect corev1.TaintEffect) PodOpt {
	return func(p *corev1.Pod) {
		op := corev1.TolerationOpEqual
		if value == "" {
			op = corev1.TolerationOpExists
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	}
}

// affinity sets required node affinity with one term per argument.
func Affinity(terms ...[]corev1.NodeSelectorRequirement) PodOpt {
	return func(p *corev1.Pod) {
		ns := &corev1.NodeSelector{}
		for _, t := range terms {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}}
	}
}

func Req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func Volume(v corev1.Volume) PodOpt {
	return func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v) }
}

func HostPath(name string) PodOpt {
	return Volume(corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}})
}

func EmptyDir(name string, medium corev1.StorageMedium) PodOpt {
	return Volume(corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium}}})
}

func PDB(key string, allowed int32, matchLabels ...string) policyv1.PodDisruptionBudget {
	ns, name, _ := strings.Cut(key, "/")
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(matchLabels); i += 2 {
		sel.MatchLabels[matchLabels[i]] = matchLabels[i+1]
	}
	one := intstr.FromInt32(1)
	return policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sel, MinAvailable: &one},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

// deepCopySnapshot copies every object, so a test can tell whether Decide
// changed its input.
func DeepCopy(s snapshot.Snapshot) snapshot.Snapshot {
	out := s
	out.NodeGroups = nil
	for _, g := range s.NodeGroups {
		c := g
		c.Instances = slices.Clone(g.Instances)
		c.Template.Allocatable = g.Template.Allocatable.DeepCopy()
		c.Template.Labels = maps.Clone(g.Template.Labels)
		c.Template.Taints = slices.Clone(g.Template.Taints)
		out.NodeGroups = append(out.NodeGroups, c)
	}
	out.Nodes, out.Pods, out.PodDisruptionBudgets = nil, nil, nil
	for i := range s.Nodes {
		out.Nodes = append(out.Nodes, *s.Nodes[i].DeepCopy())
	}
	for i := range s.Pods {
		out.Pods = append(out.Pods, *s.Pods[i].DeepCopy())
	}
	for i := range s.PodDisruptionBudgets {
		out.PodDisruptionBudgets = append(out.PodDisruptionBudgets, *s.PodDisruptionBudgets[i].DeepCopy())
	}
	out.PersistentVolumeClaims, out.PersistentVolumes, out.StorageClasses = nil, nil, nil
	for i := range s.PersistentVolumeClaims {
		out.PersistentVolumeClaims = append(out.PersistentVolumeClaims, *s.PersistentVolumeClaims[i].DeepCopy())
	}
	for i := range s.PersistentVolumes {
		out.PersistentVolumes = append(out.PersistentVolumes, *s.PersistentVolumes[i].DeepCopy())
	}
	for i := range s.StorageClasses {
		out.StorageClasses = append(out.StorageClasses, *s.StorageClasses[i].DeepCopy())
	}
	out.State = snapshot.State{UnneededSince: maps.Clone(s.State.UnneededSince), LastScaleUp: maps.Clone(s.State.LastScaleUp), BackoffUntil: maps.Clone(s.State.BackoffUntil)}
	return out
}

// equalSnapshots compares the documents: every field that is part of the
// snapshot is serialised, and quantities compare by value.
func Equal(a, b snapshot.Snapshot) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

func Cluster(groups []snapshot.NodeGroup, nodes []corev1.Node, pods []corev1.Pod) snapshot.Snapshot {
	return snapshot.Snapshot{CapturedAt: T0, NodeGroups: groups, Nodes: nodes, Pods: pods}
}
