package evaluate_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// The pods of a deleted Node linger until the pod garbage collector removes
// them (about a minute on the bed): a cycle that reads one goes on, plans as
// if it were not there and logs it, and the snapshot it read, without it, is
// one nodetide writes and reads back to the same plan.
func TestPodsOfADeletedNodeDoNotFailTheCycle(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	if err := f.group.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + f.pool})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("the group's node: %v, %v", nodes, err)
	}
	gone := nodes.Items[0].Name
	f.pod(t, "orphan", gone, nil, f.owner(t))
	f.deploy(t, "web", 1, "3") // pending: the group must grow
	if err := f.cp.Client.CoreV1().Nodes().Delete(ctx, gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.cp.WaitFor(t, time.Minute, "the node deleted", func(ctx context.Context) (bool, error) {
		_, err := f.cp.Client.CoreV1().Nodes().Get(ctx, gone, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	f.waitUnschedulable(t, 1)

	var logs bytes.Buffer
	ev := f.evaluator("unplaced")
	ev.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	snap, _, err := ev.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(planner.UnplacedPods(snap.Nodes, snap.Pods)) != 1 {
		t.Skipf("the orphan pod was collected before the read (pods: %d)", len(snap.Pods))
	}
	res, err := ev.Run(ctx)
	if err != nil {
		t.Fatalf("cycle with a deleted node's pod: %v", err)
	}
	if len(res.Plan.ScaleUp) != 1 || res.Plan.ScaleUp[0].Delta != 1 {
		t.Errorf("scale-up %+v, want one node for the pending pod", res.Plan.ScaleUp)
	}
	if line := "pods bound to a node not read, planned as on no node"; !strings.Contains(logs.String(), line) ||
		!strings.Contains(logs.String(), f.ns+"/orphan on "+gone) {
		t.Errorf("log does not say %q of %s/orphan:\n%s", line, f.ns, logs.String())
	}

	kept, dropped := planner.DropUnplacedPods(snap)
	if len(dropped) != 1 || dropped[0] != f.ns+"/orphan" {
		t.Errorf("dropped %v, want %s/orphan", dropped, f.ns)
	}
	var doc, livePlan, filePlan bytes.Buffer
	if err := snapshot.WriteCompactSnapshot(&doc, kept); err != nil {
		t.Fatalf("the snapshot without the pod cannot be written: %v", err)
	}
	read, err := snapshot.ReadSnapshot(&doc)
	if err != nil {
		t.Fatalf("the written snapshot does not read back: %v", err)
	}
	if err := planner.WritePlan(&livePlan, planner.Decide(snap, ev.Settings, snap.CapturedAt)); err != nil {
		t.Fatal(err)
	}
	if err := planner.WritePlan(&filePlan, planner.Decide(read, ev.Settings, read.CapturedAt)); err != nil {
		t.Fatal(err)
	}
	if livePlan.String() != filePlan.String() {
		t.Errorf("the written snapshot plans differently:\n--- file\n%s\n--- live\n%s", filePlan.String(), livePlan.String())
	}
}
