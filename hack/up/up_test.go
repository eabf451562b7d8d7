package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/testbed"
)

// TestUpDown runs make up's script as a user would: up, every sample event
// through make invoke's script, the CLI against the local cluster, up again
// (already up), down; then up once more and a crash
// (SIGKILL of the supervisor), after which down still clears up. Neither
// stop may leave a process behind.
func TestUpDown(t *testing.T) {
	testbed.Integration(t, "starts a whole local cluster")
	if _, err := testbed.Dir(); err != nil {
		t.Fatal(err)
	}
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "up")
	cfg := filepath.Join(tmp, "nodetide.local.yaml")
	env := append(os.Environ(), "NODETIDE_UP_DIR="+dir, "NODETIDE_UP_CONFIG="+cfg)
	script := func(arg string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "hack", "up.sh"), arg)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hack/up.sh %s: %v\n%s", arg, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(dir, "pid")); err == nil {
			script("down")
		}
	})

	cli := filepath.Join(tmp, "nodetide")
	build := exec.Command("go", "build", "-o", cli, "./cmd/nodetide")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the CLI: %v\n%s", err, out)
	}

	out := script("up")
	if !strings.Contains(out, "source ") || !strings.Contains(out, "--config ") {
		t.Errorf("up does not say how to use the cluster:\n%s", out)
	}
	pid := readPid(t, dir)
	cliEnv := append(env, sourceEnv(t, filepath.Join(dir, "env"))...)
	nodetide := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, append(args, "--config", cfg)...)
		cmd.Env = cliEnv
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("nodetide %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	// make invoke: every sample event through its function under the RIE.
	invoke := exec.Command(filepath.Join(root, "infra", "invoke.sh"), "--all")
	invoke.Env = append(env, "BOOTSTRAP_DIR="+buildFunctions(t, root, tmp))
	invoke.Dir = root
	if out, err := invoke.CombinedOutput(); err != nil || strings.Contains(string(out), "FAILED") || !strings.Contains(string(out), "ok      drain-shutdown") {
		t.Errorf("invoke.sh --all: %v\n%s", err, out)
	}
	if out := nodetide("config", "validate"); !strings.Contains(out, "workers") || !strings.Contains(out, "gpu") {
		t.Errorf("config validate:\n%s", out)
	}
	if out := nodetide("nodes"); !strings.Contains(out, "workers-local") {
		t.Errorf("nodes does not list the bed's node:\n%s", out)
	}
	nodetide("add", "gpu", "1")
	if out := nodetide("nodes"); !strings.Contains(out, "gpu-") {
		t.Errorf("nodes does not list the added gpu node:\n%s", out)
	}
	// shutdown goes through the bed's drain state machine (the env file
	// points the CLI at it).
	if out := nodetide("shutdown", "workers-local", "--wait"); !strings.Contains(out, "drained and removed") {
		t.Errorf("shutdown:\n%s", out)
	}
	if out := script("up"); !strings.Contains(out, "already up (pid "+strconv.Itoa(pid)+")") {
		t.Errorf("second up:\n%s", out)
	}

	procs := descendants(t, pid)
	if len(procs) < 5 {
		t.Fatalf("only %d processes under the supervisor: %v", len(procs), procs)
	}
	script("down")
	waitGone(t, append(procs, pid))
	for _, f := range []string{"pid", "env", "ready", "kubeconfig", "tmp"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("down left %s", f)
		}
	}
	if _, err := os.Stat(cfg); err == nil {
		t.Error("down left the config it wrote")
	}

	// A crash: the supervisor killed outright takes its children with it,
	// and down clears its files.
	script("up")
	pid = readPid(t, dir)
	procs = descendants(t, pid)
	if tmp, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmp) == 0 {
		t.Error("the running cluster keeps no temporary files under its directory")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, append(procs, pid))
	if out := script("down"); !strings.Contains(out, "is gone") {
		t.Errorf("down after a crash:\n%s", out)
	}
	for _, f := range []string{"pid", "tmp"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("down after a crash left %s", f)
		}
	}
}

// buildFunctions builds the three functions for this machine, as make
// invoke does, and returns the directory holding <fn>/bootstrap.
func buildFunctions(t *testing.T, root, tmp string) string {
	t.Helper()
	dir := filepath.Join(tmp, "build")
	for _, fn := range []string{"evaluate", "schedule", "drain"} {
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", filepath.Join(dir, fn, "bootstrap"), "./functions/"+fn)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", fn, err, out)
		}
	}
	return dir
}

func readPid(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// sourceEnv reads the export lines of make up's env file.
func sourceEnv(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kv, ok := strings.CutPrefix(sc.Text(), "export ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, k+"="+strings.Trim(v, "'"))
	}
	return env
}

// descendants lists every process below pid, from /proc.
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command name, which may hold spaces.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// waitGone waits until none of pids runs (a zombie, reaped by init soon,
// counts as gone).
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var alive []int
		for _, p := range pids {
			stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
			if err != nil {
				continue
			}
			fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if len(fields) > 0 && fields[0] != "Z" {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still running after stop: %v", alive)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
