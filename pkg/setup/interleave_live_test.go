package setup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/schedulefire"
	"github.com/nodetide/nodetide/pkg/setup"
	"github.com/nodetide/nodetide/pkg/state"
)

// envInterleaveSeed replays one seed of TestRandomInterleavingsKeepTheGuarantees
// (the failure message names it).
const envInterleaveSeed = "NODETIDE_INTERLEAVE_SEED"

// The group's configured bounds; schedules narrow them.
const (
	ilMin, ilMax = 1, 5
	ilRounds     = 2
)

// ilWorkloads are the Deployments the drains move, each under a PDB. web's
// budget allows one eviction at a time; api's single replica allows none,
// so its drains surge.
var ilWorkloads = []struct {
	name         string
	replicas     int32
	minAvailable int
}{{"web", 4, 3}, {"api", 1, 1}}

// TestRandomInterleavingsKeepTheGuarantees is a property test of the
// safety guarantees (docs/security.md). Each seed runs a few rounds; each round starts, at
// random offsets and all at once, shutdowns of random nodes (the drain
// function), evaluate cycles and adds (separately wired evaluate
// functions) and schedule fires with random min/max/desired within the
// configured bounds (separately wired schedule functions), against a kwok
// group whose Deployments have PodDisruptionBudgets, with the drain state
// machine run locally. A watcher polls every 50 ms while the round runs,
// and checks once more after every drain execution has ended:
//
//   - size: N is the group's Nodes not being deleted (a kwok group has no
//     unregistered target, so N is its target). N never exceeds the
//     configured max, and N never grows past every max in force while the
//     operations that could have grown it ran (a max read at the start of
//     an add still admits it; a schedule lowering the max later brings the
//     group down by drains, which is allowed).
//   - minimum: C is N less the nodes carrying the drain taint. A drain
//     claims its node under the group's lock counting every drain in
//     flight, so the drains never take C below the group's effective
//     minimum. C falls only when a drain cordons a node; then C must be at
//     least the lowest effective min in force since that drain began
//     (a schedule raising the min afterwards does not bind a drain already
//     admitted, and C may well sit below a freshly raised min that nothing
//     has grown the group to yet).
//   - PDBs: once a budget's covered Ready pods (not terminating) have
//     reached its minAvailable, they never fall below it again. This one
//     follows a watch of the pods rather than the poll, since kwok makes
//     replacements Ready within a poll interval.
//   - at the end: no node of the group is cordoned or tainted (no drain is
//     running), no NODE mark is held, every drain record has ended.
//
// Set NODETIDE_INTERLEAVE_SEED to replay one seed.
func TestRandomInterleavingsKeepTheGuarantees(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if s := os.Getenv(envInterleaveSeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: not a seed (an unsigned integer): %v", envInterleaveSeed, s, err)
		}
		seeds = []uint64{seed}
	}
	bed := newInterleaveBed(t)
	for _, seed := range seeds {
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { bed.seed(t, seed) }) {
			break // the bed may be left in any state
		}
	}
}

// interleaveBed is the functions wired from one config, as separately
// started Lambda instances would be (two of each), and what the checks read.
type interleaveBed struct {
	cp      *testbed.ControlPlane
	ns      string
	pool    string
	db      *dynamodb.Client
	table   string
	sfn     *sfn.Client
	machine string
	evs     []*evaluate.Evaluator
	scheds  []*schedulefire.Handler
	drains  []*drain.Handler
	watch   *evaluate.Evaluator // reads the effective bounds
	store   setup.Stores
}

func newInterleaveBed(t *testing.T) *interleaveBed {
	// Scale-down at once, so every evaluate cycle may start drains.
	l := newLive(t, "interleave", ilMin, ilMax, `scaleUp: {pendingPodMinAge: 0s}
scaleDown: {unneededTime: 0s, delayAfterAdd: 0s}
drain: {timeout: 30s}
`)
	cp, ns, pool, db, table, cfg := l.cp, l.ns, l.pool, l.db, "interleave-"+l.ns, l.cfg
	ctx := context.Background()
	svc := l.drainMachine(t)
	b := &interleaveBed{cp: cp, ns: ns, pool: pool, db: db.Client(t), table: table,
		sfn: svc.Client(ctx), machine: svc.StateMachineArn[sfnlocal.DrainStateMachine]}

	log := slog.New(slog.NewJSONHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))
	for i := range 2 {
		ev, err := setup.Evaluator(ctx, cfg, "", &setup.AWS{}, log, fmt.Sprintf("evaluate-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		sched, err := setup.Schedules(ctx, cfg, "", &setup.AWS{}, log)
		if err != nil {
			t.Fatal(err)
		}
		dh, err := setup.Drain(ctx, cfg, "", &setup.AWS{}, log)
		if err != nil {
			t.Fatal(err)
		}
		b.evs, b.scheds, b.drains = append(b.evs, ev), append(b.scheds, sched), append(b.drains, dh)
	}
	var err error
	if b.watch, err = setup.Evaluator(ctx, cfg, "", &setup.AWS{}, log, "watcher"); err != nil {
		t.Fatal(err)
	}
	if b.store, err = setup.Store(ctx, cfg, &setup.AWS{}); err != nil {
		t.Fatal(err)
	}

	if _, err := b.evs[0].Add(ctx, pool, 3); err != nil {
		t.Fatal(err)
	}
	cp.WaitFor(t, time.Minute, "3 Ready nodes", func(ctx context.Context) (bool, error) {
		s, err := b.sample(ctx)
		return err == nil && s.ready == 3, err
	})
	for _, w := range ilWorkloads {
		b.deploy(t, w.name, w.replicas, w.minAvailable)
	}
	for _, w := range ilWorkloads {
		cp.WaitPodsRunning(t, ns, "app="+w.name, int(w.replicas), 2*time.Minute)
		cp.WaitPDBObserved(t, ns, w.name)
	}
	return b
}

// deploy creates a Deployment of small pods on the group, and its PDB.
func (b *interleaveBed) deploy(t *testing.T, name string, replicas int32, minAvailable int) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"pool": b.pool},
					// Spread, so that most drains have pods to move.
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					}}},
				},
			},
		},
	}
	if _, err := b.cp.Client.AppsV1().Deployments(b.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v := intstr.FromInt(minAvailable)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &v, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := b.cp.Client.PolicyV1().PodDisruptionBudgets(b.ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// spread restarts the Deployments, so that their pods spread over the
// nodes there are now and the round's drains have pods to move.
func (b *interleaveBed) spread(t *testing.T, seed uint64, round int) {
	t.Helper()
	ctx := context.Background()
	for _, w := range ilWorkloads {
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"round":"%d-%d"}}}}}`, seed, round)
		if _, err := b.cp.Client.AppsV1().Deployments(b.ns).Patch(ctx, w.name, k8stypes.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b.cp.WaitFor(t, time.Minute, "the Deployments rolled out", func(ctx context.Context) (bool, error) {
		for _, w := range ilWorkloads {
			d, err := b.cp.Client.AppsV1().Deployments(b.ns).Get(ctx, w.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st := d.Status
			if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != w.replicas || st.Replicas != w.replicas || st.AvailableReplicas != w.replicas {
				return false, nil
			}
		}
		return true, nil
	})
}

// ilSample is one observation of the group.
type ilSample struct {
	at       time.Time
	n        int      // Nodes of the group not being deleted
	c        int      // n less those carrying the drain taint
	ready    int      // Ready Nodes (setup only)
	tainted  []string // nodes carrying the drain taint
	cordoned []string // nodes unschedulable or tainted
	min, max int      // the effective bounds
	from     string   // what set them
	pods     map[string]int
}

func (s ilSample) String() string {
	return fmt.Sprintf("%s n=%d c=%d bounds=%d..%d%s tainted=%v pods=%v",
		s.at.Format("15:04:05.000"), s.n, s.c, s.min, s.max, ifSet(" by ", s.from), s.tainted, s.pods)
}

func ifSet(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// sample reads the bounds, the Nodes and the pods, in that order.
func (b *interleaveBed) sample(ctx context.Context) (ilSample, error) {
	s := ilSample{pods: map[string]int{}}
	groups, err := b.watch.Groups(ctx)
	if err != nil {
		return s, err
	}
	s.min, s.max = groups[0].Bounds().Min, groups[0].Bounds().Max
	s.from = groups[0].Bounds().MaxSchedule
	nodes, err := b.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + b.pool})
	if err != nil {
		return s, err
	}
	s.at = time.Now()
	for _, n := range nodes.Items {
		if n.DeletionTimestamp != nil {
			continue
		}
		s.n++
		tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == drain.TaintKey })
		if tainted {
			s.tainted = append(s.tainted, n.Name)
		} else {
			s.c++
		}
		if tainted || n.Spec.Unschedulable {
			s.cordoned = append(s.cordoned, n.Name)
		}
		if slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}) {
			s.ready++
		}
	}
	pods, err := b.cp.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}) {
			s.pods[p.Labels["app"]]++
		}
	}
	return s, nil
}

// ilOp is one planned action of a round.
type ilOp struct {
	at   time.Duration // offset from the round's start
	kind string        // shutdown, run, add, fire
	pick int           // shutdown: which node (0: the one with the most pods); run, add, fire: which instance
	n    int           // add: how many nodes; shutdown: how many at once
	sch  string        // fire: the schedule's JSON
}

func (o ilOp) String() string {
	switch o.kind {
	case "shutdown":
		return fmt.Sprintf("+%v shutdown %d nodes at once, from the one with the %d. most pods", o.at, o.n, o.pick+1)
	case "add":
		return fmt.Sprintf("+%v add %d (evaluate-%d)", o.at, o.n, o.pick)
	case "fire":
		return fmt.Sprintf("+%v fire %s (schedule-%d)", o.at, o.sch, o.pick)
	}
	return fmt.Sprintf("+%v %s (evaluate-%d)", o.at, o.kind, o.pick)
}

// plan draws a round's operations from the seed's generator.
func (b *interleaveBed) plan(rng *rand.Rand, round int) []ilOp {
	ops := make([]ilOp, 5+rng.IntN(4))
	for i := range ops {
		o := ilOp{at: time.Duration(rng.IntN(2500)) * time.Millisecond, pick: rng.IntN(2)}
		switch k := rng.IntN(10); {
		case k < 3:
			// Often several at once: two drains admitted together are
			// what the group's lock must keep above the minimum.
			o.kind, o.pick, o.n = "shutdown", rng.IntN(3), 1+rng.IntN(3)
		case k < 5:
			o.kind = "run"
		case k < 7:
			o.kind, o.n = "add", 1+rng.IntN(2)
		default:
			o.kind = "fire"
			lo := ilMin + rng.IntN(3)
			hi := lo + rng.IntN(ilMax-lo+1)
			g := map[string]any{"name": b.pool}
			if rng.IntN(4) > 0 { // sometimes no bounds: the configured ones come back
				g["min"], g["max"] = lo, hi
			}
			if rng.IntN(2) == 0 {
				g["desired"] = lo + rng.IntN(hi-lo+1)
			}
			doc, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("r%d-%d", round, i), "cron": "0 0 1 1 *",
				"nodeGroups": []any{g}})
			o.sch = string(doc)
		}
		ops[i] = o
	}
	slices.SortStableFunc(ops, func(a, b ilOp) int { return int(a.at - b.at) })
	return ops
}

// ilLog is the interleaving as it happened.
type ilLog struct {
	mu      sync.Mutex
	start   time.Time
	lines   []string
	started map[int]time.Time // op index -> start, while it runs
	oldest  time.Time         // the start of the oldest operation that ran during the last sample
}

func (l *ilLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%8.3fs ", time.Since(l.start).Seconds())+fmt.Sprintf(format, args...))
}

func (l *ilLog) begin(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.started[i] = now
	if l.oldest.IsZero() || now.Before(l.oldest) {
		l.oldest = now
	}
}

func (l *ilLog) end(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.started, i)
}

// window returns the start of the oldest operation that ran since the
// previous call, and resets it to the ones running now.
func (l *ilLog) window(prev time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := prev
	if !l.oldest.IsZero() && l.oldest.Before(w) {
		w = l.oldest
	}
	l.oldest = time.Time{}
	for _, s := range l.started {
		if l.oldest.IsZero() || s.Before(l.oldest) {
			l.oldest = s
		}
	}
	return w
}

// seed runs the rounds of one seed.
func (b *interleaveBed) seed(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x6e6f646574696465))
	for round := range ilRounds {
		b.spread(t, seed, round)
		ops := b.plan(rng, round)
		log := &ilLog{start: time.Now(), started: map[int]time.Time{}}
		violations := b.round(t, round, ops, log)
		t.Logf("seed %d round %d:\n  %s", seed, round, strings.Join(log.lines, "\n  "))
		if len(violations) > 0 {
			var plan []string
			for _, o := range ops {
				plan = append(plan, "  "+o.String())
			}
			t.Fatalf("seed %d round %d (replay: %s=%d go test -run 'TestRandomInterleavingsKeepTheGuarantees' ./pkg/setup/):\n%s\nplan:\n%s\nwhat happened:\n  %s",
				seed, round, envInterleaveSeed, seed, strings.Join(violations, "\n"), strings.Join(plan, "\n"), strings.Join(log.lines, "\n  "))
		}
	}
}

// round runs ops at their offsets with the watcher on, waits for every
// drain execution to end, and returns what broke a property.
func (b *interleaveBed) round(t *testing.T, round int, ops []ilOp, log *ilLog) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := &ilWatcher{b: b, log: log, starts: map[string]time.Time{}, reached: map[string]bool{}}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		w.run(ctx, stop)
	}()
	podsWatched := make(chan struct{})
	go func() {
		defer close(podsWatched)
		w.watchPods(ctx, stop)
	}()

	var wg sync.WaitGroup
	for i, o := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-time.After(time.Until(log.start.Add(o.at))):
			case <-ctx.Done():
				return
			}
			log.begin(i)
			defer log.end(i)
			log.add("op %d start: %s", i, o)
			log.add("op %d end: %s", i, b.do(ctx, round, i, o))
		}()
	}
	wg.Wait()
	log.add("all operations returned")
	if err := b.waitExecutions(ctx, log); err != nil {
		close(stop)
		<-watched
		<-podsWatched
		return append(w.violations, err.Error())
	}
	close(stop)
	<-watched
	<-podsWatched
	return append(w.violations, b.final(ctx, w)...)
}

// do runs one operation and describes its outcome; refusals are outcomes.
func (b *interleaveBed) do(ctx context.Context, round, i int, o ilOp) string {
	switch o.kind {
	case "shutdown":
		list, err := b.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + b.pool})
		if err != nil {
			return "list nodes: " + err.Error()
		}
		pods, err := b.cp.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "list pods: " + err.Error()
		}
		on := map[string]int{}
		for _, p := range pods.Items {
			on[p.Spec.NodeName]++
		}
		var names []string
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		if len(names) == 0 {
			return "no node to shut down"
		}
		// Busiest first, so that most shutdowns move pods.
		slices.SortFunc(names, func(a, b string) int {
			if on[a] != on[b] {
				return on[b] - on[a]
			}
			return strings.Compare(a, b)
		})
		res := make([]string, o.n)
		var wg sync.WaitGroup
		for k := range o.n {
			node := names[(o.pick+k)%len(names)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := b.drains[k%2].Handle(ctx, json.RawMessage(`{"action":"shutdown","node":"`+node+`"}`))
				res[k] = outcome("shutdown "+node, out, err)
			}()
		}
		wg.Wait()
		return strings.Join(res, "; ")
	case "run":
		res, err := b.evs[o.pick].Run(ctx)
		if err != nil {
			return "run: " + err.Error()
		}
		if res.Skipped != "" {
			return "run skipped: " + res.Skipped
		}
		acts, _ := json.Marshal(res.Actions)
		return "run: " + string(acts)
	case "add":
		res, err := b.evs[o.pick].Add(ctx, b.pool, o.n)
		if err != nil {
			return fmt.Sprintf("add %d: %v", o.n, err)
		}
		acts, _ := json.Marshal(res.Actions)
		return fmt.Sprintf("add %d: %s", o.n, acts)
	case "fire":
		var doc struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal([]byte(o.sch), &doc)
		h := b.scheds[o.pick]
		if _, err := h.Handle(ctx, json.RawMessage(`{"action":"put","schedule":`+o.sch+`}`)); err != nil {
			return "put: " + err.Error()
		}
		out, err := h.Handle(ctx, json.RawMessage(`{"action":"run","name":"`+doc.Name+`"}`))
		return outcome("fire "+doc.Name, out, err)
	}
	return "unknown operation " + o.kind
}

func outcome(what string, out any, err error) string {
	if err != nil {
		return what + ": " + err.Error()
	}
	body, _ := json.Marshal(out)
	return what + ": " + string(body)
}

// waitExecutions waits until no drain execution runs, then finishes the
// drains of executions that failed their rollback, as the status-change
// rule would.
func (b *interleaveBed) waitExecutions(ctx context.Context, log *ilLog) error {
	var last []string
	for {
		running, failed, err := b.executions(ctx)
		if err != nil {
			return fmt.Errorf("list drain executions: %w", err)
		}
		if len(running) == 0 {
			if len(failed) > 0 {
				log.add("executions ended RollbackFailed: %v; recovering", failed)
				if _, err := b.drains[0].Handle(ctx, json.RawMessage(`{"action":"recover"}`)); err != nil {
					return fmt.Errorf("recover after %v: %w", failed, err)
				}
			}
			log.add("every drain execution has ended")
			return nil
		}
		last = running
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain executions still running at the round's time limit: %v", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// executions lists the running executions, and those whose rollback failed
// and whose drain may still be held.
func (b *interleaveBed) executions(ctx context.Context) (running, failed []string, err error) {
	p := sfn.NewListExecutionsPaginator(b.sfn, &sfn.ListExecutionsInput{StateMachineArn: aws.String(b.machine)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range page.Executions {
			switch e.Status {
			case sfntypes.ExecutionStatusRunning:
				running = append(running, aws.ToString(e.Name))
			case sfntypes.ExecutionStatusFailed:
				out, err := b.sfn.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: e.ExecutionArn})
				if err != nil {
					return nil, nil, err
				}
				if aws.ToString(out.Error) == "RollbackFailed" {
					failed = append(failed, aws.ToString(e.Name))
				}
			}
		}
	}
	return running, failed, nil
}

// ilWatcher checks the properties on every sample.
type ilWatcher struct {
	b          *interleaveBed
	log        *ilLog
	prev       *ilSample
	history    []ilSample
	starts     map[string]time.Time // node -> when the drain that tainted it began
	mu         sync.Mutex           // the pod watch and the poller both report
	reached    map[string]bool      // PDB -> its Ready pods have reached minAvailable
	violations []string
}

func (w *ilWatcher) run(ctx context.Context, stop <-chan struct{}) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := w.check(ctx); err != nil && ctx.Err() == nil {
			w.log.add("watcher: %v", err)
		}
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *ilWatcher) fail(s ilSample, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := fmt.Sprintf(format, args...) + " at " + s.String()
	w.log.add("VIOLATION %s", msg)
	w.violations = append(w.violations, msg)
}

func (w *ilWatcher) check(ctx context.Context) error {
	s, err := w.b.sample(ctx)
	if err != nil {
		return err
	}
	prevAt := w.log.start
	if w.prev != nil {
		prevAt = w.prev.at
	}
	opsFrom := w.log.window(prevAt)
	w.history = append(w.history, s)
	if w.prev == nil || s.n != w.prev.n || s.c != w.prev.c || s.min != w.prev.min || s.max != w.prev.max || !slices.Equal(s.tainted, w.prev.tainted) || !maps.Equal(s.pods, w.prev.pods) {
		w.log.add("sample %s", s)
	}

	if s.n > ilMax {
		w.fail(s, "%d nodes, above the configured max %d", s.n, ilMax)
	}
	if w.prev != nil && s.n > w.prev.n {
		// Some operation running since opsFrom grew the group: it may
		// have read any max in force since then.
		if allowed := w.boundSince(opsFrom, func(x ilSample) int { return x.max }, func(a, b int) int { return max(a, b) }); s.n > allowed {
			w.fail(s, "the group grew from %d to %d nodes, above every max in force since %s (at most %d)",
				w.prev.n, s.n, opsFrom.Format("15:04:05.000"), allowed)
		}
	}
	for _, node := range s.tainted {
		if _, seen := w.starts[node]; seen {
			continue
		}
		w.starts[node] = w.drainStart(ctx, node, s)
	}
	if w.prev != nil && s.c < w.prev.c {
		for _, node := range s.tainted {
			if slices.Contains(w.prev.tainted, node) {
				continue
			}
			// The drain read the min at most a lock wait before its
			// record's start; give it a second of slack.
			from := w.starts[node].Add(-time.Second)
			if allowed := w.boundSince(from, func(x ilSample) int { return x.min }, func(a, b int) int { return min(a, b) }); s.c < allowed {
				w.fail(s, "drain of %s (began %s) left %d nodes not cordoned by a drain, below every effective min in force since (at least %d)",
					node, w.starts[node].Format("15:04:05.000"), s.c, allowed)
			}
		}
	}
	w.prev = &s
	return nil
}

// watchPods follows every change of the workloads' pods, in the API
// server's order, so that a Ready count dipping for less than a poll
// interval is seen too: once a budget's Ready pods (not terminating) have
// reached its minAvailable, they must never fall below it.
func (w *ilWatcher) watchPods(ctx context.Context, stop <-chan struct{}) {
	pods := w.b.cp.Client.CoreV1().Pods(w.b.ns)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		w.fail(ilSample{at: time.Now()}, "pod watch: %v", err)
		return
	}
	ready := map[string]string{} // Ready, not terminating pod -> its app
	for _, p := range list.Items {
		if podReady(&p) {
			ready[p.Name] = p.Labels["app"]
		}
	}
	w.checkPods(ready, "listed")
	watch, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		w.fail(ilSample{at: time.Now()}, "pod watch: %v", err)
		return
	}
	defer watch.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case ev, ok := <-watch.ResultChan():
			if !ok {
				w.log.add("pod watch closed early")
				return
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type != "DELETED" && podReady(p) {
				ready[p.Name] = p.Labels["app"]
			} else {
				delete(ready, p.Name)
			}
			w.checkPods(ready, fmt.Sprintf("%s pod %s", ev.Type, p.Name))
		}
	}
}

func podReady(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

func (w *ilWatcher) checkPods(ready map[string]string, event string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wl := range ilWorkloads {
		n := 0
		for _, app := range ready {
			if app == wl.name {
				n++
			}
		}
		if n >= wl.minAvailable {
			w.reached[wl.name] = true
		} else if w.reached[wl.name] {
			msg := fmt.Sprintf("PDB %s: %d Ready pods after %s, below minAvailable %d", wl.name, n, event, wl.minAvailable)
			w.log.add("VIOLATION %s", msg)
			w.violations = append(w.violations, msg)
			w.reached[wl.name] = false // report each drop once
		}
	}
}

// boundSince folds pick over the samples taken from since on (and the one
// just before, whose bound was still in force then).
func (w *ilWatcher) boundSince(since time.Time, pick func(ilSample) int, fold func(int, int) int) int {
	i := len(w.history) - 1
	out := pick(w.history[i])
	for i > 0 && !w.history[i].at.Before(since) {
		i--
		out = fold(out, pick(w.history[i]))
	}
	return out
}

// drainStart is when the drain holding node began, per its record; the
// round's start when no drain holds it (a stray taint, reported at the end).
func (w *ilWatcher) drainStart(ctx context.Context, node string, s ilSample) time.Time {
	id, _, err := w.b.store.NodeDrain(ctx, node)
	if err == nil && id != "" {
		rec, err := w.b.store.GetDrain(ctx, node, id)
		if err == nil {
			return rec.StartedAt
		}
	}
	w.log.add("node %s carries the drain taint and no drain record was found (%v) at %s", node, err, s)
	return w.log.start
}

// final checks the end of a round: every drain execution has ended.
func (b *interleaveBed) final(ctx context.Context, w *ilWatcher) []string {
	if err := w.check(ctx); err != nil {
		return []string{"final sample: " + err.Error()}
	}
	s := *w.prev
	var out []string
	if len(s.cordoned) > 0 {
		out = append(out, fmt.Sprintf("no drain runs, yet nodes are cordoned or tainted: %v", s.cordoned))
	}
	held, err := b.store.RunningDrains(ctx)
	if err != nil {
		return append(out, "running drains: "+err.Error())
	}
	if len(held) > 0 {
		out = append(out, fmt.Sprintf("no drain runs, yet NODE marks are held: %+v", held))
	}
	running, err := b.runningRecords(ctx)
	if err != nil {
		return append(out, "drain records: "+err.Error())
	}
	if len(running) > 0 {
		out = append(out, fmt.Sprintf("no drain runs, yet drain records are still running: %v", running))
	}
	w.log.add("end: %s", s)
	return out
}

// runningRecords lists the drain records (DRAIN#node#id) whose status is
// still running.
func (b *interleaveBed) runningRecords(ctx context.Context) ([]string, error) {
	var out []string
	p := dynamodb.NewScanPaginator(b.db, &dynamodb.ScanInput{TableName: aws.String(b.table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, item := range page.Items {
			sk, _ := item["sk"].(*ddbtypes.AttributeValueMemberS)
			status, _ := item["status"].(*ddbtypes.AttributeValueMemberS)
			if sk != nil && strings.HasPrefix(sk.Value, "DRAIN#") && (status == nil || status.Value == state.DrainRunning) {
				out = append(out, sk.Value)
			}
		}
	}
	return out, nil
}
