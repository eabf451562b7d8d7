package drain_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/sfnlocal"
)

// proc identifies one process: its pid, its parent, when it started (in
// clock ticks since boot, so a pid handed to a later process reads
// differently) and the file it runs.
type proc struct {
	pid, ppid int
	start     uint64
	exe       string
}

// readProc reads pid's identity from /proc. A zombie has ended: it is an
// error like a process that is gone.
func readProc(pid int) (proc, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, fmt.Errorf("process %d: %w", pid, err)
	}
	// pid (comm) state ppid … starttime (field 22) …; comm may hold spaces
	// and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return proc{}, fmt.Errorf("process %d: malformed stat %q", pid, s)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 20 {
		return proc{}, fmt.Errorf("process %d: malformed stat %q", pid, s)
	}
	if f[0] == "Z" || f[0] == "X" {
		return proc{}, fmt.Errorf("process %d has ended (state %s)", pid, f[0])
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return proc{}, fmt.Errorf("process %d: parent: %w", pid, err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return proc{}, fmt.Errorf("process %d: start time: %w", pid, err)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return proc{}, fmt.Errorf("process %d: executable: %w", pid, err)
	}
	return proc{pid: pid, ppid: ppid, start: start, exe: exe}, nil
}

// realPath is path with its symlinks resolved, as /proc/<pid>/exe names a
// program.
func realPath(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// childrenRunning lists the live processes whose parent is one of parents
// and that run the program exe. Each parent must itself run parentExe: a
// parent's pid taken over by another program would otherwise offer that
// program's children. A process that ends while the list is read is left
// out.
func childrenRunning(parents []int, parentExe, exe string) ([]proc, error) {
	var ps []proc
	for _, pid := range parents {
		p, err := readProc(pid)
		if err != nil {
			return nil, fmt.Errorf("parent %d: %w", pid, err)
		}
		if p.exe != parentExe {
			return nil, fmt.Errorf("parent %d runs %s, not %s", pid, p.exe, parentExe)
		}
		ps = append(ps, p)
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []proc
	for _, path := range stats {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		c, err := readProc(pid)
		if err != nil {
			continue // ended meanwhile, or not ours to read
		}
		if c.exe != exe || !slices.ContainsFunc(ps, func(p proc) bool { return p.pid == c.ppid }) {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// killExactly sends SIGKILL to the process want identifies and to no
// other. It holds the process by a pidfd, checks through /proc that the
// pid is still want's process, then checks the pidfd's process is alive
// with that pid (so it is the process just checked: a live process keeps
// its pid) and signals it through the pidfd, which never reaches a later
// holder of the pid. Anything else is an error, and nothing is signalled.
func killExactly(want proc) error {
	fd, err := unix.PidfdOpen(want.pid, 0)
	if err != nil {
		return fmt.Errorf("hold process %d: %w", want.pid, err)
	}
	defer unix.Close(fd)
	now, err := readProc(want.pid)
	if err != nil {
		return fmt.Errorf("recheck: %w", err)
	}
	if now != want {
		return fmt.Errorf("pid %d is now %+v, not the process chosen %+v", want.pid, now, want)
	}
	held, err := pidfdPID(fd)
	if err != nil {
		return err
	}
	if held != want.pid {
		return fmt.Errorf("the process held as %d has ended (pidfd reports pid %d)", want.pid, held)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		return fmt.Errorf("kill process %d: %w", want.pid, err)
	}
	return nil
}

// pidfdPID is the pid of the process a pidfd holds, from its fdinfo: -1
// once that process has ended.
func pidfdPID(fd int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		return 0, fmt.Errorf("pidfd %d: %w", fd, err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0, fmt.Errorf("pidfd %d: Pid %q: %w", fd, v, err)
			}
			return pid, nil
		}
	}
	return 0, fmt.Errorf("pidfd %d: no Pid in its fdinfo", fd)
}

// echoer is a child process (cat) that answers every line it is sent, so
// a test can tell for certain, without waiting, that it still runs.
type echoer struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	proc proc
}

func startEchoer(t *testing.T) *echoer {
	t.Helper()
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e := &echoer{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Once it answers, it runs cat (not the forked copy of this process).
	if !e.alive() {
		t.Fatal("cat did not answer")
	}
	if e.proc, err = readProc(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return e
}

// alive sends a line and reads it back; a killed cat answers nothing.
func (e *echoer) alive() bool {
	if _, err := io.WriteString(e.in, "ping\n"); err != nil {
		return false
	}
	line, err := e.out.ReadString('\n')
	return err == nil && line == "ping\n"
}

// TestKillExactly: the process chosen is killed; a process whose identity
// is no longer the one chosen (its pid taken over by a later process,
// another program, another parent, or ended) is refused and left running.
func TestKillExactly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *proc)
		killed bool
	}{
		{"the process chosen", func(*proc) {}, true},
		{"pid taken over by a later process", func(p *proc) { p.start-- }, false},
		{"another program", func(p *proc) { p.exe = "/usr/bin/not-cat" }, false},
		{"another parent", func(p *proc) { p.ppid++ }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEchoer(t)
			want := e.proc
			tc.change(&want)
			err := killExactly(want)
			if !tc.killed {
				if err == nil {
					t.Fatalf("killExactly(%+v) of %+v: no error", want, e.proc)
				}
				if !e.alive() {
					t.Fatalf("killExactly(%+v) refused (%v) but killed %+v", want, err, e.proc)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = e.cmd.Wait()
			if ws, ok := e.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Errorf("cat ended %v, want killed by SIGKILL", e.cmd.ProcessState)
			}
		})
	}
	t.Run("ended", func(t *testing.T) {
		e := startEchoer(t)
		if err := e.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = e.cmd.Wait()
		if err := killExactly(e.proc); err == nil {
			t.Errorf("killExactly of an ended process %+v: no error", e.proc)
		}
	})
}

// TestChildrenRunning: only children of the parents that run the program
// asked for are listed, and a parent running another program is an error.
func TestChildrenRunning(t *testing.T) {
	a, b := startEchoer(t), startEchoer(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parents := []int{os.Getpid()}
	got, err := childrenRunning(parents, realPath(t, self), a.proc.exe)
	if err != nil {
		t.Fatal(err)
	}
	if want := []proc{a.proc, b.proc}; !sameProcs(got, want) {
		t.Errorf("children running cat: %+v, want %+v", got, want)
	}
	if got, err := childrenRunning(parents, realPath(t, self), "/usr/bin/not-cat"); err != nil || len(got) != 0 {
		t.Errorf("children running another program: %+v, %v; want none", got, err)
	}
	if _, err := childrenRunning(parents, a.proc.exe, a.proc.exe); err == nil {
		t.Error("a parent running another program than the one named: no error")
	}
}

func sameProcs(a, b []proc) bool {
	key := func(p, q proc) int { return p.pid - q.pid }
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, key)
	slices.SortFunc(b, key)
	return slices.Equal(a, b)
}

// The drain function killed (SIGKILL) in the middle of a step, as an
// out-of-memory kill or a crashed host would end it: the state machine
// carries the drain on to the node's removal or to a clean rollback, and
// nothing is left holding the node.
func TestFaultFunctionKilledMidStep(t *testing.T) {
	b, m, victim, exec := surgeHeld(t)
	ctx := context.Background()
	rie, err := sfnlocal.RIEPath()
	if err != nil {
		t.Fatal(err)
	}
	// Only the drain function's bootstraps under this test's RIEs are
	// victims: a pid read earlier may belong to another process by now
	// (the shared dynalite, a control-plane process), which must live.
	riePIDs := m.svc.FunctionPIDs("drain")
	victims, err := childrenRunning(riePIDs, realPath(t, rie), realPath(t, drainBootstrap(t)))
	if err != nil {
		t.Fatalf("find the drain function's processes under the RIEs %v: %v", riePIDs, err)
	}
	if len(victims) == 0 {
		t.Fatalf("no drain function process under the RIEs %v", riePIDs)
	}
	var killed []int
	for _, p := range victims {
		if err := killExactly(p); err != nil {
			t.Fatalf("not killing process %d, no longer the drain function chosen (killed so far: %v): %v", p.pid, killed, err)
		}
		killed = append(killed, p.pid)
	}
	t.Logf("killed drain function processes %v under the RIEs %v", killed, riePIDs)
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
