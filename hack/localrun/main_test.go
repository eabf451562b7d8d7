package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/state"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// syncBuffer is written by the child's output copiers while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nodetide.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRefusesWhatTheDrainCannotShare: the checks come before anything is
// built or started, and each error names what is wrong.
func TestRefusesWhatTheDrainCannotShare(t *testing.T) {
	memory := writeConfig(t, `cluster: {name: c, kubernetes: {kubeconfig: /nonexistent}}
state: {memory: {}}
nodeGroups:
  - {name: g, provider: kwok, minSize: 0, maxSize: 1, kwok: {template: {allocatable: {cpu: "1", memory: 1Gi}}}}
`)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"state in memory", []string{"--config", memory}, memory + ": state: the drain runs in another process, so state must be state.dynamodb"},
		{"kubeconfig flag", []string{"--config=" + memory, "--kubeconfig", "/k"}, "--kubeconfig: put the kubeconfig in the config"},
		{"config without a file", []string{"--once", "--config"}, "--config: needs a file"},
		{"missing config", []string{"--config", filepath.Join(t.TempDir(), "none.yaml")}, "none.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(t.Context(), tc.args, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut.String(), tc.want)
			}
			if out.Len() != 0 || strings.Contains(errOut.String(), "state machine at") {
				t.Errorf("started something: stdout %q, stderr %q", out.String(), errOut.String())
			}
		})
	}
}

// TestHelpStartsNothing: -h says what the command needs, and needs no
// config.
func TestHelpStartsNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, arg := range []string{"-h", "--help"} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), []string{"--interval", "5s", arg}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "state.dynamodb") || errOut.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, out.String(), errOut.String())
		}
	}
}

// TestRemovalsDrainThroughTheLocalStateMachine: an empty node of a group
// that may shrink to zero becomes unneeded, and the run loop's removal is a
// drain execution of the local state machine that deletes the node.
func TestRemovalsDrainThroughTheLocalStateMachine(t *testing.T) {
	testbed.Integration(t, "builds the CLI and the drain function and starts the local Step Functions service")
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	db := testbed.DynamoDB(t)
	ctx := t.Context()
	table := "localrun-" + ns
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, fmt.Sprintf(`cluster: {name: %[1]s, kubernetes: {kubeconfig: %[2]s}}
state: {dynamodb: {table: %[3]s, endpoint: %[4]s}}
nodeGroups:
  - name: %[1]s
    provider: kwok
    minSize: 0
    maxSize: 2
    kwok: {template: {allocatable: {cpu: "2", memory: 8Gi, pods: "110"}, labels: {pool: %[1]s}}}
scaleDown: {unneededTime: 2s, delayAfterAdd: 0s}
drain: {timeout: 2m, onTimeout: abort}
`, ns, cp.KubeconfigPath, table, db.Endpoint))
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := kwok.BlockOf(cfg.NodeGroups[0].Entry()).Template.Planner()
	if err != nil {
		t.Fatal(err)
	}
	node := ns + "-0"
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, kwok.NodeObject(ns, node, tpl), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	runCtx, stop := context.WithCancel(ctx)
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(runCtx, []string{"--config", path, "--interval", "2s"}, &out, &errOut) }()

	// localrun builds the drain function before its first drain: on a
	// loaded two-core machine, beside the other packages' tests, that build
	// alone has taken over five minutes.
	deadline := time.Now().Add(15 * time.Minute)
	for {
		_, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if strings.Contains(errOut.String(), "scale-down planned, not acted on") {
			stop()
			<-done
			t.Fatalf("the removal was not sent to the local state machine:\n%s", errOut.String())
		}
		select {
		case code := <-done:
			t.Fatalf("localrun ended (exit %d) with the node still there:\n%s", code, errOut.String())
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			<-done
			t.Fatalf("node %s not removed in 15m (err %v):\n%s", node, err, errOut.String())
		}
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after SIGTERM:\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "local drain state machine at http") || !strings.Contains(errOut.String(), "1 removals") {
		t.Errorf("stderr does not show the local state machine and the removal:\n%s", errOut.String())
	}
}
