package setup_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/setup"
	"github.com/nodetide/nodetide/pkg/state"
)

// live is one test's kwok group on the shared control plane, its state table
// on dynalite, and the config naming both, as the functions are wired from.
type live struct {
	cp   *testbed.ControlPlane
	ns   string
	pool string // the group's name and pool label: the namespace's
	db   *testbed.Dynalite
	yaml string
	cfg  *config.Config
}

// newLive makes the group (minSize..maxSize) and its table; settings are the
// rest of the config (scaleUp, scaleDown, drain), as YAML.
func newLive(t *testing.T, table string, minSize, maxSize int, settings string) *live {
	t.Helper()
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + ns})
	})
	db := testbed.DynamoDB(t)
	table += "-" + ns
	if err := state.CreateTable(context.Background(), db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`cluster: {name: %[1]s, kubernetes: {kubeconfig: %[2]s}}
state: {dynamodb: {table: %[3]s, endpoint: %[4]s}}
nodeGroups:
  - name: %[1]s
    provider: kwok
    minSize: %[5]d
    maxSize: %[6]d
    kwok: {template: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}, labels: {pool: %[1]s}}}
%[7]s`, ns, cp.KubeconfigPath, table, db.Endpoint, minSize, maxSize, settings)
	path := filepath.Join(t.TempDir(), "nodetide.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return &live{cp: cp, ns: ns, pool: ns, db: db, yaml: yaml, cfg: cfg}
}

// drainMachine runs the drain state machine locally for this config (its
// steps in the drain function under the Lambda RIE) and points the
// functions wired in this test at it, as the stack's environment does.
func (l *live) drainMachine(t *testing.T) *sfnlocal.Service {
	t.Helper()
	svc, err := sfnlocal.StartDrain(context.Background(), "", l.yaml, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("drain function output:\n%s", svc.FunctionLogs("drain"))
		}
		_ = svc.Stop()
	})
	t.Setenv(setup.EnvDrainStateMachine, svc.StateMachineArn[sfnlocal.DrainStateMachine])
	t.Setenv("AWS_ENDPOINT_URL_SFN", svc.Endpoint)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	return svc
}
