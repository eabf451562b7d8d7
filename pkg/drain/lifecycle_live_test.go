package drain_test

import (
	"context"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/state"
)

// lifecycleWrites are the Auto Scaling calls that act on a group or on a
// lifecycle action.
var lifecycleWrites = []string{"CompleteLifecycleAction", "RecordLifecycleActionHeartbeat", "SetDesiredCapacity", terminateAction}

// noWrites fails on any call of lifecycleWrites since the counts in before.
func (cb *cloudBed) noWrites(t *testing.T, before map[string]int) {
	t.Helper()
	for _, a := range lifecycleWrites {
		if n := cb.d.Calls(a) - before[a]; n != 0 {
			t.Errorf("%d %s calls, want none", n, a)
		}
	}
}

func (cb *cloudBed) writes() map[string]int {
	out := map[string]int{}
	for _, a := range lifecycleWrites {
		out[a] = cb.d.Calls(a)
	}
	return out
}

// manageAlso adds a second managed Auto Scaling Group, with the bed's hook
// and one machine, to the groups the handler's steps list.
func (cb *cloudBed) manageAlso(t *testing.T, name string) fakeaws.Instance {
	t.Helper()
	cb.d.AddGroup(fakeaws.Group{Name: name, MaxSize: 3, DesiredCapacity: 1})
	if err := cb.d.PutLifecycleHook(fakeaws.LifecycleHook{Group: name, Name: cb.hook, Transition: fakeaws.TransitionTerminating,
		DefaultResult: fakeaws.ResultContinue, HeartbeatTimeout: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	as, ec2c := aws.NewClients(awssdk.Config{Region: cb.d.Region(), BaseEndpoint: awssdk.String(cb.d.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", "")})
	p, err := aws.New(as, ec2c, aws.Options{AutoScalingGroup: name})
	if err != nil {
		t.Fatal(err)
	}
	first := cb.h.Steps.Groups
	cb.h.Steps.Groups = func(ctx context.Context) ([]providers.NodeGroup, error) {
		a, err := first(ctx)
		if err != nil {
			return nil, err
		}
		b, err := p.NodeGroups(ctx)
		return append(a, b...), err
	}
	g, _ := cb.d.Group(name)
	return g.Instances[0]
}

// Two clusters in one account and region: a termination action of a group
// this deployment does not manage (here even under a hook of the same
// name), or of another hook on its own group, is ignored, and nothing at
// all is called on the other deployment's group or action.
func TestLifecycleActionOfAForeignGroupIsLeftAlone(t *testing.T) {
	cb := newCloudBed(t, 1, true)
	foreign := cb.ns + "-other"
	cb.d.AddGroup(fakeaws.Group{Name: foreign, MaxSize: 3, DesiredCapacity: 1})
	if err := cb.d.PutLifecycleHook(fakeaws.LifecycleHook{Group: foreign, Name: cb.hook, Transition: fakeaws.TransitionTerminating,
		DefaultResult: fakeaws.ResultContinue, HeartbeatTimeout: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	g, _ := cb.d.Group(foreign)
	theirs := g.Instances[0] // no node of ours has it
	act, err := cb.d.ScaleIn(foreign, theirs.ID)
	if err != nil {
		t.Fatal(err)
	}
	before := cb.writes()
	ev := strings.ReplaceAll(string(cb.event(t, "drain-lifecycle-terminate.json", theirs.ID, act.Token)), `"`+cb.ns+`"`, `"`+foreign+`"`)
	ev = strings.ReplaceAll(ev, "autoScalingGroupName/"+cb.ns, "autoScalingGroupName/"+foreign)
	res := cb.handle(t, []byte(ev))[0]
	if res.Action != "ignored" || !strings.Contains(res.Reason, foreign+" is not one this deployment manages") {
		t.Errorf("another deployment's action: %+v, want ignored as not managed", res)
	}
	if got, _ := cb.d.Action(act.Token); got.Result != "" || got.Heartbeats != 0 {
		t.Errorf("another deployment's action was touched: %+v", got)
	}

	// Another hook on our own group (another tool's, or another cluster's
	// sharing the group).
	node := cb.nodes(t)[0].Name
	id := cb.instanceOf(t, node)
	other := strings.ReplaceAll(string(cb.event(t, "drain-lifecycle-terminate.json", id, act.Token)), cb.hook, "nodetide-drain-elsewhere")
	res = cb.handle(t, []byte(other))[0]
	if res.Action != "ignored" || !strings.Contains(res.Reason, "nodetide-drain-elsewhere is not this deployment's") {
		t.Errorf("another hook's action: %+v, want ignored", res)
	}
	cb.noWrites(t, before)
	for action, forms := range map[string][]map[string][]string{
		"DescribeAutoScalingGroups": cb.d.Requests("DescribeAutoScalingGroups"), "DescribeScalingActivities": cb.d.Requests("DescribeScalingActivities")} {
		for _, f := range forms {
			for _, vs := range f {
				for _, v := range vs {
					if v == foreign {
						t.Errorf("%s called on the other deployment's group: %v", action, f)
					}
				}
			}
		}
	}
	if n := cb.node(t, node); n.Spec.Unschedulable {
		t.Errorf("node %s cordoned for another hook's action", node)
	}
}

// Our node's machine in an event naming another managed group: refused,
// naming the machine's real group and the event's, with nothing called on
// either action; Prepare refuses the same interruption made by hand.
func TestLifecycleEventNamingTheWrongGroupIsRefused(t *testing.T) {
	cb := newCloudBed(t, 2, true)
	second := cb.ns + "-b"
	theirs := cb.manageAlso(t, second)
	act, err := cb.d.ScaleIn(second, theirs.ID) // a real action, of the other group's machine
	if err != nil {
		t.Fatal(err)
	}
	node := cb.nodes(t)[0].Name
	id := cb.instanceOf(t, node)
	before := cb.writes()
	ev := strings.ReplaceAll(string(cb.event(t, "drain-lifecycle-terminate.json", id, act.Token)), `"`+cb.ns+`"`, `"`+second+`"`)
	res := cb.handle(t, []byte(ev))[0]
	want := "machine " + id + " is in Auto Scaling group " + cb.ns + ", not in group " + second
	if res.Action != "refused" || !strings.Contains(res.Reason, want) {
		t.Errorf("wrong-group event: %+v, want refused: %s", res, want)
	}
	in := &state.Interruption{Kind: state.InterruptLifecycle, InstanceID: id, AutoScalingGroup: second, Hook: cb.hook, Token: act.Token}
	s := cb.start(node, time.Minute, drain.PolicyForce)
	s.Interruption = in
	if _, err := cb.h.Steps.Run(context.Background(), "Prepare", s); err == nil || drain.ErrorName(err) != drain.ErrNameNotManaged || !strings.Contains(err.Error(), want) {
		t.Errorf("Prepare of a wrong-group interruption: %v, want NotManaged: %s", err, want)
	}
	cb.noWrites(t, before)
	if got, _ := cb.d.Action(act.Token); got.Result != "" || got.Heartbeats != 0 {
		t.Errorf("the other group's action was touched: %+v", got)
	}
	if n := cb.node(t, node); n.Spec.Unschedulable {
		t.Errorf("node %s cordoned by a wrong-group event", node)
	}
}

// A well-formed lifecycle event whose token no action holds (the machine is
// in service) moves nothing: the handler refuses it, and an execution
// started with it by hand stops at Prepare, so a pod marked safe-to-evict
// "false" stays and no node is cordoned. The machine's real action, once
// its group scales it in, drains over that pod (the machine goes anyway)
// and completes.
func TestForgedLifecycleTokenDrainsNothing(t *testing.T) {
	cb := newCloudBed(t, 2, true)
	ctx := context.Background()
	node := cb.nodes(t)[0].Name
	id := cb.instanceOf(t, node)
	cb.barePod(t, "pinned", node, map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})
	forged := "00000000-1111-2222-3333-444444444444"

	res := cb.handle(t, cb.event(t, "drain-lifecycle-terminate.json", id, forged))[0]
	if res.Action != "refused" || res.Execution != nil || !strings.Contains(res.Reason, "holds token "+forged) {
		t.Errorf("forged token: %+v, want refused with no drain", res)
	}
	in := drain.Interruption{Interruption: state.Interruption{Kind: state.InterruptLifecycle, InstanceID: id,
		AutoScalingGroup: cb.ns, Hook: cb.hook, Token: forged}, At: time.Now(), Event: "EC2 Instance-terminate Lifecycle Action"}
	exec, err := cb.m.starter.Interrupted(ctx, node, cb.ns, in)
	if err != nil {
		t.Fatal(err)
	}
	out := cb.m.wait(t, exec.ExecutionArn)
	if out.Status != sfntypes.ExecutionStatusFailed || awssdk.ToString(out.Error) != drain.ErrNameInvalidInput {
		t.Fatalf("execution with a forged token %s: %s %s, want refused at Prepare", out.Status, awssdk.ToString(out.Error), awssdk.ToString(out.Cause))
	}
	if n := cb.node(t, node); n.Spec.Unschedulable || ours(n) != 0 {
		t.Errorf("node %s cordoned or tainted for a forged token", node)
	}
	if p, err := cb.cp.Client.CoreV1().Pods(cb.ns).Get(ctx, "pinned", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the safe-to-evict=false pod was evicted for a forged token (%v)", err)
	}
	if active, _, err := cb.m.store.NodeDrain(ctx, node); err != nil || active != "" {
		t.Errorf("node %s held by %q (%v) after a forged token", node, active, err)
	}
	if n := cb.d.Calls("CompleteLifecycleAction"); n != 0 {
		t.Errorf("%d CompleteLifecycleAction calls for a forged token, want none", n)
	}

	// The real action.
	act, err := cb.d.ScaleIn(cb.ns, id)
	if err != nil {
		t.Fatal(err)
	}
	res = cb.handle(t, cb.event(t, "drain-lifecycle-terminate.json", id, act.Token))[0]
	if res.Action != "drain" {
		t.Fatalf("real action: %+v, want a drain", res)
	}
	if out = cb.m.wait(t, res.Execution.ExecutionArn); out.Status != sfntypes.ExecutionStatusSucceeded {
		t.Fatalf("execution %s: %s %s", out.Status, awssdk.ToString(out.Error), awssdk.ToString(out.Cause))
	}
	if got, _ := cb.d.Action(act.Token); got.Result != fakeaws.ResultContinue {
		t.Errorf("real lifecycle action ended %q, want CONTINUE", got.Result)
	}
	if _, err := cb.cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s after the real action's drain: %v, want removed", node, err)
	}
}
