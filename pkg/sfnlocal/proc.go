package sfnlocal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// stopGrace is how long a child gets to exit on SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// proc is a child process in its own process group, so stopping it reaches
// whatever it spawned (an RIE's bootstrap, say).
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has been reaped
}

// startProc starts cmd in its own process group with SIGKILL as its parent-
// death signal, so a crashed test binary leaves nothing running. Its stdout
// and stderr go to logPath unless the caller set them.
func startProc(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	if cmd.Stdout == nil {
		cmd.Stdout = logFile
	}
	if cmd.Stderr == nil {
		cmd.Stderr = logFile
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &proc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the forking thread ends, not the process. The
		// thread stays locked to this goroutine, which lives until the child
		// is reaped, so the runtime can't retire it under a running child.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait() // how it ended shows in the log
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig to the process group; one that is already gone is fine.
func (p *proc) signal(sig syscall.Signal) error {
	if !p.running() {
		return nil
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s (pid %d): %v: %w", p.name, p.cmd.Process.Pid, sig, err)
	}
	return nil
}

// stopProcs ends every process: SIGTERM to all at once, SIGKILL to those
// still running after the grace period, then waits until each is reaped.
func stopProcs(procs []*proc) error {
	var errs []error
	for _, p := range procs {
		errs = append(errs, p.signal(syscall.SIGTERM))
	}
	deadline := time.Now().Add(stopGrace)
	for _, p := range procs {
		select {
		case <-p.exited:
			continue
		case <-time.After(time.Until(deadline)):
		}
		errs = append(errs, p.signal(syscall.SIGKILL))
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			// Only a process stuck in the kernel outlives SIGKILL this long.
			errs = append(errs, fmt.Errorf("stop %s (pid %d): still running after SIGKILL", p.name, p.cmd.Process.Pid))
		}
	}
	return errors.Join(errs...)
}

// waitListening polls until something accepts TCP connections on addr, the
// process exits, or ctx ends.
func (p *proc) waitListening(ctx context.Context, addr string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before listening on %s (%v)", p.name, addr, p.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("%s not listening on %s: %w", p.name, addr, ctx.Err())
		case <-tick.C:
		}
	}
}

// logTail returns the last lines of a log, for error messages.
func logTail(path string) string {
	const maxLines, maxBytes = 30, 8192
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	if len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	if len(lines) == 0 {
		return "(empty)"
	}
	var out bytes.Buffer
	for _, l := range lines {
		out.WriteString(l)
		out.WriteByte('\n')
	}
	return out.String()
}

// freePorts asks the kernel for n distinct free loopback ports. They are
// held until all are found, so they differ; another process may still take
// one before the child binds it, which callers handle by retrying.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
