package planner

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

func TestDisruptionBlockers(t *testing.T) {
	ks := func(opts ...podOpt) corev1.Pod {
		return light("kube-system/dns", append([]podOpt{podLabels("k8s-app", "dns")}, opts...)...)
	}
	local := RuleLocalStorage + ` (volume "data")`
	cases := []struct {
		name string
		node []nodeOpt
		pods []corev1.Pod
		pdbs []policyv1.PodDisruptionBudget
		want []string // Blocker.String()
	}{
		{"a replicated pod moves", nil, []corev1.Pod{light("a")}, nil, nil},
		{"a bare pod", nil, []corev1.Pod{light("a", bare())}, nil, []string{"pod default/a: " + RuleNoController}},
		{"hostPath", nil, []corev1.Pod{light("a", hostPath("data"))}, nil, []string{"pod default/a: " + local}},
		{"a disk emptyDir", nil, []corev1.Pod{light("a", emptyDir("data", ""))}, nil, []string{"pod default/a: " + local}},
		{"a memory emptyDir does not", nil, []corev1.Pod{light("a", emptyDir("data", corev1.StorageMediumMemory))}, nil, nil},
		{"local volumes listed as safe do not", nil, []corev1.Pod{light("a", hostPath("data"), annotate(annotationSafeLocalVolumes, "x, data"))}, nil, nil},
		{"kube-system without a PDB", nil, []corev1.Pod{ks()}, nil, []string{"pod kube-system/dns: " + RuleKubeSystem}},
		{"kube-system with a PDB", nil, []corev1.Pod{ks()}, []policyv1.PodDisruptionBudget{pdb("kube-system/dns", 1, "k8s-app", "dns")}, nil},
		{"kube-system with a PDB allowing nothing now is a wait", nil, []corev1.Pod{ks()}, []policyv1.PodDisruptionBudget{pdb("kube-system/dns", 0, "k8s-app", "dns")}, nil},
		{"a PDB in another namespace does not cover", nil, []corev1.Pod{ks()}, []policyv1.PodDisruptionBudget{pdb("default/dns", 1, "k8s-app", "dns")}, []string{"pod kube-system/dns: " + RuleKubeSystem}},
		{"a PDB allowing nothing now is a wait", nil, []corev1.Pod{light("a")}, []policyv1.PodDisruptionBudget{pdb("default/web", 0, "app", "web")}, nil},
		{"safe-to-evict=false", nil, []corev1.Pod{light("a", annotate(annotationSafeToEvict, "false"))}, nil, []string{"pod default/a: " + RuleNotSafeToEvict}},
		{"safe-to-evict=true lets bare, local and kube-system pods go", nil, []corev1.Pod{light("a", bare(), hostPath("data"), annotate(annotationSafeToEvict, "true")), ks(annotate(annotationSafeToEvict, "true"))}, nil, nil},
		{"do-not-disrupt even when safe to evict", nil, []corev1.Pod{light("a", annotate(annotationSafeToEvict, "true"), annotate(annotationDoNotDisrupt, "true"))}, nil, []string{"pod default/a: " + RuleDoNotDisrupt}},
		{"DaemonSet, mirror, terminal and terminating pods never block", nil, []corev1.Pod{
			light("kube-system/logs", daemon("ds-logs"), hostPath("logs")), light("kube-system/etcd", mirror(), hostPath("etcd")),
			light("done", bare(), phase(corev1.PodFailed)), light("bye", bare(), podDeleting())}, nil, nil},
		{"pods of other nodes are not this node's", nil, []corev1.Pod{pod("elsewhere", "1", "1Gi", bare(), on("n2"))}, nil, nil},
		{"node scale-down-disabled", []nodeOpt{nodeAnnotation(annotationScaleDownDisabled, "true")}, nil, nil, []string{"node n1: " + RuleNodeScaleDownDisabled}},
		{"node do-not-disrupt, and every blocking pod", []nodeOpt{nodeAnnotation(annotationDoNotDisrupt, "true")},
			[]corev1.Pod{light("a", bare()), light("b"), light("c", annotate(annotationSafeToEvict, "false"))}, nil,
			[]string{"node n1: " + RuleNodeDoNotDisrupt, "pod default/a: " + RuleNoController, "pod default/c: " + RuleNotSafeToEvict}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := node("n1", "workers", "4", "16Gi", tc.node...)
			var got []string
			for _, b := range DisruptionBlockers(&n, tc.pods, tc.pdbs) {
				got = append(got, b.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("blockers = %q, want %q", got, tc.want)
			}
		})
	}
}
