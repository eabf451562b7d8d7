package schedulefire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodetide/nodetide/internal/metricstest"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/schedulefire"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// fakeGroup is a node group whose target size only the test sees.
type fakeGroup struct {
	name     string
	max      int
	mu       sync.Mutex
	target   int
	increase int // IncreaseSize calls
}

func (g *fakeGroup) Name() string             { return g.name }
func (g *fakeGroup) Provider() string         { return "fake" }
func (g *fakeGroup) Bounds() providers.Bounds { return providers.Bounds{Min: 0, Max: g.max} }
func (g *fakeGroup) TargetSize(context.Context) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.target, nil
}
func (g *fakeGroup) Instances(context.Context) ([]providers.Instance, error) { return nil, nil }
func (g *fakeGroup) Template(context.Context) (snapshot.Template, error) {
	return snapshot.Template{}, nil
}
func (g *fakeGroup) IncreaseSize(_ context.Context, delta int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.target+delta > g.max {
		return fmt.Errorf("%w: %d", providers.ErrAboveMax, g.max)
	}
	g.target += delta
	g.increase++
	return nil
}
func (g *fakeGroup) DeleteInstance(context.Context, string) error  { return nil }
func (g *fakeGroup) DecreaseTargetSize(context.Context, int) error { return nil }

func createDeployment(t *testing.T, cp *testbed.ControlPlane, ns, name string, labels map[string]string, replicas int32) {
	t.Helper()
	sel := map[string]string{"name": name}
	podLabels := map[string]string{"name": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c"}}},
			},
		},
	}
	if _, err := cp.Client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func replicasOf(t *testing.T, cp *testbed.ControlPlane, ns, name string) int32 {
	t.Helper()
	sc, err := cp.Client.AppsV1().Deployments(ns).GetScale(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sc.Spec.Replicas
}

// TestPutThenTickScalesOnce stores a schedule through the function's put
// request, then runs two ticks at its fire time at once against the same
// table: exactly one applies it, scaling the named Deployment, the
// Deployment its appScaleTemplate selects and a node group, while a group
// the desired size doesn't fit is reported and left alone.
func TestPutThenTickScalesOnce(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	db := testbed.DynamoDB(t)
	ctx := context.Background()
	table := "schedule-" + ns
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	app := "todo-" + ns // appScaleTemplates look in every namespace
	createDeployment(t, cp, ns, "web", nil, 1)
	createDeployment(t, cp, ns, "todo", map[string]string{"app": app}, 1)
	big := &fakeGroup{name: "big", max: 5, target: 1}
	small := &fakeGroup{name: "small", max: 1, target: 1}
	shrink := &fakeGroup{name: "shrink", max: 5, target: 3}
	groups := func(context.Context) ([]providers.NodeGroup, error) {
		return []providers.NodeGroup{big, small, shrink}, nil
	}

	newHandler := func(now time.Time) *schedulefire.Handler {
		return &schedulefire.Handler{
			Store:   state.NewDynamoDB(db.Client(t), table, "c-"+ns),
			Applier: &schedulefire.Applier{Client: cp.Client, Groups: groups},
			Now:     func() time.Time { return now },
		}
	}
	created := time.Date(2027, 3, 1, 7, 59, 0, 0, time.UTC)
	put := fmt.Sprintf(`{"action":"put","schedule":{"name":"daytime","cron":"0 0 8 * * *",
		"nodeGroups":[{"name":"big","desired":3},{"name":"small","desired":2},{"name":"shrink","desired":1}],
		"appScaleTemplates":[{"app":%q,"replicas":4}],
		"apps":[{"namespace":%q,"kind":"Deployment","name":"web","replicas":3}]}}`, app, ns)
	if _, err := newHandler(created).Handle(ctx, json.RawMessage(put)); err != nil {
		t.Fatalf("put: %v", err)
	}

	// A bad payload changes nothing: not the stored schedule, not the cluster.
	for _, bad := range []string{
		strings.Replace(put, `"cron"`, `"crontab"`, 1),
		`{"action":"run","name":"daytime","force":true}`,
		`{"action":"delete","name":"daytime","schedule":{"name":"x","cron":"0 8 * * *"}}`,
		`{"action":"purge"}`,
	} {
		if _, err := newHandler(created).Handle(ctx, json.RawMessage(bad)); err == nil {
			t.Fatalf("bad payload accepted: %s", bad)
		}
	}
	rec, err := newHandler(created).Store.GetSchedule(ctx, "daytime")
	if err != nil || rec.Version != 1 || rec.Schedule.Cron != "0 0 8 * * *" {
		t.Fatalf("after bad payloads: %+v, %v", rec, err)
	}
	if got := replicasOf(t, cp, ns, "web"); got != 1 {
		t.Fatalf("web has %d replicas after bad payloads, want 1", got)
	}

	// Before the fire time, a tick does nothing.
	res, err := newHandler(created.Add(30 * time.Second)).Tick(ctx)
	if err != nil || len(res.Schedules) != 0 {
		t.Fatalf("early tick: %+v, %v", res, err)
	}

	// Two ticks at once, just after 08:00: one fires, the other loses the claim.
	tickAt := time.Date(2027, 3, 1, 8, 0, 10, 0, time.UTC)
	tick := json.RawMessage(`{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","account":"1","time":"2027-03-01T08:00:00Z","region":"eu-west-1","resources":[],"detail":{}}`)
	var wg sync.WaitGroup
	results := make([]schedulefire.TickResult, 2)
	errs := make([]error, 2)
	m := metrics.New("prod", nil) // both ticks' metrics, as one invocation's
	for i := range 2 {
		wg.Go(func() {
			out, err := newHandler(tickAt).Handle(metrics.NewContext(ctx, m), tick)
			errs[i] = err
			if err == nil {
				results[i] = out.(schedulefire.TickResult)
			}
		})
	}
	wg.Wait()
	actions := map[string]int{}
	var fired schedule.Result
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("tick %d: %v", i, errs[i])
		}
		for _, r := range results[i].Schedules {
			actions[string(r.Action)]++
			if r.Action == "fire" {
				fired = r
			}
		}
	}
	// The other tick either lost the claim or, listing after it, saw
	// nothing due; it never fires too.
	if actions["fire"] != 1 || actions["fire"]+actions["lost"] != len(results[0].Schedules)+len(results[1].Schedules) {
		t.Fatalf("actions over two ticks: %v, want one fire and at most one lost", actions)
	}
	if got := replicasOf(t, cp, ns, "web"); got != 3 {
		t.Errorf("web (apps) has %d replicas, want 3", got)
	}
	if got := replicasOf(t, cp, ns, "todo"); got != 4 {
		t.Errorf("todo (appScaleTemplates) has %d replicas, want 4", got)
	}
	if big.target != 3 || big.increase != 1 {
		t.Errorf("big: target %d after %d increases, want 3 after 1", big.target, big.increase)
	}
	if small.target != 1 || shrink.target != 3 {
		t.Errorf("small target %d (want 1, above max), shrink target %d (want 3, no drains here)", small.target, shrink.target)
	}
	if len(fired.Errors) != 2 || !strings.Contains(fired.Errors[0], "above the node group's maximum size 1") ||
		!strings.Contains(fired.Errors[1], "needs the drain state machine") {
		t.Errorf("errors %q, want one naming small's maximum and one saying shrinking needs drains", fired.Errors)
	}
	// One fire, with failed effects: counted once as fired and once as failed.
	var emf bytes.Buffer
	if err := m.Write(&emf); err != nil {
		t.Fatal(err)
	}
	published, err := metricstest.Parse(emf.Bytes(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	if published.Sum(metrics.ScheduleFires, nil) != 1 || published.Sum(metrics.ScheduleFailures, nil) != 1 {
		t.Errorf("published %v, want ScheduleFires 1 and ScheduleFailures 1", published)
	}
	outcomes := map[string]string{}
	for _, c := range fired.Changes {
		outcomes[string(c.Kind)+" "+c.Name] = string(c.Outcome)
	}
	want := map[string]string{"NodeGroup big": "scaled", "NodeGroup small": "failed", "NodeGroup shrink": "failed",
		"Deployment todo": "scaled", "Deployment web": "scaled"}
	for k, v := range want {
		if outcomes[k] != v {
			t.Errorf("%s: outcome %q, want %q (all: %v)", k, outcomes[k], v, outcomes)
		}
	}

	// The fire is remembered on the schedule, with the counts from before.
	rec, err = newHandler(tickAt).Store.GetSchedule(ctx, "daytime")
	if err != nil {
		t.Fatal(err)
	}
	remembered := map[string]string{}
	if rec.LastResult != nil {
		for _, c := range rec.LastResult.Changes {
			if c.From != nil {
				remembered[string(c.Kind)+" "+c.Name] = fmt.Sprintf("%d->%d", *c.From, c.To)
			}
		}
	}
	if remembered["Deployment web"] != "1->3" || remembered["Deployment todo"] != "1->4" || remembered["NodeGroup big"] != "1->3" {
		t.Errorf("remembered changes %v, want web 1->3, todo 1->4, big 1->3", remembered)
	}

	// A later tick in the same period fires nothing more.
	again, err := newHandler(tickAt.Add(time.Minute)).Tick(ctx)
	if err != nil || len(again.Schedules) != 0 {
		t.Fatalf("later tick: %+v, %v", again, err)
	}
	// run applies by hand without a claim: it scales back what was changed.
	if err := cp.Client.AppsV1().Deployments(ns).Delete(ctx, "todo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := newHandler(tickAt.Add(2*time.Minute)).Run(ctx, "daytime")
	if err != nil {
		t.Fatal(err)
	}
	if got := replicasOf(t, cp, ns, "web"); got != 3 || out.Action != "run" {
		t.Errorf("run: web has %d replicas (want 3), result %+v", got, out)
	}
	if len(out.Notes) == 0 || !strings.Contains(out.Notes[0], "no Deployment is labelled") {
		t.Errorf("run notes %q, want one saying no Deployment matched the template", out.Notes)
	}
}
