package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/statusmap"
)

// ages matches the "(12s ago)" and "(in 3m)" that a table writes as of now.
var ages = regexp.MustCompile(`\((in )?\d+[smhd]( ago)?\)`)

// TestStatusFromConfigMapWithoutAWS: a cycle writes the status ConfigMap;
// `nodetide status` with no AWS credentials and no DynamoDB reachable prints
// it, says where it read it, and prints what the ConfigMap's text says.
func TestStatusFromConfigMapWithoutAWS(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	common := fmt.Sprintf(`cluster: {name: %[1]s, kubernetes: {kubeconfig: %[2]s}}
nodeGroups:
  - name: %[1]s
    provider: kwok
    minSize: 0
    maxSize: 3
    kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}, labels: {pool: %[1]s}}}
status: {configMap: {namespace: %[1]s, name: nodetide-status}}
`, ns, cp.KubeconfigPath)
	runCfg := writeFile(t, "run.yaml", common+"state: {memory: {}}\n")
	// A table no one serves: reading it fails at once.
	statusCfg := writeFile(t, "status.yaml", common+"state: {dynamodb: {table: none, region: eu-west-1, endpoint: 'http://127.0.0.1:1'}}\n")
	if _, errOut, code := nodetide(t, "run", "--once", "--config", runCfg); code != 0 {
		t.Fatalf("run --once: exit %d: %s", code, errOut)
	}
	t.Cleanup(func() { // uninstall's test counts every managed ConfigMap
		_ = cp.Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), "nodetide-status", metav1.DeleteOptions{})
	})
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("HOME", t.TempDir()) // no ~/.aws either

	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "nodetide-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{"auto", "configmap"} {
		out, errOut, code := nodetide(t, "status", "--config", statusCfg, "--from", from)
		if code != 0 {
			t.Fatalf("--from %s: exit %d: %s", from, code, errOut)
		}
		if want := "Read from ConfigMap " + ns + "/nodetide-status, written "; !strings.Contains(errOut, want) {
			t.Errorf("--from %s: stderr %q does not say %q", from, errOut, want)
		}
		if got, want := ages.ReplaceAllString(out, "(age)"), ages.ReplaceAllString(cm.Data[statusmap.KeyText], "(age)"); got != want {
			t.Errorf("--from %s printed:\n%s\nthe ConfigMap's text is:\n%s", from, got, want)
		}
		if !strings.Contains(out, "Cluster:      "+ns) || !strings.Contains(out, ns+"  kwok") {
			t.Errorf("--from %s: not the cluster's status:\n%s", from, out)
		}
	}
	if _, errOut, code := nodetide(t, "status", "--config", statusCfg, "--from", "dynamodb"); code == 0 {
		t.Errorf("--from dynamodb with no table reachable succeeded: %s", errOut)
	}
	if _, errOut, code := nodetide(t, "status", "--config", statusCfg, "--from", "etcd"); code == 0 || !strings.Contains(errOut, `--from "etcd"`) {
		t.Errorf("--from etcd: exit %d: %s", code, errOut)
	}
}
