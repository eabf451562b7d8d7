package planner

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const labelZone = corev1.LabelTopologyZone

func hostPortOpt(port int32, proto corev1.Protocol, ip string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: proto, HostIP: ip})
	}
}

func spreadOpt(key string, maxSkew int32, minDomains int32, app string) podOpt {
	return func(p *corev1.Pod) {
		c := corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		}
		if minDomains > 0 {
			c.MinDomains = &minDomains
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	}
}

func podAffinityOpt(anti bool, key, app string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		term := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
		if anti {
			if p.Spec.Affinity.PodAntiAffinity == nil {
				p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
			}
			a := p.Spec.Affinity.PodAntiAffinity
			a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, term)
			return
		}
		if p.Spec.Affinity.PodAffinity == nil {
			p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{}
		}
		a := p.Spec.Affinity.PodAffinity
		a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, term)
	}
}

func pendingPods(prefix string, n int, cpu, mem string, opts ...podOpt) []corev1.Pod {
	var out []corev1.Pod
	for i := range n {
		out = append(out, pod(fmt.Sprintf("universe/%s-%02d", prefix, i), cpu, mem, append([]podOpt{pending(), podLabels("app", prefix)}, opts...)...))
	}
	return out
}

// TestEstimatorCases restates cluster-autoscaler's binpacking estimator
// cases that depend on other pods: a template of 1000m / 5000Mi / 10 pods
// in zone-mars, and an old node in zone-jupiter (cordoned here, so it only
// counts as a domain, as in the estimator, which never packs onto it).
func TestEstimatorCases(t *testing.T) {
	tests := []struct {
		name          string
		pods          []corev1.Pod
		nodes, placed int
		why           string
	}{
		{"host port conflict forces one pod per node", pendingPods("estimatee", 8, "200m", "1000", hostPortOpt(5555, "", "")), 8, 8, ""},
		{"hostname topology spread maxSkew=2", pendingPods("estimatee", 8, "200m", "200", spreadOpt(labelHostname, 2, 1, "estimatee")), 4, 8, ""},
		{"zonal topology spread maxSkew=2", pendingPods("estimatee", 8, "20m", "100", spreadOpt(labelZone, 2, 1, "estimatee")), 1, 2, "topology spread on " + labelZone + " (maxSkew 2)"},
		{"simple resource-based binpacking", pendingPods("estimatee", 10, "350m", "1000"), 5, 10, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := group("template", 0, 100, 0, "1000m", "5000Mi")
			g.Template.Allocatable[corev1.ResourcePods] = *resourceQty("10")
			g = withTemplateLabels(g, labelZone, "zone-mars")
			if tt.name == "simple resource-based binpacking" {
				g.Template.Allocatable[corev1.ResourceCPU] = *resourceQty("1000m")
				g.Template.Allocatable[corev1.ResourceMemory] = *resourceQty("2000")
			}
			old := node("oldnode", "other", "100m", "100Mi", cordoned())
			old.Labels[labelZone] = "zone-jupiter"
			p := Decide(snapshot([]NodeGroup{g}, []corev1.Node{old}, tt.pods), DefaultSettings(), t0)
			if len(p.ScaleUp) != 1 || p.ScaleUp[0].Delta != tt.nodes || len(p.ScaleUp[0].Pods) != tt.placed {
				t.Fatalf("scale-up %+v; want template +%d holding %d pods", p.ScaleUp, tt.nodes, tt.placed)
			}
			if left := len(tt.pods) - tt.placed; len(p.Unschedulable) != left {
				t.Fatalf("%d unschedulable %+v; want %d", len(p.Unschedulable), p.Unschedulable, left)
			}
			for _, u := range p.Unschedulable {
				if !strings.Contains(u.Reason, tt.why) {
					t.Errorf("%s: reason %q does not name %q", u.Pod, u.Reason, tt.why)
				}
			}
		})
	}
}

func resourceQty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
