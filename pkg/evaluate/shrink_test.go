package evaluate_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
)

// TestShrinkActsOnlyOnItsGroups: a schedule's shrink of one group drains
// its surplus and records only those nodes' times, while a scale-up the same
// decision would make for another group is neither carried out nor
// remembered as one.
func TestShrinkActsOnlyOnItsGroups(t *testing.T) {
	f := newFixture(t, 0, 5, nil)
	ctx := context.Background()
	// A second group whose nodes fit the same pods.
	other := kwok.New(f.cp.Client, f.pool+"-b", 0, 5, planner.Template{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Labels:      map[string]string{"pool": f.pool},
	})
	t.Cleanup(func() {
		_ = f.cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + f.pool + "-b"})
	})
	ev := f.evaluator("shrink")
	ev.Groups = func(context.Context) ([]providers.NodeGroup, error) {
		return []providers.NodeGroup{f.group, other}, nil
	}

	if err := f.group.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	f.deploy(t, "web", 4, "3") // one pod per 4-CPU node: two run, two wait
	f.cp.WaitPodsRunning(t, f.ns, "app=web", 2, time.Minute)
	f.waitUnschedulable(t, 2)

	res, err := ev.Shrink(ctx, map[string]int{f.pool: 1}, "schedule night")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.ScaleUp) != 0 || len(res.Plan.ScaleDown) != 1 || res.Plan.ScaleDown[0].NodeGroup != f.pool {
		t.Fatalf("shrink plan: up %+v, down %+v; want one removal in %s only", res.Plan.ScaleUp, res.Plan.ScaleDown, f.pool)
	}
	if n, _ := other.TargetSize(ctx); n != 0 {
		t.Errorf("the other group grew to %d", n)
	}
	st, err := f.store.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.LastScaleUp) != 0 {
		t.Errorf("lastScaleUp %v recorded for a scale-up the shrink did not make", st.LastScaleUp)
	}
	if _, ok := st.UnneededSince[res.Plan.ScaleDown[0].Node]; !ok || len(st.UnneededSince) != 1 {
		t.Errorf("unneededSince %v, want only the drained node %s", st.UnneededSince, res.Plan.ScaleDown[0].Node)
	}
}
