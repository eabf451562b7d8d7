package drain

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Taking a surge back writes the count back only while it is the one the
// surge wrote; any other is someone else's and is left, saying why.
func TestDecideRestore(t *testing.T) {
	tests := []struct {
		name                string
		wrote, delta, found int32
		restoring           bool
		want                restoreDecision
		wantLeft            string
	}{
		{name: "unchanged: restored", wrote: 2, delta: 1, found: 2, want: restoreDecision{Write: true, To: 1}},
		{name: "two pods surged, unchanged", wrote: 5, delta: 2, found: 5, want: restoreDecision{Write: true, To: 3}},
		{name: "a person scaled up: left", wrote: 2, delta: 1, found: 4, wantLeft: "replicas are 4, not the 2 the drain's surge set"},
		{name: "a person scaled down: left", wrote: 3, delta: 1, found: 1, wantLeft: "replicas are 1, not the 3"},
		{name: "a person scaled to what it was: left", wrote: 2, delta: 1, found: 1, wantLeft: "replicas are 1, not the 2"},
		{name: "an HPA scaled to zero: left", wrote: 2, delta: 1, found: 0, wantLeft: "replicas are 0"},
		{name: "own restore landed, answer lost", wrote: 2, delta: 1, found: 1, restoring: true, want: restoreDecision{Done: true}},
		{name: "own restore did not land", wrote: 2, delta: 1, found: 2, restoring: true, want: restoreDecision{Write: true, To: 1}},
		{name: "own restore in doubt, then changed", wrote: 2, delta: 1, found: 7, restoring: true, wantLeft: "replicas are 7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := decideRestore(tc.wrote, tc.delta, tc.found, tc.restoring)
			if tc.wantLeft != "" {
				if got.Write || got.Done || !strings.Contains(got.Left, tc.wantLeft) || !strings.Contains(got.Left, "left as they are") {
					t.Fatalf("decideRestore = %+v, want it left saying %q", got, tc.wantLeft)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("decideRestore = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A Deployment is HPA-managed when an HPA of its namespace targets it by
// kind and name.
func TestHPAFor(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	hpa := func(ns, name, kind, target, apiVersion string) autoscalingv2.HorizontalPodAutoscaler {
		return autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: kind, Name: target, APIVersion: apiVersion}}}
	}
	tests := []struct {
		name string
		hpas []autoscalingv2.HorizontalPodAutoscaler
		want string
	}{
		{"none", nil, ""},
		{"targets it", []autoscalingv2.HorizontalPodAutoscaler{hpa("shop", "web-hpa", "Deployment", "web", "apps/v1")}, "web-hpa"},
		{"another deployment", []autoscalingv2.HorizontalPodAutoscaler{hpa("shop", "api", "Deployment", "api", "apps/v1")}, ""},
		{"a StatefulSet of the same name", []autoscalingv2.HorizontalPodAutoscaler{hpa("shop", "db", "StatefulSet", "web", "apps/v1")}, ""},
		{"another namespace", []autoscalingv2.HorizontalPodAutoscaler{hpa("other", "web", "Deployment", "web", "apps/v1")}, ""},
		{"no apiVersion given", []autoscalingv2.HorizontalPodAutoscaler{hpa("shop", "old", "Deployment", "web", "")}, "old"},
		{"second of several", []autoscalingv2.HorizontalPodAutoscaler{hpa("shop", "api", "Deployment", "api", "apps/v1"), hpa("shop", "web", "Deployment", "web", "apps/v1")}, "web"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hpaFor(dep, tc.hpas); got != tc.want {
				t.Errorf("hpaFor = %q, want %q", got, tc.want)
			}
		})
	}
}
