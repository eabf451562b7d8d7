package drain_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/state"
)

// dynamo moves the bed's steps onto a state table in dynalite, where
// conditional writes are DynamoDB's own.
func (b *bed) dynamo(t *testing.T) *state.DynamoDB {
	t.Helper()
	db := testbed.DynamoDB(t)
	client := db.Client(t)
	table := "safety-" + b.pool
	if err := state.CreateTable(context.Background(), client, table); err != nil {
		t.Fatal(err)
	}
	store := state.NewDynamoDB(client, table, b.pool)
	b.steps.Store = store
	return store
}

func (b *bed) scaleTo(t *testing.T, name string, n int32) {
	t.Helper()
	ctx := context.Background()
	for {
		sc, err := b.cp.Client.AppsV1().Deployments(b.ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sc.Spec.Replicas = n
		_, err = b.cp.Client.AppsV1().Deployments(b.ns).UpdateScale(ctx, name, &autoscalingv1.Scale{ObjectMeta: sc.ObjectMeta, Spec: sc.Spec}, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		t.Logf("scale %s to %d: %v (retrying)", name, n, err)
	}
}

func (b *bed) steps1(t *testing.T, s drain.State, names ...string) drain.State {
	t.Helper()
	for _, name := range names {
		var err error
		if s, err = b.steps.Run(context.Background(), name, s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return s
}

// Two drains of a group at min 1 with 2 nodes, prepared at the same moment:
// exactly one may claim its node, on every try.
func TestConcurrentPreparesKeepTheMinimum(t *testing.T) {
	b := newBed(t, 1, 2)
	store := b.dynamo(t)
	nodes := b.nodes(t)
	ctx := context.Background()
	for round := range 12 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		states := make([]drain.State, 2)
		for i := range 2 {
			states[i] = b.start(nodes[i].Name, time.Minute, drain.PolicyAbort)
			states[i].DrainID = states[i].DrainID + "-" + string(rune('a'+round))
			wg.Add(1)
			go func() {
				defer wg.Done()
				states[i], errs[i] = b.steps.Run(ctx, "Prepare", states[i])
			}()
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if won >= 0 {
					t.Fatalf("round %d: both drains claimed a node of a group at min 1 with 2 nodes", round)
				}
				won = i
			case drain.ErrorName(err) != drain.ErrNameBelowMinSize:
				t.Fatalf("round %d: drain %d: %v, want BelowMinSize or success", round, i, err)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: neither drain claimed its node: %v", round, errs)
		}
		running, err := store.RunningDrains(ctx)
		if err != nil || len(running) != 1 || running[0].NodeGroup != b.pool {
			t.Fatalf("round %d: running drains %+v, %v; want the winner's, in group %s", round, running, err, b.pool)
		}
		b.steps1(t, states[won], "Rollback")
	}
}

// A person scales the surged Deployment while the drain runs (kubectl
// scale, an HPA and GitOps all write absolute counts): the drain takes
// nothing back and leaves the person's 4, after a finished surge and after
// a rollback, saying why in the drain record and an event on the
// Deployment. Left alone, the count goes back to 1.
func TestSurgeLeavesACountSomeoneElseChanged(t *testing.T) {
	for _, tc := range []struct {
		finish string
		person int32 // 0: nobody changes the count
		want   int32
	}{
		{"surge", 4, 4}, {"rollback", 4, 4}, {"surge", 0, 1}, {"rollback", 0, 1},
	} {
		t.Run(fmt.Sprintf("%s/person %d", tc.finish, tc.person), func(t *testing.T) {
			// One node: the replacement stays Pending until the test adds
			// room, so the person's change lands mid-surge.
			b := newBed(t, 0, 1)
			b.withEvents()
			b.steps.StepWait = -1
			b.deploy(t, "solo", 1, "")
			victim := b.podNode(t, "solo")
			s := b.steps1(t, b.start(victim, 2*time.Minute, drain.PolicyAbort), "Prepare", "Cordon", "Surge")
			if got := b.replicas(t, "solo"); got != 2 {
				t.Fatalf("replicas after the first surge round = %d, want 2", got)
			}
			if tc.person > 0 {
				b.scaleTo(t, "solo", tc.person)
			}
			if tc.finish == "surge" {
				if err := b.group.IncreaseSize(context.Background(), 1); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(time.Minute)
				for !s.SurgeDone {
					s = b.steps1(t, s, "Surge")
					if got := b.replicas(t, "solo"); tc.person > 0 && got != tc.person {
						t.Fatalf("replicas during the surge = %d; the drain overwrote the person's %d", got, tc.person)
					}
					if time.Now().After(deadline) {
						t.Fatal("surge not done in a minute")
					}
				}
				if got := b.replicas(t, "solo"); got != tc.want {
					t.Fatalf("replicas after the surge = %d, want %d", got, tc.want)
				}
			}
			rec, err := b.store.GetDrain(context.Background(), victim, s.DrainID)
			if err != nil {
				t.Fatal(err)
			}
			b.steps1(t, s, "Rollback")
			if got := b.replicas(t, "solo"); got != tc.want {
				t.Fatalf("replicas after %s and rollback = %d, want %d", tc.finish, got, tc.want)
			}
			if rec, err = b.store.GetDrain(context.Background(), victim, s.DrainID); err != nil || len(rec.Surged) != 1 {
				t.Fatalf("drain record %+v, %v", rec, err)
			}
			left, events := rec.Surged[0].Left, b.deploymentEvents(t, "solo")
			if tc.person == 0 {
				if left != "" || len(events) != 0 {
					t.Errorf("an unchanged count was reported left: record %q, events %v", left, events)
				}
				return
			}
			if !strings.Contains(left, fmt.Sprintf("replicas are %d, not the 2 the drain's surge set", tc.person)) {
				t.Errorf("drain record says %q, want why the count was left", left)
			}
			if len(events) != 1 || events[0].Reason != "SurgeLeft" || !strings.Contains(events[0].Message, "not taken back: replicas are 4") {
				t.Errorf("events on the Deployment: %+v, want one SurgeLeft saying why", events)
			}
		})
	}
}

// deploymentEvents lists nodetide's events on a Deployment of the bed.
func (b *bed) deploymentEvents(t *testing.T, name string) []corev1.Event {
	t.Helper()
	list, err := b.cp.Client.CoreV1().Events(b.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Deployment", "involvedObject.name": name, "source": kubeevents.Component}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// A node a person cordoned before asking for its drain stays cordoned when
// the drain rolls back; only the drain's taint goes.
func TestRollbackKeepsAPersonsCordon(t *testing.T) {
	b := newBed(t, 0, 2)
	ctx := context.Background()
	victim := b.nodes(t)[0].Name
	if err := k8s.Cordon(ctx, b.cp.Client, victim, ""); err != nil {
		t.Fatal(err)
	}
	b.steps1(t, b.start(victim, time.Minute, drain.PolicyAbort), "Prepare", "Cordon", "Rollback")
	n := b.node(t, victim)
	if !n.Spec.Unschedulable {
		t.Error("rollback uncordoned a node a person had cordoned")
	}
	if ours(n) != 0 {
		t.Errorf("draining taint left: %v", n.Spec.Taints)
	}
}

// Step events made by hand cannot act outside a prepared drain, steer one
// to another machine, or skip its order.
func TestForgedStepEventsAreRefused(t *testing.T) {
	b := newBed(t, 0, 2)
	ctx := context.Background()
	nodes := b.nodes(t)
	victim, other := nodes[0], nodes[1]

	forged := b.start(other.Name, time.Minute, drain.PolicyForce)
	forged.NodeGroup, forged.ProviderID = b.pool, other.Spec.ProviderID
	for _, step := range []string{"Cordon", "Evict", "ForceDelete", "Terminate", "RemoveNode", "Finish"} {
		if _, err := b.steps.Run(ctx, step, forged); drain.ErrorName(err) != drain.ErrNameInvalidInput {
			t.Errorf("%s of a drain never prepared: %v, want InvalidInput", step, err)
		}
	}

	s := b.steps1(t, b.start(victim.Name, time.Minute, drain.PolicyAbort), "Prepare", "Cordon")
	steer := s
	steer.ProviderID = other.Spec.ProviderID
	if _, err := b.steps.Run(ctx, "Terminate", steer); drain.ErrorName(err) != drain.ErrNameInvalidInput {
		t.Errorf("Terminate steered to another node's machine: %v, want InvalidInput", err)
	}
	if _, err := b.steps.Run(ctx, "Terminate", s); drain.ErrorName(err) != drain.ErrNameInvalidInput {
		t.Errorf("Terminate before the pods left: %v, want InvalidInput", err)
	}
	if _, err := b.steps.Run(ctx, "RemoveNode", s); drain.ErrorName(err) != drain.ErrNameInvalidInput {
		t.Errorf("RemoveNode before Terminate: %v, want InvalidInput", err)
	}
	force := s
	force.Policy, force.Deadline = drain.PolicyForce, time.Now().Add(-time.Hour)
	if _, err := b.steps.Run(ctx, "ForceDelete", force); drain.ErrorName(err) != drain.ErrNameInvalidInput {
		t.Errorf("ForceDelete with a forged policy and deadline: %v, want InvalidInput", err)
	}
	insts, err := b.group.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 2 || len(b.nodes(t)) != 2 {
		t.Fatalf("forged steps removed a machine or node: %d instances, %d nodes", len(insts), len(b.nodes(t)))
	}
	b.steps1(t, s, "Rollback")
	// The drain has ended: its later steps may not act any more.
	if _, err := b.steps.Run(ctx, "Cordon", s); drain.ErrorName(err) != drain.ErrNameInvalidInput {
		t.Errorf("Cordon after the drain ended: %v, want InvalidInput", err)
	}
	if n := b.node(t, victim.Name); n.Spec.Unschedulable || ours(n) != 0 {
		t.Error("a late Cordon left the node cordoned")
	}
}

// executions answers DescribeExecution from a table (every execution not in
// it does not exist). Recovery must act on what Step Functions says, so the
// table stands in for executions the test cannot end the real way.
type executions map[string]sfntypes.ExecutionStatus

func (e executions) DescribeExecution(_ context.Context, in *sfn.DescribeExecutionInput, _ ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	for name, st := range e {
		if arn := aws.ToString(in.ExecutionArn); len(arn) > len(name) && arn[len(arn)-len(name)-1:] == ":"+name {
			return &sfn.DescribeExecutionOutput{Status: st, ExecutionArn: in.ExecutionArn}, nil
		}
	}
	return nil, &sfntypes.ExecutionDoesNotExist{Message: aws.String("no such execution")}
}

func (e executions) StopExecution(_ context.Context, in *sfn.StopExecutionInput, _ ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error) {
	return nil, errors.New("not expected")
}

// Drains whose execution ended without finishing them are finished from
// their records: rolled back when the machine is still there, completed
// when it is gone; one still running is left alone.
func TestRecoveryFinishesEndedDrains(t *testing.T) {
	b := newBed(t, 0, 4)
	b.steps.StepWait = -1
	ctx := context.Background()
	b.deploy(t, "solo", 1, "")
	aborted := b.podNode(t, "solo")
	var others []string
	for _, n := range b.nodes(t) {
		if n.Name != aborted {
			others = append(others, n.Name)
		}
	}
	gone, running, orphan := others[0], others[1], others[2]

	// The replacement of the surged pod stays Pending: every other node is
	// being drained too.
	b.steps1(t, b.start(running, time.Hour, drain.PolicyAbort), "Prepare", "Cordon")
	b.steps1(t, b.start(orphan, time.Hour, drain.PolicyAbort), "Prepare", "Cordon")
	sGone := b.steps1(t, b.start(gone, time.Hour, drain.PolicyAbort), "Prepare", "Cordon")
	sAborted := b.steps1(t, b.start(aborted, time.Hour, drain.PolicyAbort), "Prepare", "Cordon", "Surge")
	if got := b.replicas(t, "solo"); got != 2 {
		t.Fatalf("surge did not grow: %d", got)
	}
	b.steps1(t, sGone, "Surge", "Evict", "Terminate")

	r := &drain.Recovery{Steps: b.steps, StateMachineArn: "arn:aws:states:us-east-1:000000000000:stateMachine:drain", Grace: time.Nanosecond,
		SFN: executions{sAborted.DrainID: sfntypes.ExecutionStatusAborted, sGone.DrainID: sfntypes.ExecutionStatusFailed,
			"test-" + running: sfntypes.ExecutionStatusRunning}}
	res, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.RolledBack) != 2 || len(res.Completed) != 1 {
		t.Errorf("recovered %+v, want 2 rolled back (aborted, orphan) and 1 completed (gone)", res)
	}
	for _, n := range []string{aborted, orphan} {
		if node := b.node(t, n); node.Spec.Unschedulable || ours(node) != 0 {
			t.Errorf("node %s still cordoned after recovery", n)
		}
	}
	if got := b.replicas(t, "solo"); got != 1 {
		t.Errorf("surged Deployment at %d replicas after recovery, want 1", got)
	}
	if _, err := b.cp.Client.CoreV1().Nodes().Get(ctx, gone, metav1.GetOptions{}); err == nil {
		t.Errorf("node %s, whose machine was terminated, still exists", gone)
	}
	if node := b.node(t, running); !node.Spec.Unschedulable {
		t.Error("recovery touched a drain whose execution is running")
	}
	left, err := b.steps.Store.RunningDrains(ctx)
	if err != nil || len(left) != 1 || left[0].Node != running {
		t.Errorf("running drains after recovery %+v, %v; want only %s", left, err, running)
	}
	// A node carrying the taint with no drain (a late step) is given back.
	if err := k8s.Cordon(ctx, b.cp.Client, aborted, drain.TaintKey); err != nil {
		t.Fatal(err)
	}
	res, err = r.Run(ctx)
	if err != nil || len(res.Untainted) != 1 {
		t.Errorf("second recovery %+v, %v; want the stray taint removed", res, err)
	}
	if node := b.node(t, aborted); node.Spec.Unschedulable || ours(node) != 0 {
		t.Error("stray draining taint left")
	}
}

// The drain function given Step Functions' status change (as the stack's
// rule sends it) recovers the drains whose execution ended; the event's own
// content decides nothing. enable --force ends a drain that still runs.
func TestHandlerRecoversOnStatusChange(t *testing.T) {
	b := newBed(t, 0, 2)
	ctx := context.Background()
	nodes := b.nodes(t)
	ended, stuck := nodes[0].Name, nodes[1].Name
	sEnded := b.steps1(t, b.start(ended, time.Hour, drain.PolicyAbort), "Prepare", "Cordon")
	sStuck := b.steps1(t, b.start(stuck, time.Hour, drain.PolicyAbort), "Prepare", "Cordon")
	stops := &stopped{executions: executions{sEnded.DrainID: sfntypes.ExecutionStatusFailed, sStuck.DrainID: sfntypes.ExecutionStatusRunning}}
	h := &drain.Handler{Steps: b.steps, Recovery: &drain.Recovery{Steps: b.steps, SFN: stops,
		StateMachineArn: "arn:aws:states:us-east-1:000000000000:stateMachine:drain"}}
	event := `{"version":"0","id":"1","detail-type":"Step Functions Execution Status Change","source":"aws.states","account":"000000000000",
		"time":"2026-12-01T10:00:00Z","region":"us-east-1","resources":[],"detail":{"status":"ABORTED","name":"anything"}}`
	if _, err := h.Handle(ctx, []byte(event)); err != nil {
		t.Fatal(err)
	}
	if n := b.node(t, ended); n.Spec.Unschedulable || ours(n) != 0 {
		t.Error("the drain whose execution failed was not rolled back")
	}
	if n := b.node(t, stuck); !n.Spec.Unschedulable {
		t.Error("a running drain was touched by recovery")
	}
	// A plain enable leaves a running drain alone; --force ends it.
	if _, err := h.Handle(ctx, []byte(`{"action":"enable","node":"`+stuck+`"}`)); err == nil {
		t.Error("enable of a node a running drain holds succeeded")
	}
	if _, err := h.Handle(ctx, []byte(`{"action":"enable","node":"`+stuck+`","force":true}`)); err != nil {
		t.Fatal(err)
	}
	if len(stops.stopped) != 1 {
		t.Errorf("StopExecution calls %v, want the stuck drain's", stops.stopped)
	}
	if n := b.node(t, stuck); n.Spec.Unschedulable || ours(n) != 0 {
		t.Error("enable --force left the node cordoned")
	}
	if left, err := b.steps.Store.RunningDrains(ctx); err != nil || len(left) != 0 {
		t.Errorf("running drains %+v (%v), want none", left, err)
	}
}

// stopped is executions that also accepts StopExecution, and then reports
// the execution aborted.
type stopped struct {
	executions
	stopped []string
}

func (s *stopped) StopExecution(_ context.Context, in *sfn.StopExecutionInput, _ ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error) {
	arn := aws.ToString(in.ExecutionArn)
	s.stopped = append(s.stopped, arn)
	for name := range s.executions {
		if strings.HasSuffix(arn, ":"+name) {
			s.executions[name] = sfntypes.ExecutionStatusAborted
		}
	}
	return &sfn.StopExecutionOutput{}, nil
}

// A Terminate whose answer was lost (its task timed out) may have removed
// the machine: Rollback then completes the removal instead of giving the
// node back to the scheduler.
func TestRollbackAfterALandedTerminateCompletes(t *testing.T) {
	b := newBed(t, 0, 2)
	b.steps.StepWait = -1
	ctx := context.Background()
	victim := b.nodes(t)[0]
	s := b.steps1(t, b.start(victim.Name, time.Minute, drain.PolicyAbort), "Prepare", "Cordon", "Surge", "Evict")
	rec, err := b.store.GetDrain(ctx, victim.Name, s.DrainID)
	if err != nil {
		t.Fatal(err)
	}
	rec.Phase = state.PhaseTerminating // what Terminate records before its call
	if err := b.store.UpdateDrain(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	if err := b.group.DeleteInstance(ctx, victim.Spec.ProviderID); err != nil { // the call that landed
		t.Fatal(err)
	}
	s.Error = &drain.ErrorInfo{Error: "States.Timeout", Cause: "Terminate timed out"}
	b.steps1(t, s, "Rollback")
	rec, err = b.store.GetDrain(ctx, victim.Name, s.DrainID)
	if err != nil || rec.Status != state.DrainSucceeded {
		t.Errorf("drain record %+v (%v), want the removal completed", rec, err)
	}
	if _, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{}); err == nil {
		t.Error("the node of a terminated machine was given back")
	}
}

// A PodDisruptionBudget with an empty selector covers every pod of its
// namespace (policy/v1): a Deployment it leaves no disruption is surged.
func TestEmptySelectorBudgetCoversTheNamespace(t *testing.T) {
	b := newBed(t, 0, 1)
	b.steps.StepWait = -1
	ctx := context.Background()
	b.deploy(t, "web", 2, "")
	v := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: b.ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &v, Selector: &metav1.LabelSelector{}},
	}
	if _, err := b.cp.Client.PolicyV1().PodDisruptionBudgets(b.ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.cp.WaitPDBObserved(t, b.ns, "all")
	victim := b.nodes(t)[0].Name
	s := b.steps1(t, b.start(victim, time.Minute, drain.PolicyAbort), "Prepare", "Cordon", "Surge")
	if got := b.replicas(t, "web"); got != 4 {
		t.Errorf("replicas after the first surge round = %d, want 4 (both pods on the node surged)", got)
	}
	b.steps1(t, s, "Rollback")
	if got := b.replicas(t, "web"); got != 2 {
		t.Errorf("replicas after rollback = %d, want 2", got)
	}
}

// roundTripper is a func as an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A person's scale that lands between the drain's read of the count and its
// write taking the surge back is not overwritten: the write is conditioned
// on the resourceVersion read, so it is refused, and the drain reads again
// and leaves the person's count.
func TestSurgeRestoreLosesARaceToAPerson(t *testing.T) {
	b := newBed(t, 0, 1)
	b.steps.StepWait = -1
	b.deploy(t, "solo", 1, "")
	victim := b.podNode(t, "solo")
	var armed atomic.Bool
	cfg := rest.CopyConfig(b.cp.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/deployments/solo/scale") && armed.CompareAndSwap(true, false) {
				b.scaleTo(t, "solo", 4) // the person, just before the drain's write arrives
			}
			return rt.RoundTrip(r)
		})
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.steps.Client = client
	s := b.steps1(t, b.start(victim, 2*time.Minute, drain.PolicyAbort), "Prepare", "Cordon", "Surge")
	if got := b.replicas(t, "solo"); got != 2 {
		t.Fatalf("replicas after the first surge round = %d, want 2", got)
	}
	armed.Store(true)
	b.steps1(t, s, "Rollback")
	if armed.Load() {
		t.Fatal("the rollback wrote no count: the race never happened")
	}
	if got := b.replicas(t, "solo"); got != 4 {
		t.Fatalf("replicas after the rollback = %d, want the person's 4", got)
	}
	rec, err := b.store.GetDrain(context.Background(), victim, s.DrainID)
	if err != nil || len(rec.Surged) != 1 || !strings.Contains(rec.Surged[0].Left, "replicas are 4") {
		t.Errorf("drain record %+v (%v), want the surge left, saying why", rec, err)
	}
}
