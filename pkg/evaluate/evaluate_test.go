package evaluate_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// fixture is one test's node group on the shared control plane. Each test
// gets its own pool label, so tests running on the same cluster never pack
// pods onto each other's groups.
type fixture struct {
	cp    *testbed.ControlPlane
	ns    string
	pool  string
	group *kwok.Group
	store state.Store
}

func newFixture(t *testing.T, minSize, maxSize int, store state.Store) *fixture {
	t.Helper()
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	pool := ns // unique per test
	tpl := snapshot.Template{
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		},
		Labels: map[string]string{"pool": pool},
	}
	g := kwok.New(cp.Client, pool, minSize, maxSize, tpl)
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + pool})
	})
	if store == nil {
		store = state.NewMemory(pool)
	}
	return &fixture{cp: cp, ns: ns, pool: pool, group: g, store: store}
}

func (f *fixture) evaluator(holder string) *evaluate.Evaluator {
	s := planner.DefaultSettings()
	s.ScaleUp.PendingPodMinAge = 0
	return &evaluate.Evaluator{
		Client: f.cp.Client,
		Groups: func(context.Context) ([]providers.NodeGroup, error) {
			return []providers.NodeGroup{f.group}, nil
		},
		Store:    f.store,
		Settings: s,
		Holder:   holder,
		LeaseTTL: time.Minute,
	}
}

func (f *fixture) deploy(t *testing.T, name string, replicas int32, cpu string) {
	t.Helper()
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"pool": f.pool},
					Containers: []corev1.Container{{Name: "app", Image: "app",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi"),
						}}}},
				},
			},
		},
	}
	if _, err := f.cp.Client.AppsV1().Deployments(f.ns).Create(context.Background(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
}

// waitUnschedulable waits until n pods of the namespace carry the scheduler's
// PodScheduled=False/Unschedulable condition.
func (f *fixture) waitUnschedulable(t *testing.T, n int) {
	t.Helper()
	f.cp.WaitPodsUnschedulable(t, f.ns, n, time.Minute)
}

// waitOneNodeReady waits until the pool has exactly one node, and it is Ready.
func (f *fixture) waitOneNodeReady(t *testing.T) {
	t.Helper()
	f.cp.WaitFor(t, time.Minute, "the pool's one node Ready", func(ctx context.Context) (bool, error) {
		nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + f.pool})
		if err != nil || len(nodes.Items) != 1 {
			return false, err
		}
		for _, c := range nodes.Items[0].Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

func (f *fixture) target(t *testing.T) int {
	t.Helper()
	n, err := f.group.TargetSize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestScaleUpByBinPackedAmount(t *testing.T) {
	f := newFixture(t, 1, 5, nil)
	ctx := context.Background()
	if err := f.group.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The node Ready first: pods created while it is not yet would all be
	// unschedulable for a moment, and the plan could catch that moment.
	f.waitOneNodeReady(t)
	// 6 pods of 1500m: the first 4-CPU node holds 2, the other 4 need 2 more nodes.
	f.deploy(t, "web", 6, "1500m")
	// Two running first: a scheduler that has not yet seen the node's
	// not-ready taint go marks every pod unschedulable one by one, and a
	// count of exactly 4 could be caught on the way to 6.
	f.cp.WaitPodsRunning(t, f.ns, "app=web", 2, time.Minute)
	f.waitUnschedulable(t, 4)

	res, err := f.evaluator("a").Run(ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Plan == nil || len(res.Plan.ScaleUp) != 1 {
		t.Fatalf("plan = %+v, want one scale-up", res.Plan)
	}
	up := res.Plan.ScaleUp[0]
	if up.NodeGroup != f.pool || up.Delta != 2 || up.NewTargetSize != 3 || len(up.Pods) != 4 {
		t.Errorf("scale-up = %+v, want %s +2 → 3 for 4 pods", up, f.pool)
	}
	for _, a := range res.Actions {
		if a.Error != "" {
			t.Errorf("action %+v failed", a)
		}
	}
	if got := f.target(t); got != 3 {
		t.Errorf("target after run = %d, want 3", got)
	}
	f.cp.WaitPodsRunning(t, f.ns, "app=web", 6, time.Minute)

	// Nothing is pending any more: a second cycle adds nothing.
	res, err = f.evaluator("a").Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.ScaleUp) != 0 || f.target(t) != 3 {
		t.Errorf("second run scaled again: %+v, target %d", res.Plan.ScaleUp, f.target(t))
	}
	st, err := f.store.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.LastScaleUp[f.pool]; !ok {
		t.Errorf("state has no lastScaleUp for %s: %+v", f.pool, st)
	}
}

func TestOverlappingRunsScaleOnce(t *testing.T) {
	db := testbed.DynamoDB(t)
	client := db.Client(t)
	ctx := context.Background()
	if err := state.CreateTable(ctx, client, "evaluate-overlap"); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 0, 5, nil)
	f.store = state.NewDynamoDB(client, "evaluate-overlap", f.pool)
	f.deploy(t, "web", 3, "3") // one pod per node: 3 nodes
	f.waitUnschedulable(t, 3)

	// Run A holds the lease and is paused inside its cycle while run B starts.
	inCycle, resume := make(chan struct{}), make(chan struct{})
	a := f.evaluator("run-a")
	groups := a.Groups
	a.Groups = func(ctx context.Context) ([]providers.NodeGroup, error) {
		close(inCycle)
		<-resume
		return groups(ctx)
	}
	type outcome struct {
		res evaluate.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := a.Run(ctx)
		done <- outcome{res, err}
	}()
	<-inCycle
	resB, err := f.evaluator("run-b").Run(ctx)
	if err != nil {
		t.Fatalf("run B: %v", err)
	}
	if resB.Skipped == "" || resB.Plan != nil || len(resB.Actions) != 0 {
		t.Errorf("run B acted while A held the lease: %+v", resB)
	}
	if !strings.Contains(resB.Skipped, "run-a") {
		t.Errorf("run B's skip reason %q does not name the holder run-a", resB.Skipped)
	}
	close(resume)
	resA := <-done
	if resA.err != nil {
		t.Fatalf("run A: %v", resA.err)
	}
	if got := f.target(t); got != 3 {
		t.Fatalf("target = %d, want 3 (scaled exactly once)", got)
	}
	// With the lease released, a third run sees the new capacity and adds nothing.
	resC, err := f.evaluator("run-c").Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resC.Skipped != "" || len(resC.Plan.ScaleUp) != 0 || f.target(t) != 3 {
		t.Errorf("run C: skipped %q, scale-ups %+v, target %d", resC.Skipped, resC.Plan.ScaleUp, f.target(t))
	}
}

func TestBlockingPodNeverProposedForRemoval(t *testing.T) {
	f := newFixture(t, 0, 5, nil)
	ctx := context.Background()
	if err := f.group.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + f.pool})
	if err != nil || len(nodes.Items) != 3 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	bare, optOut, free := nodes.Items[0].Name, nodes.Items[1].Name, nodes.Items[2].Name
	f.pod(t, "bare", bare, nil, nil)
	f.pod(t, "pinned", optOut, map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, f.owner(t))
	f.cp.WaitPodsRunning(t, f.ns, "test=blocking", 2, time.Minute)

	ev := f.evaluator("a")
	ev.Settings.ScaleDown.UnneededTime = 0
	ev.Settings.ScaleDown.DelayAfterAdd = 0
	ev.Settings.ScaleDown.MaxConcurrentDrains = 3
	res, err := ev.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Plan.ScaleDown {
		if d.Node == bare || d.Node == optOut {
			t.Errorf("node %s with a blocking pod proposed for removal: %+v", d.Node, d)
		}
	}
	if len(res.Plan.ScaleDown) != 1 || res.Plan.ScaleDown[0].Node != free {
		t.Errorf("scale-down = %+v, want only the empty node %s", res.Plan.ScaleDown, free)
	}
	for _, n := range []string{bare, optOut} {
		if _, ok := res.Plan.State.UnneededSince[n]; ok {
			t.Errorf("node %s with a blocking pod is marked unneeded", n)
		}
	}
	// No drainer is wired: the removal is reported, not acted on.
	if got := f.target(t); got != 3 {
		t.Errorf("target = %d, want 3 (nothing removed)", got)
	}
}

// owner makes a pod controller-owned, so only the annotation under test can
// block it. The owner is a ConfigMap: it exists (the garbage collector would
// delete a pod whose owner does not) and no controller acts on its pods.
func (f *fixture) owner(t *testing.T) []metav1.OwnerReference {
	t.Helper()
	cm, err := f.cp.Client.CoreV1().ConfigMaps(f.ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "owner-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: &yes}}
}

func (f *fixture) pod(t *testing.T, name, node string, annotations map[string]string, owners []metav1.OwnerReference) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: map[string]string{"test": "blocking"},
			Annotations: annotations, OwnerReferences: owners},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
	if _, err := f.cp.Client.CoreV1().Pods(f.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
}

func TestHandlerThroughLambda(t *testing.T) {
	f := newFixture(t, 0, 2, nil)
	ctx := context.Background()
	f.deploy(t, "web", 2, "3")
	f.waitUnschedulable(t, 2)
	h := lambda.NewHandler((&evaluate.Handler{Evaluator: f.evaluator("lambda")}).Handle)

	invoke := func(payload string) (map[string]any, error) {
		out, err := h.Invoke(ctx, []byte(payload))
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("response %s: %v", out, err)
		}
		return m, nil
	}

	// A dry run returns the plan and changes nothing.
	plan, err := invoke(`{"action":"plan"}`)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	ups, _ := plan["scaleUp"].([]any)
	if len(ups) != 1 {
		t.Fatalf("plan scaleUp = %v, want one entry", plan["scaleUp"])
	}
	if f.target(t) != 0 {
		t.Errorf("the plan action changed the group")
	}
	st, _ := f.store.LoadState(ctx)
	if len(st.LastScaleUp) != 0 {
		t.Errorf("the plan action wrote state: %+v", st)
	}

	// Bad requests: a clear error each, and nothing changed.
	for payload, want := range map[string]string{
		`{"action":"add","nodeGroup":"` + f.pool + `","count":3}`: "above its max size 2",
		`{"action":"add","nodeGroup":"nope","count":1}`:           `unknown node group "nope"`,
		`{"action":"add","nodeGroup":"` + f.pool + `"}`:           `needs "count"`,
		`{"action":"scale"}`:                                 `unknown action "scale"`,
		`{"action":"plan","extra":1}`:                        `extra: unknown field`,
		`{"detail-type":"Object Created","source":"aws.s3"}`: "unsupported EventBridge event",
		`[1,2]`: "must be a JSON object",
	} {
		if _, err := invoke(payload); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", payload, err, want)
		}
	}
	if f.target(t) != 0 {
		t.Fatalf("a rejected request changed the group: target %d", f.target(t))
	}

	// "add" within max works.
	if _, err := invoke(`{"action":"add","nodeGroup":"` + f.pool + `","count":1}`); err != nil {
		t.Fatalf("add: %v", err)
	}
	if f.target(t) != 1 {
		t.Errorf("target after add = %d, want 1", f.target(t))
	}

	// The scheduled event runs the cycle: one more node for the second pod.
	tick := `{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012","time":"2026-11-30T10:00:00Z","region":"eu-west-1","resources":["arn:aws:events:eu-west-1:123456789012:rule/nodetide-evaluate"],"detail":{}}`
	f.cp.WaitPodsRunning(t, f.ns, "app=web", 1, time.Minute)
	res, err := invoke(tick)
	if err != nil {
		t.Fatalf("scheduled event: %v", err)
	}
	if f.target(t) != 2 {
		t.Errorf("target after the scheduled run = %d, want 2 (result %v)", f.target(t), res)
	}
}

// watchStarted tells when a pod watch has been opened on the API server.
type watchStarted struct {
	kubernetes.Interface
	once    sync.Once
	started chan struct{}
}

func (w *watchStarted) CoreV1() typedcorev1.CoreV1Interface {
	return watchStartedCore{CoreV1Interface: w.Interface.CoreV1(), w: w}
}

type watchStartedCore struct {
	typedcorev1.CoreV1Interface
	w *watchStarted
}

func (c watchStartedCore) Pods(namespace string) typedcorev1.PodInterface {
	return watchStartedPods{PodInterface: c.CoreV1Interface.Pods(namespace), w: c.w}
}

type watchStartedPods struct {
	typedcorev1.PodInterface
	w *watchStarted
}

func (p watchStartedPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	wi, err := p.PodInterface.Watch(ctx, opts)
	if err == nil {
		p.w.once.Do(func() { close(p.w.started) })
	}
	return wi, err
}

// TestWatchScalesUpBetweenTicks: after a tick's cycle, the watch sees pods
// turn Unschedulable and runs the cycle itself, without waiting for the next
// tick.
func TestWatchScalesUpBetweenTicks(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ev := f.evaluator("watch")
	ev.Settings.ScaleUp.PendingPodMinAge = time.Second
	watching := &watchStarted{Interface: ev.Client, started: make(chan struct{})}
	ev.Client = watching
	h := &evaluate.Handler{Evaluator: ev, WatchFor: 40 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res any
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.Handle(ctx, []byte(`{"action":"run"}`))
		done <- outcome{res, err}
	}()
	// The tick's own cycle has nothing to do; the pods come once the
	// watch that follows it is open.
	select {
	case <-watching.started:
	case out := <-done:
		t.Fatalf("handle ended before watching: %v, %v", out.res, out.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no pod watch opened within 30s")
	}
	f.deploy(t, "late", 2, "3")
	f.cp.WaitFor(t, 30*time.Second, "the watch to grow the group", func(context.Context) (bool, error) {
		return f.target(t) == 2, nil
	})
	f.cp.WaitPodsRunning(t, f.ns, "app=late", 2, time.Minute)
	cancel()
	out := <-done
	if out.err != nil {
		t.Fatalf("handle: %v", out.err)
	}
	res := out.res.(evaluate.Result)
	if res.WatchRuns < 1 {
		t.Errorf("watch runs = %d, want at least 1", res.WatchRuns)
	}
	if got := f.target(t); got != 2 {
		t.Errorf("target = %d, want 2", got)
	}
}

// TestTriggeredRunWaitsForPodsToComeOfAge: the webhook hints as soon as the
// scheduler marks a pod Unschedulable, before pendingPodMinAge; the
// triggered run waits for the pod to come of age and scales up then, within
// the same invocation, instead of leaving it to the next tick.
func TestTriggeredRunWaitsForPodsToComeOfAge(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ev := f.evaluator("triggered")
	ev.Settings.ScaleUp.PendingPodMinAge = 15 * time.Second
	f.deploy(t, "young", 2, "3")
	f.waitUnschedulable(t, 2)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := ev.RunTriggered(ctx, time.Time{})
	if err != nil {
		t.Fatalf("triggered run: %v", err)
	}
	if got := f.target(t); got != 2 {
		t.Fatalf("target = %d after the triggered run (%s), want 2; result %+v", got, time.Since(start), res)
	}
	if res.TriggerRuns < 1 || len(res.Actions) != 1 || res.Actions[0].Kind != "scaleUp" || res.Actions[0].Delta != 2 {
		t.Errorf("result: %d further runs, actions %+v; want a scale-up by 2 in a further run", res.TriggerRuns, res.Actions)
	}
}
