package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/state"
)

// parseFailures are what the functions answer to an event they cannot read.
var parseFailures = []string{"bad request", "bad event", "must be a JSON object", "unknown field", "unknown action", "missing \"action\"", "unsupported EventBridge event", "InvalidInput"}

// TestEventsThroughRIE sends every file in events/ to its function's
// bootstrap running under the Lambda Runtime Interface Emulator (what `sam
// local invoke` runs), against the local control plane and dynalite: each
// must be read as a valid event (acting on it may still fail, e.g. for a
// node the sample names that this cluster lacks).
func TestEventsThroughRIE(t *testing.T) {
	files, err := filepath.Glob("../events/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("events: %v (%d files)", err, len(files))
	}
	cp := testbed.Cluster(t)
	db := testbed.DynamoDB(t)
	ctx := context.Background()
	if err := state.CreateTable(ctx, db.Client(t), "events"); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`cluster: {name: events, kubernetes: {kubeconfig: %s}}
state: {dynamodb: {table: events, endpoint: %s}}
nodeGroups:
  - {name: workers, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}}}}
evaluate: {watchFor: 0s}
`, cp.KubeconfigPath, db.Endpoint)
	rie, err := sfnlocal.RIEPath()
	if err != nil {
		t.Fatal(err)
	}
	invoke := map[string]func(payload []byte) map[string]any{}
	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		invoke[fn] = startRIE(t, rie, fn, cfg)
	}
	for _, f := range files {
		name := filepath.Base(f)
		fn := strings.SplitN(name, "-", 2)[0]
		t.Run(name, func(t *testing.T) {
			payload, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			call, ok := invoke[fn]
			if !ok {
				t.Fatalf("no function %q for %s", fn, name)
			}
			resp := call(payload)
			msg, _ := resp["errorMessage"].(string)
			typ, _ := resp["errorType"].(string)
			for _, bad := range parseFailures {
				if strings.Contains(msg, bad) || typ == bad {
					t.Errorf("%s was not read as a valid event: %s: %s", name, typ, msg)
				}
			}
		})
	}
}

// startRIE builds a function for this machine and serves it under the RIE;
// the returned func posts one event and decodes the response.
func startRIE(t *testing.T, rie, fn, cfg string) func([]byte) map[string]any {
	t.Helper()
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrap, "./functions/"+fn)
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", fn, err, out)
	}
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", ports[1]), bootstrap)
	// Any AWS call a sample event leads to (the webhook's self-invocation,
	// say) goes to a closed loopback port with dummy keys: refused at once,
	// never out to AWS or the instance metadata service.
	cmd.Env = []string{"NODETIDE_CONFIG=" + cfg, "AWS_REGION=us-east-1", "AWS_LAMBDA_FUNCTION_TIMEOUT=60", "PATH=" + os.Getenv("PATH"),
		"AWS_ENDPOINT_URL=http://127.0.0.1:1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_EC2_METADATA_DISABLED=true"}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s under the RIE:\n%s", fn, logs.String())
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/2015-03-31/functions/function/invocations", ports[0])
	return func(payload []byte) map[string]any {
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Post(url, "application/json", bytes.NewReader(payload))
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatalf("%s: %v", fn, err)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var out map[string]any
			if err := json.Unmarshal(body, &out); err != nil {
				// A list result (e.g. schedules) is not an object, and not an error.
				return map[string]any{}
			}
			return out
		}
	}
}

func TestMain(m *testing.M) { testbed.Main(m) }
