package snapshot_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
)

// TestStateReplacing: a replacement under way reads back as written, and
// every malformed one is refused by its path.
func TestStateReplacing(t *testing.T) {
	doc := func(replacing string) string {
		return `{"capturedAt": "2026-11-30T10:00:00Z", "state": {"unneededSince": {}, "lastScaleUp": {}, "replacing": ` + replacing + `}}`
	}
	s, err := snapshot.ReadSnapshot(strings.NewReader(doc(`{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["big-0"], "since": "2026-11-30T09:58:00Z"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := s.State.Replacing["r-1"]
	if !ok || got.NodeGroup != "small" || got.Delta != 1 || len(got.Nodes) != 1 || got.Nodes[0] != "big-0" ||
		!got.Since.Equal(time.Date(2026, 11, 30, 9, 58, 0, 0, time.UTC)) {
		t.Errorf("replacing = %+v", s.State.Replacing)
	}
	ok1 := `{"nodeGroup": "small", "delta": 1, "nodes": ["big-0"], "since": "2026-11-30T09:58:00Z"}`
	for _, tc := range []struct{ name, replacing, want string }{
		{"unknown key", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["big-0"], "since": "2026-11-30T09:58:00Z", "extra": 1}}`, "state.replacing.r-1.extra"},
		{"duplicate ID", `{"r-1": ` + ok1 + `, "r-1": ` + ok1 + `}`, "state.replacing.r-1"},
		{"empty ID", `{"": ` + ok1 + `}`, "ID must not be empty"},
		{"no group", `{"r-1": {"delta": 1, "nodes": ["big-0"], "since": "2026-11-30T09:58:00Z"}}`, "nodeGroup: missing"},
		{"zero delta", `{"r-1": {"nodeGroup": "small", "delta": 0, "nodes": ["big-0"], "since": "2026-11-30T09:58:00Z"}}`, "delta: must be 1 to 100"},
		{"huge delta", `{"r-1": {"nodeGroup": "small", "delta": 101, "nodes": ["big-0"], "since": "2026-11-30T09:58:00Z"}}`, "delta: must be 1 to 100"},
		{"no nodes", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": [], "since": "2026-11-30T09:58:00Z"}}`, "nodes: must name 1 to 100"},
		{"node twice", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["a", "a"], "since": "2026-11-30T09:58:00Z"}}`, `node "a" listed twice`},
		{"no since", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["a"]}}`, "since: missing"},
		{"drained not a time", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["a"], "since": "2026-11-30T09:58:00Z", "drained": "yesterday"}}`, "state.replacing.r-1.drained"},
		{"drained a number", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["a"], "since": "2026-11-30T09:58:00Z", "drained": 5}}`, "state.replacing.r-1.drained"},
		{"receivers not a list", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["a"], "since": "2026-11-30T09:58:00Z", "drained": "2026-11-30T09:59:00Z", "receivers": "b"}}`, "state.replacing.r-1.receivers"},
		{"receivers undrained", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["a"], "since": "2026-11-30T09:58:00Z", "receivers": ["b"]}}`, "state.replacing.r-1: receivers: only a drained replacement"},
		{"receiver twice", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["a"], "since": "2026-11-30T09:58:00Z", "drained": "2026-11-30T09:59:00Z", "receivers": ["b", "b"]}}`, `receivers[1]: node "b" listed twice`},
		{"receiver empty", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["a"], "since": "2026-11-30T09:58:00Z", "drained": "2026-11-30T09:59:00Z", "receivers": [""]}}`, "receivers[0]: must not be empty"},
		{"too many receivers", `{"r-1": {"nodeGroup": "small", "delta": 1, "nodes": ["a"], "since": "2026-11-30T09:58:00Z", "drained": "2026-11-30T09:59:00Z", "receivers": ` + manyNames(snapshot.MaxReplacementReceivers+1) + `}}`, "receivers: must name at most 1000 nodes, got 1001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := snapshot.ReadSnapshot(strings.NewReader(doc(tc.replacing)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to name %q", err, tc.want)
			}
		})
	}
}

// manyNames is a JSON list of n distinct node names.
func manyNames(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%q", fmt.Sprintf("n-%d", i))
	}
	return "[" + strings.Join(names, ",") + "]"
}

// TestStateReplacingDrained: a drained replacement (drained, receivers)
// and one still waiting (neither, and neither written) read back as
// written in both forms, times in UTC; a zero or null drained is no drain.
func TestStateReplacingDrained(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	since := time.Date(2026, 11, 30, 10, 58, 0, 123, cet)
	s := snapshottest.Cluster(nil, nil, nil)
	s.State.Replacing = map[string]snapshot.Replacement{
		"r-drained": {NodeGroup: "small", Delta: 2, Nodes: []string{"big-0", "big-1"}, Since: since,
			Drained: since.Add(4 * time.Minute), Receivers: []string{"mid-3", "small-0"}},
		"r-waiting": {NodeGroup: "small", Delta: 1, Nodes: []string{"big-2"}, Since: since},
	}
	want := map[string]snapshot.Replacement{
		"r-drained": {NodeGroup: "small", Delta: 2, Nodes: []string{"big-0", "big-1"}, Since: since.UTC(),
			Drained: since.Add(4 * time.Minute).UTC(), Receivers: []string{"mid-3", "small-0"}},
		"r-waiting": {NodeGroup: "small", Delta: 1, Nodes: []string{"big-2"}, Since: since.UTC()},
	}
	for _, compact := range []bool{false, true} {
		doc := snapshottest.Write(t, s, compact)
		got := snapshottest.Read(t, doc)
		if !reflect.DeepEqual(got.State.Replacing, want) {
			t.Errorf("compact %v: replacing = %+v, want %+v", compact, got.State.Replacing, want)
		}
		if n := strings.Count(string(doc), `"drained"`); n != 1 {
			t.Errorf("compact %v: %d drained keys written, want the drained replacement's only:\n%s", compact, n, doc)
		}
		if n := strings.Count(string(doc), `"receivers"`); n != 1 {
			t.Errorf("compact %v: %d receivers keys written, want the drained replacement's only:\n%s", compact, n, doc)
		}
	}
	for _, drained := range []string{`"0001-01-01T00:00:00Z"`, `null`} {
		got, err := snapshot.ReadSnapshot(strings.NewReader(`{"capturedAt": "2026-11-30T10:00:00Z", "state": {"replacing": {"r-1": ` +
			`{"nodeGroup": "small", "delta": 1, "nodes": ["a"], "since": "2026-11-30T09:58:00Z", "drained": ` + drained + `}}}}`))
		if err != nil {
			t.Fatalf("drained %s: %v", drained, err)
		}
		if r := got.State.Replacing["r-1"]; !r.Drained.IsZero() {
			t.Errorf("drained %s read as %v, want no drain", drained, r.Drained)
		}
	}
}
