package lambdarun_test

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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/state"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// malformed are payloads no function may act on, each with what its error
// must say. valid is a request that acts; each case spoils it one way.
func malformed(valid, dupField, dupValue string) []struct{ name, payload, want string } {
	dup := strings.TrimSuffix(valid, "}") + `,"` + dupField + `":` + dupValue + `}`
	return []struct{ name, payload, want string }{
		{"trailing data", valid + ` {"action":"list"}`, "unexpected data after the document"},
		{"trailing garbage", valid + `x`, "not valid JSON"},
		{"empty", ``, "event is empty"},
		{"blank", " \n", "event is empty"},
		{"truncated", valid[:len(valid)-1], "unexpected end of input"},
		{"duplicate key", dup, dupField + ": field given twice"},
	}
}

// The three functions' bootstraps, built for this machine and run under the
// Lambda Runtime Interface Emulator as Lambda runs them, read the payload as
// it came: data after the request, an empty or cut-short payload and a field
// given twice are each refused with an error naming the problem, and nothing
// changes (no node added, none uncordoned, no schedule stored). The valid
// request, sent last, does act: the refusals are not for want of a change
// to make.
func TestMalformedPayloadsThroughRIE(t *testing.T) {
	cp := testbed.Cluster(t)
	db := testbed.DynamoDB(t)
	ctx := context.Background()
	const table, group = "payloads", "payload-workers"
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`cluster: {name: payloads, kubernetes: {kubeconfig: %s}}
state: {dynamodb: {table: %s, endpoint: %s}}
nodeGroups:
  - {name: %s, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}}}}
evaluate: {watchFor: 0s}
`, cp.KubeconfigPath, table, db.Endpoint, group)
	rie, err := sfnlocal.RIEPath()
	if err != nil {
		t.Fatal(err)
	}
	store := state.NewDynamoDB(db.Client(t), table, "payloads")

	groupNodes := func() int {
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + group})
		if err != nil {
			t.Fatal(err)
		}
		return len(nodes.Items)
	}
	cordoned := cp.AddNode(t, testbed.Node{Name: "payload-cordoned", CPU: "2", Memory: "4Gi"})
	cordoned.Spec.Unschedulable = true
	if _, err := cp.Client.CoreV1().Nodes().Update(ctx, cordoned, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	isCordoned := func() bool {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, cordoned.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Spec.Unschedulable
	}
	stored := func() bool {
		list, err := store.ListSchedules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(list) > 0
	}

	functions := []struct {
		fn, valid, dupField, dupValue string
		changed                       func() bool
	}{
		{"evaluate", `{"action":"add","nodeGroup":"` + group + `","count":1}`, "count", "2",
			func() bool { return groupNodes() != 0 }},
		{"drain", `{"action":"enable","node":"` + cordoned.Name + `"}`, "node", `"other"`,
			func() bool { return !isCordoned() }},
		{"schedule", `{"action":"put","schedule":{"name":"payload","cron":"0 0 8 * * 1-5","nodeGroups":[{"name":"` + group + `","desired":1}]}}`, "action", `"put"`,
			stored},
	}
	for _, f := range functions {
		t.Run(f.fn, func(t *testing.T) {
			invoke := startRIE(t, rie, f.fn, cfg)
			for _, tc := range malformed(f.valid, f.dupField, f.dupValue) {
				resp := invoke(tc.payload)
				msg, _ := resp["errorMessage"].(string)
				if !strings.Contains(msg, tc.want) {
					t.Errorf("%s %q: answered %v, want an error saying %q", tc.name, tc.payload, resp, tc.want)
				}
				if f.changed() {
					t.Fatalf("%s %q changed the cluster or the state", tc.name, tc.payload)
				}
			}
			if resp := invoke(f.valid); resp["errorMessage"] != nil || !f.changed() {
				t.Fatalf("the valid request %s: answered %v, changed %v", f.valid, resp, f.changed())
			}
		})
	}
}

// startRIE builds a function's bootstrap for this machine and serves it
// under the RIE; the returned func posts one payload and decodes the answer.
func startRIE(t *testing.T, rie, fn, cfg string) func(string) map[string]any {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrap, "./functions/"+fn)
	build.Dir = root
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
	// AWS calls go to a closed loopback port with dummy keys: refused at
	// once, never out to AWS or the instance metadata service.
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
	return func(payload string) map[string]any {
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Post(url, "application/json", strings.NewReader(payload))
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
				return map[string]any{"answer": string(body)} // a result that is not an object
			}
			return out
		}
	}
}
