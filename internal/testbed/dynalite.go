package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/nodetide/nodetide/internal/childproc"
)

// modulePath is the module whose root holds node_modules (package.json sits
// beside go.mod).
const modulePath = "github.com/nodetide/nodetide"

// dynaliteStartTimeout bounds the shared instance's start; node needs well
// under a second on an idle machine, but the test machines are often busy.
const dynaliteStartTimeout = time.Minute

// Dynalite is a running dynalite process: DynamoDB's API, in memory, on a
// loopback port.
type Dynalite struct {
	// Endpoint is the base URL, http://127.0.0.1:PORT.
	Endpoint string

	proc *childproc.Process

	stopOnce sync.Once
	stopErr  error
}

const (
	// dynaliteStopGrace is how long node gets to exit on SIGTERM.
	dynaliteStopGrace = 5 * time.Second
	// dynaliteTailLines is how much of node's log a failed start quotes.
	dynaliteTailLines = 20
)

// StartDynalite starts dynalite from the repository's node_modules on a free
// loopback port and returns once it answers. ctx bounds the start only; the
// process runs until Stop (or until this process dies: it gets SIGKILL then).
func StartDynalite(ctx context.Context) (*Dynalite, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, fmt.Errorf("start dynalite: %w", err)
	}
	cli := filepath.Join(root, "node_modules", "dynalite", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		return nil, fmt.Errorf("start dynalite: %s is missing (run npm ci in %s): %w", cli, root, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("start dynalite: node (Node.js 20 or later) is not on PATH: %w", err)
	}
	// Keeps dynalite up when a client goes away mid-request (see the file).
	preload := filepath.Join(root, "internal", "testbed", "dynalite-preload.cjs")
	if _, err := os.Stat(preload); err != nil {
		return nil, fmt.Errorf("start dynalite: %w", err)
	}

	// The free port is found by binding and releasing it, so another process
	// can take it before node binds; a few attempts make that harmless.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		d, err := startDynalite(ctx, node, preload, cli)
		if err == nil {
			return d, nil
		}
		if attempt == attempts || !errors.Is(err, errPortInUse) || ctx.Err() != nil {
			return nil, err
		}
	}
}

func startDynalite(ctx context.Context, node, preload, cli string) (*Dynalite, error) {
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return nil, fmt.Errorf("start dynalite: %w", err)
	}
	logFile, err := os.CreateTemp("", "nodetide-dynalite-*.log")
	if err != nil {
		return nil, fmt.Errorf("start dynalite: create log: %w", err)
	}
	logFile.Close() // Start opens it for the child
	cmd := exec.Command(node, "--require", preload, cli,
		"--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]),
		// Without these, new tables sit in CREATING for half a second.
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	// Its own process group, so Stop reaches anything node spawns; SIGKILL
	// when this process dies, so a crashed test binary leaves nothing behind.
	p, err := childproc.Start(ctx, "dynalite", cmd, childproc.Options{Log: logFile.Name()})
	if err != nil {
		os.Remove(logFile.Name())
		return nil, err // "start dynalite: ...", naming node's path
	}
	d := &Dynalite{
		Endpoint: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		proc:     p,
	}
	if err := d.waitReady(ctx); err != nil {
		tail := p.LogTail(dynaliteTailLines)
		_ = d.Stop()
		if strings.Contains(tail, "EADDRINUSE") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return nil, fmt.Errorf("start dynalite on %s: %w; log:\n%s", d.Endpoint, err, tail)
	}
	return d, nil
}

// waitReady polls dynalite's health answer (GET / → 200 "healthy: …").
func (d *Dynalite) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.Endpoint+"/", nil)
		if err != nil {
			return fmt.Errorf("build health request: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.HasPrefix(body, []byte("healthy")) {
				return nil
			}
			err = fmt.Errorf("health check answered %s: %q", resp.Status, body)
		}
		lastErr = err
		select {
		case <-d.proc.Done():
			return fmt.Errorf("node exited before answering (%v)", d.proc.State())
		case <-ctx.Done():
			return fmt.Errorf("not answering (last: %v): %w", lastErr, ctx.Err())
		case <-tick.C:
		}
	}
}

// PID is the node process's id (also its process group's).
func (d *Dynalite) PID() int { return d.proc.PID() }

// Stop ends the process group (SIGTERM, then SIGKILL after a grace period),
// waits for node to be reaped and removes the log. Calling it again returns
// the first call's result.
func (d *Dynalite) Stop() error {
	d.stopOnce.Do(func() {
		d.stopErr = d.proc.Stop(context.Background(), dynaliteStopGrace)
		os.Remove(d.proc.LogPath())
	})
	return d.stopErr
}

// Client returns a DynamoDB client for this instance: dummy static
// credentials, region us-east-1, and nothing read from the environment or
// ~/.aws, so tests never reach a real account.
func (d *Dynalite) Client(t testing.TB) *dynamodb.Client {
	t.Helper()
	if d == nil || d.Endpoint == "" {
		t.Fatal("testbed: Client on a dynalite that was not started")
	}
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(d.Endpoint),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("testbed", "testbed", ""),
	})
}

// sharedDynalite is the test binary's dynalite, started by the first
// DynamoDB call and stopped by Main. A failed start is remembered, so the
// remaining tests fail at once with the same reason instead of each waiting.
var sharedDynalite struct {
	once sync.Once
	d    *Dynalite
	err  error
}

// DynamoDB returns the test binary's shared dynalite, starting it on first
// use. Tests share it, so each should use its own table or key space. It
// fails the test (never skips) when dynalite can't run; the usual cause is a
// missing `npm ci` at the repository root. Main stops it when the binary's
// tests are done, so the package's TestMain should call Main.
func DynamoDB(t testing.TB) *Dynalite {
	t.Helper()
	sharedDynalite.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dynaliteStartTimeout)
		defer cancel()
		d, err := StartDynalite(ctx)
		if err != nil {
			sharedDynalite.err = err
			return
		}
		sharedDynalite.d = d
		onExit(d.Stop)
	})
	if sharedDynalite.err != nil {
		t.Fatalf("testbed: dynalite: %v", sharedDynalite.err)
	}
	return sharedDynalite.d
}

// RepoRoot walks up from the working directory to the directory whose go.mod
// declares github.com/nodetide/nodetide, passing nested modules such as
// infra/ on the way.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for dir := wd; ; {
		mod, err := readModulePath(filepath.Join(dir, "go.mod"))
		switch {
		case err == nil && mod == modulePath:
			return dir, nil
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return "", fmt.Errorf("find repository root: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no go.mod of module %s at or above %s", modulePath, wd)
		}
		dir = parent
	}
}

// readModulePath returns the module directive's path of a go.mod file.
func readModulePath(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err // already names the file; callers test for ErrNotExist
	}
	for line := range strings.Lines(string(b)) {
		line, _, _ = strings.Cut(line, "//")
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], "\"`"), nil
		}
	}
	return "", fmt.Errorf("%s has no module directive", gomod)
}
