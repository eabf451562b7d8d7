package evaluate_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/statusmap"
)

// TestKeptNodeNamedInPlanAndStatus: a node under the threshold that a pod
// not safe to evict keeps is listed as kept, the pod named, in the plan, in
// the stored status and in the status ConfigMap's JSON and text.
func TestKeptNodeNamedInPlanAndStatus(t *testing.T) {
	f := newFixture(t, 0, 5, nil)
	ctx := context.Background()
	if err := f.group.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + f.pool})
	if err != nil || len(nodes.Items) != 2 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	pinned, free := nodes.Items[0].Name, nodes.Items[1].Name
	f.pod(t, "db-0", pinned, map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, f.owner(t))
	f.cp.WaitPodsRunning(t, f.ns, "test=blocking", 1, time.Minute)

	ev := f.evaluator("kept")
	ev.Settings.ScaleDown.UnneededTime = 0
	ev.Settings.ScaleDown.DelayAfterAdd = 0
	ev.StatusMap = &statusmap.Writer{Client: f.cp.Client, Namespace: f.ns, Name: statusCM, Cluster: "prod"}
	res, err := ev.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reason := "pod " + f.ns + `/db-0: annotation cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`
	want := planner.Kept{Node: pinned, NodeGroup: f.pool, Code: planner.KeptBlockedByPod, Reason: reason}
	if !slices.Contains(res.Plan.Kept, want) {
		t.Errorf("plan kept %+v, want %+v", res.Plan.Kept, want)
	}
	if len(res.Plan.ScaleDown) != 1 || res.Plan.ScaleDown[0].Node != free {
		t.Errorf("scale-down = %+v, want only the empty node %s", res.Plan.ScaleDown, free)
	}
	counts := []planner.KeptCount{{NodeGroup: f.pool, Code: planner.KeptBlockedByPod, Nodes: 1}}

	stored, err := evaluate.ReadStatus(ctx, f.store.(state.StatusStore))
	if err != nil {
		t.Fatal(err)
	}
	cm := statusMapOf(t, f)
	var inMap evaluate.Status
	if err := json.Unmarshal([]byte(cm.Data[statusmap.KeyJSON]), &inMap); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]evaluate.Status{"stored": stored, "ConfigMap": inMap} {
		if !slices.Equal(st.Kept, []planner.Kept{want}) || !slices.Equal(st.KeptCounts, counts) {
			t.Errorf("%s status kept %+v, counts %+v; want %+v, %+v", name, st.Kept, st.KeptCounts, want, counts)
		}
	}
	text := cm.Data[statusmap.KeyText]
	for _, s := range []string{"Kept nodes:   " + f.pool + ": 1 BlockedByPod", pinned, reason} {
		if !strings.Contains(text, s) {
			t.Errorf("status text lacks %q:\n%s", s, text)
		}
	}
}

// TestBlockedNodeGetsScaleDownBlocked: the node a pod keeps gets one
// ScaleDownBlocked event naming the pod, not again within the interval;
// the busy node gets none.
func TestBlockedNodeGetsScaleDownBlocked(t *testing.T) {
	f := newFixture(t, 0, 5, nil)
	ctx := context.Background()
	if err := f.group.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + f.pool})
	if err != nil || len(nodes.Items) != 2 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	pinned, busy := nodes.Items[0].Name, nodes.Items[1].Name
	f.pod(t, "db-0", pinned, map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, f.owner(t))
	f.cpuPod(t, "busy", busy, "3")
	f.cp.WaitPodsRunning(t, f.ns, "test=blocking", 2, time.Minute)

	ev := f.evaluator("blocked")
	ev.Settings.ScaleDown.UnneededTime, ev.Settings.ScaleDown.DelayAfterAdd = 0, 0
	ev.Events = f.recorder(f.cp.Client, nil)
	for range 2 {
		if _, err := ev.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	list, err := f.cp.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Node", "reason": kubeevents.ReasonScaleDownBlocked}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []corev1.Event
	for _, e := range list.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, f.pool) {
			got = append(got, e)
		}
	}
	want := "node not removed (BlockedByPod): pod " + f.ns + `/db-0: annotation cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`
	if len(got) != 1 || got[0].InvolvedObject.Name != pinned || got[0].Message != want || got[0].Count > 1 {
		t.Fatalf("ScaleDownBlocked events = %+v, want one on %s: %q", got, pinned, want)
	}
}

// cpuPod binds a controller-owned pod requesting cpu to node.
func (f *fixture) cpuPod(t *testing.T, name, node, cpu string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: map[string]string{"test": "blocking"}, OwnerReferences: f.owner(t)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
	if _, err := f.cp.Client.CoreV1().Pods(f.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
}
