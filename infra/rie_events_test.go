package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	invoke := map[string]func(payload []byte) map[string]any{}
	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		invoke[fn] = sfnlocal.ServeFunction(t, fn, cfg)
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

func TestMain(m *testing.M) { testbed.Main(m) }
