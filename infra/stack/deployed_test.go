package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// TestDeployedDefinitionDrains runs what deploys: the state machine
// definition taken out of the synthesised template (not the source file),
// on the local Step Functions interpreter with its tasks in the drain
// bootstrap under the Lambda RIE, against the local control plane and
// dynalite. A drain completes, and a drain the function may not finish
// (Terminate of a machine outside the group's bounds) rolls back.
func TestDeployedDefinitionDrains(t *testing.T) {
	f := synth(t, options(t, map[string]string{}), false)
	var def string
	for _, sm := range f.resources("AWS::StepFunctions::StateMachine") {
		def, _ = props(sm)["DefinitionString"].(string)
	}
	if def == "" {
		t.Fatal("no state machine in the template")
	}
	defFile := filepath.Join(t.TempDir(), "deployed.asl.json")
	if err := os.WriteFile(defFile, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}

	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	db := testbed.DynamoDB(t)
	table := "deployed-" + ns
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	// min 1: draining the last node is refused, even with belowMin, since
	// that is the provider's own minimum; nothing may be left changed.
	cfg := fmt.Sprintf(`cluster: {name: %[1]s, kubernetes: {kubeconfig: %[2]s}}
state: {dynamodb: {table: %[3]s, endpoint: %[4]s}}
nodeGroups:
  - name: %[1]s
    provider: kwok
    minSize: 1
    maxSize: 5
    kwok: {template: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}, labels: {pool: %[1]s}}}
`, ns, cp.KubeconfigPath, table, db.Endpoint)
	tpl := snapshot.Template{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Labels: map[string]string{"pool": ns}}
	group := kwok.New(cp.Client, ns, 1, 5, tpl)
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + ns})
	})
	if err := group.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}

	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrap, "./functions/drain")
	build.Dir = "../.." // the main module
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build drain: %v\n%s", err, out)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := sfnlocal.Start(ctx, sfnlocal.Options{
		Functions:     []sfnlocal.Function{{Name: "drain", Bootstrap: bootstrap, Env: []string{"NODETIDE_CONFIG=" + cfg}}},
		StateMachines: []sfnlocal.StateMachine{{Name: "drain", DefinitionFile: defFile}},
		MaxWait:       time.Second,
		Root:          root,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	store := state.NewDynamoDB(db.Client(t), table, ns)
	client := svc.Client(ctx)
	starter := &drain.Starter{SFN: client, StateMachineArn: svc.StateMachineArn["drain"], Store: store, Timeout: time.Minute, Policy: drain.PolicyAbort, Surge: true}
	wait := func(arn string) *sfn.DescribeExecutionOutput {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			out, err := client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != sfntypes.ExecutionStatusRunning {
				return out
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("execution %s still running", arn)
		return nil
	}
	nodes := func() []corev1.Node {
		list, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + ns})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}

	// A drain that completes: 2 nodes, min 1.
	first := nodes()[0].Name
	exec1, err := starter.Shutdown(ctx, drain.ShutdownRequest{Node: first})
	if err != nil {
		t.Fatal(err)
	}
	if out := wait(exec1.ExecutionArn); out.Status != sfntypes.ExecutionStatusSucceeded {
		t.Fatalf("drain of %s: %s %s: %s\n%s", first, out.Status, aws.ToString(out.Error), aws.ToString(out.Cause), svc.FunctionLogs("drain"))
	}
	if n := len(nodes()); n != 1 {
		t.Fatalf("group has %d nodes after the drain, want 1", n)
	}

	// A drain below the provider's own min is refused up front.
	last := nodes()[0].Name
	exec2, err := starter.Shutdown(ctx, drain.ShutdownRequest{Node: last, BelowMin: true})
	if err != nil {
		t.Fatal(err)
	}
	out := wait(exec2.ExecutionArn)
	if out.Status != sfntypes.ExecutionStatusFailed || aws.ToString(out.Error) != drain.ErrNameBelowMinSize {
		t.Fatalf("drain of the last node: %s %s: %s", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
	}
	n, err := cp.Client.CoreV1().Nodes().Get(ctx, last, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable {
		t.Error("the node is cordoned after the refusal")
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == drain.TaintKey {
			t.Error("the draining taint is on the node after the refusal")
		}
	}
}
