package setup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/schedulefire"
	"github.com/nodetide/nodetide/pkg/setup"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// The replace bed: an expensive group (one 4-CPU node at 0.40/h) holding a
// Deployment of two 600m pods, and an empty cheap group of 1-CPU nodes at
// 0.05/h, one such pod each. Consolidation replaces the old node by two
// cheap ones (0.10/h, 75% less): the cheap nodes first, the old node's
// drain once they are Ready.
const (
	rBigMax   = 2
	rSmallMax = 4 // room for a second replacement's nodes, so one would show
	rDelta    = 2 // the cheap nodes one replacement asks for
	rReplicas = 2
	// rProvision is scaleUp.maxNodeProvisionTime: a replacement held that
	// long after it asked for its nodes is given up.
	rProvision = 30 * time.Second
)

// replaceBed is one test's two groups on the shared control plane, state
// on dynalite and the drain state machine run locally, with the functions
// wired from one config as separately started Lambda instances would be.
type replaceBed struct {
	cp         *testbed.ControlPlane
	ns         string
	big, small string // group names
	old        string // the expensive node, once there
	db         *dynamodb.Client
	table      string
	sfn        *sfn.Client
	machine    string
	evs        [2]*evaluate.Evaluator
	sched      *schedulefire.Handler
	bounds     func(context.Context) ([]providers.NodeGroup, error) // the effective bounds, as the functions read them
	store      *state.DynamoDB
	// hooks run things inside the cycles of evs[i] (see cycleHook).
	hooks [2]*cycleHook
}

// cycleHook runs a function once inside a cycle: read, once the cycle has
// listed the groups (so read the bounds) and the cluster; grow, just
// before the cycle asks a group for more nodes.
type cycleHook struct {
	mu         sync.Mutex
	read, grow func(ctx context.Context)
}

func (h *cycleHook) set(read, grow func(ctx context.Context)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.read, h.grow = read, grow
}

// take returns the function of *slot and clears it.
func (h *cycleHook) take(slot *func(ctx context.Context)) func(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn := *slot
	*slot = nil
	return fn
}

// hookedGroup is a group whose size increases run the grow hook first.
type hookedGroup struct {
	providers.NodeGroup
	h *cycleHook
}

func (g hookedGroup) IncreaseSize(ctx context.Context, delta int) error {
	if fn := g.h.take(&g.h.grow); fn != nil {
		fn(ctx)
	}
	return g.NodeGroup.IncreaseSize(ctx, delta)
}

// Unwrap keeps the provider's group reachable (providers.Own).
func (g hookedGroup) Unwrap() providers.NodeGroup { return g.NodeGroup }

func newReplaceBed(t *testing.T) *replaceBed {
	t.Helper()
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	b := &replaceBed{cp: cp, ns: ns, big: ns + "-big", small: ns + "-small"}
	t.Cleanup(func() {
		for _, g := range []string{b.big, b.small} {
			_ = cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + g})
		}
	})
	ctx := context.Background()
	db := testbed.DynamoDB(t)
	b.db, b.table = db.Client(t), "replace-"+ns
	if err := state.CreateTable(ctx, b.db, b.table); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`cluster: {name: %[1]s, kubernetes: {kubeconfig: %[2]s}}
state: {dynamodb: {table: %[3]s, endpoint: %[4]s}}
nodeGroups:
  - name: %[5]s
    provider: kwok
    minSize: 0
    maxSize: %[7]d
    price: {perHour: 0.40, currency: USD}
    kwok: {template: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}, labels: {tier: %[1]s}}}
  - name: %[6]s
    provider: kwok
    minSize: 0
    maxSize: %[8]d
    price: {perHour: 0.05, currency: USD}
    kwok: {template: {allocatable: {cpu: "1", memory: 2Gi, pods: "110"}, labels: {tier: %[1]s}}}
scaleUp: {pendingPodMinAge: 0s, maxNodeProvisionTime: %[9]s}
scaleDown: {unneededTime: 2s, delayAfterAdd: 0s, consolidation: replace}
drain: {timeout: 1m, onTimeout: abort}
`, ns, cp.KubeconfigPath, b.table, db.Endpoint, b.big, b.small, rBigMax, rSmallMax, rProvision)
	path := filepath.Join(t.TempDir(), "nodetide.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l := &live{cp: cp, ns: ns, db: db, yaml: yaml, cfg: cfg}
	svc := l.drainMachine(t)
	b.sfn, b.machine = svc.Client(ctx), svc.StateMachineArn[sfnlocal.DrainStateMachine]

	log := slog.New(slog.NewJSONHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for i := range b.evs {
		ev, err := setup.Evaluator(ctx, cfg, "", &setup.AWS{}, log, fmt.Sprintf("evaluate-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		h := &cycleHook{}
		groups := ev.Groups
		ev.Groups = func(ctx context.Context) ([]providers.NodeGroup, error) {
			gs, err := groups(ctx)
			for i, g := range gs {
				gs[i] = hookedGroup{g, h}
			}
			if fn := h.take(&h.read); fn != nil {
				fn(ctx)
			}
			return gs, err
		}
		b.evs[i], b.hooks[i] = ev, h
	}
	if b.sched, err = setup.Schedules(ctx, cfg, "", &setup.AWS{}, log); err != nil {
		t.Fatal(err)
	}
	watch, err := setup.Evaluator(ctx, cfg, "", &setup.AWS{}, log, "watcher")
	if err != nil {
		t.Fatal(err)
	}
	b.bounds = watch.Groups
	stores, err := setup.Store(ctx, cfg, &setup.AWS{})
	if err != nil {
		t.Fatal(err)
	}
	b.store = stores.(*state.DynamoDB)

	// The old node, by hand (nodetide add), with the Deployment on it.
	if _, err := b.evs[0].Add(ctx, b.big, 1); err != nil {
		t.Fatal(err)
	}
	cp.WaitFor(t, time.Minute, "the old node Ready", func(ctx context.Context) (bool, error) {
		s, err := b.sample(ctx)
		if err != nil || len(s.big) != 1 || !s.big[0].ready {
			return false, err
		}
		b.old = s.big[0].name
		return true, nil
	})
	b.deploy(t)
	cp.WaitPodsRunning(t, ns, "app=web", rReplicas, 2*time.Minute)
	return b
}

func (b *replaceBed) deploy(t *testing.T) {
	t.Helper()
	replicas := int32(rReplicas)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"tier": b.ns},
					Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
					}}},
				},
			},
		},
	}
	if _, err := b.cp.Client.AppsV1().Deployments(b.ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// lockPDB puts a PodDisruptionBudget on the Deployment's pods that allows
// no disruption: every replica must stay available.
func (b *replaceBed) lockPDB(ctx context.Context) error {
	all := intstr.FromInt32(rReplicas)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &all,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	if _, err := b.cp.Client.PolicyV1().PodDisruptionBudgets(b.ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the PDB: %w", err)
	}
	return nil
}

// fire puts a schedule naming one group with the given bounds and runs it
// through the schedule function, as a fired cron would.
func (b *replaceBed) fire(ctx context.Context, name, group string, minSize, maxSize int) (string, error) {
	doc, err := json.Marshal(map[string]any{"name": name, "cron": "0 0 1 1 *",
		"nodeGroups": []any{map[string]any{"name": group, "min": minSize, "max": maxSize}}})
	if err != nil {
		return "", err
	}
	if _, err := b.sched.Handle(ctx, json.RawMessage(`{"action":"put","schedule":`+string(doc)+`}`)); err != nil {
		return "", fmt.Errorf("put schedule %s: %w", name, err)
	}
	out, err := b.sched.Handle(ctx, json.RawMessage(`{"action":"run","name":"`+name+`"}`))
	if err != nil {
		return "", fmt.Errorf("run schedule %s: %w", name, err)
	}
	res, _ := json.Marshal(out)
	return string(res), nil
}

// rNode is one node of a group as a sample saw it.
type rNode struct {
	name                     string
	ready, tainted, cordoned bool
}

// rSample is one observation of both groups and the state table.
type rSample struct {
	at                time.Time
	big, small        []rNode // not being deleted
	bigMin, smallMax  int     // the effective bounds
	replacing         []string
	oldDrains         []string // executions draining the old node
	oldDrainsFinished []string // of those, the ended ones, with their status
}

func (s rSample) String() string {
	names := func(ns []rNode) string {
		var out []string
		for _, n := range ns {
			f := n.name
			if n.tainted {
				f += "(tainted)"
			} else if n.cordoned {
				f += "(cordoned)"
			}
			out = append(out, f)
		}
		return "[" + strings.Join(out, " ") + "]"
	}
	return fmt.Sprintf("%s old group %s (min %d), cheap group %s (max %d), replacing %v, the old node's drains %v",
		s.at.Format("15:04:05.000"), names(s.big), s.bigMin, names(s.small), s.smallMax, s.replacing, s.oldDrains)
}

func (s rSample) node(group []rNode, name string) (rNode, bool) {
	i := slices.IndexFunc(group, func(n rNode) bool { return n.name == name })
	if i < 0 {
		return rNode{}, false
	}
	return group[i], true
}

// sample reads the bounds, the nodes, the REPLACE# items and the drain
// executions of the old node.
func (b *replaceBed) sample(ctx context.Context) (rSample, error) {
	s := rSample{}
	groups, err := b.bounds(ctx)
	if err != nil {
		return s, err
	}
	for _, g := range groups {
		switch g.Name() {
		case b.big:
			s.bigMin = g.Bounds().Min
		case b.small:
			s.smallMax = g.Bounds().Max
		}
	}
	s.at = time.Now()
	for _, g := range []struct {
		name string
		into *[]rNode
	}{{b.big, &s.big}, {b.small, &s.small}} {
		list, err := b.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + g.name})
		if err != nil {
			return s, err
		}
		for _, n := range list.Items {
			if n.DeletionTimestamp != nil {
				continue
			}
			tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == drain.TaintKey })
			*g.into = append(*g.into, rNode{name: n.Name, tainted: tainted, cordoned: tainted || n.Spec.Unschedulable,
				ready: slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
					return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
				})})
		}
		slices.SortFunc(*g.into, func(a, b rNode) int { return strings.Compare(a.name, b.name) })
	}
	if s.replacing, err = b.replaceItems(ctx); err != nil {
		return s, err
	}
	p := sfn.NewListExecutionsPaginator(b.sfn, &sfn.ListExecutionsInput{StateMachineArn: aws.String(b.machine)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s, fmt.Errorf("list drain executions: %w", err)
		}
		for _, e := range page.Executions {
			if b.old != "" && strings.Contains(aws.ToString(e.Name), b.old) {
				s.oldDrains = append(s.oldDrains, aws.ToString(e.Name))
				if e.Status != sfntypes.ExecutionStatusRunning {
					s.oldDrainsFinished = append(s.oldDrainsFinished, aws.ToString(e.Name)+" "+string(e.Status))
				}
			}
		}
	}
	return s, nil
}

// replaceItems lists the REPLACE# items of the cluster, read strongly
// consistent.
func (b *replaceBed) replaceItems(ctx context.Context) ([]string, error) {
	out, err := b.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(b.table),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":pk": &ddbtypes.AttributeValueMemberS{Value: "CLUSTER#" + b.ns},
			":p":  &ddbtypes.AttributeValueMemberS{Value: "REPLACE#"},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("query REPLACE# items: %w", err)
	}
	var ids []string
	for _, item := range out.Items {
		if sk, ok := item["sk"].(*ddbtypes.AttributeValueMemberS); ok {
			ids = append(ids, sk.Value)
		}
	}
	return ids, nil
}

// rWatcher samples the bed every 50 ms while a test runs, and follows the
// Deployment's pods by a watch, checking the properties on each.
type rWatcher struct {
	b  *replaceBed
	mu sync.Mutex
	// oldMayGo: the old node may be drained (else it must never be
	// cordoned or tainted).
	oldMayGo bool
	// frozenAt: from then on the cheap group may not grow; frozenCap is
	// its fewest nodes seen since (-1: none seen yet).
	frozenAt  time.Time
	frozenCap int
	// budgetHeld: a PDB's Ready pods reached its minAvailable while the
	// pods were followed, so a fall below it would have been seen.
	budgetHeld bool
	last       rSample
	samples    int
	violations []string
	kinds      []string       // the format of each violation
	repeats    map[string]int // samples that broke each kind
	reported   int            // violations reported so far
	stop       chan struct{}
	done       sync.WaitGroup
}

func (b *replaceBed) watch(t *testing.T, oldMayGo bool) *rWatcher {
	t.Helper()
	w := &rWatcher{b: b, oldMayGo: oldMayGo, frozenCap: -1, repeats: map[string]int{}, stop: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	w.done.Add(2)
	go func() {
		defer w.done.Done()
		w.poll(ctx)
	}()
	go func() {
		defer w.done.Done()
		w.watchPods(ctx)
	}()
	t.Cleanup(func() {
		w.halt()
		cancel()
		w.report(t) // when the test ended before result
	})
	return w
}

// report fails t with the violations not reported yet.
func (w *rWatcher) report(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, v := range w.violations[w.reported:] {
		t.Errorf("%s (%d times)", v, w.repeats[w.kinds[w.reported+i]])
	}
	w.reported = len(w.violations)
}

// halt stops the watch; it may be called again.
func (w *rWatcher) halt() {
	w.mu.Lock()
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.mu.Unlock()
	w.done.Wait()
}

// freezeSmall: from now on the cheap group may not grow.
func (w *rWatcher) freezeSmall() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.frozenAt.IsZero() {
		w.frozenAt = time.Now()
	}
}

// fail records a broken property, the first time only for each kind (the
// format), counting the repeats.
func (w *rWatcher) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.repeats[format]; n > 0 {
		w.repeats[format] = n + 1
		return
	}
	w.repeats[format] = 1
	w.violations = append(w.violations, strings.ReplaceAll(fmt.Sprintf(format, args...), w.b.ns+"-", ""))
	w.kinds = append(w.kinds, format)
}

func (w *rWatcher) poll(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if s, err := w.b.sample(ctx); err == nil {
			w.observe(s)
		}
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

// observe checks the properties on one sample.
func (w *rWatcher) observe(s rSample) {
	w.mu.Lock()
	w.last = s
	w.samples++
	grew := false
	if !w.frozenAt.IsZero() && !s.at.Before(w.frozenAt) {
		grew = w.frozenCap >= 0 && len(s.small) > w.frozenCap
		if w.frozenCap < 0 || len(s.small) < w.frozenCap {
			w.frozenCap = len(s.small)
		}
	}
	w.mu.Unlock()
	if grew {
		w.fail("the cheap group grew after a schedule capped it at %s", s)
	}
	if len(s.big) > rBigMax || len(s.small) > rSmallMax {
		w.fail("a group above its configured max (%d, %d) at %s", rBigMax, rSmallMax, s)
	}
	// More than one replacement's nodes: a second replacement, or a
	// replacement asked for twice.
	if len(s.small) > rDelta {
		w.fail("the cheap group has %d nodes, more than the %d of one replacement, at %s", len(s.small), rDelta, s)
	}
	if len(s.replacing) > 1 {
		w.fail("%d replacements under way, want at most one, at %s", len(s.replacing), s)
	}
	if len(s.oldDrains) > 1 {
		w.fail("%d drains of the old node, want at most one, at %s", len(s.oldDrains), s)
	}
	up := 0
	for _, n := range s.big {
		if !n.cordoned {
			up++
		}
		if n.name == w.b.old && n.cordoned && !w.oldMayGo {
			w.fail("the old node is cordoned or tainted, which nothing may do here, at %s", s)
		}
	}
	if up < s.bigMin {
		w.fail("the old group has %d nodes not cordoned, below its effective min %d, at %s", up, s.bigMin, s)
	}
}

// watchPods follows every change of the Deployment's pods, in the API
// server's order: once a PDB covers them and its Ready pods (not
// terminating) have reached its minAvailable, they must never fall below
// it, however briefly.
func (w *rWatcher) watchPods(ctx context.Context) {
	pods := w.b.cp.Client.CoreV1().Pods(w.b.ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		w.fail("pod watch: %v", err)
		return
	}
	ready := map[string]bool{}
	for _, p := range list.Items {
		if podReady(&p) {
			ready[p.Name] = true
		}
	}
	watch, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: "app=web", ResourceVersion: list.ResourceVersion})
	if err != nil {
		w.fail("pod watch: %v", err)
		return
	}
	defer watch.Stop()
	reached := false
	for {
		select {
		case <-w.stop:
			return
		case ev, ok := <-watch.ResultChan():
			if !ok {
				return
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type != "DELETED" && podReady(p) {
				ready[p.Name] = true
			} else {
				delete(ready, p.Name)
			}
			covered, err := w.b.cp.Client.PolicyV1().PodDisruptionBudgets(w.b.ns).Get(ctx, "web", metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err), err == nil && covered.Status.ObservedGeneration < covered.Generation:
				continue // no budget in force yet
			case err != nil:
				continue // the watch is ending
			}
			if len(ready) >= rReplicas {
				reached = true
				w.mu.Lock()
				w.budgetHeld = true
				w.mu.Unlock()
			} else if reached {
				w.fail("PDB web allows no disruption, yet %d of %d pods are Ready after %s pod %s", len(ready), rReplicas, ev.Type, p.Name)
				reached = false // report each drop once
			}
		}
	}
}

// result is the end of a watch: what broke a property, and the last sample.
func (w *rWatcher) result(t *testing.T) rSample {
	t.Helper()
	w.halt()
	w.report(t)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.samples < 10 {
		t.Errorf("only %d samples taken", w.samples)
	}
	return w.last
}

// run is one evaluate cycle of evs[i]; hook, when set, runs inside it once
// it has read the cluster and the bounds.
func (b *replaceBed) run(t *testing.T, i int, hook func(ctx context.Context)) evaluate.Result {
	t.Helper()
	b.hooks[i].set(hook, nil)
	res, err := b.evs[i].Run(context.Background())
	if err != nil {
		t.Fatalf("evaluate-%d: %v", i, err)
	}
	if res.Skipped != "" {
		t.Fatalf("evaluate-%d skipped its cycle: %s", i, res.Skipped)
	}
	t.Logf("evaluate-%d: %s", i, b.describe(res))
	return res
}

// describe is what a cycle did with replacements, for logs and failures,
// with the names shortened to what follows the namespace.
func (b *replaceBed) describe(res evaluate.Result) string {
	return strings.ReplaceAll(describeResult(res), b.ns+"-", "")
}

func describeResult(res evaluate.Result) string {
	if res.Skipped != "" {
		return "skipped: " + res.Skipped
	}
	var parts []string
	for _, r := range res.Plan.Replace {
		parts = append(parts, fmt.Sprintf("replace %s %s (%s)", r.ID, r.Phase, r.Reason))
	}
	for _, a := range res.Actions {
		s := fmt.Sprintf("%s %s %s %+d", a.Kind, a.NodeGroup, a.Node, a.Delta)
		if a.Error != "" {
			s += " failed: " + a.Error
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}

// phase is the phase of the plan's replacement of the old node ("" when
// the plan has none).
func (b *replaceBed) phase(res evaluate.Result) string {
	if res.Plan == nil {
		return ""
	}
	for _, r := range res.Plan.Replace {
		if slices.Contains(r.Nodes, b.old) {
			return r.Phase
		}
	}
	return ""
}

// requested runs cycles until one starts the replacement (the old node
// must first be older than unneededTime, and the cluster settled), grow
// inside that one just before it asks for the cheap nodes, and waits for
// them to be Ready.
func (b *replaceBed) requested(t *testing.T, grow func(ctx context.Context)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	b.hooks[0].set(nil, grow)
	for {
		res, err := b.evs[0].Run(context.Background())
		if err != nil || res.Skipped != "" {
			t.Fatalf("evaluate-0: %v %s", err, res.Skipped)
		}
		t.Logf("evaluate-0: %s", b.describe(res))
		p := b.phase(res)
		if p == planner.ReplaceRequested {
			if b.hooks[0].take(&b.hooks[0].grow) != nil {
				t.Fatal("the cycle that started the replacement asked for no node")
			}
			break
		}
		if p != "" || len(res.Plan.ScaleUp) > 0 || time.Now().After(deadline) {
			kept, _ := json.Marshal(res.Plan.Kept)
			t.Fatalf("the replacement of %s is %q, want %s: %s; kept %s", b.old, p, planner.ReplaceRequested, b.describe(res), kept)
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.cp.WaitFor(t, time.Minute, "the cheap nodes Ready", func(ctx context.Context) (bool, error) {
		s, err := b.sample(ctx)
		ready := 0
		for _, n := range s.small {
			if n.ready {
				ready++
			}
		}
		return err == nil && ready == rDelta, err
	})
}

// settleCycles is how many cycles in a row must find nothing under way:
// the ones after a replacement ends must not start another.
const settleCycles = 3

// settle runs cycles until settleCycles in a row end with no replacement
// under way and no drain of the old node running, and returns every phase
// the plans gave the old node's replacement, in order (repeats dropped).
func (b *replaceBed) settle(t *testing.T, i int) []string {
	t.Helper()
	var phases []string
	deadline := time.Now().Add(3 * time.Minute)
	for calm := 0; ; {
		res := b.run(t, i, nil)
		if p := b.phase(res); p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
			phases = append(phases, p)
		}
		s, err := b.sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		calm++
		if len(s.replacing) > 0 || len(s.oldDrains) > len(s.oldDrainsFinished) {
			calm = 0
		}
		if calm == settleCycles {
			return phases
		}
		if time.Now().After(deadline) {
			t.Fatalf("still under way after 3 minutes (phases %v): %s", phases, s)
		}
		time.Sleep(time.Second) // between cycles, as the minute's schedule would
	}
}

// webOn returns the nodes the Deployment's Running pods are on, and fails
// unless all replicas run and the Deployment asks for rReplicas again.
func (b *replaceBed) webOn(t *testing.T) []string {
	t.Helper()
	b.cp.WaitPodsRunning(t, b.ns, "app=web", rReplicas, 2*time.Minute)
	ctx := context.Background()
	d, err := b.cp.Client.AppsV1().Deployments(b.ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != rReplicas {
		t.Errorf("the Deployment asks for %d replicas, want its own %d back", *d.Spec.Replicas, rReplicas)
	}
	pods, err := b.cp.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			on = append(on, p.Spec.NodeName)
		}
	}
	slices.Sort(on)
	return on
}

// keptOld checks the end of a replacement that did not happen: the old
// node is there, schedulable, with both pods, and no replacement is left.
func (b *replaceBed) keptOld(t *testing.T) {
	t.Helper()
	n, err := b.cp.Client.CoreV1().Nodes().Get(context.Background(), b.old, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the old node: %v", err)
	}
	if n.Spec.Unschedulable || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == drain.TaintKey }) {
		t.Errorf("the old node is left cordoned: %+v", n.Spec)
	}
	if on := b.webOn(t); !slices.Equal(on, []string{b.old, b.old}) {
		t.Errorf("the Deployment's pods run on %v, want both still on %s", on, b.old)
	}
}

// TestReplaceUnderWayKeepsBoundsAndBudgets: while a replacement is under
// way (its cheap nodes being asked for or Ready, the old node not drained
// yet), a schedule changes a group's bounds or a PDB appears: before the
// cycle that would drain the old node, or inside a cycle once it has read
// the cluster and the bounds (so it decides on what was, and what it
// starts must keep to what is). A watcher checks on every sample that the old
// node is never cordoned when it must stay, the old group keeps its
// effective min of nodes not cordoned, the cheap group never grows past
// the nodes it may have (none once a schedule capped it), one replacement
// at most is under way with one drain at most of the old node, and,
// following the pods by a watch, that a PDB's Ready pods never fall below
// its minAvailable.
func TestReplaceUnderWayKeepsBoundsAndBudgets(t *testing.T) {
	for _, tc := range []struct {
		name string
		// The event happens before the cycle after the cheap nodes are
		// Ready (at 2), inside that cycle once it has read the cluster and
		// the bounds (at 2, inside), or inside the first cycle just before
		// it asks for the cheap nodes (at 1, inside).
		at     int
		inside bool
		event  func(ctx context.Context, b *replaceBed) (string, error)
		// freeze: from the event on (from the end of its cycle, inside
		// one), the cheap group may not grow.
		freeze bool
		// givenUp: the replacement must end given up, never draining;
		// oldMayGo: the old node may be drained (else it stays); moved:
		// the pods move under the PDB, which the watch must then see held.
		givenUp, oldMayGo, moved bool
		// smallAtEnd is the most cheap nodes left at the end (-1: any).
		smallAtEnd int
	}{
		{name: "min raised to the old group's size before the drain", at: 2, event: raiseBigMin,
			givenUp: true, smallAtEnd: -1},
		// The cycle decides on the old min and may start the drain, whose
		// own claim must refuse it.
		{name: "min raised while the draining cycle decides", at: 2, inside: true, event: raiseBigMin,
			smallAtEnd: -1},
		{name: "cheap max lowered under the replacement once its nodes are Ready", at: 2, event: lowerSmallMax,
			freeze: true, givenUp: true, smallAtEnd: 1},
		// The cycle asks for the nodes under the max it read, as any size
		// change does; they must then go, the old node stay.
		{name: "cheap max lowered while the first cycle asks for the nodes", at: 1, inside: true, event: lowerSmallMax,
			freeze: true, givenUp: true, smallAtEnd: 1},
		{name: "a PDB allowing no disruption before the drain", at: 2, event: lockPDB,
			givenUp: true, smallAtEnd: -1},
		// The drain surges each pod and restores the Deployment, or gives
		// up at its timeout and rolls back: either way within the budget.
		{name: "a PDB allowing no disruption while the draining cycle decides", at: 2, inside: true, event: lockPDB,
			oldMayGo: true, moved: true, smallAtEnd: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newReplaceBed(t)
			w := b.watch(t, tc.oldMayGo)
			event := func(ctx context.Context) {
				out, err := tc.event(ctx, b)
				if err != nil {
					t.Errorf("the concurrent event: %v", err)
				}
				t.Logf("the concurrent event: %s", out)
				if tc.freeze && !tc.inside {
					w.freezeSmall()
				}
			}
			var hook func(ctx context.Context)
			if tc.at == 1 && tc.inside {
				hook = event
			}
			b.requested(t, hook)
			if tc.at == 1 && tc.freeze {
				w.freezeSmall()
			}
			hook = nil
			switch {
			case tc.at == 2 && tc.inside:
				hook = event
			case tc.at == 2:
				event(context.Background())
			}
			res := b.run(t, 0, hook)
			if tc.at == 2 && tc.inside && tc.freeze {
				w.freezeSmall()
			}
			var phases []string
			if p := b.phase(res); p != "" {
				phases = append(phases, p)
			}
			for _, p := range b.settle(t, 0) {
				if len(phases) == 0 || phases[len(phases)-1] != p {
					phases = append(phases, p)
				}
			}
			last := w.result(t)
			t.Logf("the old node's replacement went %v; its drains %v; last sample %s", phases, last.oldDrainsFinished, last)
			if tc.givenUp && (!slices.Contains(phases, planner.ReplaceAbandoned) || slices.Contains(phases, planner.ReplaceDraining)) {
				t.Errorf("the replacement went %v, want given up (%s) and never %s", phases, planner.ReplaceAbandoned, planner.ReplaceDraining)
			}
			if tc.moved && !w.budgetHeld {
				t.Error("the PDB was never seen in force while the pods moved: nothing was checked")
			}
			if tc.oldMayGo {
				t.Logf("the Deployment's pods run on %v", b.webOn(t))
			} else {
				b.keptOld(t)
			}
			if tc.smallAtEnd >= 0 {
				b.cp.WaitFor(t, 2*time.Minute, fmt.Sprintf("the cheap group down to %d nodes", tc.smallAtEnd), func(ctx context.Context) (bool, error) {
					s, err := b.sample(ctx)
					return err == nil && len(s.small) <= tc.smallAtEnd, err
				})
			}
		})
	}
}

// raiseBigMin fires a schedule that sets the old group's min to its size
// (1): the old node may no longer go.
func raiseBigMin(ctx context.Context, b *replaceBed) (string, error) {
	return b.fire(ctx, "hold", b.big, 1, rBigMax)
}

// lowerSmallMax fires a schedule that caps the cheap group at one node,
// under the two the replacement asks for.
func lowerSmallMax(ctx context.Context, b *replaceBed) (string, error) {
	return b.fire(ctx, "cap", b.small, 0, 1)
}

func lockPDB(ctx context.Context, b *replaceBed) (string, error) {
	return "PDB web with minAvailable 2", b.lockPDB(ctx)
}

// TestReplaceByConcurrentCycles: two evaluate functions cycle against the
// same table and cluster while a replacement runs its course, at the same
// moments, or one of them held inside its cycle, after it has loaded the
// state, past its lease while the other starts the replacement (a cycle
// slowed by a throttled API). Exactly one replacement is started and one
// drain of the old node runs: the cheap group never has more than the
// nodes of one replacement, the table never more than one replacement. At
// the end the old node is gone, its pods run on the two cheap nodes and
// nothing is left under way.
func TestReplaceByConcurrentCycles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, b *replaceBed)
	}{
		{"cycles at the same moments", func(t *testing.T, b *replaceBed) {
			b.ripe(t)
			res := b.together(t)
			if p0, p1 := b.phase(res[0]), b.phase(res[1]); (p0 == planner.ReplaceRequested) == (p1 == planner.ReplaceRequested) {
				t.Errorf("of two cycles at once, %q and %q started the replacement: want exactly one", p0, p1)
			}
		}},
		{"a cycle held past its lease", func(t *testing.T, b *replaceBed) {
			// Held after loading the state, with a lease of one second.
			b.ripe(t)
			held := &stallingStore{DynamoDB: b.store, stalled: make(chan struct{}), release: make(chan struct{})}
			a := b.evs[0]
			store, ttl := a.Store, a.LeaseTTL
			a.Store, a.LeaseTTL = held, time.Second
			type outcome struct {
				res evaluate.Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := a.Run(context.Background())
				done <- outcome{res, err}
			}()
			select {
			case <-held.stalled:
			case o := <-done:
				t.Fatalf("evaluate-0 ended before loading the state: %v %s", o.err, b.describe(o.res))
			}
			// The other cycles once the held one's lease has run out.
			var res evaluate.Result
			b.cp.WaitFor(t, time.Minute, "evaluate-1 past evaluate-0's lease", func(ctx context.Context) (bool, error) {
				var err error
				res, err = b.evs[1].Run(ctx)
				return err == nil && res.Skipped == "", err
			})
			t.Logf("evaluate-1: %s", b.describe(res))
			if got := b.phase(res); got != planner.ReplaceRequested {
				t.Fatalf("evaluate-1's replacement of %s is %q, want %s", b.old, got, planner.ReplaceRequested)
			}
			close(held.release)
			o := <-done
			t.Logf("evaluate-0, released: %s (%v)", b.describe(o.res), o.err)
			if o.err != nil || len(o.res.Actions) > 0 {
				t.Errorf("the cycle held past its lease acted on what it read before: %s (%v)", b.describe(o.res), o.err)
			}
			a.Store, a.LeaseTTL = store, ttl
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newReplaceBed(t)
			w := b.watch(t, true)
			tc.start(t, b)
			var phases []string
			deadline := time.Now().Add(3 * time.Minute)
			for calm := 0; calm < settleCycles; {
				for _, res := range b.together(t) {
					if p := b.phase(res); p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
						phases = append(phases, p)
					}
				}
				s, err := b.sample(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				calm++
				if _, there := s.node(s.big, b.old); there || len(s.replacing) > 0 || len(s.oldDrains) > len(s.oldDrainsFinished) {
					calm = 0
				}
				if calm < settleCycles && time.Now().After(deadline) {
					t.Fatalf("not done after 3 minutes (phases %v): %s", phases, s)
				}
				time.Sleep(time.Second)
			}
			last := w.result(t)
			t.Logf("the replacement went %v; last sample %s", phases, last)
			if len(last.oldDrainsFinished) != 1 || !strings.HasSuffix(last.oldDrainsFinished[0], string(sfntypes.ExecutionStatusSucceeded)) {
				t.Errorf("the old node's drains: %v, want one, succeeded", last.oldDrainsFinished)
			}
			on := b.webOn(t)
			if len(last.small) != rDelta || len(on) != rReplicas || on[0] == on[1] ||
				!slices.ContainsFunc(last.small, func(n rNode) bool { return n.name == on[0] }) ||
				!slices.ContainsFunc(last.small, func(n rNode) bool { return n.name == on[1] }) {
				t.Errorf("the pods run on %v, want one on each of the cheap nodes %v", on, last.small)
			}
		})
	}
}

// ripe waits until a plan (a dry run) would start the replacement.
func (b *replaceBed) ripe(t *testing.T) {
	t.Helper()
	b.cp.WaitFor(t, time.Minute, "a plan that starts the replacement", func(ctx context.Context) (bool, error) {
		plan, err := b.evs[1].Plan(ctx)
		return err == nil && b.phase(evaluate.Result{Plan: &plan}) == planner.ReplaceRequested, err
	})
}

// together runs a cycle of each evaluate function at the same moment.
func (b *replaceBed) together(t *testing.T) [2]evaluate.Result {
	t.Helper()
	var out [2]evaluate.Result
	var errs [2]error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range b.evs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = b.evs[i].Run(context.Background())
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("evaluate-%d: %v", i, err)
		}
		t.Logf("evaluate-%d: %s", i, b.describe(out[i]))
	}
	return out
}

// stallingStore holds the first cycle that loads the state until released.
type stallingStore struct {
	*state.DynamoDB
	once             sync.Once
	stalled, release chan struct{}
}

func (s *stallingStore) LoadState(ctx context.Context) (snapshot.State, error) {
	st, err := s.DynamoDB.LoadState(ctx)
	s.once.Do(func() {
		close(s.stalled)
		<-s.release
	})
	return st, err
}
