// Package childproc starts and stops the helper processes that tests and
// local tools run beside this one (etcd, kube-apiserver, dynalite, the Lambda
// Runtime Interface Emulator, ...), so that none of them outlives its parent.
//
// Every child gets a process group of its own, so stopping it also reaches
// whatever it spawned, and SIGKILL as its parent-death signal, so a parent
// that crashes or is killed leaves nothing running. Output goes to a log file
// whose end is quoted in errors, since that is where a child says why it
// failed.
//
// Linux only: it relies on Setpgid and Pdeathsig.
package childproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a running (or ended) child started by Start.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has been reaped
}

// Options configures Start.
type Options struct {
	// Log is the file the child's stdout and stderr go to, unless the
	// command already has its own; it is created if missing and appended to
	// otherwise, so retries can share one log. Empty means no log file: the
	// caller set cmd.Stdout and cmd.Stderr itself.
	Log string
	// Spawner, when set, forks the child from the spawner's thread instead
	// of from a thread of its own (see Spawner).
	Spawner *Spawner
}

// Start runs cmd as the child called name (name appears in every error and
// should say what the child is: "etcd", "aws-lambda-rie drain-0").
//
// It overwrites cmd.SysProcAttr: the child gets its own process group and
// SIGKILL when the thread that forked it ends. That is a thread, not the
// process: Go may retire an OS thread at any time, which would kill the
// child in mid-run. So the fork happens on a thread locked to a goroutine
// that lives as long as it must: by default one per child, until the child
// is reaped; with opts.Spawner, the spawner's, until it is closed.
//
// ctx bounds the start only. Unlike exec.CommandContext, the child is not
// tied to it: it runs until Stop, or until this process dies.
func Start(ctx context.Context, name string, cmd *exec.Cmd, opts Options) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if opts.Log != "" {
		logFile, err := os.OpenFile(opts.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("start %s: open log: %w", name, err)
		}
		// The child holds its own descriptor once started; ours is no longer
		// needed either way.
		defer logFile.Close()
		if cmd.Stdout == nil {
			cmd.Stdout = logFile
		}
		if cmd.Stderr == nil {
			cmd.Stderr = logFile
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{name: name, cmd: cmd, logPath: opts.Log, done: make(chan struct{})}

	if opts.Spawner != nil {
		if err := opts.Spawner.start(ctx, cmd); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		go p.wait()
		return p, nil
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			// Nothing depends on this thread: hand it back to the runtime.
			runtime.UnlockOSThread()
			started <- err
			return
		}
		started <- nil
		// Still locked: the thread ends with this goroutine, after the
		// child has been reaped, when its death signal can harm no one.
		p.wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// wait reaps the child. How it ended is in cmd.ProcessState, and the reason
// usually in its log, so Wait's error adds nothing.
func (p *Process) wait() {
	_ = p.cmd.Wait()
	close(p.done)
}

// Name is the name given to Start.
func (p *Process) Name() string { return p.name }

// PID is the child's process id, which is also its process group's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogPath is the log file given to Start ("" when there is none).
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the child has exited (and been reaped).
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// State is how the child ended ("exit status 1", "signal: killed"); nil
// while it runs.
func (p *Process) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// LogTail returns the last n lines of the child's log, for error messages:
// "(empty)" when there are none, and a note instead of an error when the log
// can't be read, since it is only ever quoted in another error.
func (p *Process) LogTail(n int) string {
	if p.logPath == "" {
		return "(no log)"
	}
	return logTail(p.logPath, n)
}

// maxTailBytes bounds how much of a log LogTail reads: only the end matters,
// and a chatty child can write megabytes.
const maxTailBytes = 16 << 10

func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxTailBytes {
		if _, err := f.Seek(-maxTailBytes, io.SeekEnd); err != nil {
			return fmt.Sprintf("(log unreadable: %v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4<<10), maxTailBytes+1)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return "(empty)"
	}
	return strings.Join(lines, "\n")
}

// killWait is how long Stop waits for a child to be reaped after SIGKILL.
// That needs nothing from the child, so it does not depend on the grace
// period: a grace of 0 still gets the moment the kernel takes.
const killWait = 5 * time.Second

// Stop ends the child's process group: SIGTERM, then SIGKILL once grace has
// passed (or ctx has ended) without the child exiting, then waits up to
// killWait for it to be reaped. After the child is gone, whatever is
// left in its group gets SIGKILL too: a grandchild that ignored SIGTERM
// would otherwise outlive its parent. A child that had already exited is not
// an error. Stop may be called more than once.
func (p *Process) Stop(ctx context.Context, grace time.Duration) error {
	return StopAll(ctx, grace, p)
}

// StopAll stops every process as Stop does, all at once: they share one
// grace period instead of waiting for each other's.
func StopAll(ctx context.Context, grace time.Duration, procs ...*Process) error {
	var errs []error
	for _, p := range procs {
		if !p.Exited() {
			errs = append(errs, p.signal(syscall.SIGTERM))
		}
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	waitAll(ctx, timer.C, procs)
	for _, p := range procs {
		if !p.Exited() {
			errs = append(errs, p.signal(syscall.SIGKILL))
		}
	}
	timer.Reset(killWait)
	// Not ctx: a child must be reaped (or reported) even when the caller's
	// patience ran out, and SIGKILL takes effect at once.
	waitAll(context.Background(), timer.C, procs)
	for _, p := range procs {
		if !p.Exited() {
			// Only a process stuck in the kernel outlives SIGKILL this long.
			errs = append(errs, fmt.Errorf("stop %s (pid %d): still running after SIGKILL", p.name, p.PID()))
			continue
		}
		// The group's id stays reserved while any member lives, so this
		// reaches stragglers of ours only (ESRCH: there are none) -- unless
		// none was left when the child was reaped and the id has been handed
		// on since: a child that ended long before Stop (or a second Stop)
		// leaves time for a pid wrap-around, which takes seconds where
		// pid_max is 32768. A process now running under the child's pid
		// shows that: its group, if it leads one, is someone else's.
		if !pidInUse(p.PID()) {
			_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		}
	}
	return errors.Join(errs...)
}

// pidInUse reports whether a process (a zombie too) has the pid now.
func pidInUse(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// waitAll waits until every process is reaped, expired fires or ctx ends.
func waitAll(ctx context.Context, expired <-chan time.Time, procs []*Process) {
	for _, p := range procs {
		select {
		case <-p.done:
		case <-expired:
			return
		case <-ctx.Done():
			return
		}
	}
}

// signal sends sig to the process group; a group that is already gone is
// fine (the child may exit between our check and the kill).
func (p *Process) signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.PID(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s (pid %d): %s: %w", p.name, p.PID(), signalName(sig), err)
	}
	return nil
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return sig.String()
}

// Spawner forks children from one OS thread that lives until Close, for a
// caller that starts several children and stops them together (a control
// plane): they share a thread instead of holding one each.
//
// The kernel sends the parent-death signal when the forking thread exits,
// so Close must come after every child the spawner started has been
// stopped: closing ends the thread and, with it, any child still running.
type Spawner struct {
	reqs      chan spawnReq
	closed    chan struct{}
	closeOnce sync.Once
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

// NewSpawner starts the spawner's thread.
func NewSpawner() *Spawner {
	s := &Spawner{reqs: make(chan spawnReq), closed: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread must exit with this goroutine, not
		// serve other goroutines that could lock and end it meanwhile.
		for {
			select {
			case r := <-s.reqs:
				r.errc <- r.cmd.Start()
			case <-s.closed:
				return
			}
		}
	}()
	return s
}

func (s *Spawner) start(ctx context.Context, cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	select {
	case s.reqs <- spawnReq{cmd: cmd, errc: errc}:
	case <-s.closed:
		return errors.New("spawner closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-errc
}

// Close ends the spawner's thread. Starting a child with it afterwards
// fails. It may be called more than once.
func (s *Spawner) Close() { s.closeOnce.Do(func() { close(s.closed) }) }
