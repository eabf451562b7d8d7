package lambdarun_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
	store := state.NewDynamoDB(db.Client(t), table, "payloads")

	groupNodes := func() int {
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + group})
		if err != nil {
			t.Fatal(err)
		}
		return len(nodes.Items)
	}
	cordoned := cp.AddNode(t, testbed.Node{Name: "payload-cordoned", CPU: "2", Memory: "4Gi"})
	// kwok and the node controller write the new Node too: cordon it by a
	// patch, not an update of a copy that may be stale by then.
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, cordoned.Name, types.MergePatchType,
		[]byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
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
			invoke := sfnlocal.ServeFunction(t, f.fn, cfg)
			for _, tc := range malformed(f.valid, f.dupField, f.dupValue) {
				resp := invoke([]byte(tc.payload))
				msg, _ := resp["errorMessage"].(string)
				if !strings.Contains(msg, tc.want) {
					t.Errorf("%s %q: answered %v, want an error saying %q", tc.name, tc.payload, resp, tc.want)
				}
				if f.changed() {
					t.Fatalf("%s %q changed the cluster or the state", tc.name, tc.payload)
				}
			}
			if resp := invoke([]byte(f.valid)); resp["errorMessage"] != nil || !f.changed() {
				t.Fatalf("the valid request %s: answered %v, changed %v", f.valid, resp, f.changed())
			}
		})
	}
}
