package drain_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda/messages"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/k8s"
)

// lambdaError is the errorType a Lambda error carries (what the state
// machine and callers match on) and its message.
func lambdaError(t *testing.T, err error) (typ, msg string) {
	t.Helper()
	var ie messages.InvokeResponse_Error
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T) carries no errorType", err, err)
	}
	return ie.Type, ie.Message
}

// cordoned lists which of the bed's nodes are unschedulable.
func (b *bed) cordoned(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, n := range b.nodes(t) {
		if n.Spec.Unschedulable {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// cordon cordons a node as a person would (no draining taint), retrying
// when kwok's status updates win the race for the Node.
func (b *bed) cordon(t *testing.T, name string) {
	t.Helper()
	if err := k8s.Cordon(context.Background(), b.cp.Client, name, ""); err != nil {
		t.Fatal(err)
	}
}

// TestHandleRefusesBeforeActing: events that encoding/json alone would read
// as "enable every node" (or as another node), an empty or invalid node name,
// and an absurd shutdown timeout are InvalidInput and leave every cordoned
// node cordoned; an unknown node is NodeNotFound. The Handler has no
// Starter, so a shutdown that got past the checks would fail the test.
func TestHandleRefusesBeforeActing(t *testing.T) {
	b := newBed(t, 0, 2)
	ctx := context.Background()
	names := []string{b.nodes(t)[0].Name, b.nodes(t)[1].Name}
	slices.Sort(names)
	for _, n := range names {
		b.cordon(t, n)
	}
	h := &drain.Handler{Steps: b.steps}
	state := func(node string) string {
		return `{"node":"` + node + `","drainId":"d","deadline":"2030-01-01T00:00:00Z","policy":"abort","surge":false}`
	}
	refused := []struct{ payload, errorType, msg string }{
		{`{"action":"enable","node":""}`, drain.ErrNameInvalidInput, "empty node name"},
		{`{"action":"enable","node":"  "}`, drain.ErrNameInvalidInput, "is not a node name"},
		{`{"action":"enable","node":"` + names[0] + `","node":""}`, drain.ErrNameInvalidInput, "node: field given twice"},
		{`{"Action":"enable"}`, drain.ErrNameInvalidInput, "Action: unknown field"},
		{`{"action":"enable","Node":"` + names[0] + `"}`, drain.ErrNameInvalidInput, "Node: unknown field"},
		{`{"action":"enable","node":"` + names[0] + `"} {"action":"enable"}`, drain.ErrNameInvalidInput, "unexpected data after the document"},
		{`{"action":"shutdown","node":"` + names[0] + `","timeout":"2562047h"}`, drain.ErrNameInvalidInput, `"timeout" must be a duration from 30s to 24h0m0s`},
		{`{"action":"shutdown","node":""}`, drain.ErrNameInvalidInput, "empty node name"},
		{`{"action":"shutdown","node":"no-such-node"}`, drain.ErrNameNodeNotFound, "node no-such-node does not exist"},
		{`{"action":"enable","node":"no-such-node"}`, drain.ErrNameNodeNotFound, "node no-such-node does not exist"},
		// A step's state is read as strictly: Rollback uncordons its node.
		{`{"step":"Rollback","state":` + strings.Replace(state(names[0]), `"drainId"`, `"node":"`+names[1]+`","drainId"`, 1) + `}`, drain.ErrNameInvalidInput, "state.node: field given twice"},
		{`{"step":"Rollback","state":` + strings.Replace(state(names[0]), `"node"`, `"Node"`, 1) + `}`, drain.ErrNameInvalidInput, "state: Node: unknown field"},
		{`{"step":"Rollback","state":` + state(names[0]) + `{}}`, drain.ErrNameInvalidInput, "invalid character"},
	}
	for _, tc := range refused {
		out, err := h.Handle(ctx, json.RawMessage(tc.payload))
		if err == nil {
			t.Errorf("%s: accepted, returned %+v", tc.payload, out)
			continue
		}
		if typ, msg := lambdaError(t, err); typ != tc.errorType || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: error %s %q, want %s mentioning %q", tc.payload, typ, msg, tc.errorType, tc.msg)
		}
	}
	if got := b.cordoned(t); !slices.Equal(got, names) {
		t.Fatalf("after the refused events the cordoned nodes are %v, want %v", got, names)
	}

	// Naming a node enables it alone; only the field's absence means all.
	if _, err := h.Handle(ctx, json.RawMessage(`{"action":"enable","node":"`+names[0]+`"}`)); err != nil {
		t.Fatalf("enable %s: %v", names[0], err)
	}
	if got := b.cordoned(t); !slices.Equal(got, names[1:]) {
		t.Fatalf("after enabling %s the cordoned nodes are %v, want %v", names[0], got, names[1:])
	}
	if _, err := h.Handle(ctx, json.RawMessage(`{"action":"enable"}`)); err != nil {
		t.Fatalf("enable all: %v", err)
	}
	if got := b.cordoned(t); len(got) != 0 {
		t.Fatalf("after enabling all, %v are still cordoned", got)
	}
}
