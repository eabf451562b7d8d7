package snapshot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := snapshot.ReadSnapshot(strings.NewReader(doc(tc.replacing)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to name %q", err, tc.want)
			}
		})
	}
}
