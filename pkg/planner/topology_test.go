package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
			p := Decide(clusterOf([]snapshot.NodeGroup{g}, []corev1.Node{old}, tt.pods), DefaultSettings(), t0)
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

// TestPodRules checks the scheduler's semantics case by case on small
// clusters: one registered node n1 (zone za, 4 CPU) in group g (max 5,
// template zone za, 4 CPU), and the pods given.
func TestPodRules(t *testing.T) {
	ignore := corev1.NodeInclusionPolicyIgnore
	tests := []struct {
		name        string
		nodes       []corev1.Node // besides n1
		pods        []corev1.Pod
		delta       int    // new nodes of g
		unsched     int    // pods left pending
		reason      string // in every unschedulable reason
		scaleUpRule string // in the scale-up reason
	}{
		{
			name: "host port taken on the node: a new node",
			pods: []corev1.Pod{
				pod("web-0", "100m", "", on("n1"), hostPortOpt(80, "", "")),
				pod("web-1", "100m", "", pending(), hostPortOpt(80, "", "")),
			},
			delta: 1, scaleUpRule: "host port 80/TCP",
		},
		{
			name: "same port, other protocol: fits",
			pods: []corev1.Pod{
				pod("web-0", "100m", "", on("n1"), hostPortOpt(53, corev1.ProtocolUDP, "")),
				pod("web-1", "100m", "", pending(), hostPortOpt(53, corev1.ProtocolTCP, "")),
			},
		},
		{
			name: "same port, two host IPs: fits",
			pods: []corev1.Pod{
				pod("web-0", "100m", "", on("n1"), hostPortOpt(80, "", "10.0.0.1")),
				pod("web-1", "100m", "", pending(), hostPortOpt(80, "", "10.0.0.2")),
			},
		},
		{
			name: "an existing pod's anti-affinity keeps a plain pod off its node",
			pods: []corev1.Pod{
				pod("db-0", "100m", "", on("n1"), podLabels("app", "db"), podAffinityOpt(true, labelHostname, "web")),
				pod("web-0", "100m", "", pending(), podLabels("app", "web")),
			},
			delta: 1, scaleUpRule: "least waste",
		},
		{
			name: "anti-affinity in another namespace does not apply",
			pods: []corev1.Pod{
				pod("other/db-0", "100m", "", on("n1"), podLabels("app", "db"), podAffinityOpt(true, labelHostname, "web")),
				pod("web-0", "100m", "", pending(), podLabels("app", "web")),
			},
		},
		{
			name: "zone anti-affinity: the template's zone is taken, nothing fits",
			pods: []corev1.Pod{
				pod("web-0", "100m", "", on("n1"), podLabels("app", "web")),
				pod("web-1", "100m", "", pending(), podLabels("app", "web"), podAffinityOpt(true, labelZone, "web")),
			},
			unsched: 1, reason: "pod anti-affinity on " + labelZone,
		},
		{
			name: "affinity to pods that are nowhere, not even itself",
			pods: []corev1.Pod{
				pod("web-0", "100m", "", pending(), podLabels("app", "web"), podAffinityOpt(false, labelHostname, "cache")),
			},
			unsched: 1, reason: "pod affinity on " + labelHostname + " not satisfied",
		},
		{
			name: "the first pod of a self-affine series fits, and its peers follow it",
			pods: []corev1.Pod{
				pod("web-0", "100m", "", pending(), podLabels("app", "web"), podAffinityOpt(false, labelHostname, "web")),
				pod("web-1", "100m", "", pending(), podLabels("app", "web"), podAffinityOpt(false, labelHostname, "web")),
			},
		},
		{
			name:  "affinity follows the target's zone onto a new node",
			nodes: []corev1.Node{withZone(node("n2", "other", "4", "8Gi"), "zb")},
			pods: []corev1.Pod{
				pod("cache-0", "3500m", "", on("n1"), podLabels("app", "cache")),
				pod("web-0", "1", "", pending(), podLabels("app", "web"), podAffinityOpt(false, labelZone, "cache")),
			},
			delta: 1, scaleUpRule: "pod affinity on " + labelZone,
		},
		{
			name:  "zone spread: zone za is one ahead, the new node in za may not take it",
			nodes: []corev1.Node{withZone(node("n2", "other", "50m", "8Gi"), "zb")},
			pods: []corev1.Pod{
				pod("web-0", "100m", "", on("n1"), podLabels("app", "web")),
				pod("web-1", "100m", "", pending(), podLabels("app", "web"), spreadOpt(labelZone, 1, 0, "web")),
			},
			unsched: 1, reason: "topology spread on " + labelZone + " (maxSkew 1)",
		},
		{
			name:  "zone spread with nodeAffinityPolicy Ignore counts zb even though the pod cannot go there",
			nodes: []corev1.Node{withZone(node("n2", "other", "4", "8Gi"), "zb")},
			pods: []corev1.Pod{
				pod("web-0", "100m", "", on("n1"), podLabels("app", "web")),
				pod("web-1", "100m", "", pending(), podLabels("app", "web"), selector("pool", "g"), spreadOpt(labelZone, 1, 0, "web"),
					func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = &ignore }),
			},
			unsched: 1, reason: "topology spread on " + labelZone,
		},
		{
			name:  "zone spread honouring node affinity: only za counts, it fits",
			nodes: []corev1.Node{withZone(node("n2", "other", "4", "8Gi"), "zb")},
			pods: []corev1.Pod{
				pod("web-0", "100m", "", on("n1"), podLabels("app", "web")),
				pod("web-1", "100m", "", pending(), podLabels("app", "web"), selector("pool", "g"), spreadOpt(labelZone, 1, 0, "web")),
			},
		},
		{
			name: "minDomains 2 with one zone: the global minimum is 0",
			pods: []corev1.Pod{
				pod("web-0", "100m", "", pending(), podLabels("app", "web"), spreadOpt(labelZone, 1, 2, "web")),
				pod("web-1", "100m", "", pending(), podLabels("app", "web"), spreadOpt(labelZone, 1, 2, "web")),
			},
			unsched: 1, reason: "topology spread on " + labelZone,
		},
		{
			name: "a single domain never skews: hostname spread on n1 alone",
			pods: []corev1.Pod{
				pod("web-0", "100m", "", on("n1"), podLabels("app", "web")),
				pod("web-1", "100m", "", pending(), podLabels("app", "web"), spreadOpt(labelHostname, 1, 0, "web")),
				pod("web-2", "100m", "", pending(), podLabels("app", "web"), spreadOpt(labelHostname, 1, 0, "web")),
			},
		},
		{
			name:  "hostname spread maxSkew 1 counting an empty node it may not use: one pod per new node",
			nodes: []corev1.Node{withZone(node("n2", "other", "4", "8Gi"), "zb")},
			pods: []corev1.Pod{
				pod("web-0", "100m", "", on("n1"), podLabels("app", "web")),
				pod("web-1", "100m", "", pending(), podLabels("app", "web"), selector("pool", "g"), spreadOpt(labelHostname, 1, 0, "web"),
					func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = &ignore }),
				pod("web-2", "100m", "", pending(), podLabels("app", "web"), selector("pool", "g"), spreadOpt(labelHostname, 1, 0, "web"),
					func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = &ignore }),
				pod("web-3", "100m", "", pending(), podLabels("app", "web"), selector("pool", "g"), spreadOpt(labelHostname, 1, 0, "web"),
					func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = &ignore }),
			},
			delta: 3, scaleUpRule: "topology spread on " + labelHostname,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := withTemplateLabels(group("g", 0, 5, 1, "4", "8Gi", "n1"), labelZone, "za")
			nodes := append([]corev1.Node{withZone(node("n1", "g", "4", "8Gi"), "za")}, tt.nodes...)
			p := Decide(clusterOf([]snapshot.NodeGroup{g}, nodes, tt.pods), DefaultSettings(), t0)
			delta := 0
			for _, u := range p.ScaleUp {
				delta += u.Delta
				if tt.scaleUpRule != "" && !strings.Contains(u.Reason, tt.scaleUpRule) {
					t.Errorf("scale-up reason %q does not name %q", u.Reason, tt.scaleUpRule)
				}
			}
			if delta != tt.delta || len(p.Unschedulable) != tt.unsched {
				t.Fatalf("%d new nodes, unschedulable %+v; want %d new nodes, %d unschedulable", delta, p.Unschedulable, tt.delta, tt.unsched)
			}
			for _, u := range p.Unschedulable {
				if !strings.Contains(u.Reason, tt.reason) {
					t.Errorf("%s: reason %q does not name %q", u.Pod, u.Reason, tt.reason)
				}
			}
		})
	}
}

func withZone(n corev1.Node, zone string) corev1.Node {
	n.Labels[labelZone] = zone
	return n
}

// TestScaleDownKeepsPodRules: a node goes only when its pods' rules let
// them move. n1 and n2 are in zone zb; n0 (zone za, opted out of
// scale-down, almost no room) anchors zone za.
func TestScaleDownKeepsPodRules(t *testing.T) {
	tests := []struct {
		name    string
		pods    []corev1.Pod
		removed int
	}{
		{"plain pods move", []corev1.Pod{
			pod("web-0", "100m", "", on("n1")), pod("web-1", "100m", "", on("n2")),
		}, 1},
		{"one per node by anti-affinity: neither can go", []corev1.Pod{
			pod("web-0", "100m", "", on("n1"), podAffinityOpt(true, labelHostname, "web")),
			pod("web-1", "100m", "", on("n2"), podAffinityOpt(true, labelHostname, "web")),
		}, 0},
		{"host port on both nodes: neither can go", []corev1.Pod{
			pod("web-0", "100m", "", on("n1"), hostPortOpt(80, "", "")),
			pod("web-1", "100m", "", on("n2"), hostPortOpt(80, "", "")),
		}, 0},
		{"zone spread against empty zone za: both in one zb node would be skew 2", []corev1.Pod{
			pod("web-0", "100m", "", on("n1"), spreadOpt(labelZone, 1, 0, "web")),
			pod("web-1", "100m", "", on("n2"), spreadOpt(labelZone, 1, 0, "web")),
		}, 0},
		{"zone spread with maxSkew 2: they may share a node", []corev1.Pod{
			pod("web-0", "100m", "", on("n1"), spreadOpt(labelZone, 2, 0, "web")),
			pod("web-1", "100m", "", on("n2"), spreadOpt(labelZone, 2, 0, "web")),
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := DefaultSettings()
			set.ScaleDown.UnneededTime = 0
			set.ScaleDown.MaxConcurrentDrains = 10
			g := group("g", 0, 5, 3, "4", "8Gi", "n0", "n1", "n2")
			nodes := []corev1.Node{
				withZone(node("n0", "g", "50m", "8Gi", nodeAnnotation(annotationScaleDownDisabled, "true")), "za"),
				withZone(node("n1", "g", "4", "8Gi"), "zb"),
				withZone(node("n2", "g", "4", "8Gi"), "zb"),
			}
			p := Decide(clusterOf([]snapshot.NodeGroup{g}, nodes, tt.pods), set, t0)
			if len(p.ScaleDown) != tt.removed {
				t.Fatalf("scale-down %+v; want %d nodes removed", p.ScaleDown, tt.removed)
			}
		})
	}
}
