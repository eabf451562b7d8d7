package providers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	k8s "github.com/scaleway/scaleway-sdk-go/api/k8s/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/fake/fakekamatera"
	"github.com/nodetide/nodetide/internal/fake/fakescaleway"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kamatera"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// End to end, per cloud: the cloud is its double, the cluster the local
// control plane. When the double boots a machine, the test bed registers a
// kwok Node for it (its provider ID, the group's template labels and
// allocatable), as the machine's kubelet would; kwok makes it Ready. So the
// evaluate cycle's scale-up makes pending pods Running, and a drain's
// Terminate goes through the double, exactly as against the cloud. Every log
// line and error of the run is checked for the cloud's secrets.

const e2eWait = time.Minute

// e2e is one test's cloud and cluster.
type e2e struct {
	t     *testing.T
	cp    *testbed.ControlPlane
	ns    string
	pool  string // value of poolLabel on the group's nodes, selected by the pods
	leaks *leakCheck
	store *state.Memory

	provider providers.Provider
	group    string
	// cloudTarget is the group's size as the cloud itself counts it.
	cloudTarget func() int
	// cloudHas says the cloud has the machine and is not removing it.
	cloudHas func(providerID string) bool

	mu         sync.Mutex
	tpl        *snapshot.Template // what a booted machine's Node offers
	registered map[string]string  // provider ID → Node name
}

const poolLabel = "e2e.nodetide.io/pool"

func newE2E(t *testing.T, secrets ...string) *e2e {
	t.Helper()
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	e := &e2e{t: t, cp: cp, ns: ns, pool: ns, leaks: newLeakCheck(t, secrets...), store: state.NewMemory(ns), registered: map[string]string{}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, name := range e.registered {
			err := cp.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete node %s: %v", name, err)
			}
		}
	})
	return e
}

// labels are the template labels the group gets: its pool.
func (e *e2e) labels() map[string]string { return map[string]string{poolLabel: e.pool} }

// boot registers the Node of a machine the double brought up. It runs on
// the double's goroutines, so it reports with Errorf.
func (e *e2e) boot(providerID, name string) {
	e.mu.Lock()
	tpl := e.tpl
	if _, dup := e.registered[providerID]; dup || tpl == nil {
		e.mu.Unlock()
		if tpl == nil {
			e.t.Errorf("machine %s booted before the test knew the group's template", providerID)
		}
		return
	}
	e.registered[providerID] = name
	e.mu.Unlock()
	q := func(r corev1.ResourceName) string {
		v, ok := tpl.Allocatable[r]
		if !ok {
			return ""
		}
		return v.String()
	}
	node := testbed.NodeObject(testbed.Node{
		Name: name, CPU: q(corev1.ResourceCPU), Memory: q(corev1.ResourceMemory), Pods: q(corev1.ResourcePods),
		Labels: tpl.Labels, Taints: tpl.Taints, ProviderID: providerID,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		e.t.Errorf("register node %s of machine %s: %v", name, providerID, err)
	}
}

// groupNow is a fresh view of the group.
func (e *e2e) groupNow() providers.NodeGroup {
	e.t.Helper()
	groups, err := e.provider.NodeGroups(e.t.Context())
	if err != nil {
		e.t.Fatalf("NodeGroups: %v", e.leaks.err(err))
	}
	for _, g := range groups {
		if g.Name() == e.group {
			return g
		}
	}
	e.t.Fatalf("no group %s", e.group)
	return nil
}

// learnTemplate reads the group's template, which booted machines' Nodes
// copy; the group's labels must be on it.
func (e *e2e) learnTemplate() snapshot.Template {
	e.t.Helper()
	tpl, err := e.groupNow().Template(e.t.Context())
	if err != nil {
		e.t.Fatalf("Template: %v", e.leaks.err(err))
	}
	if tpl.Labels[poolLabel] != e.pool {
		e.t.Fatalf("template labels %v lack %s=%s", tpl.Labels, poolLabel, e.pool)
	}
	e.mu.Lock()
	e.tpl = &tpl
	e.mu.Unlock()
	return tpl
}

func (e *e2e) evaluator() *evaluate.Evaluator {
	s := planner.DefaultSettings()
	s.ScaleUp.PendingPodMinAge = 0
	return &evaluate.Evaluator{
		Client: e.cp.Client, Groups: e.provider.NodeGroups, Store: e.store, Settings: s,
		Log: e.leaks.Log, Holder: "e2e-" + e.group, LeaseTTL: time.Minute,
	}
}

// run is one evaluate cycle; its result is checked for secrets too.
func (e *e2e) run() evaluate.Result {
	e.t.Helper()
	res, err := e.evaluator().Run(e.t.Context())
	if out, jerr := json.Marshal(res); jerr == nil {
		e.leaks.say(string(out))
	}
	if err != nil {
		e.t.Fatalf("evaluate: %v", e.leaks.err(err))
	}
	for _, a := range res.Actions {
		if a.Error != "" {
			e.t.Errorf("evaluate action %+v failed", a)
		}
	}
	return res
}

// deploy runs replicas pods on the group's nodes, each asking for 60% of a
// node's CPU, so each needs a node of its own.
func (e *e2e) deploy(name string, replicas int32, tpl snapshot.Template) {
	e.t.Helper()
	cpu := resource.NewMilliQuantity(tpl.Allocatable.Cpu().MilliValue()*6/10, resource.DecimalSI)
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: e.labels(),
					Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: *cpu, corev1.ResourceMemory: resource.MustParse("256Mi")},
					}}},
				},
			},
		},
	}
	if _, err := e.cp.Client.AppsV1().Deployments(e.ns).Create(e.t.Context(), dep, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create deployment: %v", err)
	}
}

func (e *e2e) pods(selector string) []corev1.Pod {
	e.t.Helper()
	list, err := e.cp.Client.CoreV1().Pods(e.ns).List(e.t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

func (e *e2e) waitUnschedulable(selector string, n int) {
	e.t.Helper()
	e.cp.WaitFor(e.t, e2eWait, fmt.Sprintf("%d unschedulable pods", n), func(ctx context.Context) (bool, error) {
		count := 0
		for _, p := range e.pods(selector) {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					count++
				}
			}
		}
		return count == n, nil
	})
}

// scale sets the Deployment's replicas and waits until exactly n of its
// pods are left, all Running.
func (e *e2e) scale(name string, n int32) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	_, err := e.cp.Client.AppsV1().Deployments(e.ns).Patch(e.t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		e.t.Fatalf("scale deployment %s to %d: %v", name, n, err)
	}
	e.cp.WaitFor(e.t, e2eWait, fmt.Sprintf("%d pods of %s", n, name), func(ctx context.Context) (bool, error) {
		pods := e.pods("app=" + name)
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return len(pods) == int(n) && running == int(n), nil
	})
}

// nodeOf maps the registered Nodes to their provider IDs.
func (e *e2e) nodeOf() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]string{}
	for id, name := range e.registered {
		out[name] = id
	}
	return out
}

// until calls step until it reports done, polling up to the deadline.
func (e *e2e) until(what string, step func() bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), e2eWait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !step() {
		select {
		case <-ctx.Done():
			e.t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// drainNode drives a drain of node through the steps, as the state machine
// would, checking what Terminate did at the cloud and RemoveNode in the
// cluster.
func (e *e2e) drainNode(node, providerID string, targetBefore int) {
	e.t.Helper()
	steps := &drain.Steps{Client: e.cp.Client, Groups: e.provider.NodeGroups, Store: e.store, Log: e.leaks.Log, StepWait: 2 * time.Second}
	s := drain.State{Node: node, DrainID: "e2e-" + node, Deadline: time.Now().Add(5 * time.Minute), Policy: drain.PolicyAbort, Surge: true}
	run := func(step string) {
		e.t.Helper()
		var err error
		if s, err = steps.Run(e.t.Context(), step, s); err != nil {
			e.t.Fatalf("drain step %s: %v", step, e.leaks.err(err))
		}
	}
	run("Prepare")
	if s.NodeGroup != e.group || s.ProviderID != providerID {
		e.t.Fatalf("Prepare put node %s in group %q with provider ID %q, want %s and %s", node, s.NodeGroup, s.ProviderID, e.group, providerID)
	}
	run("Cordon")
	e.until("the surge", func() bool { run("Surge"); return s.SurgeDone })
	e.until("the evictions", func() bool { run("Evict"); return s.Evicted })
	e.until("the replacements", func() bool { run("WaitReplacements"); return s.Replaced })

	run("Terminate")
	if got := e.cloudTarget(); got != targetBefore-1 {
		e.t.Errorf("after Terminate the cloud's target is %d, want %d", got, targetBefore-1)
	}
	if e.cloudHas(providerID) {
		e.t.Errorf("after Terminate the cloud still runs %s", providerID)
	}
	if n, err := e.groupNow().TargetSize(e.t.Context()); err != nil || n != targetBefore-1 {
		e.t.Errorf("after Terminate the group's target is %d (%v), want %d", n, err, targetBefore-1)
	}
	if _, err := e.cp.Client.CoreV1().Nodes().Get(e.t.Context(), node, metav1.GetOptions{}); err != nil {
		e.t.Errorf("node %s is gone before RemoveNode: %v", node, err)
	}

	run("RemoveNode")
	if _, err := e.cp.Client.CoreV1().Nodes().Get(e.t.Context(), node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		e.t.Errorf("node %s after RemoveNode: %v, want not found", node, err)
	}
	run("Finish")
	rec, err := e.store.GetDrain(e.t.Context(), node, s.DrainID)
	if err != nil || rec.Status != state.DrainSucceeded {
		e.t.Errorf("drain record %+v (%v), want %s", rec, err, state.DrainSucceeded)
	}
}

// cycle is the whole run: pods pending → evaluate scales up through the
// double → the booted machines' Nodes take the pods → one node emptied and
// drained → the cloud has one machine fewer, the cluster one Node fewer.
func (e *e2e) cycle() {
	t := e.t
	tpl := e.learnTemplate()
	if n := e.cloudTarget(); n != 0 {
		t.Fatalf("the group starts with %d machines, want 0", n)
	}

	e.deploy("web", 2, tpl)
	e.waitUnschedulable("app=web", 2)
	res := e.run()
	if res.Plan == nil || len(res.Plan.ScaleUp) != 1 || res.Plan.ScaleUp[0].NodeGroup != e.group || res.Plan.ScaleUp[0].Delta != 2 {
		t.Fatalf("plan %+v, want one scale-up of %s by 2", res.Plan, e.group)
	}
	if n := e.cloudTarget(); n != 2 {
		t.Errorf("after the scale-up the cloud's target is %d, want 2", n)
	}
	e.cp.WaitPodsRunning(t, e.ns, "app=web", 2, e2eWait)
	nodes := e.nodeOf()
	if len(nodes) != 2 {
		t.Fatalf("%d machines booted, want 2: %v", len(nodes), nodes)
	}
	for _, p := range e.pods("app=web") {
		if _, ours := nodes[p.Spec.NodeName]; !ours {
			t.Errorf("pod %s runs on %q, not on a node of the group", p.Name, p.Spec.NodeName)
		}
	}
	// The group knows its machines as running, by the Nodes' provider IDs.
	ins, err := e.groupNow().Instances(t.Context())
	if err != nil {
		t.Fatalf("Instances: %v", e.leaks.err(err))
	}
	var running []string
	for _, in := range ins {
		if in.State == providers.StateRunning {
			running = append(running, in.ProviderID)
		}
	}
	var want []string
	for _, id := range nodes {
		want = append(want, id)
	}
	slices.Sort(running)
	slices.Sort(want)
	if !slices.Equal(running, want) {
		t.Errorf("running instances %v, want the registered %v", running, want)
	}

	// Nothing pending any more: the next cycle adds nothing.
	if res := e.run(); len(res.Plan.ScaleUp) != 0 || e.cloudTarget() != 2 {
		t.Errorf("a second cycle scaled again: %+v, cloud target %d", res.Plan.ScaleUp, e.cloudTarget())
	}

	// One replica less leaves a node empty; drain it.
	e.scale("web", 1)
	kept := e.pods("app=web")[0].Spec.NodeName
	var victim string
	for name := range nodes {
		if name != kept {
			victim = name
		}
	}
	e.drainNode(victim, nodes[victim], 2)

	// The group and the cycle see one machine, still carrying the pod.
	if res := e.run(); len(res.Plan.ScaleUp) != 0 {
		t.Errorf("after the drain the cycle scaled up: %+v", res.Plan.ScaleUp)
	}
	if n := e.cloudTarget(); n != 1 {
		t.Errorf("the cloud ends with target %d, want 1", n)
	}
	e.cp.WaitPodsRunning(t, e.ns, "app=web", 1, e2eWait)
	if lines := e.leaks.lines(`"msg":"scaled up"`, e.group); len(lines) != 1 {
		t.Errorf("scale-up log lines: %q, want one", lines)
	}
	if lines := e.leaks.lines(`"msg":"drain step"`, `"step":"Terminate"`); len(lines) != 1 {
		t.Errorf("Terminate log lines: %q, want one", lines)
	}
}

// awsE2E is an ASG of the double, empty, whose launched machines boot at
// once and register.
func awsE2E(t *testing.T, creds awsCreds) (*e2e, *fakeaws.Server) {
	e := newE2E(t, creds.secretAccessKey, creds.securityToken)
	d := fakeaws.New()
	t.Cleanup(d.Close)
	asg := "e2e-" + randomHex(8)
	d.AddGroup(awsGroup(d, asg, 0, 3, 0, e.labels()))
	d.OnLaunch(func(ev fakeaws.Event) {
		if ev.Group != asg {
			return
		}
		d.Boot(asg)
		e.boot(ev.Instance.ProviderID(), ev.Instance.ID)
	})
	e.provider, e.group = awsProvider(t, d, asg, creds), asg
	e.cloudTarget = func() int { g, _ := d.Group(asg); return g.DesiredCapacity }
	e.cloudHas = func(id string) bool {
		g, _ := d.Group(asg)
		for _, in := range g.Instances {
			if in.ProviderID() == id {
				return !strings.HasPrefix(in.LifecycleState, "Terminat")
			}
		}
		return false
	}
	return e, d
}

func TestEndToEndAWS(t *testing.T) {
	e, d := awsE2E(t, newAWSCreds())
	e.cycle()
	if g, _ := d.Group(e.group); g.HonorCooldownLastRequest != "false" {
		t.Errorf("SetDesiredCapacity sent HonorCooldown=%q, want false", g.HonorCooldownLastRequest)
	}
}

// scwE2E is a Kapsule pool of the double, empty, whose created nodes boot
// at once: the kubelet registers, Kapsule says ready.
func scwE2E(t *testing.T, key string, moreSecrets ...string) (*e2e, *fakescaleway.Server) {
	e := newE2E(t, append([]string{key}, moreSecrets...)...)
	var d *fakescaleway.Server
	d = fakescaleway.New(fakescaleway.Options{SecretKey: key, OnCreate: func(n k8s.Node) {
		e.boot(n.ProviderID, n.Name)
		if err := d.SetNodeStatus(n.ID, k8s.NodeStatusReady, ""); err != nil {
			t.Errorf("boot node %s: %v", n.Name, err)
		}
	}})
	t.Cleanup(d.Close)
	pool := d.AddPool(fakescaleway.PoolSpec{Name: "e2e-" + randomHex(6), MaxSize: 3, Labels: e.labels()})
	e.provider, e.group = scwProvider(t, d, pool.Name, key), pool.Name
	e.cloudTarget = func() int { p, _ := d.Pool(pool.ID); return int(p.Size) }
	e.cloudHas = func(id string) bool {
		for _, n := range d.Nodes(pool.ID) {
			if n.ProviderID == id {
				return n.Status != k8s.NodeStatusDeleting && n.Status != k8s.NodeStatusDeleted
			}
		}
		return false
	}
	return e, d
}

func TestEndToEndScaleway(t *testing.T) {
	e, _ := scwE2E(t, newUUID())
	e.cycle()
}

// kamateraSecrets are what a Kamatera setup must keep to itself: the API
// secret, the servers' root password and the join token in the init script.
type kamateraSecrets struct {
	clientID, secret, password, joinToken string
}

func newKamateraSecrets() kamateraSecrets {
	return kamateraSecrets{clientID: randomHex(32), secret: randomHex(32), password: "Pw-" + randomHex(20),
		joinToken: randomHex(6) + "." + randomHex(16)}
}

// kamateraE2E is a node group of the double, empty, whose creates complete
// at once; the server's kubelet registers with
// --provider-id=kamatera://<hostname>.
func kamateraE2E(t *testing.T, ks kamateraSecrets, moreSecrets ...string) (*e2e, *fakekamatera.Double, kamateraConfig) {
	cfg := kamateraConfig{cluster: "e2e", group: "e2e" + randomHex(6), namePrefix: "e2e", minSize: 0, maxSize: 3,
		password: ks.password, joinToken: ks.joinToken, apiClientID: ks.clientID, apiSecret: ks.secret}
	e := newE2E(t, append([]string{ks.secret, ks.password, ks.joinToken, cfg.scriptBase64()}, moreSecrets...)...)
	d := newKamateraDouble(t, ks.clientID, ks.secret)
	cfg.url, cfg.labels = d.URL(), e.labels()
	d.OnCreate(func(_ fakekamatera.CreateRequest, commandID string) {
		if err := d.Complete(commandID); err != nil {
			t.Errorf("complete command %s: %v", commandID, err)
		}
	})
	d.OnComplete(func(s fakekamatera.Server) { e.boot(kamatera.DefaultProviderIDPrefix+s.Name, s.Name) })
	e.provider, e.group = kamateraProvider(t, cfg, ks.clientID, ks.secret, e.leaks.Log), cfg.group
	e.cloudTarget = func() int {
		n := 0
		for _, s := range d.Servers() {
			if slices.Contains(s.Tags, kamatera.NodeGroupTagPrefix+cfg.group) {
				n++
			}
		}
		return n
	}
	e.cloudHas = func(id string) bool {
		_, ok := d.Server(strings.TrimPrefix(id, kamatera.DefaultProviderIDPrefix))
		return ok
	}
	return e, d, cfg
}

func TestEndToEndKamatera(t *testing.T) {
	ks := newKamateraSecrets()
	e, d, cfg := kamateraE2E(t, ks)
	e.cycle()
	for _, req := range d.CreateRequests() {
		if req.Password != ks.password || !slices.Equal(req.Tags(), cfg.tags()) || !strings.Contains(req.ScriptFile, ks.joinToken) {
			t.Errorf("create request for %s: tags %v; password, script as configured: %v, %v", req.Name, req.Tags(), req.Password == ks.password, strings.Contains(req.ScriptFile, ks.joinToken))
		}
	}
}
