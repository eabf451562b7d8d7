package shadowcompare

import (
	"strings"
	"testing"
	"time"
)

func TestCompare(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 30, 0, time.UTC)
	since := now.Add(-time.Minute)
	status := func(at time.Time, targets map[string]int) *Status { return &Status{At: at, Targets: targets} }
	nodes := map[string]string{"w1": "workers", "w2": "workers", "other1": ""}
	cases := []struct {
		name       string
		planned    []Planned
		obs        Observed
		agree      bool
		why        string // of the first group
		ntDir      string
		caDir      string
		caSize     int
		unattrib   int
		noCATarget bool
	}{
		{
			name:    "both scale up by two",
			planned: []Planned{{NodeGroup: "workers", Target: 1, NewTarget: 3}},
			obs: Observed{Status: status(now.Add(-40*time.Second), map[string]int{"workers": 1}),
				ScaleUps: []ScaleUp{{Group: "workers", From: 1, To: 3, Max: 10, At: now.Add(-20 * time.Second)}}},
			agree: true, ntDir: DirUp, caDir: DirUp, caSize: 2,
		},
		{
			name:    "cluster-autoscaler acted first: its target is read, nodetide adds nothing",
			planned: []Planned{{NodeGroup: "workers", Target: 3, NewTarget: 3}},
			obs:     Observed{Status: status(now.Add(-5*time.Second), map[string]int{"workers": 3})},
			agree:   true, ntDir: DirNone, caDir: DirNone,
		},
		{
			name:    "different sizes",
			planned: []Planned{{NodeGroup: "workers", Target: 1, NewTarget: 3}},
			obs: Observed{Status: status(now.Add(-40*time.Second), map[string]int{"workers": 1}),
				ScaleUps: []ScaleUp{{Group: "workers", From: 1, To: 2, Max: 10, At: now.Add(-20 * time.Second)}}},
			why: "target: nodetide 3, cluster-autoscaler 2", ntDir: DirUp, caDir: DirUp, caSize: 1,
		},
		{
			name:    "a scale-up in the status's second: the Event's whole second wins",
			planned: []Planned{{NodeGroup: "workers", Target: 0, NewTarget: 2}},
			obs: Observed{Status: status(now.Add(400*time.Millisecond), map[string]int{"workers": 0}),
				ScaleUps: []ScaleUp{{Group: "workers", From: 0, To: 2, Max: 10, At: now}}},
			agree: true, ntDir: DirUp, caDir: DirUp, caSize: 2,
		},
		{
			name:    "the status is newer than the scale-up Event",
			planned: []Planned{{NodeGroup: "workers", Target: 2, NewTarget: 2}},
			obs: Observed{Status: status(now.Add(-5*time.Second), map[string]int{"workers": 2}),
				ScaleUps: []ScaleUp{{Group: "workers", From: 1, To: 3, Max: 10, At: now.Add(-50 * time.Second)}}},
			agree: true, ntDir: DirNone, caDir: DirNone,
		},
		{
			name:    "cluster-autoscaler idle while nodetide would scale up",
			planned: []Planned{{NodeGroup: "workers", Target: 1, NewTarget: 2}},
			obs:     Observed{Status: status(now.Add(-5*time.Second), map[string]int{"workers": 1})},
			why:     "target: nodetide 2, cluster-autoscaler 1", ntDir: DirUp, caDir: DirNone,
		},
		{
			name:    "cluster-autoscaler removes a node, nodetide would not",
			planned: []Planned{{NodeGroup: "workers", Target: 2, NewTarget: 2}},
			obs: Observed{Status: status(now.Add(-5*time.Second), map[string]int{"workers": 2}),
				ScaleDowns: map[string]time.Time{"w1": now.Add(-10 * time.Second)}},
			why: "removals: nodetide 0, cluster-autoscaler 1", ntDir: DirNone, caDir: DirDown, caSize: 1,
		},
		{
			name:    "both remove one node (not the same one)",
			planned: []Planned{{NodeGroup: "workers", Target: 2, NewTarget: 2, Drains: []string{"w2"}}},
			obs: Observed{Status: status(now.Add(-5*time.Second), map[string]int{"workers": 2}),
				ScaleDowns: map[string]time.Time{"w1": now.Add(-10 * time.Second), "other1": now, "gone": now}},
			agree: true, ntDir: DirDown, caDir: DirDown, caSize: 1, unattrib: 1,
		},
		{
			name:    "group named differently by cluster-autoscaler",
			planned: []Planned{{NodeGroup: "workers", CAName: "prod-workers-asg", Target: 1, NewTarget: 1}},
			obs:     Observed{Status: status(now, map[string]int{"prod-workers-asg": 1, "workers": 7})},
			agree:   true, ntDir: DirNone, caDir: DirNone,
		},
		{
			name:    "a group cluster-autoscaler does not report",
			planned: []Planned{{NodeGroup: "workers", Target: 1, NewTarget: 1}},
			obs:     Observed{Status: status(now, map[string]int{"other": 1})},
			why:     "does not report this group", ntDir: DirNone, caDir: DirNone, noCATarget: true,
		},
		{
			name:    "malformed status: never agreement",
			planned: []Planned{{NodeGroup: "workers", Target: 1, NewTarget: 1}},
			obs:     Observed{Problems: []string{"status ConfigMap: status has no autoscalerStatus"}},
			why:     "status could not be read", ntDir: DirNone, caDir: DirNone, noCATarget: true,
		},
		{
			name:    "agreeing groups, an unreadable Event: the cycle disagrees",
			planned: []Planned{{NodeGroup: "workers", Target: 1, NewTarget: 1}},
			obs:     Observed{Status: status(now, map[string]int{"workers": 1}), Problems: []string{"1 cluster-autoscaler Event(s) unreadable"}},
			ntDir:   DirNone, caDir: DirNone,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Compare(tc.planned, tc.obs, nodes, since)
			if c.Agree != tc.agree || len(c.Groups) != 1 {
				t.Fatalf("agree %v, want %v: %+v", c.Agree, tc.agree, c)
			}
			g := c.Groups[0]
			if tc.why == "" && !g.Agree && len(tc.obs.Problems) == 0 {
				t.Errorf("group disagrees: %+v", g)
			}
			if tc.why != "" && (g.Agree || !strings.Contains(g.Why, tc.why)) {
				t.Errorf("group %+v, want disagreement %q", g, tc.why)
			}
			if g.Nodetide.Direction != tc.ntDir || g.CA.Direction != tc.caDir || g.CA.Size != tc.caSize {
				t.Errorf("directions nodetide %+v, cluster-autoscaler %+v; want %s, %s %d", g.Nodetide, g.CA, tc.ntDir, tc.caDir, tc.caSize)
			}
			if (g.CA.Target == nil) != tc.noCATarget || len(c.Unattributed) != tc.unattrib {
				t.Errorf("CA target %v, unattributed %v", g.CA.Target, c.Unattributed)
			}
		})
	}
}

func TestCompareOrdersGroupsAndAgreesOnlyWhenAllDo(t *testing.T) {
	obs := Observed{Status: &Status{Targets: map[string]int{"a": 1, "b": 2}}}
	c := Compare([]Planned{{NodeGroup: "b", Target: 2, NewTarget: 2}, {NodeGroup: "a", Target: 1, NewTarget: 1}}, obs, nil, time.Time{})
	if !c.Agree || c.Groups[0].NodeGroup != "a" || c.Groups[1].NodeGroup != "b" {
		t.Fatalf("%+v", c)
	}
	c = Compare([]Planned{{NodeGroup: "b", Target: 2, NewTarget: 3}, {NodeGroup: "a", Target: 1, NewTarget: 1}}, obs, nil, time.Time{})
	if c.Agree || !c.Groups[0].Agree || c.Groups[1].Agree {
		t.Fatalf("%+v", c)
	}
}

func TestScaleUpsOnePerChange(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	got := ScaleUps([]ScaleUp{
		{Group: "w", From: 1, To: 3, At: t0.Add(2 * time.Second)},
		{Group: "w", From: 1, To: 3, At: t0.Add(5 * time.Second)},
		{Group: "w", From: 3, To: 4, At: t0.Add(3 * time.Second)},
		{Group: "g", From: 0, To: 1, At: t0},
	})
	if len(got) != 3 || got[0].Group != "g" || got[1].To != 4 || got[2].To != 3 || !got[2].At.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("%+v", got)
	}
}
