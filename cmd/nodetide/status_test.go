package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/buildinfo"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/shadowcompare"
	"github.com/nodetide/nodetide/pkg/state"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden from the current output (review the diff)")

var statusNow = time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)

func sampleStatus() evaluate.Status {
	at := func(d time.Duration) *time.Time { t := statusNow.Add(d); return &t }
	return evaluate.Status{
		CycleAt: statusNow.Add(-30 * time.Second), Duration: "1.84s", Holder: "evaluate-3f2a9c01d4e5",
		LastError: &evaluate.StatusError{At: statusNow.Add(-2*time.Minute - 30*time.Second), Message: "scaleUp gpu: SetDesiredCapacity: api error Throttling: Rate exceeded"},
		GroupsAt:  statusNow.Add(-30 * time.Second),
		NodeGroups: []evaluate.GroupSummary{
			{Name: "workers", Provider: "aws", MinSize: 2, MaxSize: 10, TargetSize: 6, Registered: 4, Ready: 4,
				Health: []string{evaluate.HealthProvisioning}, LastScaleUp: at(-30 * time.Second), LastScaleDown: at(-3 * time.Hour),
				CPUUtilization: 0.71, MemoryUtilization: 0.52,
				Headroom: &evaluate.GroupHeadroom{Rule: "2 spare nodes", Free: "0 free", Need: 2, Adding: 2}},
			{Name: "gpu", Provider: "aws", MinSize: 0, MaxSize: 2, TargetSize: 2, Registered: 2, Ready: 1,
				Health:       []string{evaluate.HealthBackedOff, evaluate.HealthAtMax, evaluate.HealthNodesNotReady},
				BackoffUntil: at(2*time.Minute + 30*time.Second), LastScaleUp: at(-20 * time.Minute), CPUUtilization: 0.9, MemoryUtilization: 0.4,
				Headroom: &evaluate.GroupHeadroom{Rule: "utilisation below 80%", Free: "at 90%", Need: 1, Blocked: "backed off until 2026-12-01T10:03:00Z"}},
			{Name: "batch", Provider: "scaleway", MinSize: 0, MaxSize: 5, TargetSize: 1, Registered: 1, Ready: 1, Health: []string{},
				Headroom: &evaluate.GroupHeadroom{Rule: "2 cpu, 4Gi memory spare", Free: "4 cpu, 16Gi memory free", Met: true}},
			{Name: "spot", Provider: "aws", MinSize: 0, MaxSize: 4, TargetSize: 4, Registered: 3, Ready: 3, Health: []string{evaluate.HealthAtMax, evaluate.HealthProvisioning},
				Headroom: &evaluate.GroupHeadroom{Rule: "3 spare nodes", Free: "0 free", Need: 3, Adding: 1, Blocked: "max size 4"}},
			{Name: "system", Provider: "aws", MinSize: 2, MaxSize: 3, TargetSize: 2, Registered: 2, Ready: 2, Health: []string{}},
		},
		UnschedulablePods: 3,
		Problems: []evaluate.Problem{{Kind: evaluate.ProblemGroupBackoff, Count: 1, Detail: "gpu until 2026-12-01T10:03:00Z"},
			{Kind: evaluate.ProblemPodsPending, Count: 3, Detail: "default/train-0, default/train-1, default/train-2; the oldest for 14m2s, over 10m0s"},
			{Kind: evaluate.ProblemHeadroomGroupNotFound, Count: 1, Detail: "prod-gpu-old; names are matched exactly; a headroom applies once its group is found"}},
		Unneeded: []evaluate.UnneededNode{
			{Node: "ip-10-0-3-17.eu-west-1.compute.internal", NodeGroup: "workers", Since: statusNow.Add(-9 * time.Minute)},
			{Node: "scw-batch-7d1e", NodeGroup: "batch", Since: statusNow.Add(-2 * time.Minute)},
		},
		UnneededOmitted: 0,
		Drains:          []evaluate.DrainSummary{},
		Actions: []evaluate.Action{
			{Kind: "scaleUp", NodeGroup: "workers", Delta: 2},
		},
		Build: &sampleBuild,
	}
}

var sampleBuild = buildinfo.Info{Version: "0.1.0", Commit: "fedcba9876543210fedcba9876543210fedcba98", Date: "2026-11-30T08:00:00Z",
	GoVersion: "go1.26.8", Platform: "linux/arm64"}

func TestStatusTableGolden(t *testing.T) {
	doc := statusDoc{Cluster: "prod", Status: sampleStatus(), DrainsReadAt: statusNow}
	doc.Drains = []evaluate.DrainSummary{{Node: "ip-10-0-1-4.eu-west-1.compute.internal", NodeGroup: "workers",
		ID: "ip-10-0-1-4-1764582000", Phase: state.PhaseEvicted.String(), StartedAt: statusNow.Add(-4 * time.Minute), Deadline: statusNow.Add(6 * time.Minute)}}
	doc.UnneededOmitted = 12
	doc.FunctionBuilds = map[string]state.FunctionBuild{"drain": {Build: sampleBuild, Since: statusNow.Add(-26 * time.Hour)},
		"schedule": {Build: sampleBuild, Since: statusNow.Add(-26 * time.Hour)}}
	var out bytes.Buffer
	if err := writeStatusTable(&out, doc, statusNow); err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/status.golden"
	if *updateGolden {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("rewrote %s: review the diff, then run again without -update", golden)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("table differs from %s:\n%s", golden, out.String())
	}
}

func TestStatusCommand(t *testing.T) {
	db := testbed.DynamoDB(t)
	ctx := context.Background()
	table := "cli-status"
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, "nodetide.yaml", fmt.Sprintf(`cluster: {name: prod}
state: {dynamodb: {table: %s, endpoint: %s}}
nodeGroups:
  - {name: workers, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}}}}
`, table, db.Endpoint))

	// Before any cycle: a clear error.
	if _, errOut, code := nodetide(t, "status", "--config", cfg); code == 0 || !strings.Contains(errOut, "no evaluate cycle has written a status for cluster prod") {
		t.Fatalf("status before any cycle: exit %d: %s", code, errOut)
	}

	store := state.NewDynamoDB(db.Client(t), table, "prod")
	stored := sampleStatus()
	raw, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutStatus(ctx, evaluate.StatusName, raw); err != nil {
		t.Fatal(err)
	}
	// A drain that started after the cycle: status reads it now.
	started := statusNow.Add(-10 * time.Second)
	if _, err := store.BeginDrain(ctx, state.DrainRecord{Node: "n1", ID: "d1", NodeGroup: "workers", StartedAt: started, Phase: state.PhasePrepared}); err != nil {
		t.Fatal(err)
	}

	// Drain has started once with this build; schedule never.
	if _, err := state.RecordBuild(ctx, store, "drain", sampleBuild, started); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := nodetide(t, "status", "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("status -o json: exit %d: %s", code, errOut)
	}
	var got statusDoc
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	wantDrains := []evaluate.DrainSummary{{Node: "n1", NodeGroup: "workers", ID: "d1", Phase: state.PhasePrepared.String(), StartedAt: started}}
	if !reflect.DeepEqual(got.Drains, wantDrains) || got.DrainsReadAt.Before(got.CycleAt) || got.Cluster != "prod" {
		t.Errorf("drains %+v read at %s, cluster %q; want %+v read now", got.Drains, got.DrainsReadAt, got.Cluster, wantDrains)
	}
	wantBuilds := map[string]state.FunctionBuild{"drain": {Build: sampleBuild, Since: started}}
	if !reflect.DeepEqual(got.FunctionBuilds, wantBuilds) || got.FunctionBuildsError != "" {
		t.Errorf("function builds %+v (error %q), want %+v", got.FunctionBuilds, got.FunctionBuildsError, wantBuilds)
	}
	got.Drains = stored.Drains
	if !reflect.DeepEqual(got.Status, stored) {
		t.Errorf("status round trip differs:\n got %+v\nwant %+v", got.Status, stored)
	}

	out, errOut, code = nodetide(t, "status", "--config", cfg, "-o", "yaml")
	var y statusDoc
	if code != 0 || yaml.Unmarshal([]byte(out), &y) != nil || len(y.NodeGroups) != 5 || y.NodeGroups[1].BackoffUntil == nil || y.NodeGroups[0].Headroom == nil {
		t.Fatalf("status -o yaml: exit %d: %s\n%s", code, errOut, out)
	}

	out, errOut, code = nodetide(t, "status", "--config", cfg)
	versions := "Versions:     evaluate 0.1.0 (fedcba987654), drain 0.1.0 (fedcba987654), schedule not recorded\n"
	if code != 0 || !strings.Contains(out, "NODE GROUP") || !strings.Contains(out, "BackedOff,AtMax,NodesNotReady") || !strings.Contains(out, "n1 ") ||
		!strings.Contains(out, versions) {
		t.Fatalf("status table: exit %d: %s\n%s", code, errOut, out)
	}

	if _, errOut, code := nodetide(t, "status", "--config", cfg, "-o", "wide"); code == 0 || !strings.Contains(errOut, `--output "wide"`) {
		t.Errorf("status -o wide: exit %d: %s", code, errOut)
	}
	mem := writeFile(t, "memory.yaml", "cluster: {name: prod}\nstate: {memory: {}}\nnodeGroups:\n  - {name: workers, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: \"2\", memory: 8Gi}}}}\n")
	if _, errOut, code := nodetide(t, "status", "--config", mem); code == 0 || !strings.Contains(errOut, "state.memory") {
		t.Errorf("status with memory state: exit %d: %s", code, errOut)
	}
}

// TestRunPrintsStatusWithMemoryState: with state.memory the status lives in
// the run process, and run --status prints it there.
func TestRunPrintsStatusWithMemoryState(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	cfg := writeFile(t, "nodetide.yaml", fmt.Sprintf(`cluster: {name: local, kubernetes: {kubeconfig: %[2]s}}
state: {memory: {}}
nodeGroups:
  - {name: %[1]s, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}, labels: {pool: %[1]s}}}}
`, ns, cp.KubeconfigPath))
	_, errOut, code := nodetide(t, "run", "--once", "--status", "--config", cfg)
	if code != 0 {
		t.Fatalf("run --once --status: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Cluster:      local", "NODE GROUP", ns + "  ", "No running drains."} {
		if !strings.Contains(errOut, want) {
			t.Errorf("run --status output lacks %q:\n%s", want, errOut)
		}
	}
}

// TestStatusSaysWhenGroupsWereNotRead: the node groups are said to be an
// earlier cycle's only when the last cycle did not read them, not whenever
// their capture time differs from the cycle's end (it always does: the
// snapshot is taken during the cycle).
func TestStatusSaysWhenGroupsWereNotRead(t *testing.T) {
	end := statusNow.Add(-30 * time.Second)
	cases := []struct {
		name     string
		groupsAt time.Time
		duration string
		want     bool
	}{
		{"read at the cycle's end", end, "1.84s", false},
		{"read during the cycle", end.Add(-1500 * time.Millisecond), "1.84s", false},
		{"read as the cycle began", end.Add(-1840 * time.Millisecond), "1.84s", false},
		{"read at the start, duration rounded", end.Add(-1840*time.Millisecond - 400*time.Microsecond), "1.84s", false},
		{"an earlier cycle's", end.Add(-time.Minute), "1.84s", true},
		{"never read", time.Time{}, "120ms", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := sampleStatus()
			st.CycleAt, st.GroupsAt, st.Duration = end, tc.groupsAt, tc.duration
			var out bytes.Buffer
			if err := writeStatusTable(&out, statusDoc{Cluster: "prod", Status: st}, statusNow); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out.String(), "(the last cycle did not read them)"); got != tc.want {
				t.Errorf("says the groups were not read: %v, want %v\n%s", got, tc.want, out.String())
			}
		})
	}
}

// TestStatusTableShadowGolden: a shadow cycle's status ends with its
// comparison with cluster-autoscaler: the verdict, what could not be read,
// and a row per group.
func TestStatusTableShadowGolden(t *testing.T) {
	st := sampleStatus()
	st.Shadow = true
	st.Actions = []evaluate.Action{{Kind: evaluate.KindShadow, Would: "scaleUp", NodeGroup: "workers", Delta: 2}}
	three, six, two := 3, 6, 2
	st.ShadowCompare = &shadowcompare.Comparison{
		Since: statusNow.Add(-90 * time.Second), StatusAt: statusNow.Add(-35 * time.Second),
		Groups: []shadowcompare.Group{
			{NodeGroup: "gpu", Agree: true,
				Nodetide: shadowcompare.Side{Target: &two, Direction: shadowcompare.DirNone, Removals: []string{}},
				CA:       shadowcompare.Side{Target: &two, Direction: shadowcompare.DirNone, Removals: []string{}}},
			{NodeGroup: "workers", Why: "target: nodetide 6, cluster-autoscaler 3",
				Nodetide: shadowcompare.Side{Target: &six, Direction: shadowcompare.DirUp, Size: 2, Removals: []string{}},
				CA:       shadowcompare.Side{Target: &three, Direction: shadowcompare.DirDown, Size: 1, Removals: []string{"ip-10-0-3-17.eu-west-1.compute.internal"}}},
			{NodeGroup: "system", Why: "cluster-autoscaler does not report this group",
				Nodetide: shadowcompare.Side{Target: &two, Direction: shadowcompare.DirNone, Removals: []string{}},
				CA:       shadowcompare.Side{Direction: shadowcompare.DirNone, Removals: []string{}}},
		},
		Unattributed: []string{"ip-10-0-9-9.eu-west-1.compute.internal"},
		Problems:     []string{"1 cluster-autoscaler Event(s) unreadable: TriggeredScaleUp Event default/train-0.1: message \"pod triggered scale-up: [?]\" names no node group"},
	}
	var out bytes.Buffer
	if err := writeStatusTable(&out, statusDoc{Cluster: "prod", Status: st, DrainsReadAt: statusNow}, statusNow); err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/status-shadow.golden"
	if *updateGolden {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("rewrote %s: review the diff, then run again without -update", golden)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("table differs from %s:\n%s", golden, out.String())
	}
	// -o json and -o yaml carry it whole.
	for name, marshal := range map[string]func(any) ([]byte, error){"json": json.Marshal, "yaml": func(v any) ([]byte, error) { return yaml.Marshal(v) }} {
		b, err := marshal(statusDoc{Cluster: "prod", Status: st})
		if err != nil {
			t.Fatal(err)
		}
		var back statusDoc
		if err := yaml.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.ShadowCompare, st.ShadowCompare) {
			t.Errorf("-o %s: comparison %+v (%v), want %+v", name, back.ShadowCompare, err, st.ShadowCompare)
		}
	}
}
