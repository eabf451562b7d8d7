package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// errPortInUse marks a start failure caused by a port another process took
// between our probe and the child's bind; Start retries those.
var errPortInUse = errors.New("port already in use")

// process is one child of the bed: its own process group, its output in a
// log file in the bed's directory.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // valid after done is closed
}

// spawner starts children from one goroutine locked to its OS thread. The
// kernel sends Pdeathsig when the thread that forked a child exits, not the
// process; a thread the Go runtime retires (a goroutine that ends while locked
// to its thread) would otherwise take our children down in the middle of a
// test. The locked goroutine lives until the bed is stopped.
type spawner struct {
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq)}
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: when the bed stops, this thread exits with the
		// goroutine, after every child it started is gone.
		for r := range s.reqs {
			r.errc <- r.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	s.reqs <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}

func (s *spawner) close() { close(s.reqs) }

// startProcess runs bin with args in its own process group, output to
// dir/<name>.log, and records its pid in dir/<name>.pid so a later run can
// sweep it if this test binary is killed before it could clean up.
func startProcess(sp *spawner, dir, name, bin string, args, env []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = sp.start(cmd)
	// The child holds its own descriptor; ours is no longer needed.
	logFile.Close()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	pidFile := filepath.Join(dir, name+".pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		p.stop(0)
		return nil, fmt.Errorf("write %s pid file: %w", name, err)
	}
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes an unexpected exit, with the end of the process's log
// (that is where the reason is), marked errPortInUse when it failed to bind.
func (p *process) exitError() error {
	tail := logTail(p.logPath, 30)
	// Not the log's path: Stop removes it with the bed's directory.
	err := fmt.Errorf("%s exited (%v); end of its log:\n%s", p.name, p.waitErr, tail)
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
}

// stop sends SIGTERM to the process group, SIGKILL once grace has passed, and
// waits until the process is reaped. Stragglers in the group are killed too.
func (p *process) stop(grace time.Duration) {
	pgid := p.cmd.Process.Pid
	if !p.exited() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		timer := time.NewTimer(grace)
		select {
		case <-p.done:
		case <-timer.C:
		}
		timer.Stop()
	}
	// The leader may be gone while others in its group are not; ESRCH just
	// means nothing is left.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
}

// logTail returns the last n lines of a log file, for error messages.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	const maxTail = 16 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxTail {
		if _, err := f.Seek(st.Size()-maxTail, io.SeekStart); err != nil {
			return fmt.Sprintf("(reading log: %v)", err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(reading log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePorts returns n distinct loopback ports nobody listens on right now.
// All n listeners are held open together so the kernel can't hand out the
// same port twice; another process may still take one before our child binds
// it, which Start handles by retrying.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// childEnv is the environment the children run with: ours, minus variables
// that would point them at another cluster or etcd than the flags say.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "KWOK_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
