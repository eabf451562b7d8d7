package setup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/schedulefire"
	"github.com/nodetide/nodetide/pkg/setup"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// TestSchedulesSetEffectiveBounds runs the functions as they are wired in
// Lambda (pkg/setup from one config), on the local control plane with a
// kwok group, state on dynalite and the drain state machine run locally:
//
//   - a night schedule capping the group at max 1 drains the two surplus
//     nodes through drain executions;
//   - evaluate then leaves pending pods pending, naming the schedule;
//   - a day schedule with min 2 grows the group to 2, evaluate may grow it
//     again, and the drain refuses to take it below the schedule's min;
//   - deleting the day schedule gives the group its configured bounds back.
func TestSchedulesSetEffectiveBounds(t *testing.T) {
	l := newLive(t, "sched", 0, 5, `scaleUp: {pendingPodMinAge: 0s}
scaleDown: {unneededTime: 1h}
drain: {timeout: 2m}
`)
	cp, ns, pool, cfg := l.cp, l.ns, l.pool, l.cfg
	ctx := context.Background()
	l.drainMachine(t)

	log := slog.New(slog.NewJSONHandler(testWriter{t}, nil))
	aws := &setup.AWS{}
	sched, err := setup.Schedules(ctx, cfg, "", aws, log)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := setup.Evaluator(ctx, cfg, "", aws, log, "test")
	if err != nil {
		t.Fatal(err)
	}
	invoke := func(payload string) any {
		t.Helper()
		out, err := sched.Handle(ctx, json.RawMessage(payload))
		if err != nil {
			t.Fatalf("%s: %v", payload, err)
		}
		return out
	}
	if list, _ := json.Marshal(invoke(`{"action":"list"}`)); string(list) != "[]" {
		t.Errorf("list with no schedules is %s, want []", list)
	}

	nodes := func() []corev1.Node {
		list, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + pool})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	target := func() int {
		groups, err := ev.Groups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n, err := groups[0].TargetSize(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Three nodes, with work on each.
	if _, err := ev.Add(ctx, pool, 3); err != nil {
		t.Fatal(err)
	}
	cp.WaitFor(t, time.Minute, "3 Ready nodes", func(context.Context) (bool, error) {
		ready := 0
		for _, n := range nodes() {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == 3, nil
	})
	deploy(t, cp.Client.AppsV1().Deployments(ns), pool, "web", 3)
	cp.WaitPodsRunning(t, ns, "app=web", 3, 2*time.Minute)

	// A schedule naming a group the config doesn't manage is refused, and
	// nothing is stored.
	if _, err := sched.Handle(ctx, json.RawMessage(`{"action":"put","schedule":{"name":"typo","cron":"0 20 * * *","nodeGroups":[{"name":"wrokers","max":1}]}}`)); err == nil ||
		!strings.Contains(err.Error(), `unknown node group "wrokers"`) {
		t.Fatalf("put naming an unknown group: %v", err)
	}
	if list, _ := json.Marshal(invoke(`{"action":"list"}`)); string(list) != "[]" {
		t.Errorf("after a refused put, list is %s", list)
	}

	// Night: max 1. The two surplus nodes are drained now, by drain executions.
	invoke(`{"action":"put","schedule":{"name":"night","cron":"0 20 * * *","nodeGroups":[{"name":"` + pool + `","max":1}]}}`)
	res := invoke(`{"action":"run","name":"night"}`).(schedule.Result)
	if len(res.Errors) > 0 || len(res.Changes) != 1 {
		t.Fatalf("night: %+v", res)
	}
	c := res.Changes[0]
	if c.Outcome != schedule.OutcomeDraining || *c.From != 3 || c.To != 1 || *c.Max != 1 || strings.Count(c.Message, ",") != 1 {
		t.Fatalf("night's change %+v (message %q), want draining 3 -> 1 with two nodes named", c, c.Message)
	}
	cp.WaitFor(t, 2*time.Minute, "the group down to 1 node", func(context.Context) (bool, error) {
		return len(nodes()) == 1 && target() == 1, nil
	})
	cp.WaitPodsRunning(t, ns, "app=web", 3, 2*time.Minute) // 3 × 1 CPU fit on the 4-CPU node left

	// Evaluate keeps to the night's max: pending pods stay pending, and
	// say why.
	scale(t, cp.Client.AppsV1().Deployments(ns), "web", 6)
	cp.WaitPodsUnschedulable(t, ns, 2, time.Minute)
	run, err := ev.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Plan.ScaleUp) != 0 || target() != 1 {
		t.Fatalf("evaluate grew the capped group: %+v", run.Plan.ScaleUp)
	}
	wantReason := fmt.Sprintf("node group %s at max size 1 (max set by schedule night)", pool)
	// This test's pods only: the control plane is shared with other tests.
	mine := slices.DeleteFunc(slices.Clone(run.Plan.Unschedulable), func(u planner.Unschedulable) bool {
		return !strings.HasPrefix(u.Pod, ns+"/")
	})
	if len(mine) != 2 || mine[0].Reason != wantReason {
		t.Fatalf("unschedulable %+v, want 2 with reason %q", mine, wantReason)
	}

	// Day: min 2, max 4, no desired size: the group grows to its new min,
	// and evaluate may grow it further.
	invoke(`{"action":"put","schedule":{"name":"day","cron":"0 8 * * *","nodeGroups":[{"name":"` + pool + `","min":2,"max":4}]}}`)
	res = invoke(`{"action":"run","name":"day"}`).(schedule.Result)
	if len(res.Errors) > 0 || len(res.Changes) != 1 || res.Changes[0].Outcome != schedule.OutcomeScaled || res.Changes[0].To != 2 {
		t.Fatalf("day: %+v", res)
	}
	if target() != 2 {
		t.Fatalf("target %d after day, want 2", target())
	}
	plan, err := ev.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range plan.Unschedulable {
		if strings.Contains(u.Reason, "max set by") {
			t.Errorf("after day, pod %s is still capped: %s", u.Pod, u.Reason)
		}
	}

	// The drain keeps to the day's min: with 2 nodes, none may go.
	dh, err := setup.Drain(ctx, cfg, "", aws, log)
	if err != nil {
		t.Fatal(err)
	}
	cp.WaitFor(t, time.Minute, "2 nodes", func(context.Context) (bool, error) { return len(nodes()) == 2, nil })
	_, err = dh.Steps.Prepare(ctx, drain.State{Node: nodes()[0].Name, DrainID: "by-hand", Deadline: time.Now().Add(time.Minute), Policy: drain.PolicyAbort})
	if got := drain.ErrorName(err); got != drain.ErrNameBelowMinSize || !strings.Contains(err.Error(), "set by schedule day") {
		t.Fatalf("drain below the day's min: %v (%s), want %s naming the schedule", err, got, drain.ErrNameBelowMinSize)
	}

	// Deleting day clears its override: the configured bounds are back.
	del := invoke(`{"action":"delete","name":"day"}`).(schedulefire.Deleted)
	if !slices.Equal(del.ClearedOverrides, []string{pool}) {
		t.Fatalf("delete day cleared %v, want [%s]", del.ClearedOverrides, pool)
	}
	groups, err := ev.Groups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if groups[0].Bounds().Min != 0 || groups[0].Bounds().Max != 5 {
		t.Errorf("after deleting day: bounds %d..%d, want the configured 0..5", groups[0].Bounds().Min, groups[0].Bounds().Max)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

type deployments interface {
	Create(ctx context.Context, d *appsv1.Deployment, opts metav1.CreateOptions) (*appsv1.Deployment, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*appsv1.Deployment, error)
	Update(ctx context.Context, d *appsv1.Deployment, opts metav1.UpdateOptions) (*appsv1.Deployment, error)
}

func deploy(t *testing.T, c deployments, pool, name string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"pool": pool},
					Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					}}},
				},
			},
		},
	}
	if _, err := c.Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func scale(t *testing.T, c deployments, name string, replicas int32) {
	t.Helper()
	d, err := c.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = &replicas
	if _, err := c.Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
