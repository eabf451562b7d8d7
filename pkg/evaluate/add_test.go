package evaluate_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/providers"
)

// TestAddBoundsThroughHandler: on a kwok group with max 5, the payloads
// encoding/json alone reads as an add (a repeated action, field names in
// another case, an add followed by more) and counts past the maximum or
// absurd ones are refused and add no node and write no state; an add of
// exactly up to the maximum succeeds.
func TestAddBoundsThroughHandler(t *testing.T) {
	f := newFixture(t, 0, 5, nil)
	ctx := context.Background()
	h := &evaluate.Handler{Evaluator: f.evaluator("add")}
	g := `"` + f.pool + `"`
	unchanged := func(after string, want int) {
		t.Helper()
		if n := f.target(t); n != want {
			t.Fatalf("after %s the group's target is %d, want %d", after, n, want)
		}
		if st, _ := f.store.LoadState(ctx); len(st.LastScaleUp) != 0 && want == 0 {
			t.Fatalf("after %s the state records a scale-up: %+v", after, st)
		}
	}
	for _, tc := range []struct{ payload, err string }{
		{`{"action":"plan","action":"add","nodeGroup":` + g + `,"count":1}`, "action: field given twice"},
		{`{"Action":"add","NodeGroup":` + g + `,"COUNT":1}`, "Action: unknown field"},
		{`{"action":"add","nodeGroup":` + g + `,"count":1} {"action":"plan"}`, "not valid JSON"},
		{`{"action":"add","nodeGroup":` + g + `,"count":6}`, "above its max size 5"},
		{`{"action":"add","nodeGroup":` + g + `,"count":` + strconv.Itoa(math.MaxInt64) + `}`, `"count" must be from 1 to 1000`},
		{`{"action":"add","nodeGroup":` + g + `,"count":-1}`, `"count" must be from 1 to 1000`},
	} {
		if _, err := h.Handle(ctx, json.RawMessage(tc.payload)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want it to mention %q", tc.payload, err, tc.err)
		}
		unchanged(tc.payload, 0)
	}
	// Evaluator.Add itself, as the CLI calls it, refuses the same.
	for _, n := range []int{math.MaxInt64, math.MaxInt64 - 1, 1 << 32, 6, 0, -5} {
		if _, err := f.evaluator("add").Add(ctx, f.pool, n); err == nil {
			t.Errorf("Add(%d) to a group of 0 with max 5 succeeded", n)
		}
		unchanged("Add("+strconv.Itoa(n)+")", 0)
	}

	if _, err := h.Handle(ctx, json.RawMessage(`{"action":"add","nodeGroup":`+g+`,"count":5}`)); err != nil {
		t.Fatalf("add exactly up to max: %v", err)
	}
	unchanged("adding 5", 5)
	for _, n := range []int{1, math.MaxInt64 - 4, 1000} {
		_, err := f.evaluator("add").Add(ctx, f.pool, n)
		if n != math.MaxInt64-4 && !errors.Is(err, providers.ErrAboveMax) {
			t.Errorf("Add(%d) at max: error %v, want %v", n, err, providers.ErrAboveMax)
		} else if err == nil {
			t.Errorf("Add(%d) at max succeeded", n)
		}
		unchanged("Add("+strconv.Itoa(n)+") at max", 5)
	}
}
