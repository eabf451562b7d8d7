package drain_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodetide/nodetide/internal/metricstest"
	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/state"
)

const aslFile = "../../functions/drain/statemachine.asl.json"

var bootstrap struct {
	once sync.Once
	path string
	err  error
}

// drainBootstrap builds the drain function for this machine, once per test
// binary, as the RIE runs it.
func drainBootstrap(t *testing.T) string {
	t.Helper()
	bootstrap.once.Do(func() {
		dir, err := os.MkdirTemp("", "nodetide-drain-bootstrap-")
		if err != nil {
			bootstrap.err = err
			return
		}
		bootstrap.path = filepath.Join(dir, "bootstrap")
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrap.path, "../../functions/drain")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			bootstrap.err = fmt.Errorf("build drain bootstrap: %v\n%s", err, out)
		}
	})
	if bootstrap.err != nil {
		t.Fatal(bootstrap.err)
	}
	return bootstrap.path
}

func TestDefinitionIsValidASL(t *testing.T) {
	if err := sfnlocal.ValidateASL(context.Background(), aslFile); err != nil {
		t.Fatal(err)
	}
}

// machine is the drain state machine run locally: its task states invoke
// the drain function's bootstrap under the Lambda Runtime Interface
// Emulator, against the test's kwok group and DynamoDB on dynalite.
type machine struct {
	svc     *sfnlocal.Service
	client  *sfn.Client
	starter *drain.Starter
	store   *state.DynamoDB
}

func (b *bed) machine(t *testing.T, kubeconfig string, timeout time.Duration, policy string) *machine {
	t.Helper()
	ctx := context.Background()
	db := testbed.DynamoDB(t)
	dbClient := db.Client(t)
	table := "drain-" + b.pool
	if err := state.CreateTable(ctx, dbClient, table); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`cluster: {name: %[1]s, kubernetes: {kubeconfig: %[2]s}}
state: {dynamodb: {table: %[3]s, endpoint: %[4]s}}
nodeGroups:
  - name: %[1]s
    provider: kwok
    minSize: 0
    maxSize: 5
    kwok: {template: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}, labels: {pool: %[1]s}}}
`, b.pool, kubeconfig, table, db.Endpoint)
	svc, err := sfnlocal.Start(ctx, sfnlocal.Options{
		Functions: []sfnlocal.Function{{Name: "drain", Bootstrap: drainBootstrap(t),
			Env: []string{"NODETIDE_CONFIG=" + cfg, "AWS_REGION=us-east-1"}}},
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
	store := state.NewDynamoDB(dbClient, table, b.pool)
	client := svc.Client(ctx)
	return &machine{svc: svc, client: client, store: store, starter: &drain.Starter{
		SFN: client, StateMachineArn: svc.StateMachineArn["drain"], Store: store,
		Timeout: timeout, Policy: policy, Surge: true,
	}}
}

// wait polls the execution until it ends.
func (m *machine) wait(t *testing.T, arn string) *sfn.DescribeExecutionOutput {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		out, err := m.client.DescribeExecution(context.Background(), &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
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

func (b *bed) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := b.cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *bed) replicas(t *testing.T, name string) int32 {
	t.Helper()
	dep, err := b.cp.Client.AppsV1().Deployments(b.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *dep.Spec.Replicas
}

func (b *bed) podNode(t *testing.T, app string) string {
	t.Helper()
	pods, err := b.cp.Client.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of %s: %v", app, err)
	}
	return pods.Items[0].Spec.NodeName
}

// TestMachineDrainsAndRemoves is the happy path through the real state
// machine: the single-replica Deployment keeps a Ready replica throughout,
// the node is terminated and deleted, the group shrinks, and a duplicate
// shutdown request joins the running execution.
func TestMachineDrainsAndRemoves(t *testing.T) {
	b := newBed(t, 0, 2)
	m := b.machine(t, b.cp.KubeconfigPath, 2*time.Minute, drain.PolicyAbort)
	b.deploy(t, "solo", 1, "")
	b.deploy(t, "web", 2, "")
	victim := b.podNode(t, "solo")
	stop := b.readyReplicasWatch(t, "solo")
	ctx := context.Background()

	start := time.Now()
	first, err := m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: victim})
	if err != nil {
		t.Fatal(err)
	}
	second, err := m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: victim})
	if err != nil {
		t.Fatal(err)
	}
	if second.ExecutionArn != first.ExecutionArn || !second.AlreadyStarted {
		t.Errorf("duplicate shutdown started %s (already %t), want the running %s", second.ExecutionArn, second.AlreadyStarted, first.ExecutionArn)
	}
	out := m.wait(t, first.ExecutionArn)
	elapsed := time.Since(start)
	lowest := stop()
	if out.Status != sfntypes.ExecutionStatusSucceeded {
		t.Fatalf("execution %s: %s %s", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
	}
	t.Logf("drain of %s: start to node removed in %s", victim, elapsed.Round(10*time.Millisecond))
	if lowest < 1 {
		t.Errorf("the single-replica Deployment had %d Ready replicas at some moment", lowest)
	}
	if got := b.replicas(t, "solo"); got != 1 {
		t.Errorf("solo replicas = %d, want 1 restored", got)
	}
	if _, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{}); err == nil {
		t.Error("node still exists")
	}
	if n, _ := b.group.TargetSize(ctx); n != 1 {
		t.Errorf("group target = %d, want 1", n)
	}
	b.cp.WaitPodsRunning(t, b.ns, "app=web", 2, time.Minute)
	active, ended, err := m.store.NodeDrain(ctx, victim)
	if err != nil || active != "" || ended != 1 {
		t.Errorf("node drain mark: %q ended %d (%v)", active, ended, err)
	}
	// The drain function, wired as deployed, records the drain on the node.
	if got := reasons(b.nodeEvents(t, victim)); !slices.Equal(got, []string{"DrainStarted", "ScaleDown"}) {
		t.Errorf("events on %s: %v, want [DrainStarted ScaleDown]", victim, got)
	}
}

// TestMachinePDBAbortRollsBack: a PDB that allows no disruption holds the
// pods; the drain never violates it and at the deadline rolls back.
func TestMachinePDBAbortRollsBack(t *testing.T) {
	b := newBed(t, 0, 1)
	m := b.machine(t, b.cp.KubeconfigPath, 6*time.Second, drain.PolicyAbort)
	b.deploy(t, "guarded", 2, "")
	b.pdb(t, "guarded", "guarded", 2)
	victim := b.nodes(t)[0].Name
	stop := b.readyReplicasWatch(t, "guarded")
	exec, err := m.starter.Shutdown(context.Background(), drain.ShutdownRequest{Node: victim})
	if err != nil {
		t.Fatal(err)
	}
	out := m.wait(t, exec.ExecutionArn)
	lowest := stop()
	if out.Status != sfntypes.ExecutionStatusFailed || aws.ToString(out.Error) != "DrainTimeout" {
		t.Fatalf("execution %s %s: %s", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
	}
	if lowest < 2 {
		t.Errorf("the PDB (minAvailable 2) was violated: %d Ready at some moment", lowest)
	}
	n := b.node(t, victim)
	if n.Spec.Unschedulable || ours(n) != 0 {
		t.Errorf("node not restored: unschedulable %t, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if got := b.replicas(t, "guarded"); got != 2 {
		t.Errorf("guarded replicas = %d, want 2 restored", got)
	}
	b.cp.WaitPodsRunning(t, b.ns, "app=guarded", 2, time.Minute)
	if got := reasons(b.nodeEvents(t, victim)); !slices.Equal(got, []string{"DrainStarted", "DrainRolledBack"}) {
		t.Errorf("events on %s: %v, want [DrainStarted DrainRolledBack]", victim, got)
	}

	// The drain function's own output, read as CloudWatch reads it.
	published, err := metricstest.Parse([]byte(m.svc.FunctionLogs("drain")), b.pool)
	if err != nil {
		t.Fatal(err)
	}
	if published.Sum(metrics.DrainsStarted, nil) != 1 || published.Sum(metrics.DrainsRolledBack, nil) != 1 ||
		len(published[metrics.DrainDuration]) != 1 || published.Has(metrics.DrainsSucceeded, nil) {
		t.Errorf("the drain function published %v, want one drain started and rolled back, with its duration", published)
	}
}

// TestMachinePDBForceRemoves: with policy force the deadline deletes what
// the PDB still holds and the node goes.
func TestMachinePDBForceRemoves(t *testing.T) {
	b := newBed(t, 0, 1)
	m := b.machine(t, b.cp.KubeconfigPath, 6*time.Second, drain.PolicyForce)
	b.deploy(t, "guarded", 1, "")
	b.pdb(t, "guarded", "guarded", 1)
	victim := b.nodes(t)[0].Name
	exec, err := m.starter.Shutdown(context.Background(), drain.ShutdownRequest{Node: victim})
	if err != nil {
		t.Fatal(err)
	}
	out := m.wait(t, exec.ExecutionArn)
	if out.Status != sfntypes.ExecutionStatusSucceeded {
		t.Fatalf("execution %s %s: %s", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
	}
	if _, err := b.cp.Client.CoreV1().Nodes().Get(context.Background(), victim, metav1.GetOptions{}); err == nil {
		t.Error("node still exists")
	}
	if got := b.replicas(t, "guarded"); got != 1 {
		t.Errorf("guarded replicas = %d, want 1", got)
	}
}

// TestMachineTerminateFailureRollsBack: the drain function may not delete
// nodes (its RBAC lacks it), so Terminate fails; Rollback leaves the node
// schedulable and the surged Deployment at its count.
func TestMachineTerminateFailureRollsBack(t *testing.T) {
	b := newBed(t, 0, 2)
	kubeconfig := b.restrictedKubeconfig(t)
	m := b.machine(t, kubeconfig, 2*time.Minute, drain.PolicyAbort)
	b.deploy(t, "solo", 1, "")
	victim := b.podNode(t, "solo")
	exec, err := m.starter.Shutdown(context.Background(), drain.ShutdownRequest{Node: victim})
	if err != nil {
		t.Fatal(err)
	}
	out := m.wait(t, exec.ExecutionArn)
	if out.Status != sfntypes.ExecutionStatusFailed || aws.ToString(out.Error) != drain.ErrNameForbidden {
		t.Fatalf("execution %s %s: %s", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
	}
	n := b.node(t, victim)
	if n.Spec.Unschedulable || ours(n) != 0 {
		t.Errorf("node not restored: unschedulable %t, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if got := b.replicas(t, "solo"); got != 1 {
		t.Errorf("solo replicas = %d, want 1", got)
	}
	rec, err := m.store.GetDrain(context.Background(), victim, exec.Name)
	if err != nil || rec.Status != state.DrainRolledBack || rec.Error == "" {
		t.Errorf("drain record = %+v (%v), want rolled back with the reason", rec, err)
	}
}

// restrictedKubeconfig is a ServiceAccount's kubeconfig with what the drain
// needs except deleting nodes.
func (b *bed) restrictedKubeconfig(t *testing.T) string {
	t.Helper()
	return b.kubeconfigWith(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"get", "list", "watch"}},
	})
}

// kubeconfigWith is a ServiceAccount's kubeconfig allowed only rules.
func (b *bed) kubeconfigWith(t *testing.T, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	c := b.cp.Client
	name := b.pool + "-drain"
	if _, err := c.CoreV1().ServiceAccounts(b.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "drain"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "drain", Namespace: b.ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = c.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	tok, err := c.CoreV1().ServiceAccounts(b.ns).CreateToken(ctx, "drain", &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.LoadFromFile(b.cp.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	for n, cl := range admin.Clusters {
		kc.Clusters[n] = cl
		kc.AuthInfos["drain"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
		kc.Contexts["drain"] = &clientcmdapi.Context{Cluster: n, AuthInfo: "drain"}
	}
	kc.CurrentContext = "drain"
	path := filepath.Join(t.TempDir(), "drain.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
