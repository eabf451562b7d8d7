package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodetide/nodetide/internal/childproc"
)

// emulator is one aws-lambda-rie serving one function, as `sam local invoke`
// runs it: it starts the bootstrap on the first invocation (the cold start)
// and keeps it for the next ones. It prints the function's output and a
// REPORT line per invocation, which are kept.
type emulator struct {
	fn     string
	url    string
	proc   *childproc.Process
	exited chan struct{} // closed once its output is read to the end and it is reaped
	log    *slog.Logger

	mu      sync.Mutex
	reports map[string]report
	logs    *logAccount
	tail    []string // the last lines, for errors
	arrived chan struct{}
}

const (
	emulatorTailLines = 40
	// emulatorStopGrace is how long the emulator gets to exit on SIGTERM.
	emulatorStopGrace = 5 * time.Second
	// emulatorListenTimeout bounds its start.
	emulatorListenTimeout = 30 * time.Second
)

// lambdaEnv is what Lambda sets that the Go runtime and the AWS SDK read,
// with placeholder credentials (the endpoints are all local) and nothing
// else from this process's environment.
func lambdaEnv(fn string, timeout time.Duration) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"TZ=:UTC",
		"LANG=en_US.UTF-8",
		"AWS_REGION=us-east-1",
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=measure",
		"AWS_SECRET_ACCESS_KEY=measure",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_LAMBDA_FUNCTION_NAME=nodetide-measure-" + fn,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(int(timeout.Seconds())),
		"_HANDLER=bootstrap",
	}
}

// startEmulator runs the emulator with program as the function's bootstrap.
func startEmulator(ctx context.Context, rie, fn, program string, env []string, log *slog.Logger) (*emulator, error) {
	ports, err := childproc.FreePorts(2)
	if err != nil {
		return nil, fmt.Errorf("%s emulator: %w", fn, err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", addr,
		// Each emulator needs a runtime API port of its own; 9001 is the default.
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(ports[1]),
		program)
	cmd.Dir = filepath.Dir(program) // Lambda runs in the code's directory
	cmd.Env = env
	// No log file: the output is read here, for its REPORT lines.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%s emulator: %w", fn, err)
	}
	cmd.Stdout = w
	cmd.Stderr = w
	// Its own process group, so stopping it stops the bootstrap too; killed
	// with this process should it die first.
	p, err := childproc.Start(ctx, fn+" emulator", cmd, childproc.Options{})
	// The emulator and its bootstrap hold their own copies: out reads to EOF
	// once they are all gone.
	w.Close()
	if err != nil {
		out.Close()
		return nil, err // "start <fn> emulator: ...", naming rie's path
	}
	e := &emulator{fn: fn, url: "http://" + addr, proc: p, exited: make(chan struct{}), log: log,
		reports: map[string]report{}, logs: newLogAccount(), arrived: make(chan struct{})}
	go func() {
		e.read(out)
		out.Close()
		<-p.Done()
		close(e.exited)
	}()
	lctx, cancel := context.WithTimeout(ctx, emulatorListenTimeout)
	defer cancel()
	if err := p.WaitListening(lctx, addr); err != nil {
		// Stopped first, so the output is read to its end: the last lines
		// say why it failed.
		stopErr := e.stop()
		return nil, errors.Join(fmt.Errorf("%w; emulator output:\n%s", err, e.output()), stopErr)
	}
	return e, nil
}

// read keeps the REPORT lines and the last lines of output.
func (e *emulator) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		rep, ok, err := parseReport(line)
		e.mu.Lock()
		e.logs.add(line)
		e.tail = append(e.tail, line)
		if len(e.tail) > emulatorTailLines {
			e.tail = e.tail[len(e.tail)-emulatorTailLines:]
		}
		if ok && err == nil {
			e.reports[rep.RequestID] = rep
			close(e.arrived)
			e.arrived = make(chan struct{})
		}
		e.mu.Unlock()
		if err != nil {
			e.log.Warn("unreadable REPORT line", "function", e.fn, "error", err)
		}
	}
}

func (e *emulator) output() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.tail, "\n")
}

// invoke posts one event and returns the request id and the response. A
// function error (the emulator answers {"errorType", "errorMessage"} with
// status 200) is an error.
func (e *emulator) invoke(ctx context.Context, payload []byte, timeout time.Duration) (string, []byte, error) {
	id, err := requestID()
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/2015-03-31/functions/function/invocations", bytes.NewReader(payload))
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", e.fn, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Amzn-RequestId", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return id, nil, fmt.Errorf("%s: invoke: %w; emulator output:\n%s", e.fn, err, e.output())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return id, nil, fmt.Errorf("%s: read the response: %w", e.fn, err)
	}
	if resp.StatusCode != http.StatusOK {
		return id, body, fmt.Errorf("%s: invoke answered %s: %s; emulator output:\n%s", e.fn, resp.Status, body, e.output())
	}
	if fnErr := functionError(body); fnErr != "" {
		return id, body, fmt.Errorf("%s: function error %s; emulator output:\n%s", e.fn, fnErr, e.output())
	}
	return id, body, nil
}

// functionError returns "<type>: <message>" when body is a Lambda error
// object.
func functionError(body []byte) string {
	var fe struct {
		Type    string `json:"errorType"`
		Message string `json:"errorMessage"`
	}
	if json.Unmarshal(body, &fe) != nil || fe.Type == "" {
		return ""
	}
	return fe.Type + ": " + fe.Message
}

// report waits for the REPORT line of request id, and returns it with the
// bytes the invocation logged.
func (e *emulator) report(ctx context.Context, id string) (report, int64, error) {
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		e.mu.Lock()
		rep, ok := e.reports[id]
		logged := e.logs.bytes[id]
		arrived := e.arrived
		e.mu.Unlock()
		if ok {
			return rep, logged, nil
		}
		select {
		case <-arrived:
		case <-e.exited:
			return report{}, 0, fmt.Errorf("%s emulator exited before reporting %s", e.fn, id)
		case <-timer.C:
			return report{}, 0, fmt.Errorf("%s: no REPORT line for %s", e.fn, id)
		case <-ctx.Done():
			return report{}, 0, ctx.Err()
		}
	}
}

// stop ends the emulator and the bootstrap it runs (its process group) and
// waits until their output is read to its end.
func (e *emulator) stop() error {
	err := e.proc.Stop(context.Background(), emulatorStopGrace)
	if e.proc.Exited() {
		<-e.exited
	}
	return err
}

func requestID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("request id: %w", err)
	}
	return hex.EncodeToString(b), nil
}
