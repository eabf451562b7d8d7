package drain_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/state"
)

// podSpec is a one-container pod bound to node, bypassing the scheduler so
// the test knows where it runs.
func podSpec(node string, volumes ...corev1.Volume) corev1.PodSpec {
	return corev1.PodSpec{NodeName: node, Volumes: volumes, Containers: []corev1.Container{{Name: "c", Image: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}
}

// barePod creates a pod no controller owns on node.
func (b *bed) barePod(t *testing.T, name, node string, annotations map[string]string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns, Labels: map[string]string{"app": name}, Annotations: annotations}, Spec: podSpec(node)}
	if _, err := b.cp.Client.CoreV1().Pods(b.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.cp.WaitPodsRunning(t, b.ns, "app="+name, 1, time.Minute)
}

// deployOn creates a one-replica Deployment in ns whose pod runs on node
// with the given annotations and volumes.
func (b *bed) deployOn(t *testing.T, ns, name, node string, annotations map[string]string, volumes ...corev1.Volume) {
	t.Helper()
	one := int32(1)
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}, Spec: podSpec(node, volumes...)}},
	}
	deps := b.cp.Client.AppsV1().Deployments(ns)
	if _, err := deps.Create(context.Background(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ns != b.ns { // the test's namespace goes with the test; others do not
		t.Cleanup(func() { _ = deps.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	b.cp.WaitPodsRunning(t, ns, "app="+name, 1, time.Minute)
}

func (b *bed) annotateNode(t *testing.T, node, key, value string) {
	t.Helper()
	patch := `{"metadata":{"annotations":{"` + key + `":"` + value + `"}}}`
	if _, err := b.cp.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// untouched fails unless the node is schedulable, untainted, free of any
// drain mark, and still runs every pod in want (namespace/name prefixes).
func (b *bed) untouched(t *testing.T, node string, want ...string) {
	t.Helper()
	ctx := context.Background()
	n := b.node(t, node)
	if n.Spec.Unschedulable || ours(n) != 0 {
		t.Errorf("node %s was cordoned or tainted by a refused drain", node)
	}
	if active, ended, err := b.store.NodeDrain(ctx, node); err != nil || active != "" || ended != 0 {
		t.Errorf("node %s drain mark = %q, ended %d, %v; want none", node, active, ended, err)
	}
	pods, err := b.cp.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		found := false
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Namespace+"/"+p.Name, w) && p.DeletionTimestamp == nil {
				found = true
			}
		}
		if !found {
			t.Errorf("pod %s* is gone from node %s", w, node)
		}
	}
}

// TestPrepareRefusesWhatMustNotBeDisrupted: every pod and node annotation
// the scale-down rules protect stops a drain at Prepare, named, with
// nothing changed; safe-to-evict "true" lifts the bare-pod rule; force
// lets the drain through.
func TestPrepareRefusesWhatMustNotBeDisrupted(t *testing.T) {
	b := newBed(t, 0, 2)
	ctx := context.Background()
	victim := b.nodes(t)[0].Name
	ks := "nt-" + b.ns // a kube-system Deployment of this test

	b.barePod(t, "bare", victim, nil)
	b.barePod(t, "bare-but-safe", victim, map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})
	b.deployOn(t, b.ns, "scratch", victim, nil, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	b.deployOn(t, metav1.NamespaceSystem, ks, victim, nil)
	b.deployOn(t, b.ns, "pinned", victim, map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})
	b.deployOn(t, b.ns, "etl", victim, map[string]string{"karpenter.sh/do-not-disrupt": "true"})
	b.deploy(t, "web", 2, "") // movable pods do not count
	all := []string{b.ns + "/bare", b.ns + "/bare-but-safe", b.ns + "/scratch-", "kube-system/" + ks + "-", b.ns + "/pinned-", b.ns + "/etl-"}

	for _, policy := range []string{drain.PolicyAbort, drain.PolicyForce} {
		s := b.start(victim, time.Minute, policy)
		_, err := b.steps.Run(ctx, "Prepare", s)
		if drain.ErrorName(err) != drain.ErrNameNotDisruptable {
			t.Fatalf("Prepare (policy %s): %v, want %s", policy, err, drain.ErrNameNotDisruptable)
		}
		msg := err.Error()
		for _, want := range []string{
			"pod " + b.ns + "/bare: " + planner.RuleNoController,
			"pod " + b.ns + "/scratch-", planner.RuleLocalStorage + ` (volume "data")`,
			"pod kube-system/" + ks + "-", planner.RuleKubeSystem,
			"pod " + b.ns + "/pinned-", planner.RuleNotSafeToEvict,
			"pod " + b.ns + "/etl-", planner.RuleDoNotDisrupt,
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("refusal does not name %q:\n%s", want, msg)
			}
		}
		if strings.Contains(msg, "bare-but-safe") || strings.Contains(msg, "/web-") || strings.Contains(msg, "more") {
			t.Errorf("refusal names what may move:\n%s", msg)
		}
		b.untouched(t, victim, all...)
	}

	// The node's own annotations refuse it too; the list stays readable.
	for _, key := range []string{"cluster-autoscaler.kubernetes.io/scale-down-disabled", "karpenter.sh/do-not-disrupt"} {
		other := b.nodes(t)[1].Name
		b.annotateNode(t, other, key, "true")
		_, err := b.steps.Run(ctx, "Prepare", b.start(other, time.Minute, drain.PolicyAbort))
		if drain.ErrorName(err) != drain.ErrNameNotDisruptable || !strings.Contains(err.Error(), "node "+other+": node annotation "+key) {
			t.Errorf("Prepare of a node annotated %s: %v, want %s naming it", key, err, drain.ErrNameNotDisruptable)
		}
		b.untouched(t, other)
		b.annotateNode(t, other, key, "false")
	}
	b.annotateNode(t, victim, "karpenter.sh/do-not-disrupt", "true")
	_, err := b.steps.Run(ctx, "Prepare", b.start(victim, time.Minute, drain.PolicyAbort))
	if err == nil || !strings.Contains(err.Error(), "node "+victim+": "+planner.RuleNodeDoNotDisrupt) || !strings.Contains(err.Error(), "; and 1 more") {
		t.Errorf("six blockers: %v, want the node's and four pods named, and 1 more", err)
	}
	b.untouched(t, victim, all...)

	// Forced, the drain goes on.
	s := b.start(victim, time.Minute, drain.PolicyAbort)
	s.Force = true
	if s, err = b.steps.Run(ctx, "Prepare", s); err != nil {
		t.Fatalf("forced Prepare: %v", err)
	}
	if active, _, _ := b.store.NodeDrain(ctx, victim); active != s.DrainID {
		t.Errorf("forced Prepare did not claim the node: %q", active)
	}
	if _, err := b.steps.Run(ctx, "Rollback", s); err != nil {
		t.Fatal(err)
	}
}

// TestMachineRefusesWhatMustNotBeDisrupted: a shutdown of a node running a
// bare pod ends in the state machine's Rejected state with NotDisruptable,
// the pod still there; the same request with force removes the node.
func TestMachineRefusesWhatMustNotBeDisrupted(t *testing.T) {
	b := newBed(t, 0, 2)
	ctx := context.Background()
	victim := b.nodes(t)[0].Name
	m := b.machine(t, b.cp.KubeconfigPath, time.Minute, drain.PolicyAbort)
	b.barePod(t, "bare", victim, nil)

	exec, err := m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: victim})
	if err != nil {
		t.Fatal(err)
	}
	out := m.wait(t, exec.ExecutionArn)
	if out.Status != sfntypes.ExecutionStatusFailed || aws.ToString(out.Error) != drain.ErrNameNotDisruptable ||
		!strings.Contains(aws.ToString(out.Cause), "pod "+b.ns+"/bare: "+planner.RuleNoController) {
		t.Fatalf("execution %s %s: %s; want %s naming the bare pod", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause), drain.ErrNameNotDisruptable)
	}
	n := b.node(t, victim)
	if n.Spec.Unschedulable || ours(n) != 0 {
		t.Errorf("node changed by a refused drain: unschedulable %t, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if _, err := b.cp.Client.CoreV1().Pods(b.ns).Get(ctx, "bare", metav1.GetOptions{}); err != nil {
		t.Errorf("bare pod: %v", err)
	}

	// The same request again, once what blocked it is gone, is a new
	// drain, not the refused one "already started".
	other := b.nodes(t)[1].Name
	b.barePod(t, "bare2", other, nil)
	first, err := m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: other})
	if err != nil {
		t.Fatal(err)
	}
	if out := m.wait(t, first.ExecutionArn); out.Status != sfntypes.ExecutionStatusFailed {
		t.Fatalf("execution %s, want refused", out.Status)
	}
	if err := b.cp.Client.CoreV1().Pods(b.ns).Delete(ctx, "bare2", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	again, err := m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: other})
	if err != nil {
		t.Fatal(err)
	}
	if again.AlreadyStarted || again.ExecutionArn == first.ExecutionArn {
		t.Fatalf("the repeated request returned the refused execution %s", again.ExecutionArn)
	}
	dup, err := m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: other})
	if err != nil || !dup.AlreadyStarted || dup.ExecutionArn != again.ExecutionArn {
		t.Errorf("a duplicate of the new request: %+v (%v), want the running %s", dup, err, again.ExecutionArn)
	}
	if out := m.wait(t, again.ExecutionArn); out.Status != sfntypes.ExecutionStatusSucceeded {
		t.Fatalf("repeated request: %s %s: %s", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
	}

	exec, err = m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: victim, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if out = m.wait(t, exec.ExecutionArn); out.Status != sfntypes.ExecutionStatusSucceeded {
		t.Fatalf("forced execution %s %s: %s", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
	}
	if _, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{}); err == nil {
		t.Error("node still exists after a forced shutdown")
	}
}

// TestForceIsCarriedToTheDrain: "force" is accepted on a shutdown only,
// and reaches the execution's state, under a name of its own.
func TestForceIsCarriedToTheDrain(t *testing.T) {
	for _, tc := range []struct{ payload, err string }{
		{`{"action":"shutdown","node":"n","force":true}`, ""},
		{`{"action":"shutdown","node":"n","force":"yes"}`, "force"},
		{`{"action":"enable","force":true}`, `give "node"`},
		{`{"step":"Prepare","state":{},"force":true}`, `only "step" and "state"`},
	} {
		ev, err := drain.ParseEvent([]byte(tc.payload))
		switch {
		case tc.err == "" && (err != nil || !ev.Force):
			t.Errorf("%s: %+v, %v; want force", tc.payload, ev, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.payload, err, tc.err)
		}
	}

	sfnc := &recordingSFN{}
	st := &drain.Starter{SFN: sfnc, StateMachineArn: "arn:aws:states:eu-west-1:1:stateMachine:drain",
		Store: state.NewMemory("c"), Timeout: time.Minute, Policy: drain.PolicyAbort}
	ctx := context.Background()
	plain, err := st.Shutdown(ctx, drain.ShutdownRequest{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	forced, err := st.Shutdown(ctx, drain.ShutdownRequest{Node: "n", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Name == forced.Name {
		t.Errorf("forced and plain requests share the execution name %s", plain.Name)
	}
	if len(sfnc.inputs) != 2 || sfnc.inputs[0].Force || !sfnc.inputs[1].Force {
		t.Errorf("execution inputs = %+v, want force only on the second", sfnc.inputs)
	}
}

type recordingSFN struct{ inputs []drain.State }

func (r *recordingSFN) StartExecution(_ context.Context, in *sfn.StartExecutionInput, _ ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	var s drain.State
	if err := json.Unmarshal([]byte(aws.ToString(in.Input)), &s); err != nil {
		return nil, err
	}
	r.inputs = append(r.inputs, s)
	return &sfn.StartExecutionOutput{ExecutionArn: aws.String("arn:" + aws.ToString(in.Name))}, nil
}

func (r *recordingSFN) DescribeExecution(context.Context, *sfn.DescribeExecutionInput, ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	return &sfn.DescribeExecutionOutput{}, nil
}

func (r *recordingSFN) StopExecution(context.Context, *sfn.StopExecutionInput, ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error) {
	return nil, errors.New("not expected")
}
