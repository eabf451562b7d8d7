package drain_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// stamped is a sample event about a machine stamped at a given time, and
// replayed from an EventBridge archive when replay is set.
func (cb *cloudBed) stamped(t *testing.T, file, instance string, at time.Time, replay string) []byte {
	t.Helper()
	s := sample(t, file)
	s = strings.ReplaceAll(s, "i-0123456789abcdef0", instance)
	s = strings.ReplaceAll(s, "2026-11-30T10:00:00Z", at.UTC().Format(time.RFC3339))
	if replay != "" {
		s = strings.Replace(s, `"version": "0",`, `"version": "0", "replay-name": "`+replay+`",`, 1)
	}
	return []byte(s)
}

// evaluator is the evaluate cycle over the bed's group, recovering drains
// as the function does (its steps have no Auto Scaling client, but EC2).
func (cb *cloudBed) evaluator(t *testing.T) *evaluate.Evaluator {
	t.Helper()
	cfg := awssdk.Config{Region: cb.d.Region(), BaseEndpoint: awssdk.String(cb.d.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", "")}
	as, ec2c := aws.NewClients(cfg)
	// The double's group names no launch template: evaluate's snapshot
	// gets the bed nodes' shape.
	tpl := &snapshot.Template{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}}
	p, err := aws.New(as, ec2c, aws.Options{AutoScalingGroup: cb.ns,
		NodeTemplate: func(context.Context, string) (*snapshot.Template, error) { return tpl, nil }})
	if err != nil {
		t.Fatal(err)
	}
	steps := *cb.h.Steps
	steps.Lifecycle, steps.Groups = nil, p.NodeGroups
	s := planner.DefaultSettings()
	s.ScaleUp.PendingPodMinAge = 0
	return &evaluate.Evaluator{Client: cb.cp.Client, Groups: p.NodeGroups, Store: cb.m.store, Settings: s,
		Holder: "evaluate-" + cb.ns, LeaseTTL: time.Minute,
		Recoverer: &drain.Recovery{Steps: &steps, SFN: cb.m.client, StateMachineArn: cb.m.svc.StateMachineArn["drain"]}}
}

func cordoned(n *corev1.Node) bool {
	if !n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == drain.TaintKey {
			return true
		}
	}
	return false
}

// A Spot warning stamped an hour ago and replayed from an archive: while
// EC2 says the machine is not going it changes nothing; once EC2 has
// marked the machine for interruption it drains as an ordinary drain, so
// the pod a PodDisruptionBudget protects stays (the API server refuses its
// eviction) until the budget allows it, instead of being deleted at the
// long-passed deadline.
func TestStaleReplayedSpotWarningKeepsThePDB(t *testing.T) {
	cb := newCloudBed(t, 2, true)
	if err := cb.d.SetSpot(cb.ns); err != nil {
		t.Fatal(err)
	}
	cb.m.starter.Surge = false // the PDB, not a surge, must hold the pod
	cb.deploy(t, "web", 1, "")
	cb.pdb(t, "web", "web", 1)
	victim := cb.podNode(t, "web")
	id := cb.instanceOf(t, victim)
	pod := cb.pods(t, "web")[0]
	ev := cb.stamped(t, "drain-spot-interruption.json", id, time.Now().Add(-time.Hour), "archive-replay-1")

	res := cb.handle(t, ev)[0]
	if res.Action != "ignored" || !strings.Contains(res.Reason, "not going") || res.Execution != nil {
		t.Fatalf("replayed stale warning for a machine EC2 keeps: %+v, want ignored", res)
	}
	if cordoned(cb.node(t, victim)) {
		t.Fatal("an ignored warning cordoned the node")
	}

	if _, err := cb.d.InterruptSpot(id, "terminate"); err != nil {
		t.Fatal(err)
	}
	res = cb.handle(t, ev)[0]
	if res.Action != "drain" || res.Execution == nil {
		t.Fatalf("replayed stale warning for a machine EC2 has marked: %+v, want a drain", res)
	}
	rec, err := cb.m.store.GetDrain(context.Background(), victim, res.Execution.Name)
	for i := 0; err != nil && i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		rec, err = cb.m.store.GetDrain(context.Background(), victim, res.Execution.Name)
	}
	if err != nil {
		t.Fatal(err)
	}
	if rec.Policy != drain.PolicyAbort || !rec.Deadline.After(time.Now().Add(time.Minute)) {
		t.Errorf("drain record policy %s deadline %s, want the ordinary abort and a deadline ahead", rec.Policy, rec.Deadline)
	}
	// Several Evict rounds (the local state machine waits 1 s between).
	time.Sleep(8 * time.Second)
	now := cb.pods(t, "web")
	if len(now) != 1 || now[0].UID != pod.UID || now[0].DeletionTimestamp != nil {
		t.Fatalf("the PDB-protected pod was removed by a stale warning: %+v", now)
	}
	if logs := cb.m.svc.FunctionLogs("drain"); !strings.Contains(logs, "eviction refused for now") {
		t.Errorf("no eviction the API server refused in the drain's logs:\n%s", logs)
	}
	if !cordoned(cb.node(t, victim)) {
		t.Error("node not cordoned during the drain")
	}
	// The budget allows it: the ordinary drain goes on to the end.
	if err := cb.cp.Client.PolicyV1().PodDisruptionBudgets(cb.ns).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out := cb.m.wait(t, res.Execution.ExecutionArn)
	if out.Status != sfntypes.ExecutionStatusSucceeded {
		t.Fatalf("execution %s: %s %s", out.Status, awssdk.ToString(out.Error), awssdk.ToString(out.Cause))
	}
}

// Events that claim what EC2 denies change nothing: a fresh-looking Spot
// warning or a rebalance recommendation naming an on-demand machine, a
// replayed rebalance recommendation, a scheduled-maintenance event for a
// machine EC2 says is terminated, and an event stamped in the future.
func TestForgedCloudEventsAreIgnored(t *testing.T) {
	cb := newCloudBed(t, 2, true)
	cb.h.Rebalance = true
	nodes := cb.nodes(t)
	id := cb.instanceOf(t, nodes[0].Name)
	desired := func() int { g, _ := cb.d.Group(cb.ns); return g.DesiredCapacity }
	before := desired()
	now := time.Now()
	for _, tt := range []struct {
		name, file, replay, reason string
	}{
		{"spot warning for on-demand", "drain-spot-interruption.json", "", "not a Spot instance"},
		{"rebalance for on-demand", "drain-rebalance.json", "", "not a Spot instance"},
	} {
		res := cb.handle(t, cb.stamped(t, tt.file, id, now, tt.replay))[0]
		if res.Action != "ignored" || !strings.Contains(res.Reason, tt.reason) {
			t.Errorf("%s: %+v, want ignored (%s)", tt.name, res, tt.reason)
		}
	}
	if err := cb.d.SetSpot(cb.ns); err != nil {
		t.Fatal(err)
	}
	res := cb.handle(t, cb.stamped(t, "drain-rebalance.json", id, now, "archive-replay-2"))[0]
	if res.Action != "ignored" || !strings.Contains(res.Reason, "replayed") {
		t.Errorf("replayed rebalance: %+v, want ignored", res)
	}
	other := cb.instanceOf(t, nodes[1].Name)
	if err := cb.d.SetEC2State(other, "terminated"); err != nil {
		t.Fatal(err)
	}
	res = cb.handle(t, cb.stamped(t, "drain-scheduled-maintenance.json", other, now, ""))[0]
	if res.Action != "ignored" || !strings.Contains(res.Reason, "terminated") {
		t.Errorf("maintenance for a terminated machine: %+v, want ignored", res)
	}
	_, err := cb.h.Handle(context.Background(), cb.stamped(t, "drain-spot-interruption.json", id, now.Add(10*time.Minute), ""))
	var refused messages.InvokeResponse_Error
	if !errors.As(err, &refused) || refused.Type != drain.ErrNameInvalidInput || !strings.Contains(refused.Message, `"time"`) {
		t.Errorf("warning stamped 10 minutes ahead: %v, want refused naming the time", err)
	}
	for _, n := range nodes {
		if cordoned(cb.node(t, n.Name)) {
			t.Errorf("node %s cordoned by an unproven event", n.Name)
		}
	}
	if got := desired(); got != before {
		t.Errorf("desired capacity %d, want %d (no replacement)", got, before)
	}
	if n := cb.d.Calls("DescribeInstances"); n == 0 {
		t.Error("EC2 was never asked")
	}
}

// After a lifecycle drain rolls back (its machine goes anyway), evaluate's
// cycles keep the node cordoned while the group is terminating the
// machine, and delete the Node once EC2 says the machine is terminated.
func TestRolledBackLifecycleDrainKeepsTheCordonUntilTheMachineIsGone(t *testing.T) {
	// The function may not scale Deployments: the surge fails, the drain
	// rolls back.
	cb := newCloudBed(t, 2, true, func(b *bed) string {
		return b.kubeconfigWith(t, []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "update", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"get"}},
			{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"get", "list", "watch"}},
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
	if out := cb.m.wait(t, res.Execution.ExecutionArn); out.Status != sfntypes.ExecutionStatusFailed {
		t.Fatalf("execution %s, want failed (rolled back)", out.Status)
	}
	ev := cb.evaluator(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := ev.Run(ctx); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if n := cb.node(t, victim); !cordoned(n) {
			t.Fatalf("cycle %d gave back the node of a machine its group is terminating: %+v", i, n.Spec)
		}
	}
	if gone := cb.d.Reap(cb.ns); len(gone) != 1 || gone[0].ID != id {
		t.Fatalf("reaped %+v, want %s", gone, id)
	}
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s of a terminated machine: %v, want deleted", victim, err)
	}
	for _, n := range cb.nodes(t) {
		if n.Name != victim && cordoned(&n) {
			t.Errorf("node %s cordoned", n.Name)
		}
	}
}

// A drain record whose execution never existed (here: Prepare and Cordon
// run by hand) keeps its node cordoned for at most the recovery's grace
// after the drain began plus one evaluate interval, as docs/drain.md states:
// measured with evaluate cycles every 5 s on the bed.
func TestRecoveryBoundForADrainWithoutExecution(t *testing.T) {
	// docs/drain.md's bound: 15 s after the drain began plus one interval.
	const interval, grace = 5 * time.Second, 15 * time.Second
	cb := newCloudBed(t, 2, true)
	node := cb.nodes(t)[0].Name
	steps := cb.h.Steps
	s := cb.start(node, time.Hour, drain.PolicyAbort)
	s.DrainID = "orphan-" + cb.ns[len(cb.ns)-5:]
	ctx := context.Background()
	for _, step := range []string{"Prepare", "Cordon"} {
		var err error
		if s, err = steps.Run(ctx, step, s); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	began := time.Now()
	bound := grace + interval
	// The cycles' own API calls on a loaded machine.
	const slack = 5 * time.Second
	ev := cb.evaluator(t)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if _, err := ev.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if !cordoned(cb.node(t, node)) {
			break
		}
		if time.Since(began) > bound+slack {
			t.Fatalf("node %s still cordoned %s after its drain began, past the stated bound %s (grace %s + one %s interval)",
				node, time.Since(began).Round(time.Second), bound, grace, interval)
		}
		<-tick.C
	}
	took := time.Since(began)
	t.Logf("drain record without execution: node given back after %s (bound %s)", took.Round(100*time.Millisecond), bound)
	if took < grace-2*time.Second {
		t.Errorf("given back after %s, within the grace %s a starting execution has", took, grace)
	}
}

func (b *bed) pods(t *testing.T, app string) []corev1.Pod {
	t.Helper()
	list, err := b.cp.Client.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// A Spot drain whose execution did not come through the drain function's
// checked event (StartExecution, or a step invoked by hand) is checked again
// at Prepare: for an on-demand machine, or past its deadline while EC2 says
// the machine is not going, it is refused before anything moves, so the
// pod marked safe-to-evict "false" stays and nothing is cordoned.
func TestForgedSpotExecutionIsRefusedAtPrepare(t *testing.T) {
	cb := newCloudBed(t, 2, true)
	ctx := context.Background()
	node := cb.nodes(t)[0].Name
	id := cb.instanceOf(t, node)
	cb.barePod(t, "pinned", node, map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})
	start := func(at time.Time, suffix string) *sfn.DescribeExecutionOutput {
		t.Helper()
		in := drain.Interruption{Interruption: state.Interruption{Kind: state.InterruptSpot, InstanceID: id},
			At: at, Event: "EC2 Spot Instance Interruption Warning " + suffix}
		exec, err := cb.m.starter.Interrupted(ctx, node, cb.ns, in)
		if err != nil {
			t.Fatal(err)
		}
		return cb.m.wait(t, exec.ExecutionArn)
	}
	check := func(what, want string, out *sfn.DescribeExecutionOutput) {
		t.Helper()
		if out.Status != sfntypes.ExecutionStatusFailed || awssdk.ToString(out.Error) != drain.ErrNameInvalidInput || !strings.Contains(awssdk.ToString(out.Cause), want) {
			t.Errorf("%s: %s %s %s, want refused at Prepare (%s)", what, out.Status, awssdk.ToString(out.Error), awssdk.ToString(out.Cause), want)
		}
		if n := cb.node(t, node); n.Spec.Unschedulable || ours(n) != 0 {
			t.Errorf("%s: node %s cordoned or tainted", what, node)
		}
		if p, err := cb.cp.Client.CoreV1().Pods(cb.ns).Get(ctx, "pinned", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
			t.Errorf("%s: the safe-to-evict=false pod was evicted (%v)", what, err)
		}
	}
	check("on-demand machine", "not a Spot instance", start(time.Now(), "on-demand"))

	if err := cb.d.SetSpot(cb.ns); err != nil {
		t.Fatal(err)
	}
	// Its deadline (an hour ago plus 90 s) passed: Interrupted itself never
	// gives a late warning this deadline, so only a forged input has it.
	in := drain.State{Node: node, NodeGroup: cb.ns, DrainID: "spot-forged-" + cb.ns[len(cb.ns)-5:], Policy: drain.PolicyForce,
		Deadline: time.Now().Add(-time.Hour), Interruption: &state.Interruption{Kind: state.InterruptSpot, InstanceID: id}}
	_, err := cb.h.Steps.Prepare(ctx, in)
	if drain.ErrorName(err) != drain.ErrNameInvalidInput || !strings.Contains(err.Error(), "not going") {
		t.Errorf("Prepare of a Spot drain past its deadline, machine not going: %v, want refused", err)
	}
	check("past its deadline, not going", "", &sfn.DescribeExecutionOutput{Status: sfntypes.ExecutionStatusFailed,
		Error: awssdk.String(drain.ErrNameInvalidInput)})
}
