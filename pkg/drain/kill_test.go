package drain_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// childrenOf lists the processes whose parent is one of parents, read from
// /proc: the RIE runs the function's bootstrap as its child.
func childrenOf(t *testing.T, parents []int) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if f[0] == "Z" || !slices.Contains(parents, ppid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		out = append(out, pid)
	}
	return out
}

// The drain function killed (SIGKILL) in the middle of a step, as an
// out-of-memory kill or a crashed host would end it: the state machine
// carries the drain on to the node's removal or to a clean rollback, and
// nothing is left holding the node.
func TestFaultFunctionKilledMidStep(t *testing.T) {
	b, m, victim, exec := surgeHeld(t)
	ctx := context.Background()
	rie := m.svc.FunctionPIDs("drain")
	killed := childrenOf(t, rie)
	if len(killed) == 0 {
		t.Fatalf("no function process under the RIEs %v", rie)
	}
	for _, pid := range killed {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill function process %d: %v", pid, err)
		}
	}
	t.Logf("killed function processes %v under the RIEs %v", killed, rie)
	// Room for the replacement, so a drain carried on can finish.
	if err := b.group.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}

	out := m.wait(t, exec.ExecutionArn)
	hist, err := m.client.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(exec.ExecutionArn)})
	if err != nil {
		t.Fatal(err)
	}
	var failures []string
	for _, ev := range hist.Events {
		if d := ev.LambdaFunctionFailedEventDetails; d != nil {
			failures = append(failures, aws.ToString(d.Error))
		}
		if d := ev.TaskFailedEventDetails; d != nil {
			failures = append(failures, aws.ToString(d.Error))
		}
	}
	t.Logf("execution %s %s; failed task tries: %v", out.Status, aws.ToString(out.Error), failures)
	if len(failures) == 0 {
		t.Error("no task try failed: the kill did not hit a step")
	}
	switch {
	case out.Status == sfntypes.ExecutionStatusSucceeded:
		if _, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{}); err == nil {
			t.Errorf("the drain succeeded but node %s is still there", victim)
		}
		if got := b.replicas(t, "solo"); got != 1 {
			t.Errorf("solo replicas = %d, want 1", got)
		}
		if active, _, err := m.store.NodeDrain(ctx, victim); err != nil || active != "" {
			t.Errorf("node %s still held by drain %q (%v)", victim, active, err)
		}
	case out.Status == sfntypes.ExecutionStatusFailed && aws.ToString(out.Error) != "RollbackFailed":
		b.assertRestored(t, m.store, victim, "solo", 1)
	default:
		t.Fatalf("execution %s %s: %s; want removed or rolled back", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
	}
}
