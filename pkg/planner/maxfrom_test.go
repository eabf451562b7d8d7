package planner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// TestMaxSourceDecidesOverMax: a group above its max is shrunk only when a
// schedule set the max; a provider's or the config's max stops growth and
// removes nothing. A snapshot naming the schedule only in boundsFrom (as
// written before maxFrom) is read as a schedule's.
func TestMaxSourceDecidesOverMax(t *testing.T) {
	cases := []struct {
		name       string
		maxFrom    snapshot.BoundSource
		boundsFrom string
		wantDown   int
		wantReason string
	}{
		{name: "provider", maxFrom: snapshot.BoundProvider},
		{name: "config", maxFrom: snapshot.BoundConfig},
		{name: "schedule", maxFrom: snapshot.BoundSchedule, boundsFrom: "schedule night", wantDown: 2, wantReason: "(max set by schedule night)"},
		{name: "schedule named only in boundsFrom", boundsFrom: "schedule night", wantDown: 2, wantReason: "(max set by schedule night)"},
		{name: "schedule not named", maxFrom: snapshot.BoundSchedule, wantDown: 2, wantReason: "(max set by a schedule)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := group("a", 0, 1, 3, "4", "16Gi", "a1", "a2", "a3")
			g.MaxFrom, g.BoundsFrom = tc.maxFrom, tc.boundsFrom
			s := clusterOf([]snapshot.NodeGroup{g},
				[]corev1.Node{node("a1", "a", "4", "16Gi"), node("a2", "a", "4", "16Gi"), node("a3", "a", "4", "16Gi")},
				[]corev1.Pod{pod("busy", "3", "1Gi", on("a1")), pod("light", "1", "1Gi", on("a2")), pod("lighter", "500m", "1Gi", on("a3"))})
			plan := Decide(s, DefaultSettings(), t0)
			if len(plan.ScaleDown) != tc.wantDown {
				t.Fatalf("removals %+v, want %d", plan.ScaleDown, tc.wantDown)
			}
			for _, d := range plan.ScaleDown {
				if !strings.Contains(d.Reason, tc.wantReason) {
					t.Errorf("reason %q, want it to contain %q", d.Reason, tc.wantReason)
				}
			}
		})
	}
}

// TestMaxFromDocument: maxFrom is written and read back in both forms,
// absent for the provider; a bad value is refused with its path.
func TestMaxFromDocument(t *testing.T) {
	s := clusterOf([]snapshot.NodeGroup{
		group("p", 0, 5, 0, "4", "16Gi"),
		group("c", 0, 5, 0, "4", "16Gi"),
		group("s", 0, 5, 0, "4", "16Gi"),
	}, nil, nil)
	s.NodeGroups[1].MaxFrom = snapshot.BoundConfig
	s.NodeGroups[2].MaxFrom, s.NodeGroups[2].BoundsFrom = snapshot.BoundSchedule, "schedule night"
	for _, form := range []struct {
		name  string
		write func(*bytes.Buffer, snapshot.Snapshot) error
	}{
		{"full", func(b *bytes.Buffer, s snapshot.Snapshot) error { return snapshot.WriteSnapshot(b, s) }},
		{"compact", func(b *bytes.Buffer, s snapshot.Snapshot) error { return snapshot.WriteCompactSnapshot(b, s) }},
	} {
		t.Run(form.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := form.write(&b, s); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(b.String(), `"maxFrom"`); n != 2 {
				t.Errorf("maxFrom written %d times, want 2 (not for the provider):\n%s", n, b.String())
			}
			got, err := snapshot.ReadSnapshot(&b)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []snapshot.BoundSource{snapshot.BoundProvider, snapshot.BoundConfig, snapshot.BoundSchedule} {
				if g := got.NodeGroups[i]; g.MaxFrom != want || g.BoundsFrom != s.NodeGroups[i].BoundsFrom {
					t.Errorf("%s: maxFrom %q boundsFrom %q, want %q %q", g.Name, g.MaxFrom, g.BoundsFrom, want, s.NodeGroups[i].BoundsFrom)
				}
			}
		})
	}

	doc := func(fields string) string {
		return `{"capturedAt": "2026-11-30T10:00:00Z", "nodeGroups": [{"name": "g", "maxSize": 3` + fields + `}]}`
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown source", doc(`, "maxFrom": "cron"`), `nodeGroups[0].maxFrom: must be "config" or "schedule", or omitted for the provider (got "cron")`},
		{"config naming a schedule", doc(`, "maxFrom": "config", "boundsFrom": "schedule night"`), `nodeGroups[0].boundsFrom: names a schedule ("schedule night"), but maxFrom is "config"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := snapshot.ReadSnapshot(strings.NewReader(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
