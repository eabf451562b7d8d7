package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/state"
)

// TestShutdownAndEnable drives `nodetide shutdown --wait` through the drain
// state machine run locally, and `nodetide enable`.
func TestShutdownAndEnable(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	pool := ns
	db := testbed.DynamoDB(t)
	ctx := context.Background()
	table := "cli-" + pool
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`cluster: {name: %[1]s, kubernetes: {kubeconfig: %[2]s}}
state: {dynamodb: {table: %[3]s, endpoint: %[4]s}}
nodeGroups:
  - name: %[1]s
    provider: kwok
    minSize: 0
    maxSize: 3
    kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}, labels: {pool: %[1]s}}}
`, pool, cp.KubeconfigPath, table, db.Endpoint)
	cfg := writeFile(t, "nodetide.yaml", yaml)
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + pool})
	})
	// An acting command says what it did in one line on stdout; the log
	// (JSON) is on stderr only when asked for.
	if out, errOut, code := nodetide(t, "add", pool, "2", "--config", cfg); code != 0 || out != "node group "+pool+": 2 node(s) added\n" || errOut != "" {
		t.Fatalf("add: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + pool})
	if err != nil || len(nodes.Items) != 2 {
		t.Fatalf("nodes: %v %d", err, len(nodes.Items))
	}
	victim, other := nodes.Items[0].Name, nodes.Items[1].Name

	svc, err := sfnlocal.StartDrain(ctx, "", yaml, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	t.Setenv("NODETIDE_DRAIN_STATE_MACHINE_ARN", svc.StateMachineArn[sfnlocal.DrainStateMachine])
	t.Setenv("AWS_ENDPOINT_URL_SFN", svc.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_REGION", "us-east-1")

	if _, errOut, code := nodetide(t, "shutdown", "no-such-node", "--config", cfg); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("shutdown of a missing node: exit %d, %s", code, errOut)
	}
	if _, errOut, code := nodetide(t, "shutdown", victim, "--policy", "later", "--config", cfg); code == 0 || !strings.Contains(errOut, `--policy "later"`) {
		t.Errorf("bad policy: exit %d, %s", code, errOut)
	}
	out, errOut, code := nodetide(t, "shutdown", victim, "--wait", "--config", cfg)
	if code != 0 {
		t.Fatalf("shutdown: exit %d\n%s\n%s\n%s", code, out, errOut, svc.FunctionLogs("drain"))
	}
	if !strings.HasPrefix(out, "node "+victim+": drain started (execution arn:") || !strings.Contains(out, "node "+victim+": drained and removed") || !strings.Contains(out, "SUCCEEDED") {
		t.Errorf("shutdown output:\n%s", out)
	}
	if _, err := cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{}); err == nil {
		t.Error("node still exists after shutdown")
	}

	if err := k8s.Cordon(ctx, cp.Client, other, ""); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = nodetide(t, "enable", other, "--config", cfg)
	if code != 0 || !strings.Contains(out, other+": schedulable") {
		t.Fatalf("enable: exit %d: %s %s", code, out, errOut)
	}
	n, err := cp.Client.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
	if err != nil || n.Spec.Unschedulable {
		t.Errorf("node %s still unschedulable (%v)", other, err)
	}
}
