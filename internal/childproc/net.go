package childproc

import (
	"context"
	"fmt"
	"net"
	"time"
)

// FreePorts returns n distinct loopback ports nobody listens on right now.
// All n are held open together, so the kernel can't hand out one twice;
// they are released on return, and another process may still take one
// before the child binds it, so callers retry on "address already in use".
func FreePorts(n int) ([]int, error) {
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

const (
	// listenPoll is how often WaitListening tries to connect: a child
	// usually binds within milliseconds of starting.
	listenPoll = 20 * time.Millisecond
	// dialTimeout bounds one attempt, so a dial hanging on a busy machine
	// can't eat the whole wait.
	dialTimeout = time.Second
	// errorTailLines is how many lines of the child's log WaitListening's
	// errors quote.
	errorTailLines = 30
)

// WaitListening polls until something accepts TCP connections on addr. It
// fails early if the child exits first, and when ctx ends; both errors name
// addr and, when the child has a log, quote its end.
func (p *Process) WaitListening(ctx context.Context, addr string) error {
	tick := time.NewTicker(listenPoll)
	defer tick.Stop()
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		conn, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before listening on %s (%v)%s", p.name, addr, p.State(), p.quoteLog())
		case <-ctx.Done():
			return fmt.Errorf("%s not listening on %s: %w%s", p.name, addr, ctx.Err(), p.quoteLog())
		case <-tick.C:
		}
	}
}

// quoteLog is the end of the child's log, to append to an error; nothing when
// the child has no log file (its caller holds the output).
func (p *Process) quoteLog() string {
	if p.logPath == "" {
		return ""
	}
	return "; end of its log:\n" + p.LogTail(errorTailLines)
}
