package drain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/state"
)

// cloudBed is an Auto Scaling Group on the AWS double with a termination
// lifecycle hook, its machines kwok nodes, and the drain function's handler
// for the cloud's events starting executions of the real state machine
// (run locally, its steps in the drain function under the Lambda RIE).
type cloudBed struct {
	*bed
	d    *fakeaws.Server
	m    *machine
	h    *drain.Handler
	hook string // the bed's cluster's own hook (config.LifecycleHookName)
}

// newCloudBed's drain function reaches the cluster as the admin, or with
// the kubeconfig kubeconfig returns.
func newCloudBed(t *testing.T, nodes int, withMachine bool, kubeconfig ...func(*bed) string) *cloudBed {
	t.Helper()
	b, d := newAWSBed(t, nodes)
	hookName := config.LifecycleHookName(b.ns)
	if err := d.PutLifecycleHook(fakeaws.LifecycleHook{Group: b.ns, Name: hookName, Transition: fakeaws.TransitionTerminating,
		DefaultResult: fakeaws.ResultContinue, HeartbeatTimeout: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	cfg := awssdk.Config{Region: d.Region(), BaseEndpoint: awssdk.String(d.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", "")}
	as, ec2c := aws.NewClients(cfg)
	b.steps.Lifecycle, b.steps.Machines, b.steps.Hook = as, ec2c, hookName
	cb := &cloudBed{bed: b, d: d, h: &drain.Handler{Steps: b.steps}, hook: hookName}
	if !withMachine {
		return cb
	}
	ctx := context.Background()
	kc := b.cp.KubeconfigPath
	for _, fn := range kubeconfig {
		kc = fn(b)
	}
	db := testbed.DynamoDB(t)
	table := "cloud-" + b.ns
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`cluster: {name: %[1]s, kubernetes: {kubeconfig: %[2]s}}
state: {dynamodb: {table: %[3]s, endpoint: %[4]s}}
nodeGroups:
  - {name: %[1]s, provider: aws, aws: {autoScalingGroup: %[1]s}}
`, b.ns, kc, table, db.Endpoint)
	svc, err := sfnlocal.Start(ctx, sfnlocal.Options{
		Functions: []sfnlocal.Function{{Name: "drain", Bootstrap: drainBootstrap(t),
			Env: []string{"NODETIDE_CONFIG=" + yaml, "AWS_ENDPOINT_URL_AUTO_SCALING=" + d.URL(), "AWS_ENDPOINT_URL_EC2=" + d.URL()}}},
		StateMachines: []sfnlocal.StateMachine{{Name: "drain", DefinitionFile: aslFile}},
		MaxWait:       time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("drain function output:\n%s", svc.FunctionLogs("drain"))
		}
		_ = svc.Stop()
	})
	store := state.NewDynamoDB(db.Client(t), table, b.ns)
	client := svc.Client(ctx)
	cb.m = &machine{svc: svc, client: client, store: store, starter: &drain.Starter{
		SFN: client, StateMachineArn: svc.StateMachineArn["drain"], Store: store, Timeout: 2 * time.Minute, Policy: drain.PolicyAbort, Surge: true}}
	steps := *b.steps
	steps.Store = store
	cb.h = &drain.Handler{Steps: &steps, Starter: cb.m.starter}
	return cb
}

// instanceOf is the EC2 machine behind a node.
func (cb *cloudBed) instanceOf(t *testing.T, node string) string {
	t.Helper()
	pid := cb.node(t, node).Spec.ProviderID
	return pid[strings.LastIndex(pid, "/")+1:]
}

// event is a sample event of events/ as EventBridge would send it now
// about this machine.
func (cb *cloudBed) event(t *testing.T, file, instance, token string) []byte {
	t.Helper()
	s := sample(t, file)
	s = strings.ReplaceAll(s, "i-0123456789abcdef0", instance)
	s = strings.ReplaceAll(s, "87654321-4321-4321-4321-210987654321", token)
	s = strings.ReplaceAll(s, "nodetide-drain-prod", cb.hook)
	s = strings.ReplaceAll(s, "prod-workers", cb.ns)
	s = strings.ReplaceAll(s, "2026-11-30T10:00:00Z", time.Now().UTC().Format(time.RFC3339))
	return []byte(s)
}

func (cb *cloudBed) handle(t *testing.T, event []byte) []drain.InterruptResult {
	t.Helper()
	out, err := cb.h.Handle(context.Background(), event)
	if err != nil {
		t.Fatalf("drain function: %v", err)
	}
	res, ok := out.([]drain.InterruptResult)
	if !ok || len(res) != 1 {
		t.Fatalf("drain function answered %#v", out)
	}
	return res
}

// podsAtTermination records, when the machine actually starts terminating,
// the pods still on its node that a drain moves.
func (cb *cloudBed) podsAtTermination(t *testing.T, instance, node string) func() (int, bool) {
	var mu sync.Mutex
	left, seen := -1, false
	cb.d.OnTerminate(func(e fakeaws.Event) {
		if e.Instance.ID != instance {
			return
		}
		pods, err := cb.cp.Client.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		mu.Lock()
		defer mu.Unlock()
		seen = true
		if err != nil {
			t.Errorf("list pods at termination: %v", err)
			return
		}
		left = 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase != "Succeeded" && p.Status.Phase != "Failed" {
				left++
			}
		}
	})
	return func() (int, bool) { mu.Lock(); defer mu.Unlock(); return left, seen }
}

// An Auto Scaling Group taking a node out (scale in, rebalance, instance
// refresh) waits on its termination hook while the real state machine
// drains the node within its PodDisruptionBudgets; the action is completed
// with CONTINUE only once the pods are gone, nodetide neither terminates
// the machine itself nor changes the desired capacity, and the event
// delivered twice at once starts one drain.
func TestMachineLifecycleHookDrains(t *testing.T) {
	cb := newCloudBed(t, 3, true)
	cb.deploy(t, "solo", 1, "")
	cb.deploy(t, "web", 2, "")
	cb.pdb(t, "web", "web", 1)
	victim := cb.podNode(t, "solo")
	id := cb.instanceOf(t, victim)
	podsLeft := cb.podsAtTermination(t, id, victim)
	stop := cb.readyReplicasWatch(t, "solo")

	act, err := cb.d.ScaleIn(cb.ns, id)
	if err != nil {
		t.Fatal(err)
	}
	ev := cb.event(t, "drain-lifecycle-terminate.json", id, act.Token)
	var wg sync.WaitGroup
	results := make([][]drain.InterruptResult, 2)
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = cb.handle(t, ev) }()
	}
	wg.Wait()
	a, b := results[0][0], results[1][0]
	if a.Action != "drain" || b.Action != "drain" || a.Execution.ExecutionArn != b.Execution.ExecutionArn || a.Execution.AlreadyStarted == b.Execution.AlreadyStarted {
		t.Fatalf("duplicate events: %+v and %+v, want one execution started and joined once", a, b)
	}
	out := cb.m.wait(t, a.Execution.ExecutionArn)
	lowest := stop()
	if out.Status != sfntypes.ExecutionStatusSucceeded {
		t.Fatalf("execution %s: %s %s", out.Status, awssdk.ToString(out.Error), awssdk.ToString(out.Cause))
	}
	if got, _ := cb.d.Action(act.Token); got.Result != fakeaws.ResultContinue {
		t.Errorf("lifecycle action ended %q, want CONTINUE", got.Result)
	}
	if left, seen := podsLeft(); !seen || left != 0 {
		t.Errorf("machine terminating (seen %t) with %d pods still on its node, want none", seen, left)
	}
	if lowest < 1 {
		t.Errorf("the single-replica Deployment had %d Ready replicas at some moment", lowest)
	}
	if n := cb.d.Calls(terminateAction); n != 0 {
		t.Errorf("%d TerminateInstanceInAutoScalingGroup calls, want none: the group terminates the machine", n)
	}
	if n := cb.d.Calls("SetDesiredCapacity"); n != 0 {
		t.Errorf("%d SetDesiredCapacity calls, want none", n)
	}
	if g, _ := cb.d.Group(cb.ns); g.DesiredCapacity != 2 {
		t.Errorf("desired capacity %d, want 2 (the group's own scale-in)", g.DesiredCapacity)
	}
	if _, err := cb.cp.Client.CoreV1().Nodes().Get(context.Background(), victim, metav1.GetOptions{}); err == nil {
		t.Errorf("node %s still exists", victim)
	}
}

// A drain held by a hook that fails still lets the machine go: the
// rollback completes the lifecycle action, and keeps the node cordoned,
// since the machine goes anyway.
func TestMachineLifecycleRollbackCompletesTheAction(t *testing.T) {
	// The function may not scale Deployments: the surge of the
	// single-replica one fails with Forbidden, and the drain rolls back.
	cb := newCloudBed(t, 2, true, func(b *bed) string {
		return b.kubeconfigWith(t, []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "update", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"get"}},
			{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"get", "list", "watch"}},
		})
	})
	cb.deploy(t, "web", 1, "")
	victim := cb.podNode(t, "web")
	id := cb.instanceOf(t, victim)
	act, err := cb.d.ScaleIn(cb.ns, id)
	if err != nil {
		t.Fatal(err)
	}
	res := cb.handle(t, cb.event(t, "drain-lifecycle-terminate.json", id, act.Token))[0]
	out := cb.m.wait(t, res.Execution.ExecutionArn)
	if out.Status != sfntypes.ExecutionStatusFailed || !strings.Contains(awssdk.ToString(out.Cause), "Forbidden") {
		t.Fatalf("execution %s: %s %s, want failed from the forbidden surge", out.Status, awssdk.ToString(out.Error), awssdk.ToString(out.Cause))
	}
	if got, _ := cb.d.Action(act.Token); got.Result != fakeaws.ResultContinue {
		t.Errorf("lifecycle action after the rollback: %q, want CONTINUE", got.Result)
	}
	rec, err := cb.m.store.GetDrain(context.Background(), victim, res.Execution.Name)
	if err != nil || rec.Status != state.DrainRolledBack {
		t.Errorf("drain record %+v (%v), want rolled back", rec, err)
	}
	if n := cb.node(t, victim); !n.Spec.Unschedulable {
		t.Errorf("node %s schedulable again on a machine that is going", victim)
	}
	if n := cb.d.Calls(terminateAction); n != 0 {
		t.Errorf("%d TerminateInstanceInAutoScalingGroup calls, want none", n)
	}
}

// EC2's two-minute Spot warning: the node is drained before its deadline
// (90 s after the warning) and a replacement is asked for at once; the
// interrupted machine's removal takes the target back down.
func TestMachineSpotInterruption(t *testing.T) {
	cb := newCloudBed(t, 2, true)
	if err := cb.d.SetSpot(cb.ns); err != nil {
		t.Fatal(err)
	}
	cb.deploy(t, "solo", 1, "")
	victim := cb.podNode(t, "solo")
	id := cb.instanceOf(t, victim)
	if _, err := cb.d.InterruptSpot(id, "terminate"); err != nil {
		t.Fatal(err)
	}
	warned := time.Now()
	res := cb.handle(t, cb.event(t, "drain-spot-interruption.json", id, ""))[0]
	if res.Action != "drain" || !res.Replacement {
		t.Fatalf("spot warning: %+v, want a drain and a replacement", res)
	}
	// EventBridge delivers at least once: a second delivery joins the
	// running drain and asks for nothing more.
	again := cb.handle(t, cb.event(t, "drain-spot-interruption.json", id, ""))[0]
	if again.Execution == nil || again.Execution.ExecutionArn != res.Execution.ExecutionArn || again.Replacement {
		t.Errorf("repeated warning: %+v, want the first drain, no replacement", again)
	}
	if g, _ := cb.d.Group(cb.ns); g.DesiredCapacity != 3 {
		t.Errorf("desired capacity right after the warning %d, want 3", g.DesiredCapacity)
	}
	out := cb.m.wait(t, res.Execution.ExecutionArn)
	if out.Status != sfntypes.ExecutionStatusSucceeded {
		t.Fatalf("execution %s: %s %s", out.Status, awssdk.ToString(out.Error), awssdk.ToString(out.Cause))
	}
	took := awssdk.ToTime(out.StopDate).Sub(warned)
	t.Logf("spot drain: warning to node removed in %s", took.Round(10*time.Millisecond))
	if took > 2*time.Minute {
		t.Errorf("drain took %s, past the two minutes EC2 gives", took)
	}
	if g, _ := cb.d.Group(cb.ns); g.DesiredCapacity != 2 {
		t.Errorf("desired capacity after the drain %d, want 2 (replacement in, interrupted machine out)", g.DesiredCapacity)
	}
	if n := cb.d.Calls(terminateAction); n != 1 {
		t.Errorf("%d TerminateInstanceInAutoScalingGroup calls, want 1", n)
	}
}

// A machine no node has (it never registered) lets its lifecycle action go
// at once; a Spot warning for a machine of no managed group changes nothing.
func TestInterruptionOfUnknownMachines(t *testing.T) {
	cb := newCloudBed(t, 1, false)
	ctx := context.Background()
	lone, err := cb.d.AddInstance(cb.ns, fakeaws.Instance{LifecycleState: fakeaws.StateInService})
	if err != nil {
		t.Fatal(err)
	}
	act, err := cb.d.ScaleIn(cb.ns, lone.ID)
	if err != nil {
		t.Fatal(err)
	}
	res := cb.handle(t, cb.event(t, "drain-lifecycle-terminate.json", lone.ID, act.Token))[0]
	if res.Action != "completed" {
		t.Errorf("unregistered machine: %+v, want its action completed", res)
	}
	if got, _ := cb.d.Action(act.Token); got.Result != fakeaws.ResultContinue {
		t.Errorf("lifecycle action %q, want CONTINUE at once", got.Result)
	}

	// A node whose machine is in another Auto Scaling Group.
	cb.d.AddGroup(fakeaws.Group{Name: cb.ns + "-other", MaxSize: 3, DesiredCapacity: 1})
	g, _ := cb.d.Group(cb.ns + "-other")
	other := g.Instances[0]
	cb.cp.AddNode(t, testbed.Node{Name: "other-" + cb.ns[len(cb.ns)-5:], CPU: "4", Memory: "16Gi", ProviderID: other.ProviderID()})
	before := cb.d.Calls("SetDesiredCapacity")
	for _, file := range []string{"drain-spot-interruption.json", "drain-scheduled-maintenance.json"} {
		res = cb.handle(t, cb.event(t, file, other.ID, ""))[0]
		if res.Action != "ignored" || !strings.Contains(res.Reason, "no managed node group") {
			t.Errorf("%s for an unmanaged machine: %+v, want ignored", file, res)
		}
	}
	// An update saying the scheduled change is over, for a managed node.
	managed := cb.nodes(t)[0]
	closed := strings.Replace(string(cb.event(t, "drain-scheduled-maintenance.json", cb.instanceOf(t, managed.Name), "")), `"statusCode": "upcoming"`, `"statusCode": "closed"`, 1)
	if res = cb.handle(t, []byte(closed))[0]; res.Action != "ignored" || !strings.Contains(res.Reason, "over") {
		t.Errorf("closed maintenance event: %+v, want ignored", res)
	}
	if cb.d.Calls("SetDesiredCapacity") != before || cb.node(t, "other-"+cb.ns[len(cb.ns)-5:]).Spec.Unschedulable {
		t.Error("an ignored interruption changed something")
	}
	_ = ctx
}

// While a drain held by a hook waits on a PodDisruptionBudget, its steps
// keep the hook alive with heartbeats.
func TestLifecycleHeartbeats(t *testing.T) {
	cb := newCloudBed(t, 2, false)
	cb.steps.HeartbeatEvery = time.Millisecond
	cb.deploy(t, "web", 1, "")
	cb.pdb(t, "web", "web", 1) // never allows the eviction
	victim := cb.podNode(t, "web")
	id := cb.instanceOf(t, victim)
	act, err := cb.d.ScaleIn(cb.ns, id)
	if err != nil {
		t.Fatal(err)
	}
	in := &state.Interruption{Kind: state.InterruptLifecycle, InstanceID: id, AutoScalingGroup: cb.ns, Hook: cb.hook, Token: act.Token}
	s := cb.start(victim, time.Minute, drain.PolicyForce)
	s.Surge, s.Interruption = false, in
	s = cb.steps1(t, s, "Prepare", "Cordon", "Surge", "Evict", "Evict")
	if s.Evicted {
		t.Fatal("evicted past a PDB allowing no disruption")
	}
	got, _ := cb.d.Action(act.Token)
	if got.Heartbeats < 3 || got.Result != "" {
		t.Errorf("lifecycle action %+v, want at least 3 heartbeats and still waiting", got)
	}
	data, _ := json.Marshal(s)
	if !strings.Contains(string(data), `"heartbeatAt"`) {
		t.Errorf("state carries no heartbeat time: %s", data)
	}
}

// A lifecycle drain Prepare refuses (here: its node is gone by then) lets
// the hook go through the state machine's ReleaseHook state; the same step
// made by hand for a machine whose node nodetide would drain is refused and
// completes nothing.
func TestMachineRefusedLifecycleDrainReleasesTheHook(t *testing.T) {
	cb := newCloudBed(t, 1, true)
	ctx := context.Background()
	lone, err := cb.d.AddInstance(cb.ns, fakeaws.Instance{LifecycleState: fakeaws.StateInService})
	if err != nil {
		t.Fatal(err)
	}
	act, err := cb.d.ScaleIn(cb.ns, lone.ID)
	if err != nil {
		t.Fatal(err)
	}
	in := drain.Interruption{Interruption: state.Interruption{Kind: state.InterruptLifecycle, InstanceID: lone.ID,
		AutoScalingGroup: cb.ns, Hook: cb.hook, Token: act.Token}, At: time.Now(), Event: "EC2 Instance-terminate Lifecycle Action"}
	exec, err := cb.m.starter.Interrupted(ctx, "gone-"+cb.ns[len(cb.ns)-5:], cb.ns, in)
	if err != nil {
		t.Fatal(err)
	}
	out := cb.m.wait(t, exec.ExecutionArn)
	if out.Status != sfntypes.ExecutionStatusFailed || awssdk.ToString(out.Error) != drain.ErrNameNodeNotFound {
		t.Fatalf("execution %s: %s %s, want refused with NodeNotFound", out.Status, awssdk.ToString(out.Error), awssdk.ToString(out.Cause))
	}
	if got, _ := cb.d.Action(act.Token); got.Result != fakeaws.ResultContinue {
		t.Errorf("lifecycle action after the refusal: %q, want CONTINUE", got.Result)
	}

	nodes := cb.nodes(t)
	id := cb.instanceOf(t, nodes[0].Name)
	held, err := cb.d.ScaleIn(cb.ns, id)
	if err != nil {
		t.Fatal(err)
	}
	forged := drain.State{Node: nodes[0].Name, DrainID: "forged", Deadline: time.Now().Add(time.Minute), Policy: drain.PolicyForce,
		Interruption: &state.Interruption{Kind: state.InterruptLifecycle, InstanceID: id, AutoScalingGroup: cb.ns, Hook: cb.hook, Token: held.Token}}
	if _, err := cb.h.Steps.Run(ctx, "ReleaseHook", forged); err == nil || drain.ErrorName(err) != drain.ErrNameInvalidInput {
		t.Errorf("hand-made ReleaseHook for a drainable node: %v, want InvalidInput", err)
	}
	if got, _ := cb.d.Action(held.Token); got.Result != "" {
		t.Errorf("a hand-made ReleaseHook completed the action of a drainable node (%q)", got.Result)
	}
}

// A machine its group terminates under the hook has already left the
// group's target: its drain does not count against the minimum a second
// time, so a scale-down the minimum allows is not refused.
func TestLifecycleDrainIsNotCountedTwiceAgainstTheMinimum(t *testing.T) {
	cb := newCloudBed(t, 3, false)
	if err := cb.d.SetBounds(cb.ns, 1, 5); err != nil {
		t.Fatal(err)
	}
	nodes := cb.nodes(t)
	id := cb.instanceOf(t, nodes[0].Name)
	act, err := cb.d.ScaleIn(cb.ns, id) // desired 3 -> 2
	if err != nil {
		t.Fatal(err)
	}
	in := drain.Interruption{Interruption: state.Interruption{Kind: state.InterruptLifecycle, InstanceID: id,
		AutoScalingGroup: cb.ns, Hook: cb.hook, Token: act.Token}}
	life := drain.State{Node: nodes[0].Name, DrainID: "lifecycle-" + id + "-1", Deadline: time.Now().Add(time.Minute),
		Policy: drain.PolicyForce, Interruption: &in.Interruption}
	cb.steps1(t, life, "Prepare")
	// Two machines left in the target, min 1: one more may go.
	s := cb.start(nodes[1].Name, time.Minute, drain.PolicyAbort)
	if _, err := cb.steps.Run(context.Background(), "Prepare", s); err != nil {
		t.Fatalf("scale-down beside a lifecycle drain: %v", err)
	}
	// And no further.
	s = cb.start(nodes[2].Name, time.Minute, drain.PolicyAbort)
	if _, err := cb.steps.Run(context.Background(), "Prepare", s); err == nil || drain.ErrorName(err) != drain.ErrNameBelowMinSize {
		t.Fatalf("third drain: %v, want BelowMinSize", err)
	}
}

// The group takes out a node a scale-down is already draining: the action
// joins that drain, which heartbeats it and completes it at Terminate
// instead of terminating the machine a second time.
func TestLifecycleActionJoinsTheRunningDrain(t *testing.T) {
	cb := newCloudBed(t, 2, false)
	cb.steps.HeartbeatEvery = time.Millisecond
	cb.deploy(t, "web", 1, "")
	victim := cb.podNode(t, "web")
	id := cb.instanceOf(t, victim)
	s := cb.start(victim, time.Minute, drain.PolicyAbort)
	s = cb.steps1(t, s, "Prepare", "Cordon")

	act, err := cb.d.ScaleIn(cb.ns, id)
	if err != nil {
		t.Fatal(err)
	}
	res := cb.handle(t, cb.event(t, "drain-lifecycle-terminate.json", id, act.Token))[0]
	if res.Action != "joined" || !strings.Contains(res.Reason, s.DrainID) {
		t.Fatalf("lifecycle action for a node being drained: %+v, want joined to %s", res, s.DrainID)
	}
	for !s.SurgeDone {
		s = cb.steps1(t, s, "Surge")
	}
	for !s.Evicted {
		s = cb.steps1(t, s, "Evict")
	}
	if got, _ := cb.d.Action(act.Token); got.Heartbeats == 0 || got.Result != "" {
		t.Errorf("lifecycle action during the drain: %+v, want heartbeats and still waiting", got)
	}
	s = cb.steps1(t, s, "Terminate")
	if got, _ := cb.d.Action(act.Token); got.Result != fakeaws.ResultContinue {
		t.Errorf("lifecycle action after Terminate: %q, want CONTINUE", got.Result)
	}
	if n := cb.d.Calls(terminateAction); n != 0 {
		t.Errorf("%d TerminateInstanceInAutoScalingGroup calls, want none", n)
	}
	if g, _ := cb.d.Group(cb.ns); g.DesiredCapacity != 1 {
		t.Errorf("desired capacity %d, want 1 (the group's own scale-in only)", g.DesiredCapacity)
	}
}

// A lifecycle drain whose action is not the group's (a made-up token: the
// machine is not terminating) is refused at Prepare, before anything moves:
// its node is neither cordoned nor deleted.
func TestLifecycleDrainOfARunningMachineKeepsItsNode(t *testing.T) {
	cb := newCloudBed(t, 2, false)
	node := cb.nodes(t)[0].Name
	id := cb.instanceOf(t, node)
	s := cb.start(node, time.Minute, drain.PolicyForce)
	s.DrainID = "lifecycle-" + id + "-forged"
	s.Interruption = &state.Interruption{Kind: state.InterruptLifecycle, InstanceID: id, AutoScalingGroup: cb.ns, Hook: cb.hook,
		Token: "00000000-0000-0000-0000-000000000000"}
	if _, err := cb.steps.Run(context.Background(), "Prepare", s); err == nil || drain.ErrorName(err) != drain.ErrNameInvalidInput {
		t.Fatalf("Prepare of a lifecycle drain whose action no group holds: %v, want InvalidInput", err)
	}
	if _, err := cb.steps.Run(context.Background(), "Cordon", s); err == nil || drain.ErrorName(err) != drain.ErrNameInvalidInput {
		t.Errorf("Cordon after a refused Prepare: %v, want InvalidInput", err)
	}
	cb.untouched(t, node)
}
