package evaluate_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
)

// deploySelecting creates a Deployment of replicas pods of 3 cpu each,
// selecting the pool and the extra labels.
func (f *fixture) deploySelecting(t *testing.T, name string, replicas int32, extra map[string]string) {
	t.Helper()
	labels := map[string]string{"app": name}
	sel := map[string]string{"pool": f.pool}
	for k, v := range extra {
		sel[k] = v
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: sel,
					Containers: []corev1.Container{{Name: "app", Image: "app",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi"),
						}}}},
				},
			},
		},
	}
	if _, err := f.cp.Client.AppsV1().Deployments(f.ns).Create(t.Context(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
}

// On the real control plane: a kwok group's template lacks kubernetes.io/os,
// which its kwok nodes carry. A pending pod selecting it plans a scale-up
// from the template taken from the group's running node; with that node
// cordoned, the provider's bare template is all there is, and the pod is
// unschedulable for that label.
func TestBedTemplateFromRunningNode(t *testing.T) {
	f := newFixture(t, 0, 5, nil)
	ctx := t.Context()
	if err := f.group.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.waitOneNodeReady(t)
	f.deploySelecting(t, "os", 2, map[string]string{corev1.LabelOSStable: "linux"})
	f.waitUnschedulable(t, 1)

	nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + f.pool})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes %v, %v: want the group's one", nodes, err)
	}
	name := nodes.Items[0].Name

	ev := f.evaluator("templates")
	snap, _, err := ev.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := snap.NodeGroups[0]
	if g.TemplateFrom != "node "+name || g.Template.Labels[corev1.LabelOSStable] != "linux" {
		t.Fatalf("template from %q with labels %v, want node %s's, with kubernetes.io/os", g.TemplateFrom, g.Template.Labels, name)
	}
	if _, ok := g.Template.Labels[corev1.LabelHostname]; ok {
		t.Errorf("template labels %v keep the node's hostname", g.Template.Labels)
	}
	plan, err := ev.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ScaleUp) != 1 || plan.ScaleUp[0].Delta != 1 || len(plan.Unschedulable) != 0 {
		t.Fatalf("scale-up %+v, unschedulable %+v; want one node for the pod selecting kubernetes.io/os", plan.ScaleUp, plan.Unschedulable)
	}

	if _, err := f.cp.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	plan, err = ev.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.NodeGroups[0].TemplateFrom; got != "provider" {
		t.Errorf("templateFrom %q with the node cordoned, want provider", got)
	}
	if len(plan.ScaleUp) != 0 || len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, corev1.LabelOSStable) {
		t.Errorf("scale-up %+v, unschedulable %+v; want the pod unschedulable for kubernetes.io/os", plan.ScaleUp, plan.Unschedulable)
	}
}

// On the real control plane: a node kwok reports Ready but which still
// carries a startup taint (its CNI not up yet) is starting: the pod that
// does not tolerate the taint waits for it, and nothing is unschedulable.
// The group's template is then the provider's, the node not being ready for
// pods yet. Not configured, the taint is an ordinary one, on the node and
// on the template taken from it: the pod fits neither.
func TestBedStartupTaintedNodeIsStarting(t *testing.T) {
	f := newFixture(t, 0, 5, nil)
	ctx := t.Context()
	const cilium = "node.cilium.io/agent-not-ready"
	tpl, err := f.group.Template(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tpl.Taints = []corev1.Taint{{Key: cilium, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	n := kwok.NodeObject(f.pool, f.pool+"-starting", tpl)
	if _, err := f.cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.cp.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	f.waitOneNodeReady(t)
	f.deploySelecting(t, "waits", 1, nil)
	f.waitUnschedulable(t, 1)

	for _, tc := range []struct {
		name        string
		startup     []string
		wantUnsched int
		from        string
	}{
		{"the taint not configured: a Ready node the pod cannot use", nil, 1, "node " + n.Name},
		{"a configured startup taint: the pod waits for the node", []string{cilium}, 0, "provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := f.evaluator("startup")
			ev.Settings.ScaleUp.IgnoredTaints = podfacts.IgnoredTaints{Startup: tc.startup}
			plan, err := ev.Plan(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.ScaleUp) != 0 || len(plan.Unschedulable) != tc.wantUnsched {
				t.Errorf("scale-up %+v, unschedulable %+v; want no scale-up, %d unschedulable", plan.ScaleUp, plan.Unschedulable, tc.wantUnsched)
			}
			if got := plan.NodeGroups[0].TemplateFrom; got != tc.from {
				t.Errorf("templateFrom %q, want %q", got, tc.from)
			}
		})
	}
}
