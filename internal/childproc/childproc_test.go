package childproc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/childproc"
)

// helperEnv makes the test binary, run as a child, act as a helper program
// instead of running tests: see TestMain.
const helperEnv = "CHILDPROC_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "listen":
		listenHelper()
	case "parent":
		parentHelper()
	default:
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// listenHelper listens on the address in its first argument until killed.
func listenHelper() {
	l, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening on", l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(1)
		}
		c.Close()
	}
}

// parentHelper starts `sleep 600` with childproc (through a spawner when its
// first argument is "spawner"), retires OS threads (which would take the
// child down, were the forking thread among them), prints the child's pid
// and waits to be killed.
func parentHelper() {
	runtime.LockOSThread()
	var opts childproc.Options
	if os.Args[1] == "spawner" {
		opts.Spawner = childproc.NewSpawner()
	}
	p, err := childproc.Start(context.Background(), "sleep", exec.Command("sleep", "600"), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// A goroutine that ends while locked to its thread ends the thread.
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() { runtime.LockOSThread() })
		wg.Wait()
	}
	fmt.Println(p.PID())
	select {}
}

// helper returns a command running the test binary as the named helper.
func helper(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	return cmd
}

// start starts cmd with a log in a temporary directory and stops it (with
// its group) when the test ends.
func start(t *testing.T, name string, cmd *exec.Cmd) *childproc.Process {
	t.Helper()
	p, err := childproc.Start(t.Context(), name, cmd, childproc.Options{Log: filepath.Join(t.TempDir(), name+".log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(context.Background(), time.Second); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return p
}

// waitLog waits until the process's log contains s: a shell script has set
// its traps once it says so.
func waitLog(t *testing.T, p *childproc.Process, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(p.LogPath())
		if strings.Contains(string(b), s) {
			return
		}
		if time.Now().After(deadline) || p.Exited() {
			t.Fatalf("%s never logged %q; log:\n%s", p.Name(), s, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStartLogsAndReportsExit(t *testing.T) {
	p := start(t, "script", exec.Command("sh", "-c", "echo to stdout; echo to stderr >&2; exit 3"))
	<-p.Done()
	if got := p.State().String(); got != "exit status 3" {
		t.Errorf("State() = %q, want exit status 3", got)
	}
	if got, want := p.LogTail(10), "to stdout\nto stderr"; got != want {
		t.Errorf("LogTail(10) = %q, want %q", got, want)
	}
	if err := p.Stop(t.Context(), time.Second); err != nil {
		t.Errorf("Stop after exit: %v", err)
	}
}

func TestStartAppendsToLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "shared.log")
	for i := range 2 {
		p, err := childproc.Start(t.Context(), "attempt", exec.Command("echo", "attempt", strconv.Itoa(i)), childproc.Options{Log: log})
		if err != nil {
			t.Fatal(err)
		}
		<-p.Done()
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "attempt 0\nattempt 1\n"; got != want {
		t.Errorf("log = %q, want %q (both attempts)", got, want)
	}
}

func TestStartKeepsCallersOutput(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("sh", "-c", "echo out; echo err >&2")
	cmd.Stdout = w
	p := start(t, "split", cmd)
	w.Close()
	sc := bufio.NewScanner(r)
	if !sc.Scan() || sc.Text() != "out" || sc.Scan() {
		t.Errorf("pipe got %q, want just the stdout line", sc.Text())
	}
	<-p.Done()
	if got := p.LogTail(10); got != "err" {
		t.Errorf("log = %q, want just the stderr line", got)
	}
}

func TestStartErrors(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	closed := childproc.NewSpawner()
	closed.Close()
	tests := []struct {
		name string
		ctx  context.Context
		bin  string
		opts childproc.Options
		want []string
	}{
		{name: "missing binary", ctx: t.Context(), bin: "/nonexistent/bin",
			want: []string{"start missing binary", "/nonexistent/bin"}},
		{name: "missing binary, spawner", ctx: t.Context(), bin: "/nonexistent/bin", opts: childproc.Options{Spawner: childproc.NewSpawner()},
			want: []string{"start missing binary, spawner", "/nonexistent/bin"}},
		{name: "log directory missing", ctx: t.Context(), bin: "true", opts: childproc.Options{Log: "/nonexistent/dir/x.log"},
			want: []string{"start log directory missing: open log", "/nonexistent/dir/x.log"}},
		{name: "context ended", ctx: canceled, bin: "true", want: []string{"context canceled"}},
		{name: "spawner closed", ctx: t.Context(), bin: "true", opts: childproc.Options{Spawner: closed},
			want: []string{"start spawner closed: spawner closed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.opts.Spawner != nil {
				defer tt.opts.Spawner.Close()
			}
			p, err := childproc.Start(tt.ctx, tt.name, exec.Command(tt.bin), tt.opts)
			if err == nil {
				_ = p.Stop(context.Background(), time.Second)
				t.Fatal("Start succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLogTail(t *testing.T) {
	long := strings.Repeat("x", 100)
	var many strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&many, "%04d %s\n", i, long)
	}
	tests := []struct {
		name    string
		content *string // nil: no log file
		n       int
		want    string
	}{
		{name: "last lines", content: new("a\nb\nc\nd\n"), n: 2, want: "c\nd"},
		{name: "fewer lines than asked", content: new("a\nb"), n: 5, want: "a\nb"},
		{name: "empty", content: new(""), n: 5, want: "(empty)"},
		{name: "only the end of a big log is read", content: new(many.String()), n: 2,
			want: "0998 " + long + "\n0999 " + long},
		{name: "missing", n: 5, want: "(log unreadable: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "x.log")
			p, err := childproc.Start(t.Context(), "true", exec.Command("true"), childproc.Options{Log: log})
			if err != nil {
				t.Fatal(err)
			}
			<-p.Done()
			if tt.content == nil {
				os.Remove(log)
			} else if err := os.WriteFile(log, []byte(*tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := p.LogTail(tt.n); !strings.HasPrefix(got, tt.want) {
				t.Errorf("LogTail(%d) = %q, want %q", tt.n, got, tt.want)
			}
		})
	}
}

func TestWaitListening(t *testing.T) {
	ports, err := childproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	tests := []struct {
		name    string
		cmd     *exec.Cmd
		timeout time.Duration
		want    []string // in the error; none: success
	}{
		{name: "listens", cmd: helper(t, "listen", addr), timeout: 30 * time.Second},
		{name: "never listens", cmd: exec.Command("sh", "-c", "echo still thinking; exec sleep 60"), timeout: 300 * time.Millisecond,
			want: []string{"never listens not listening on " + addr, "deadline exceeded", "end of its log:\nstill thinking"}},
		{name: "exits", cmd: exec.Command("sh", "-c", "echo cannot bind >&2; exit 4"), timeout: 30 * time.Second,
			want: []string{"exits exited before listening on " + addr, "exit status 4", "end of its log:\ncannot bind"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, tt.name, tt.cmd)
			ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
			defer cancel()
			err := p.WaitListening(ctx, addr)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("WaitListening succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			if tt.name == "never listens" && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
			}
		})
	}
}

func TestWaitListeningWithoutLogQuotesNothing(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	p, err := childproc.Start(t.Context(), "quiet", cmd, childproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitListening(t.Context(), "127.0.0.1:1")
	if err == nil || strings.Contains(err.Error(), "log") {
		t.Errorf("WaitListening = %v, want an exit error quoting no log", err)
	}
}

func TestStop(t *testing.T) {
	const grace = 300 * time.Millisecond
	tests := []struct {
		name      string
		script    string
		wantState string
		slow      bool // escalation: the stop takes the grace period
	}{
		{name: "exits on SIGTERM", script: "echo ready; exec sleep 60", wantState: "signal: terminated"},
		// An ignored signal stays ignored across exec, so sleep ignores it too.
		{name: "ignores SIGTERM", script: `trap "" TERM; echo ready; exec sleep 60`, wantState: "signal: killed", slow: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, "stubborn", exec.Command("sh", "-c", tt.script))
			waitLog(t, p, "ready")
			began := time.Now()
			if err := p.Stop(t.Context(), grace); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			took := time.Since(began)
			if got := p.State().String(); got != tt.wantState {
				t.Errorf("State() = %q, want %q", got, tt.wantState)
			}
			if tt.slow && took < grace {
				t.Errorf("Stop took %v, less than the grace period %v before SIGKILL", took, grace)
			}
			if !tt.slow && took >= grace {
				t.Errorf("Stop took %v, the whole grace period, for a process that exits on SIGTERM", took)
			}
			if err := syscall.Kill(-p.PID(), 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process group %d after Stop: kill -0 gave %v, want ESRCH", p.PID(), err)
			}
			if err := p.Stop(t.Context(), grace); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

func TestStopEndedContextSkipsGrace(t *testing.T) {
	p := start(t, "stubborn", exec.Command("sh", "-c", `trap "" TERM; echo ready; exec sleep 60`))
	waitLog(t, p, "ready")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	began := time.Now()
	if err := p.Stop(ctx, time.Minute); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("Stop with an ended context took %v, want SIGKILL at once", took)
	}
}

func TestStopKillsStragglers(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	// The leader exits on SIGTERM; its child, in the same group, ignores it.
	script := `sh -c 'trap "" TERM; echo $$ > ` + pidFile + `; exec sleep 60' & while [ ! -s ` + pidFile + ` ]; do sleep 0.01; done; echo ready; wait`
	p := start(t, "leader", exec.Command("sh", "-c", script))
	waitLog(t, p, "ready")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(t.Context(), 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The grandchild was reparented; its new parent reaps it shortly after
	// it dies.
	deadline := time.Now().Add(5 * time.Second)
	for alive(grandchild) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(grandchild, syscall.SIGKILL)
			t.Fatalf("grandchild %d that ignored SIGTERM survived Stop", grandchild)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

func TestStopAllSharesTheGracePeriod(t *testing.T) {
	const grace = 500 * time.Millisecond
	var procs []*childproc.Process
	for i := range 3 {
		p := start(t, "stubborn-"+strconv.Itoa(i), exec.Command("sh", "-c", `trap "" TERM; echo ready; exec sleep 60`))
		waitLog(t, p, "ready")
		procs = append(procs, p)
	}
	began := time.Now()
	if err := childproc.StopAll(t.Context(), grace, procs...); err != nil {
		t.Fatalf("StopAll: %v", err)
	}
	if took := time.Since(began); took < grace || took >= 3*grace {
		t.Errorf("StopAll took %v, want one grace period (%v), not one each", took, grace)
	}
	for _, p := range procs {
		if !p.Exited() {
			t.Errorf("%s still running after StopAll", p.Name())
		}
	}
}

func TestFreePortsDistinct(t *testing.T) {
	for _, n := range []int{0, 1, 50} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			ports, err := childproc.FreePorts(n)
			if err != nil {
				t.Fatal(err)
			}
			if len(ports) != n {
				t.Fatalf("got %d ports, want %d", len(ports), n)
			}
			seen := map[int]bool{}
			for _, port := range ports {
				if port <= 0 || seen[port] {
					t.Fatalf("ports %v: %d is invalid or given twice", ports, port)
				}
				seen[port] = true
			}
			// Released on return: a child can bind each one.
			for _, port := range ports {
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
				if err != nil {
					t.Fatalf("port %d not free: %v", port, err)
				}
				l.Close()
			}
		})
	}
}

// TestChildDiesWithParent runs a parent that starts a child with childproc
// and retires OS threads meanwhile: the child must survive that, and die
// when the parent is killed. (A spawner whose goroutine did not keep its
// thread fails it; a child of its own thread is also kept alive by its
// goroutine blocking in wait4 on that thread, so that mode passes either way.)
func TestChildDiesWithParent(t *testing.T) {
	for _, mode := range []string{"own thread", "spawner"} {
		t.Run(mode, func(t *testing.T) {
			parent := helper(t, "parent", strings.Fields(mode)[0])
			out, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			parent.Stderr = os.Stderr
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
			sc := bufio.NewScanner(out)
			if !sc.Scan() {
				t.Fatalf("parent printed no child pid (%v)", sc.Err())
			}
			child, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
			// The threads retired before the pid was printed; give a wrongly
			// sent death signal a moment to land.
			time.Sleep(100 * time.Millisecond)
			if !alive(child) {
				t.Fatalf("child %d died while its parent runs: the forking thread was retired", child)
			}
			if err := parent.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = parent.Wait()
			deadline := time.Now().Add(5 * time.Second)
			for alive(child) {
				if time.Now().After(deadline) {
					t.Fatalf("child %d outlived its killed parent", child)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestStopWithoutGrace(t *testing.T) {
	p := start(t, "sleeper", exec.Command("sleep", "60"))
	if err := p.Stop(t.Context(), 0); err != nil {
		t.Fatalf("Stop with no grace: %v", err)
	}
	if got := p.State().String(); got != "signal: killed" && got != "signal: terminated" {
		t.Errorf("State() = %q, want killed or terminated", got)
	}
}
