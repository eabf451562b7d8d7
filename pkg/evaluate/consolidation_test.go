package evaluate_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
)

// TestConsolidationStartsSeveralDrains: with consolidation, one cycle
// removes several under-used nodes of a group and starts a drain for each,
// and a drain already under way counts against the disruption budget.
func TestConsolidationStartsSeveralDrains(t *testing.T) {
	f := newFixture(t, 0, 6, nil)
	ctx := context.Background()
	if err := f.group.IncreaseSize(ctx, 5); err != nil {
		t.Fatal(err)
	}
	var nodes []corev1.Node
	f.cp.WaitFor(t, time.Minute, "5 Ready nodes", func(ctx context.Context) (bool, error) {
		list, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + f.pool})
		if err != nil {
			return false, err
		}
		nodes = list.Items
		ready := 0
		for _, n := range nodes {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == 5, nil
	})
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	// A drain under way on one node; a small pod on another.
	inFlight, busy := nodes[0].Name, nodes[1].Name
	if err := k8s.Cordon(ctx, f.cp.Client, inFlight, drain.TaintKey); err != nil {
		t.Fatal(err)
	}
	f.pod(t, "small", busy, nil, f.owner(t))
	f.cp.WaitPodsRunning(t, f.ns, "test=blocking", 1, time.Minute)

	ev := f.evaluator("a")
	ev.Settings.ScaleDown.Consolidation = planner.ConsolidationDelete
	ev.Settings.ScaleDown.DisruptionBudgets = []planner.DisruptionBudget{{Nodes: 3}}
	ev.Settings.ScaleDown.UnneededTime, ev.Settings.ScaleDown.DelayAfterAdd = 0, 0
	drainer := &countingDrainer{}
	ev.Drainer = drainer
	res, err := ev.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The three empty nodes could go (the small pod then has nowhere to
	// move); the budget of 3 less the drain under way leaves 2.
	var planned []string
	for _, d := range res.Plan.ScaleDown {
		planned = append(planned, d.Node)
		if !strings.HasPrefix(d.Reason, "consolidation: 2 nodes, pods fit on the rest; ") {
			t.Errorf("reason %q", d.Reason)
		}
	}
	if len(planned) != 2 || slices.Contains(planned, inFlight) {
		t.Fatalf("planned removals %v, want 2 of the nodes not draining (%s drains)", planned, inFlight)
	}
	started := drainer.started()
	slices.Sort(started)
	if !slices.Equal(started, planned) {
		t.Errorf("drains started for %v, want one for each planned removal %v", started, planned)
	}
}
