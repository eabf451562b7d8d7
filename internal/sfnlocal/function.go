package sfnlocal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/testbed"
)

// ServeFunction builds one of the functions (functions/<fn>) for this
// machine and serves it alone under the Lambda RIE with configYAML as its
// NODETIDE_CONFIG, as `sam local invoke` would; it is stopped when the
// test ends. The returned func posts one payload, exactly as given, and
// decodes the answer: an object as it came (errors as errorMessage and
// errorType), any other result under "answer". AWS calls the function makes
// go to a closed loopback port with dummy keys: refused at once, never out
// to AWS or the instance metadata service.
func ServeFunction(t testing.TB, fn, configYAML string) func(payload []byte) map[string]any {
	t.Helper()
	rie, err := RIEPath()
	if err != nil {
		t.Fatal(err)
	}
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
	cmd.Env = []string{"NODETIDE_CONFIG=" + configYAML, "AWS_REGION=us-east-1", "AWS_LAMBDA_FUNCTION_TIMEOUT=60", "PATH=" + os.Getenv("PATH"),
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
				return map[string]any{"answer": string(body)} // a result that is not an object
			}
			return out
		}
	}
}
