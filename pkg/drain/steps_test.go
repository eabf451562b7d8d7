package drain_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

func TestMain(m *testing.M) {
	code := testbed.Run(m)
	// The drain bootstrap is built once per test binary (statemachine_test.go).
	if bootstrap.path != "" {
		os.RemoveAll(filepath.Dir(bootstrap.path))
	}
	os.Exit(code)
}

// bed is one test's kwok group on the shared control plane.
type bed struct {
	cp    *testbed.ControlPlane
	ns    string
	pool  string
	group *kwok.Group
	store *state.Memory
	steps *drain.Steps
	// ctx, when set, is what runSteps runs the steps with.
	ctx context.Context
}

func newBed(t *testing.T, minSize, nodes int) *bed {
	t.Helper()
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	tpl := snapshot.Template{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Labels:      map[string]string{"pool": ns},
	}
	g := kwok.New(cp.Client, ns, minSize, 5, tpl)
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + ns})
	})
	if nodes > 0 {
		if err := g.IncreaseSize(context.Background(), nodes); err != nil {
			t.Fatal(err)
		}
	}
	store := state.NewMemory(ns)
	b := &bed{cp: cp, ns: ns, pool: ns, group: g, store: store}
	b.steps = &drain.Steps{Client: cp.Client, Store: store,
		Groups: func(context.Context) ([]providers.NodeGroup, error) { return []providers.NodeGroup{g}, nil }}
	b.waitNodesReady(t, nodes)
	return b
}

func (b *bed) nodes(t *testing.T) []corev1.Node {
	t.Helper()
	list, err := b.cp.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + b.pool})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func (b *bed) waitNodesReady(t *testing.T, n int) {
	b.cp.WaitFor(t, time.Minute, "group nodes ready and untainted", func(ctx context.Context) (bool, error) {
		ready := 0
		for _, node := range b.nodes(t) {
			ok := len(node.Spec.Taints) == 0
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
					ok = false
				}
			}
			if ok && len(node.Status.Conditions) > 0 {
				ready++
			}
		}
		return ready == n, nil
	})
}

// deploy creates a Deployment of the group's pool; pin, if set, puts its
// pods on that node only (so the test knows where they start).
func (b *bed) deploy(t *testing.T, name string, replicas int32, pin string) *appsv1.Deployment {
	t.Helper()
	sel := map[string]string{"pool": b.pool}
	if pin != "" {
		sel["kubernetes.io/hostname"] = pin
	}
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeSelector: sel, Containers: []corev1.Container{{Name: "c", Image: "c",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
			},
		},
	}
	out, err := b.cp.Client.AppsV1().Deployments(b.ns).Create(context.Background(), dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.cp.WaitPodsRunning(t, b.ns, "app="+name, int(replicas), time.Minute)
	return out
}

func (b *bed) pdb(t *testing.T, name, app string, minAvailable int) {
	t.Helper()
	v := intstr.FromInt32(int32(minAvailable))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &v, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}
	if _, err := b.cp.Client.PolicyV1().PodDisruptionBudgets(b.ns).Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.cp.WaitPDBObserved(t, b.ns, name)
}

// readyReplicasWatch polls a Deployment's ready pods until stopped and
// records the lowest count seen.
func (b *bed) readyReplicasWatch(t *testing.T, app string) (stop func() int32) {
	var lowest atomic.Int32
	lowest.Store(1 << 30)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			pods, err := b.cp.Client.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
			if err == nil {
				var ready int32
				for _, p := range pods.Items {
					for _, c := range p.Status.Conditions {
						if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
							ready++
						}
					}
				}
				if ready < lowest.Load() {
					lowest.Store(ready)
				}
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() int32 { close(done); <-finished; return lowest.Load() }
}

func (b *bed) start(node string, timeout time.Duration, policy string) drain.State {
	return drain.State{Node: node, DrainID: "test-" + node, Deadline: time.Now().Add(timeout), Policy: policy, Surge: true}
}

// runSteps drives the steps as the state machine would, with short waits.
// The sleeps between rounds stand in for the state machine's Wait states:
// they are polling intervals, not synchronisation, since each round runs
// the step again and its result (SurgeDone, Evicted, Replaced, or the
// deadline) decides whether to go on.
func (b *bed) runSteps(t *testing.T, s drain.State) (drain.State, error) {
	t.Helper()
	ctx := context.Background()
	if b.ctx != nil {
		ctx = b.ctx
	}
	var err error
	step := func(name string) bool {
		s, err = b.steps.Run(ctx, name, s)
		return err == nil
	}
	if !step("Prepare") || !step("Cordon") {
		return s, err
	}
	for {
		if !step("Surge") {
			return s, err
		}
		if s.SurgeDone || s.PastDeadline {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for s.SurgeDone {
		if !step("Evict") {
			return s, err
		}
		if s.Evicted || s.PastDeadline {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !s.Evicted {
		if s.Policy == drain.PolicyForce {
			if !step("ForceDelete") {
				return s, err
			}
		} else {
			s.Error = &drain.ErrorInfo{Error: "DrainTimeout", Cause: "deadline"}
			step("Rollback")
			return s, &drain.StepError{Name: "DrainTimeout", Err: context.DeadlineExceeded}
		}
	}
	for {
		if !step("WaitReplacements") {
			return s, err
		}
		if s.Replaced || s.PastDeadline {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range []string{"Terminate", "RemoveNode", "Finish"} {
		if !step(name) {
			return s, err
		}
	}
	return s, nil
}

func TestSingleReplicaSurgeKeepsAReadyReplica(t *testing.T) {
	b := newBed(t, 0, 2)
	nodes := b.nodes(t)
	victim := nodes[0].Name
	// The pod starts on the victim: the other node joins the pool after.
	b.deploy(t, "solo", 1, "")
	pods, _ := b.cp.Client.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=solo"})
	victim = pods.Items[0].Spec.NodeName
	stop := b.readyReplicasWatch(t, "solo")
	s, err := b.runSteps(t, b.start(victim, 2*time.Minute, drain.PolicyAbort))
	lowest := stop()
	if err != nil {
		t.Fatalf("drain: %v (state %+v)", err, s)
	}
	if lowest < 1 {
		t.Errorf("the single-replica Deployment had %d ready replicas at some moment", lowest)
	}
	dep, err := b.cp.Client.AppsV1().Deployments(b.ns).Get(context.Background(), "solo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 1 {
		t.Errorf("replicas = %d after the drain, want 1 restored", *dep.Spec.Replicas)
	}
	if got := len(b.nodes(t)); got != 1 {
		t.Errorf("group has %d nodes, want 1", got)
	}
	b.cp.WaitPodsRunning(t, b.ns, "app=solo", 1, time.Minute)
	rec, err := b.store.GetDrain(context.Background(), victim, s.DrainID)
	if err != nil || rec.Status != state.DrainSucceeded || len(rec.Surged) != 1 {
		t.Errorf("drain record = %+v, %v", rec, err)
	}
}

func TestPDBBlocksThenAbortRollsBack(t *testing.T) {
	b := newBed(t, 0, 1)
	victim := b.nodes(t)[0].Name
	b.deploy(t, "guarded", 2, "")
	b.pdb(t, "guarded", "guarded", 2)
	ctx := context.Background()

	// Surge off: the PDB alone must hold the pods.
	s := b.start(victim, 3*time.Second, drain.PolicyAbort)
	s.Surge = false
	_, err := b.runSteps(t, s)
	if err == nil || !strings.Contains(err.Error(), "DrainTimeout") {
		t.Fatalf("drain error = %v, want a timeout", err)
	}
	node, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Spec.Unschedulable {
		t.Error("node still cordoned after rollback")
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == drain.TaintKey {
			t.Error("draining taint left after rollback")
		}
	}
	b.cp.WaitPodsRunning(t, b.ns, "app=guarded", 2, time.Minute)
	active, ended, _ := b.store.NodeDrain(ctx, victim)
	if active != "" || ended != 1 {
		t.Errorf("node drain mark = %q, ended %d; want free, 1", active, ended)
	}
}

func TestForceAtDeadline(t *testing.T) {
	b := newBed(t, 0, 1)
	victim := b.nodes(t)[0].Name
	b.deploy(t, "guarded", 1, "")
	b.pdb(t, "guarded", "guarded", 1)
	s := b.start(victim, 3*time.Second, drain.PolicyForce)
	s.Surge = false
	s, err := b.runSteps(t, s)
	if err != nil {
		t.Fatalf("forced drain: %v", err)
	}
	if len(b.nodes(t)) != 0 {
		t.Error("node not removed")
	}
}

func TestStepsAreIdempotent(t *testing.T) {
	b := newBed(t, 0, 2)
	victim := b.nodes(t)[0].Name
	ctx := context.Background()
	s := b.start(victim, time.Minute, drain.PolicyAbort)
	for _, step := range []string{"Prepare", "Prepare", "Cordon", "Cordon"} {
		var err error
		if s, err = b.steps.Run(ctx, step, s); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	before, _ := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
	if _, err := b.steps.Run(ctx, "Cordon", s); err != nil {
		t.Fatal(err)
	}
	after, _ := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
	if ours(after) != 1 || ours(before) != 1 {
		t.Errorf("draining taints before/after a second Cordon: %v → %v, want exactly one", before.Spec.Taints, after.Spec.Taints)
	}
	// Another drain of the same node is refused while this one holds it.
	other := s
	other.DrainID = "other"
	if _, err := b.steps.Run(ctx, "Prepare", other); drain.ErrorName(err) != drain.ErrNameAlreadyDraining {
		t.Errorf("second drain: %v, want AlreadyDraining", err)
	}
	for _, step := range []string{"Rollback", "Rollback"} {
		if _, err := b.steps.Run(ctx, step, s); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
}

func TestPrepareRefusals(t *testing.T) {
	b := newBed(t, 1, 1)
	ctx := context.Background()
	victim := b.nodes(t)[0].Name
	unmanaged := b.cp.AddNode(t, testbed.Node{Name: b.pool + "-static", CPU: "1", Memory: "1Gi"})
	cases := []struct {
		s    drain.State
		want string
	}{
		{b.start("no-such-node", time.Minute, drain.PolicyAbort), drain.ErrNameNodeNotFound},
		{b.start(unmanaged.Name, time.Minute, drain.PolicyAbort), drain.ErrNameNotManaged},
		{b.start(victim, time.Minute, drain.PolicyAbort), drain.ErrNameBelowMinSize},
		{drain.State{Node: victim}, drain.ErrNameInvalidInput},
	}
	for _, tc := range cases {
		_, err := b.steps.Run(ctx, "Prepare", tc.s)
		if drain.ErrorName(err) != tc.want {
			t.Errorf("Prepare(%s): %v, want %s", tc.s.Node, err, tc.want)
		}
	}
	if active, _, _ := b.store.NodeDrain(ctx, victim); active != "" {
		t.Errorf("a refused Prepare marked the node: %q", active)
	}
}

func ours(n *corev1.Node) int {
	c := 0
	for _, t := range n.Spec.Taints {
		if t.Key == drain.TaintKey {
			c++
		}
	}
	return c
}
