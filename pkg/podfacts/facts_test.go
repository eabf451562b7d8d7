package podfacts

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUnschedulableSince(t *testing.T) {
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	marked := created.Add(3 * time.Second)
	cond := func(status corev1.ConditionStatus, reason string, at time.Time) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodScheduled, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
	}
	pod := func(opts ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		p.Status.Conditions = []corev1.PodCondition{cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable, marked)}
		for _, o := range opts {
			o(p)
		}
		return p
	}
	now := metav1.NewTime(created)
	tests := []struct {
		name string
		pod  *corev1.Pod
		ok   bool
		at   time.Time
	}{
		{"marked", pod(), true, marked},
		{"no transition time", pod(func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.Time{} }), true, created},
		{"bound", pod(func(p *corev1.Pod) { p.Spec.NodeName = "n1" }), false, time.Time{}},
		{"failed", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false, time.Time{}},
		{"deleting", pod(func(p *corev1.Pod) { p.DeletionTimestamp = &now }), false, time.Time{}},
		{"scheduling gated", pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.ConditionFalse, corev1.PodReasonSchedulingGated, marked)}
		}), false, time.Time{}},
		{"not yet tried", pod(func(p *corev1.Pod) { p.Status.Conditions = nil }), false, time.Time{}},
		{"other conditions first", pod(func(p *corev1.Pod) {
			p.Status.Conditions = append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}, p.Status.Conditions...)
		}), true, marked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			at, ok := UnschedulableSince(tc.pod)
			if ok != tc.ok || !at.Equal(tc.at) || IsUnschedulable(tc.pod) != tc.ok {
				t.Errorf("UnschedulableSince = %v, %v; want %v, %v", at, ok, tc.at, tc.ok)
			}
		})
	}
}

func TestPodKinds(t *testing.T) {
	yes := true
	owned := func(kind string, controller *bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: kind, UID: "u1", Controller: controller}}}}
	}
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}}
	tests := []struct {
		name              string
		pod               *corev1.Pod
		daemonSet, mirror bool
		kind              string
	}{
		{"DaemonSet", owned("DaemonSet", &yes), true, false, "DaemonSet"},
		{"ReplicaSet", owned("ReplicaSet", &yes), false, false, "ReplicaSet"},
		{"owner that is no controller", owned("DaemonSet", nil), false, false, ""},
		{"mirror", mirror, false, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kind, _, _ := ControllerOf(tc.pod)
			if IsDaemonSetPod(tc.pod) != tc.daemonSet || IsMirrorPod(tc.pod) != tc.mirror || kind != tc.kind {
				t.Errorf("daemonSet %v mirror %v kind %q; want %v %v %q", IsDaemonSetPod(tc.pod), IsMirrorPod(tc.pod), kind, tc.daemonSet, tc.mirror, tc.kind)
			}
		})
	}
	if !IsTerminal(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}) || IsTerminal(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}) {
		t.Error("IsTerminal: want Succeeded terminal, Running not")
	}
}
