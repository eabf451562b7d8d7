// Package podfacts is nodetide's vocabulary for Kubernetes objects: the taint it
// puts on nodes it drains, the startup and status taints it ignores, and what it reads a pod to be (unschedulable,
// terminal, a mirror or DaemonSet pod). The planner, the drain and the
// evaluate cycle all ask these questions; answering them in one place keeps
// their answers the same. It depends on the API types only, never on a
// client.
package podfacts

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TaintDraining marks a node nodetide is draining (NoSchedule).
const TaintDraining = "nodetide.io/draining"

// IsTerminal reports whether the pod has finished (Succeeded or Failed).
func IsTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// UnschedulableSince reports whether the scheduler marked the pod
// Unschedulable — not bound, not finished, not being deleted, its
// PodScheduled condition False with reason Unschedulable — and since when
// (the condition's transition, or the pod's creation when that is unset).
func UnschedulableSince(p *corev1.Pod) (time.Time, bool) {
	if p.Spec.NodeName != "" || IsTerminal(p) || p.DeletionTimestamp != nil {
		return time.Time{}, false
	}
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type != corev1.PodScheduled {
			continue
		}
		if c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			return time.Time{}, false
		}
		if c.LastTransitionTime.IsZero() {
			return p.CreationTimestamp.Time, true
		}
		return c.LastTransitionTime.Time, true
	}
	return time.Time{}, false
}

// IsUnschedulable reports whether the scheduler marked the pod
// Unschedulable (see UnschedulableSince).
func IsUnschedulable(p *corev1.Pod) bool {
	_, ok := UnschedulableSince(p)
	return ok
}

// ControllerOf returns the kind and UID of the pod's controlling owner.
func ControllerOf(p *corev1.Pod) (kind, uid string, ok bool) {
	for i := range p.OwnerReferences {
		o := &p.OwnerReferences[i]
		if o.Controller != nil && *o.Controller {
			return o.Kind, string(o.UID), true
		}
	}
	return "", "", false
}

// IsDaemonSetPod reports whether a DaemonSet controls the pod.
func IsDaemonSetPod(p *corev1.Pod) bool {
	kind, _, ok := ControllerOf(p)
	return ok && kind == "DaemonSet"
}

// IsMirrorPod reports whether the pod is the API's mirror of a static pod
// (the kubelet runs it; evicting it does nothing).
func IsMirrorPod(p *corev1.Pod) bool {
	_, ok := p.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// AnnotationStorageClass is the storage class of claims made before
// spec.storageClassName existed; the scheduler still reads it first.
const AnnotationStorageClass = "volume.beta.kubernetes.io/storage-class"

// VolumeZoneLabels are the zone and region labels the scheduler's
// VolumeZone check compares between a volume and a node. A beta label on
// the volume also matches its GA label on the node.
func VolumeZoneLabels() [4]string {
	return [...]string{
		corev1.LabelFailureDomainBetaZone,
		corev1.LabelFailureDomainBetaRegion,
		corev1.LabelTopologyZone,
		corev1.LabelTopologyRegion,
	}
}

// ResourceGPU is the extended resource the planner packs besides cpu, memory
// and pod slots.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
