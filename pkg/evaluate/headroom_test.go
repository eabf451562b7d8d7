package evaluate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestHeadroomKeepsSpareNode: a kwok group with headroom {nodes: 1} grows
// from zero to one empty node with no pod pending, holds there while the
// node stays empty, and grows again once a pod takes it.
func TestHeadroomKeepsSpareNode(t *testing.T) {
	f := newFixture(t, 0, 5, nil)
	ctx := context.Background()
	run := func(what string, set ...func(*planner.Settings)) *planner.Plan {
		t.Helper()
		ev := f.evaluator("a")
		ev.Headroom = map[string]snapshot.Headroom{f.pool: {Nodes: 1}}
		for _, s := range set {
			s(&ev.Settings)
		}
		res, err := ev.Run(ctx)
		if err != nil {
			t.Fatalf("%s: Run: %v", what, err)
		}
		for _, a := range res.Actions {
			if a.Error != "" {
				t.Fatalf("%s: action %+v failed", what, a)
			}
		}
		return res.Plan
	}
	readyNodes := func(n int) {
		t.Helper()
		f.cp.WaitFor(t, 2*time.Minute, "nodes Ready", func(ctx context.Context) (bool, error) {
			nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + f.pool})
			if err != nil {
				return false, err
			}
			ready := 0
			for _, nd := range nodes.Items {
				for _, c := range nd.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			return ready == n, nil
		})
	}
	wantUp := func(p *planner.Plan, what, reason string, target int) {
		t.Helper()
		if len(p.ScaleUp) != 1 || p.ScaleUp[0].Delta != 1 || !strings.HasPrefix(p.ScaleUp[0].Reason, reason) {
			t.Fatalf("%s: scale-up %+v, want +1 for %q", what, p.ScaleUp, reason)
		}
		if got := f.target(t); got != target {
			t.Fatalf("%s: target %d, want %d", what, got, target)
		}
	}

	wantUp(run("empty group"), "empty group", "headroom: 1 spare node wanted, 0 free", 1)
	readyNodes(1)
	if p := run("one empty node"); len(p.ScaleUp) != 0 || f.target(t) != 1 {
		t.Fatalf("one empty node: scaled again: %+v, target %d", p.ScaleUp, f.target(t))
	}

	f.deploy(t, "web", 1, "1")
	f.cp.WaitPodsRunning(t, f.ns, "app=web", 1, 2*time.Minute)
	wantUp(run("node taken"), "node taken", "headroom: 1 spare node wanted, 0 free", 2)
	readyNodes(2)
	if p := run("spare again"); len(p.ScaleUp) != 0 || f.target(t) != 2 {
		t.Fatalf("spare again: scaled again: %+v, target %d", p.ScaleUp, f.target(t))
	}

	// Both nodes are under the threshold and removable at once, but either
	// removal would leave no spare node.
	p := run("scale-down", func(s *planner.Settings) { s.ScaleDown.UnneededTime, s.ScaleDown.DelayAfterAdd = 0, 0 })
	if len(p.ScaleDown) != 0 || len(p.State.UnneededSince) == 0 {
		t.Fatalf("scale-down: removals %+v (unneeded %v), want the unneeded nodes kept", p.ScaleDown, p.State.UnneededSince)
	}
}
