package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/planner"
)

// TestConsolidationAbsentIsToday: without scaleDown.consolidation the
// settings are today's (one drain per group at a time, no budgets).
func TestConsolidationAbsentIsToday(t *testing.T) {
	cfg, err := Parse([]byte(kwokDoc(okTemplate, "")), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sd := cfg.Settings().ScaleDown
	if sd.Consolidation != "" || sd.DisruptionBudgets != nil || sd.MaxConcurrentDrains != 1 {
		t.Errorf("scaleDown = %+v, want today's defaults", sd)
	}
}

func TestConsolidationBudgets(t *testing.T) {
	doc := kwokDoc(okTemplate, `scaleDown:
  consolidation: delete
  disruptionBudgets:
    - nodes: "20%"
    - nodes: "0"
      schedule: "0 9 * * mon-fri"
      duration: 8h
      timeZone: Europe/Amsterdam
      nodeGroups: [g]
    - nodes: 3
`)
	cfg, err := Parse([]byte(doc), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sd := cfg.Settings().ScaleDown
	if sd.Consolidation != planner.ConsolidationDelete || len(sd.DisruptionBudgets) != 3 {
		t.Fatalf("scaleDown = %+v", sd)
	}
	b := sd.DisruptionBudgets
	if b[0].Nodes != 20 || !b[0].Percent || b[0].Schedule != nil || b[0].NodeGroups != nil {
		t.Errorf("budget 0 = %+v, want 20%% always", b[0])
	}
	if b[1].Nodes != 0 || b[1].Percent || b[1].Schedule == nil || b[1].Duration != 8*time.Hour || !slices.Equal(b[1].NodeGroups, []string{"g"}) {
		t.Fatalf("budget 1 = %+v", b[1])
	}
	if loc := b[1].Schedule.Location().String(); loc != "Europe/Amsterdam" {
		t.Errorf("budget 1 zone = %s", loc)
	}
	// Monday 2026-11-30 08:00 UTC is 09:00 in Amsterdam: the window opens.
	monday := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	if got := b[1].Schedule.Next(monday.Add(-time.Second)); !got.Equal(monday) {
		t.Errorf("next fire = %s, want %s", got, monday)
	}
	if b[2].Nodes != 3 || b[2].Percent {
		t.Errorf("budget 2 = %+v, want 3 nodes", b[2])
	}
}

// TestConsolidationReplace: replace is read with its minimum saving, and
// without one the planner's default applies.
func TestConsolidationReplace(t *testing.T) {
	for _, tc := range []struct {
		body string
		want float64
	}{
		{"  consolidation: replace\n", 0},
		{"  consolidation: replace\n  replaceMinSaving: 0.35\n", 0.35},
	} {
		cfg, err := Parse([]byte(kwokDoc(okTemplate, "scaleDown:\n"+tc.body)), "x.yaml")
		if err != nil {
			t.Fatalf("%q: %v", tc.body, err)
		}
		sd := cfg.Settings().ScaleDown
		if sd.Consolidation != planner.ConsolidationReplace || sd.ReplaceMinSaving != tc.want {
			t.Errorf("%q: scaleDown = %+v, want replace with min saving %v", tc.body, sd, tc.want)
		}
	}
}

// TestConsolidationRefused: each mistake is named with its line and path,
// and replaceMinSaving only goes with replace, as a share.
func TestConsolidationRefused(t *testing.T) {
	sd := func(body string) string { return kwokDoc(okTemplate, "scaleDown:\n"+body) }
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"unknown mode", sd("  consolidation: always\n"), []string{`x.yaml:11: scaleDown.consolidation: unknown value "always" (use delete or replace)`}},
		{"min saving without replace", sd("  consolidation: delete\n  replaceMinSaving: 0.3\n"), []string{"x.yaml:12: scaleDown.replaceMinSaving: applies only with scaleDown.consolidation: replace"}},
		{"min saving without consolidation", sd("  replaceMinSaving: 0.3\n"), []string{"x.yaml:11: scaleDown.replaceMinSaving: applies only with scaleDown.consolidation: replace"}},
		{"min saving zero", sd("  consolidation: replace\n  replaceMinSaving: 0\n"), []string{"x.yaml:12: scaleDown.replaceMinSaving: must be a share in (0, 1)"}},
		{"min saving whole", sd("  consolidation: replace\n  replaceMinSaving: 1\n"), []string{"x.yaml:12: scaleDown.replaceMinSaving: must be a share in (0, 1)"}},
		{"min saving percent", sd("  consolidation: replace\n  replaceMinSaving: 20%\n"), []string{"x.yaml:12: scaleDown.replaceMinSaving"}},
		{"min saving NaN", sd("  consolidation: replace\n  replaceMinSaving: .nan\n"), []string{"x.yaml:12: scaleDown.replaceMinSaving: must be a finite number"}},
		{"budgets without consolidation", sd("  disruptionBudgets: [{nodes: \"1\"}]\n"), []string{"x.yaml:11: scaleDown.disruptionBudgets: apply only to consolidation"}},
		{"maxConcurrentDrains with consolidation", sd("  consolidation: delete\n  maxConcurrentDrains: 2\n"), []string{"x.yaml:12: scaleDown.maxConcurrentDrains: does not apply with consolidation"}},
		{"no nodes", sd("  consolidation: delete\n  disruptionBudgets:\n    - schedule: \"@daily\"\n      duration: 1h\n"), []string{"x.yaml:13: scaleDown.disruptionBudgets[0].nodes: is required"}},
		{"percent above 100", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"101%\"\n"), []string{`x.yaml:13: scaleDown.disruptionBudgets[0].nodes: must be a number of nodes ("3") or a percentage of a group's nodes from 0% to 100% ("10%"), got "101%"`}},
		{"fraction", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"1.5\"\n"), []string{`scaleDown.disruptionBudgets[0].nodes: must be a number of nodes`}},
		{"negative", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"-1\"\n"), []string{`scaleDown.disruptionBudgets[0].nodes: must be a number of nodes`}},
		{"schedule without duration", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"0\"\n      schedule: \"0 9 * * 1-5\"\n"), []string{"x.yaml:13: scaleDown.disruptionBudgets[0].duration: is required with schedule"}},
		{"duration without schedule", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"0\"\n      duration: 8h\n"), []string{"x.yaml:14: scaleDown.disruptionBudgets[0].duration: applies only with schedule"}},
		{"zero duration", sd("  consolidation: delete\n  disruptionBudgets:\n    - {nodes: \"0\", schedule: \"@daily\", duration: 0s}\n"), []string{"scaleDown.disruptionBudgets[0].duration: is required with schedule and must be above 0"}},
		{"zone without schedule", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"0\"\n      timeZone: Europe/Paris\n"), []string{"x.yaml:14: scaleDown.disruptionBudgets[0].timeZone: applies only with schedule"}},
		{"bad cron", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"0\"\n      schedule: \"0 25 * * *\"\n      duration: 1h\n"), []string{`x.yaml:14: scaleDown.disruptionBudgets[0].schedule: cron "0 25 * * *": hour "25"`}},
		{"bad zone", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"0\"\n      schedule: \"@daily\"\n      duration: 1h\n      timeZone: Mars/Olympus\n"), []string{`x.yaml:16: scaleDown.disruptionBudgets[0].timeZone: unknown time zone "Mars/Olympus"`}},
		{"Local zone", sd("  consolidation: delete\n  disruptionBudgets:\n    - {nodes: \"0\", schedule: \"@daily\", duration: 1h, timeZone: Local}\n"), []string{`scaleDown.disruptionBudgets[0].timeZone: "Local" depends on the machine`}},
		{"unknown group", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"1\"\n      nodeGroups: [g, h]\n"), []string{`x.yaml:14: scaleDown.disruptionBudgets[0].nodeGroups[1]: "h" names no node group`}},
		{"group twice", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"1\"\n      nodeGroups: [g, g]\n"), []string{`scaleDown.disruptionBudgets[0].nodeGroups[1]: node group "g" listed twice`}},
		{"unknown budget key", sd("  consolidation: delete\n  disruptionBudgets:\n    - nodes: \"1\"\n      reasons: [Underutilized]\n"), []string{"x.yaml:14: scaleDown.disruptionBudgets[0].reasons: unknown field"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "x.yaml")
			if err == nil {
				t.Fatal("Parse accepted a bad config")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
