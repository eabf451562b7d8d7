package evaluate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestShrinkActsOnlyOnItsGroups: a schedule's shrink of one group drains
// its surplus and records only those nodes' times, while a scale-up the same
// decision would make for another group is neither carried out nor
// remembered as one.
func TestShrinkActsOnlyOnItsGroups(t *testing.T) {
	f := newFixture(t, 0, 5, nil)
	ctx := context.Background()
	// A second group whose nodes fit the same pods.
	other := kwok.New(f.cp.Client, f.pool+"-b", 0, 5, snapshot.Template{
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

// waitReady waits until the pool's kwok group has n Ready nodes.
func waitReady(t *testing.T, f *fixture, pool string, n int) {
	t.Helper()
	f.cp.WaitFor(t, time.Minute, fmt.Sprintf("%d Ready nodes in %s", n, pool), func(ctx context.Context) (bool, error) {
		nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + pool})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == n, nil
	})
}

func removals(res evaluate.Result) []string {
	var out []string
	for _, d := range res.Plan.ScaleDown {
		out = append(out, d.NodeGroup+"/"+d.Node)
	}
	return out
}

// TestShrinkBelowMinStopsAtMin: a schedule asking for fewer nodes than the
// group's min removes down to the min only.
func TestShrinkBelowMinStopsAtMin(t *testing.T) {
	f := newFixture(t, 2, 5, nil)
	ctx := context.Background()
	if err := f.group.IncreaseSize(ctx, 4); err != nil {
		t.Fatal(err)
	}
	waitReady(t, f, f.pool, 4)

	res, err := f.evaluator("shrink").Shrink(ctx, map[string]int{f.pool: 0}, "schedule night")
	if err != nil {
		t.Fatal(err)
	}
	if got := removals(res); len(got) != 2 || len(res.Plan.DecreaseTarget) != 0 {
		t.Errorf("removals %v, decreases %+v; want 2 removals (4 nodes down to min 2)", got, res.Plan.DecreaseTarget)
	}
	if len(res.Actions) != 2 {
		t.Errorf("actions %+v, want the 2 drains", res.Actions)
	}
}

// TestShrinkLeavesOtherGroupsRemovableNodes: a node of another group that a
// cycle would remove (empty, unneeded long enough) is neither removed nor
// forgotten by a shrink of one group.
func TestShrinkLeavesOtherGroupsRemovableNodes(t *testing.T) {
	f := newFixture(t, 0, 5, nil)
	ctx := context.Background()
	otherPool := f.pool + "-b"
	other := kwok.New(f.cp.Client, otherPool, 0, 5, snapshot.Template{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Labels:      map[string]string{"pool": otherPool},
	})
	t.Cleanup(func() {
		_ = f.cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + otherPool})
	})
	ev := f.evaluator("shrink")
	ev.Groups = func(context.Context) ([]providers.NodeGroup, error) {
		return []providers.NodeGroup{f.group, other}, nil
	}
	if err := f.group.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := other.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitReady(t, f, f.pool, 2)
	waitReady(t, f, otherPool, 1)
	nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + otherPool})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("the other group's nodes: %v, %v", nodes, err)
	}
	otherNode := nodes.Items[0].Name
	since := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	prev := snapshot.State{UnneededSince: map[string]time.Time{otherNode: since}}
	if err := f.store.SaveState(ctx, snapshot.State{}, prev); err != nil {
		t.Fatal(err)
	}

	res, err := ev.Shrink(ctx, map[string]int{f.pool: 1}, "schedule night")
	if err != nil {
		t.Fatal(err)
	}
	if got := removals(res); len(got) != 1 || res.Plan.ScaleDown[0].NodeGroup != f.pool {
		t.Errorf("removals %v, want one node of %s only", got, f.pool)
	}
	for _, a := range res.Actions {
		if a.NodeGroup != f.pool {
			t.Errorf("action %+v on a group the shrink does not cover", a)
		}
	}
	st, err := f.store.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := st.UnneededSince[otherNode]; !ok || !got.Equal(since) {
		t.Errorf("unneededSince %v, want %s kept at %s", st.UnneededSince, otherNode, since)
	}
	if n, _ := other.TargetSize(ctx); n != 1 {
		t.Errorf("the other group's target %d, want 1", n)
	}
}
