package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/state"
)

const daytimeFile = "../../pkg/schedule/testdata/daytime.json"

func TestSchedulesValidate(t *testing.T) {
	if out, errOut, code := nodetide(t, "schedules", "validate", daytimeFile); code != 0 || !strings.Contains(out, "1 schedule(s), valid") {
		t.Fatalf("validate daytime.json: exit %d: %s %s", code, out, errOut)
	}
	bad := writeFile(t, "bad.json", `[{"name":"a","cron":"0 25 * * *","timezone":"Mars/Olympus","desiredCapacity":1},{"name":"a","cron":"0 8 * * *","desiredCapacity":1}]`)
	out, errOut, code := nodetide(t, "schedules", "validate", bad)
	if code == 0 {
		t.Fatalf("invalid file passed: %s", out)
	}
	for _, want := range []string{"[0].cron", "[0].timezone", "[1].name", ": 3 problem(s)"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("errors don't mention %s:\n%s", want, errOut)
		}
	}
	unknown := writeFile(t, "unknown.json", `{"name":"a","cron":"0 8 * * *","replica":3}`)
	if _, errOut, code := nodetide(t, "schedules", "validate", unknown); code == 0 || !strings.Contains(errOut, "replica: unknown field") {
		t.Errorf("unknown field: exit %d: %s", code, errOut)
	}
}

// TestSchedulesNextAcrossDST: 02:30 doesn't exist in Amsterdam on the last
// Sunday of March 2027; the schedule fires once, at 03:00 CEST.
func TestSchedulesNextAcrossDST(t *testing.T) {
	file := writeFile(t, "night.json", `{"name":"night","cron":"0 30 2 * * *","timezone":"Europe/Amsterdam","desiredCapacity":0}`)
	out, errOut, code := nodetide(t, "schedules", "next", file, "--from", "2027-03-26T12:00:00Z", "--count", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "2027-03-27T02:30:00+01:00\n2027-03-28T03:00:00+02:00\n2027-03-29T02:30:00+02:00\n2027-03-30T02:30:00+02:00\n"
	if out != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	if _, errOut, code := nodetide(t, "schedules", "next", file, "--from", "yesterday"); code == 0 || !strings.Contains(errOut, "--from") {
		t.Errorf("bad --from: exit %d: %s", code, errOut)
	}
}

func TestSchedulesStoreCommands(t *testing.T) {
	db := testbed.DynamoDB(t)
	ctx := context.Background()
	table := "cli-schedules"
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, "nodetide.yaml", fmt.Sprintf(`cluster: {name: sched}
state: {dynamodb: {table: %s, endpoint: %s}}
nodeGroups:
  - name: workers
    provider: kwok
    minSize: 0
    maxSize: 3
    kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}}}
`, table, db.Endpoint))

	if out, errOut, code := nodetide(t, "schedules", "create", daytimeFile, "--config", cfg); code != 0 || !strings.Contains(out, "schedule daytime: stored (version 1)") {
		t.Fatalf("create: exit %d: %s %s", code, out, errOut)
	}
	// Creating again replaces the definition.
	if out, errOut, code := nodetide(t, "schedules", "create", daytimeFile, "--config", cfg); code != 0 || !strings.Contains(out, "version 2") {
		t.Fatalf("create again: exit %d: %s %s", code, out, errOut)
	}
	out, errOut, code := nodetide(t, "schedules", "list", "--config", cfg)
	if code != 0 || !strings.Contains(out, "daytime") || !strings.Contains(out, "0 0 8 * * *") {
		t.Fatalf("list: exit %d: %s %s", code, out, errOut)
	}
	if strings.Contains(out, "NODE GROUP") {
		t.Errorf("list shows overrides before any schedule fired:\n%s", out)
	}
	// The sizes a fired schedule holds show under the schedules.
	max1 := 1
	if _, err := state.NewDynamoDB(db.Client(t), table, "sched").SetOverride(ctx, schedule.Override{
		Group: "workers", Schedule: "daytime", Max: &max1, FiredAt: time.Date(2027, 3, 1, 8, 0, 0, 0, time.UTC),
	}); err != nil {
		t.Fatal(err)
	}
	out, _, _ = nodetide(t, "schedules", "list", "--config", cfg)
	if !regexp.MustCompile(`(?m)^workers +schedule daytime +- +1 +- +2027-03-01T08:00:00Z$`).MatchString(out) {
		t.Errorf("list does not show the override:\n%s", out)
	}
	out, errOut, code = nodetide(t, "schedules", "get", "daytime", "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("get: exit %d: %s", code, errOut)
	}
	var rec struct {
		Schedule struct {
			Name              string `json:"name"`
			DesiredCapacity   int    `json:"desiredCapacity"`
			AppScaleTemplates []struct {
				App string `json:"app"`
			} `json:"appScaleTemplates"`
		} `json:"schedule"`
		Version int `json:"version"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("get -o json: %v\n%s", err, out)
	}
	if rec.Schedule.Name != "daytime" || rec.Schedule.DesiredCapacity != 5 || len(rec.Schedule.AppScaleTemplates) != 1 || rec.Version != 2 {
		t.Fatalf("get: %+v", rec)
	}
	if out, errOut, code := nodetide(t, "schedules", "delete", "daytime", "--config", cfg); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: exit %d: %s %s", code, out, errOut)
	}
	if _, errOut, code := nodetide(t, "schedules", "get", "daytime", "--config", cfg); code == 0 || !strings.Contains(errOut, "no such schedule") {
		t.Fatalf("get after delete: exit %d: %s", code, errOut)
	}
	if _, errOut, code := nodetide(t, "schedules", "delete", "daytime", "--config", cfg); code == 0 || !strings.Contains(errOut, "no such schedule") {
		t.Fatalf("delete twice: exit %d: %s", code, errOut)
	}

	// In-memory state can't keep schedules between commands: a clear error.
	mem := writeFile(t, "memory.yaml", "cluster: {name: sched}\nstate: {memory: {}}\nnodeGroups:\n  - {name: workers, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: \"2\", memory: 8Gi}}}}\n")
	if _, errOut, code := nodetide(t, "schedules", "list", "--config", mem); code == 0 || !strings.Contains(errOut, "state.dynamodb") {
		t.Fatalf("list with memory state: exit %d: %s", code, errOut)
	}
}
