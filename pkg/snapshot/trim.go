package snapshot

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodetide/nodetide/pkg/podfacts"
)

// Trimmer keeps of each object only the fields the planner (and the
// disruption rules) read, so a large cluster's snapshot costs a fraction of
// its API objects' memory. Pods of one controller usually share their labels
// and their whole trimmed spec: the Trimmer hands such pods the same maps and
// slices, and interns the strings many objects repeat (namespaces, node
// names, label keys and values).
//
// The objects it returns share memory with each other: treat them as
// read-only, as the planner does. A Trimmer is not safe for concurrent use.
type Trimmer struct {
	strs   map[string]string
	shapes map[types.UID]*podShape
	// lists holds the nodes' allocatable and capacity lists by content:
	// nodes of one instance type share them.
	lists map[string]corev1.ResourceList
}

// maxSharedLists bounds Trimmer.lists: a long-lived Trimmer sees nodes come
// and go, and lists that differ per node (ephemeral storage does on some
// clouds) are then kept as they are.
const maxSharedLists = 1024

// podShape is what the pods of one controller have in common.
type podShape struct {
	labels      map[string]string
	annotations map[string]string
	owners      []metav1.OwnerReference
	spec        corev1.PodSpec
}

// NewTrimmer returns an empty Trimmer.
func NewTrimmer() *Trimmer {
	return &Trimmer{strs: map[string]string{}, shapes: map[types.UID]*podShape{}, lists: map[string]corev1.ResourceList{}}
}

// keptAnnotation reports whether nodetide reads an annotation; every other
// annotation is dropped.
func keptAnnotation(key string) bool {
	return strings.HasPrefix(key, "cluster-autoscaler.kubernetes.io/") ||
		strings.HasPrefix(key, "karpenter.sh/") ||
		strings.HasPrefix(key, "nodetide.io/") ||
		key == corev1.MirrorPodAnnotationKey
}

func (t *Trimmer) str(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := t.strs[s]; ok {
		return v
	}
	s = strings.Clone(s)
	t.strs[s] = s
	return s
}

func (t *Trimmer) strMap(m map[string]string, keep func(string) bool) map[string]string {
	var out map[string]string
	for k, v := range m {
		if keep != nil && !keep(k) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(m))
		}
		out[t.str(k)] = t.str(v)
	}
	return out
}

// Pod returns p with only what the planner reads.
func (t *Trimmer) Pod(p *corev1.Pod) corev1.Pod {
	out, _ := t.pod(p)
	return out
}

// pod is Pod, also returning the shape the trimmed pod shares with the
// other pods of its controller (a pod of no controller has its own).
func (t *Trimmer) pod(p *corev1.Pod) (corev1.Pod, *podShape) {
	out := corev1.Pod{TypeMeta: p.TypeMeta}
	out.Name = p.Name
	out.Namespace = t.str(p.Namespace)
	out.UID = p.UID
	out.CreationTimestamp = p.CreationTimestamp
	out.DeletionTimestamp = p.DeletionTimestamp

	var owner types.UID
	for i := range p.OwnerReferences {
		if o := &p.OwnerReferences[i]; o.Controller != nil && *o.Controller {
			owner = o.UID
		}
	}
	spec := trimPodSpec(&p.Spec)
	// A DaemonSet's pods differ only in their pin to their node: they share
	// a shape with the node's name left empty, and each gets its pin back.
	node := pinnedNode(spec.Affinity)
	if node != "" {
		spec.Affinity = pinAffinity(spec.Affinity, "")
	}
	prev := t.shapes[owner]
	if prev == nil || owner == "" || !prev.matches(p, &spec) {
		prev = &podShape{
			labels:      t.strMap(p.Labels, nil),
			annotations: t.strMap(p.Annotations, keptAnnotation),
			owners:      t.owners(p.OwnerReferences),
			spec:        t.internSpec(spec),
		}
		if owner != "" {
			t.shapes[owner] = prev
		}
	}
	out.Labels = prev.labels
	out.Annotations = prev.annotations
	out.OwnerReferences = prev.owners
	out.Spec = prev.spec
	out.Spec.NodeName = t.str(p.Spec.NodeName)
	if node != "" {
		out.Spec.Affinity = pinAffinity(prev.spec.Affinity, t.str(node))
	}

	out.Status.Phase = p.Status.Phase
	out.Status.NominatedNodeName = t.str(p.Status.NominatedNodeName)
	if c := scheduledCondition(p); c != nil {
		out.Status.Conditions = []corev1.PodCondition{{
			Type: c.Type, Status: c.Status, Reason: t.str(c.Reason),
			LastTransitionTime: c.LastTransitionTime,
		}}
	}
	return out, prev
}

// scheduledCondition is the PodScheduled condition of an unbound pod: only
// an unbound pod's scheduling condition is read.
func scheduledCondition(p *corev1.Pod) *corev1.PodCondition {
	if p.Spec.NodeName != "" {
		return nil
	}
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodScheduled {
			return c
		}
	}
	return nil
}

// matches reports whether p's kept fields equal the shape's, so p can share
// them.
func (s *podShape) matches(p *corev1.Pod, spec *corev1.PodSpec) bool {
	if !maps.Equal(s.labels, p.Labels) || !slices.EqualFunc(s.owners, p.OwnerReferences, sameOwner) {
		return false
	}
	var kept int
	for k, v := range p.Annotations {
		if !keptAnnotation(k) {
			continue
		}
		kept++
		if w, ok := s.annotations[k]; !ok || w != v {
			return false
		}
	}
	return kept == len(s.annotations) && reflect.DeepEqual(&s.spec, spec)
}

func sameOwner(a, b metav1.OwnerReference) bool {
	return a.UID == b.UID && a.Kind == b.Kind && a.Name == b.Name && a.APIVersion == b.APIVersion &&
		(a.Controller != nil && *a.Controller) == (b.Controller != nil && *b.Controller)
}

func (t *Trimmer) owners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return nil
	}
	out := make([]metav1.OwnerReference, len(refs))
	for i, r := range refs {
		out[i] = metav1.OwnerReference{
			APIVersion: t.str(r.APIVersion), Kind: t.str(r.Kind), Name: t.str(r.Name),
			UID: r.UID, Controller: r.Controller,
		}
	}
	return out
}

// trimPodSpec keeps what packing, the scheduling predicates and the
// disruption rules read. NodeName is set by the caller (it is per pod).
func trimPodSpec(s *corev1.PodSpec) corev1.PodSpec {
	out := corev1.PodSpec{
		NodeSelector:              s.NodeSelector,
		Affinity:                  s.Affinity,
		Tolerations:               s.Tolerations,
		TopologySpreadConstraints: s.TopologySpreadConstraints,
		Overhead:                  s.Overhead,
		Priority:                  s.Priority,
		PriorityClassName:         s.PriorityClassName,
		SchedulerName:             s.SchedulerName,
		HostNetwork:               s.HostNetwork,
		Containers:                trimContainers(s.Containers),
		InitContainers:            trimContainers(s.InitContainers),
	}
	if s.Resources != nil {
		out.Resources = &corev1.ResourceRequirements{Requests: s.Resources.Requests}
	}
	for _, v := range s.Volumes {
		// Local storage blocks scale-down; claims tie a pod to its volume's
		// topology. Nothing reads the other volumes, and they are dropped
		// whole: their names can differ per pod (the service account token
		// volume is kube-api-access-<random> in every pod), which would
		// keep the pods of one controller from sharing their spec.
		if v.HostPath == nil && v.EmptyDir == nil && v.PersistentVolumeClaim == nil && v.Ephemeral == nil {
			continue
		}
		out.Volumes = append(out.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
			HostPath: v.HostPath, EmptyDir: v.EmptyDir, PersistentVolumeClaim: v.PersistentVolumeClaim, Ephemeral: v.Ephemeral,
		}})
	}
	return out
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		c := &cs[i]
		out[i] = corev1.Container{
			Name:          c.Name,
			Resources:     corev1.ResourceRequirements{Requests: c.Resources.Requests},
			RestartPolicy: c.RestartPolicy,
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				out[i].Ports = append(out[i].Ports, p)
			}
		}
	}
	return out
}

// internSpec interns the strings of a spec that is about to be shared.
func (t *Trimmer) internSpec(s corev1.PodSpec) corev1.PodSpec {
	s.NodeSelector = t.strMap(s.NodeSelector, nil)
	for i := range s.Containers {
		s.Containers[i].Name = t.str(s.Containers[i].Name)
	}
	for i := range s.InitContainers {
		s.InitContainers[i].Name = t.str(s.InitContainers[i].Name)
	}
	s.PriorityClassName = t.str(s.PriorityClassName)
	s.SchedulerName = t.str(s.SchedulerName)
	return s
}

// Node returns n with only what the planner reads: its spec, labels, kept
// annotations, allocatable and capacity, and the type, status and reason of
// its conditions (images, addresses and the like are dropped).
func (t *Trimmer) Node(n *corev1.Node) corev1.Node {
	out := corev1.Node{TypeMeta: n.TypeMeta}
	out.Name = t.str(n.Name)
	out.UID = n.UID
	out.CreationTimestamp = n.CreationTimestamp
	out.DeletionTimestamp = n.DeletionTimestamp
	out.Labels = t.strMap(n.Labels, nil)
	out.Annotations = t.strMap(n.Annotations, keptAnnotation)
	out.Spec = corev1.NodeSpec{
		ProviderID:    n.Spec.ProviderID,
		Unschedulable: n.Spec.Unschedulable,
		Taints:        n.Spec.Taints,
	}
	out.Status.Allocatable = t.resources(n.Status.Allocatable)
	out.Status.Capacity = t.resources(n.Status.Capacity)
	if len(n.Status.Conditions) > 0 {
		out.Status.Conditions = make([]corev1.NodeCondition, 0, len(n.Status.Conditions))
	}
	for _, c := range n.Status.Conditions {
		out.Status.Conditions = append(out.Status.Conditions, corev1.NodeCondition{
			Type: c.Type, Status: c.Status, Reason: t.str(c.Reason),
			LastTransitionTime: c.LastTransitionTime,
		})
	}
	return out
}

// resources returns a list equal to l, the one handed out before when
// there was one: at 5,000 nodes, two lists each are megabytes.
func (t *Trimmer) resources(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var key strings.Builder
	for _, name := range names {
		q := l[corev1.ResourceName(name)]
		// The canonical form and format: lists that read the same write
		// the same.
		key.WriteString(name + "=" + q.String() + "/" + string(q.Format) + "\n")
	}
	if shared, ok := t.lists[key.String()]; ok {
		return shared
	}
	if len(t.lists) < maxSharedLists {
		t.lists[key.String()] = l
	}
	return l
}

// PDB returns b with only what the planner reads: its selector and the
// disruptions it allows.
func (t *Trimmer) PDB(b *policyv1.PodDisruptionBudget) policyv1.PodDisruptionBudget {
	out := policyv1.PodDisruptionBudget{TypeMeta: b.TypeMeta}
	out.Name = b.Name
	out.Namespace = t.str(b.Namespace)
	out.UID = b.UID
	out.Spec = b.Spec
	out.Status.DisruptionsAllowed = b.Status.DisruptionsAllowed
	out.Status.CurrentHealthy = b.Status.CurrentHealthy
	out.Status.DesiredHealthy = b.Status.DesiredHealthy
	out.Status.ExpectedPods = b.Status.ExpectedPods
	out.Status.ObservedGeneration = b.Status.ObservedGeneration
	out.Generation = b.Generation
	return out
}

// Snapshot trims every object of s in place.
func (t *Trimmer) Snapshot(s *Snapshot) {
	for i := range s.Nodes {
		s.Nodes[i] = t.Node(&s.Nodes[i])
	}
	for i := range s.Pods {
		s.Pods[i] = t.Pod(&s.Pods[i])
	}
	for i := range s.PodDisruptionBudgets {
		s.PodDisruptionBudgets[i] = t.PDB(&s.PodDisruptionBudgets[i])
	}
	for i := range s.PersistentVolumeClaims {
		s.PersistentVolumeClaims[i] = t.PersistentVolumeClaim(&s.PersistentVolumeClaims[i])
	}
	for i := range s.PersistentVolumes {
		s.PersistentVolumes[i] = t.PersistentVolume(&s.PersistentVolumes[i])
	}
	for i := range s.StorageClasses {
		s.StorageClasses[i] = t.StorageClass(&s.StorageClasses[i])
	}
}

// PersistentVolumeClaim returns c with only what volume topology reads: its
// name, namespace, volume, class (and the beta class annotation, which
// wins over it), phase and deletion.
func (t *Trimmer) PersistentVolumeClaim(c *corev1.PersistentVolumeClaim) corev1.PersistentVolumeClaim {
	out := corev1.PersistentVolumeClaim{TypeMeta: c.TypeMeta}
	out.Name = c.Name
	out.Namespace = t.str(c.Namespace)
	out.UID = c.UID
	out.DeletionTimestamp = c.DeletionTimestamp
	if v, ok := c.Annotations[podfacts.AnnotationStorageClass]; ok {
		out.Annotations = map[string]string{podfacts.AnnotationStorageClass: t.str(v)}
	}
	out.Spec.VolumeName = c.Spec.VolumeName
	if c.Spec.StorageClassName != nil {
		name := t.str(*c.Spec.StorageClassName)
		out.Spec.StorageClassName = &name
	}
	out.Status.Phase = c.Status.Phase
	return out
}

// PersistentVolume returns v with only what volume topology reads: its
// name, node affinity, zone and region labels, and the claim it is bound to.
func (t *Trimmer) PersistentVolume(v *corev1.PersistentVolume) corev1.PersistentVolume {
	out := corev1.PersistentVolume{TypeMeta: v.TypeMeta}
	out.Name = v.Name
	out.UID = v.UID
	for _, key := range podfacts.VolumeZoneLabels() {
		if val, ok := v.Labels[key]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[t.str(key)] = t.str(val)
		}
	}
	out.Spec.NodeAffinity = v.Spec.NodeAffinity
	if r := v.Spec.ClaimRef; r != nil {
		out.Spec.ClaimRef = &corev1.ObjectReference{Namespace: t.str(r.Namespace), Name: r.Name, UID: r.UID}
	}
	out.Status.Phase = v.Status.Phase
	return out
}

// StorageClass returns sc with only what volume topology reads: its name,
// provisioner, binding mode and allowed topologies.
func (t *Trimmer) StorageClass(sc *storagev1.StorageClass) storagev1.StorageClass {
	out := storagev1.StorageClass{TypeMeta: sc.TypeMeta}
	out.Name = t.str(sc.Name)
	out.UID = sc.UID
	out.Provisioner = t.str(sc.Provisioner)
	out.VolumeBindingMode = sc.VolumeBindingMode
	out.AllowedTopologies = sc.AllowedTopologies
	return out
}
