package podfacts

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestIgnoredTaints(t *testing.T) {
	ig := IgnoredTaints{Startup: []string{"node.cilium.io/agent-not-ready"}, Status: []string{"example.com/degraded"}}
	tests := []struct {
		key             string
		startup, status bool
	}{
		{"startup-taint.cluster-autoscaler.kubernetes.io/cni", true, false},
		{"ignore-taint.cluster-autoscaler.kubernetes.io/gpu", true, false},
		{"status-taint.cluster-autoscaler.kubernetes.io/disk", false, true},
		{"node.cilium.io/agent-not-ready", true, false},
		{"example.com/degraded", false, true},
		{"dedicated", false, false},
		// A prefix names a key's start, not any key holding it.
		{"x.startup-taint.cluster-autoscaler.kubernetes.io/cni", false, false},
		{"node.cilium.io/agent", false, false},
	}
	for _, tc := range tests {
		if got := ig.IsStartup(tc.key); got != tc.startup {
			t.Errorf("IsStartup(%q) = %v, want %v", tc.key, got, tc.startup)
		}
		if got := ig.IsStatus(tc.key); got != tc.status {
			t.Errorf("IsStatus(%q) = %v, want %v", tc.key, got, tc.status)
		}
	}
	// Without configured keys, only the prefixes count.
	if (IgnoredTaints{}).IsStartup("node.cilium.io/agent-not-ready") {
		t.Error("an unconfigured key is a startup taint")
	}
}

func TestIgnoredTaintsWithoutAndStarting(t *testing.T) {
	ig := IgnoredTaints{Startup: []string{"cni"}}
	taint := func(k string) corev1.Taint { return corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule} }
	keep := []corev1.Taint{taint("a"), taint("b")}
	if got := ig.Without(keep); &got[0] != &keep[0] {
		t.Error("Without copied a list it kept whole")
	}
	mixed := []corev1.Taint{taint("cni"), taint("a"), taint(StatusTaintPrefix + "x"), taint("b")}
	got := ig.Without(mixed)
	if !slices.Equal(got, keep) {
		t.Errorf("Without = %v, want %v", got, keep)
	}
	status := taint(StatusTaintPrefix + "x")
	if got := ig.WithoutStartup(mixed); !slices.Equal(got, []corev1.Taint{taint("a"), status, taint("b")}) {
		t.Errorf("WithoutStartup = %v, want the status taint kept", got)
	}
	if mixed[0].Key != "cni" || len(mixed) != 4 {
		t.Errorf("Without changed its input: %v", mixed)
	}

	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint("a"), taint(StartupTaintPrefix + "dp"), taint("cni")}}}
	if k, ok := ig.Starting(n); !ok || k != StartupTaintPrefix+"dp" {
		t.Errorf("Starting = %q, %v; want the first startup taint", k, ok)
	}
	n.Spec.Taints = keep
	if k, ok := ig.Starting(n); ok {
		t.Errorf("Starting = %q on a node without a startup taint", k)
	}
}
