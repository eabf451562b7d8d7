package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// nodetide runs one command line in-process.
func nodetide(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// TestPlanFixtures plans every recorded snapshot of the planner's rule
// fixtures through the CLI, with the rule's nodetide.yaml when it has one,
// and compares with the expected plan.
func TestPlanFixtures(t *testing.T) {
	dirs, err := filepath.Glob("../../pkg/planner/testdata/*/snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("found %d fixtures, want at least 10", len(dirs))
	}
	for _, snap := range dirs {
		dir := filepath.Dir(snap)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var withConfig []string
			if cfg := filepath.Join(dir, "nodetide.yaml"); fileExists(cfg) {
				withConfig = []string{"--config", cfg}
			}
			out, errOut, code := nodetide(t, append([]string{"plan", "--snapshot", snap, "-o", "json"}, withConfig...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			want, err := os.ReadFile(filepath.Join(dir, "plan.json"))
			if err != nil {
				t.Fatal(err)
			}
			var got, exp any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if err := json.Unmarshal(want, &exp); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("plan differs from %s/plan.json:\n%s", dir, out)
			}
			// The table form of the same plan prints without error.
			if _, errOut, code := nodetide(t, append([]string{"plan", "--snapshot", snap}, withConfig...)...); code != 0 {
				t.Errorf("table output: exit %d: %s", code, errOut)
			}
			// The compact form of the same snapshot plans byte for byte alike.
			compact := compactCopy(t, snap)
			if got, errOut, code := nodetide(t, append([]string{"plan", "--snapshot", compact, "-o", "json"}, withConfig...)...); code != 0 || got != out {
				t.Errorf("compact form: exit %d: %s\n%s", code, errOut, got)
			}
		})
	}
}

func TestPlanTable(t *testing.T) {
	snap := writeFile(t, "snap.json", `{
  "capturedAt": "2026-11-30T10:00:00Z",
  "nodeGroups": [{"name": "workers", "provider": "kwok", "minSize": 0, "maxSize": 4, "targetSize": 0,
    "template": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}, "labels": {"pool": "workers"}, "taints": []},
    "instances": []}],
  "nodes": [],
  "pods": [{"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "default", "creationTimestamp": "2026-11-30T09:59:00Z",
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1", "controller": true}]},
    "spec": {"containers": [{"name": "c", "image": "c", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]},
    "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": "2026-11-30T09:59:01Z"}]}}],
  "podDisruptionBudgets": [],
  "state": {"unneededSince": {}, "lastScaleUp": {}}
}`)
	out, errOut, code := nodetide(t, "plan", "--snapshot", snap)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"NODE GROUP", "workers", "SCALE UP", "+1", "Scale down: none"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "predicted") {
		t.Errorf("no pods compete, yet the table says the assignment is predicted:\n%s", out)
	}
}

// TestPlanAssignmentNote: when pending pods compete for the new nodes (the
// group's max leaves one pending), the table and the JSON say that which
// pod gets which node is a prediction, and the pod promised the node is
// the one the scheduler's queue takes first (the higher priority).
func TestPlanAssignmentNote(t *testing.T) {
	pod := func(name, prio string) string {
		return `{"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "` + name + `", "namespace": "default", "creationTimestamp": "2026-11-30T09:59:00Z",
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1", "controller": true}]},
    "spec": {"priority": ` + prio + `, "containers": [{"name": "c", "image": "c", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]},
    "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": "2026-11-30T09:59:01Z"}]}}`
	}
	snap := writeFile(t, "snap.json", `{
  "capturedAt": "2026-11-30T10:00:00Z",
  "nodeGroups": [{"name": "workers", "provider": "kwok", "minSize": 0, "maxSize": 1, "targetSize": 0,
    "template": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}, "labels": {"pool": "workers"}, "taints": []},
    "instances": []}],
  "nodes": [],
  "pods": [`+pod("web-1", "0")+`, `+pod("web-2", "100")+`],
  "podDisruptionBudgets": [],
  "state": {"unneededSince": {}, "lastScaleUp": {}}
}`)
	out, errOut, code := nodetide(t, "plan", "--snapshot", snap)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "Pods: "+planner.AssignmentPredicted) {
		t.Errorf("table lacks the assignment note:\n%s", out)
	}
	out, errOut, code = nodetide(t, "plan", "--snapshot", snap, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var p planner.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if p.Assignment != planner.AssignmentPredicted || len(p.ScaleUp) != 1 || !slices.Equal(p.ScaleUp[0].Pods, []string{"default/web-2"}) {
		t.Errorf("plan %s; want web-2 promised the node and the assignment predicted", out)
	}
}

// compactCopy writes the snapshot at path in the compact form to a
// temporary file.
func compactCopy(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := snapshot.ReadSnapshot(f)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := snapshot.WriteCompactSnapshot(&b, s); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "compact-"+filepath.Base(filepath.Dir(path))+".json", b.String())
}

func TestBadInputs(t *testing.T) {
	badJSON := writeFile(t, "bad.json", `{"capturedAt": "2026-11-30T10:00:00Z", "nodeGroups": [`)
	badQty := writeFile(t, "qty.json", `{"capturedAt":"2026-11-30T10:00:00Z","nodeGroups":[{"name":"g","provider":"kwok","minSize":0,"maxSize":1,"targetSize":0,"template":{"allocatable":{"cpu":"four"},"labels":{},"taints":[]},"instances":[]}],"nodes":[],"pods":[],"podDisruptionBudgets":[],"state":{"unneededSince":{},"lastScaleUp":{}}}`)
	minMax := writeFile(t, "minmax.json", `{"capturedAt":"2026-11-30T10:00:00Z","nodeGroups":[{"name":"g","provider":"kwok","minSize":3,"maxSize":1,"targetSize":0,"template":{"allocatable":{"cpu":"4"},"labels":{},"taints":[]},"instances":[]}],"nodes":[],"pods":[],"podDisruptionBudgets":[],"state":{"unneededSince":{},"lastScaleUp":{}}}`)
	negative := writeFile(t, "neg.json", `{"capturedAt":"2026-11-30T10:00:00Z","nodeGroups":[{"name":"g","provider":"kwok","minSize":0,"maxSize":1,"targetSize":-1,"template":{"allocatable":{"cpu":"4"},"labels":{},"taints":[]},"instances":[]}],"nodes":[],"pods":[],"podDisruptionBudgets":[],"state":{"unneededSince":{},"lastScaleUp":{}}}`)
	badConfig := writeFile(t, "nodetide.yaml", "cluster: {name: c}\nstate: {memory: {}}\nnodeGroups: [{name: g, provider: kwok, minSize: 1, maxSize: 2, kwok: {template: {allocatable: {cpu: 2, memory: 1Gi}}}}]\nscaleDown: {unneededTme: 5m}\n")
	badCompact := writeFile(t, "compact.json", `{"format": "nodetide.io/snapshot-compact/v1", "capturedAt": "2026-11-30T10:00:00Z", "podShapes": [],
  "pods": [{"name": "a", "shape": 3}]}`)
	// A pod bound to a node the snapshot lacks, a Pod among the nodes, two
	// nodes of one machine: each would be planned as something it is not.
	unbound := writeFile(t, "unbound.json", `{"format": "nodetide.io/snapshot-compact/v1", "capturedAt": "2026-11-30T10:00:00Z",
  "nodes": [{"metadata": {"name": "a"}}], "podShapes": [{}],
  "pods": [{"name": "p0", "shape": 0, "nodeName": "a"}, {"name": "p1", "shape": 0}, {"name": "p2", "shape": 0, "nodeName": "a"}, {"name": "p3", "shape": 0, "nodeName": "x"}]}`)
	podAsNode := writeFile(t, "podnode.json", `{"capturedAt": "2026-11-30T10:00:00Z", "nodes": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}},
  {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web-0", "namespace": "shop"}, "spec": {"nodeName": "a"}}]}`)
	oneMachine := writeFile(t, "machine.json", `{"capturedAt": "2026-11-30T10:00:00Z", "nodes": [
  {"metadata": {"name": "a"}, "spec": {"providerID": "aws:///eu-west-1a/i-0a"}}, {"metadata": {"name": "b"}, "spec": {"providerID": "aws:///eu-west-1a/i-0b"}},
  {"metadata": {"name": "c"}}, {"metadata": {"name": "d"}}, {"metadata": {"name": "e"}},
  {"metadata": {"name": "f"}, "spec": {"providerID": "aws:///eu-west-1a/i-0b"}}]}`)
	good := writeFile(t, "good.json", `{"capturedAt":"2026-11-30T10:00:00Z","nodeGroups":[],"nodes":[],"pods":[],"podDisruptionBudgets":[],"state":{"unneededSince":{},"lastScaleUp":{}}}`)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no snapshot flag", []string{"plan"}, "--snapshot is required"},
		{"missing file", []string{"plan", "--snapshot", "/nonexistent/snap.json"}, "no such file"},
		{"bad JSON", []string{"plan", "--snapshot", badJSON}, badJSON},
		{"bad quantity", []string{"plan", "--snapshot", badQty}, "nodeGroups[0].template.allocatable.cpu"},
		{"min above max", []string{"plan", "--snapshot", minMax}, "nodeGroups[0]"},
		{"bad compact pod", []string{"plan", "--snapshot", badCompact}, "pods[0].shape: no podShapes[3]"},
		{"negative size", []string{"plan", "--snapshot", negative}, "targetSize"},
		{"pod on a node not in the snapshot", []string{"plan", "--snapshot", unbound}, `pods[3].nodeName: "x" is not a node of the snapshot`},
		{"a Pod among the nodes", []string{"plan", "--snapshot", podAsNode}, `nodes[2]: kind "Pod" is not a Node`},
		{"two nodes of one machine", []string{"plan", "--snapshot", oneMachine}, `nodes[5].spec.providerID: "aws:///eu-west-1a/i-0b" is also nodes[1]'s`},
		{"bad output", []string{"plan", "--snapshot", good, "-o", "xml"}, `--output "xml"`},
		{"bad config", []string{"plan", "--snapshot", good, "--config", badConfig}, "scaleDown.unneededTme: unknown field"},
		{"unknown flag", []string{"plan", "--snapshots", good}, "unknown flag: --snapshots"},
		{"unknown command", []string{"scale"}, `unknown command "scale"`},
		{"add needs a number", []string{"add", "g", "two"}, `N must be a whole number`},
		{"add needs two args", []string{"add", "g"}, "accepts 2 arg(s)"},
		{"run interval", []string{"run", "--interval", "0s", "--config", badConfig}, "--interval 0s"},
		{"config validate", []string{"config", "validate", "--config", badConfig}, "nodetide.yaml:4: scaleDown.unneededTme: unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := nodetide(t, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0 for a bad input; stdout %s", out)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q does not mention %q", errOut, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := writeFile(t, "nodetide.yaml", `cluster: {name: prod, kubernetes: {eks: {name: prod}}}
state: {dynamodb: {table: nodetide}}
nodeGroups:
  - {name: workers, provider: aws, aws: {autoScalingGroup: prod-workers}}
  - {provider: aws, maxSize: 8, aws: {autoDiscovery: ["k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/prod"]}}
  - {name: local, provider: kwok, minSize: 1, maxSize: 5, kwok: {template: {allocatable: {cpu: 4, memory: 16Gi}}}}
`)
	out, errOut, code := nodetide(t, "config", "validate", "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		NodeGroups []struct {
			Name     string `json:"name"`
			Provider string `json:"provider"`
			MinSize  *int   `json:"minSize"`
			MaxSize  *int   `json:"maxSize"`
		} `json:"nodeGroups"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(doc.NodeGroups) != 3 {
		t.Fatalf("groups = %+v", doc.NodeGroups)
	}
	w, d, l := doc.NodeGroups[0], doc.NodeGroups[1], doc.NodeGroups[2]
	if w.Name != "workers" || w.MinSize != nil || w.MaxSize != nil {
		t.Errorf("workers = %+v, want sizes null (the ASG decides)", w)
	}
	if d.MaxSize == nil || *d.MaxSize != 8 || d.MinSize != nil {
		t.Errorf("discovered = %+v, want max 8 and min null", d)
	}
	if l.Name != "local" || *l.MinSize != 1 || *l.MaxSize != 5 {
		t.Errorf("local = %+v", l)
	}
	table, _, code := nodetide(t, "config", "validate", "--config", cfg)
	if code != 0 || !strings.Contains(table, "NAME") || !strings.Contains(table, "local") {
		t.Errorf("table output (exit %d):\n%s", code, table)
	}
}

// TestConfigValidateKamatera: a Kamatera entry lists the groups of its INI
// (cluster-autoscaler's format, read unchanged), and a broken INI fails
// validation naming file, line and key.
func TestConfigValidateKamatera(t *testing.T) {
	ini, err := os.ReadFile("../../pkg/providers/kamatera/testdata/kamatera.ini")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kamatera.ini"), ini, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "nodetide.yaml")
	if err := os.WriteFile(cfg, []byte("cluster: {name: prod}\nstate: {memory: {}}\nnodeGroups: [{provider: kamatera, kamatera: {cloudConfig: kamatera.ini}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := nodetide(t, "config", "validate", "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `"name": "highcpu"`) || !strings.Contains(out, `"maxSize": 20`) || !strings.Contains(out, `"name": "workers"`) {
		t.Errorf("groups from the INI missing:\n%s", out)
	}
	if strings.Contains(out, "9ii88h7g6f55555ee4444444dd33eee2") || strings.Contains(errOut, "9ii88h7g6f55555ee4444444dd33eee2") {
		t.Error("the Kamatera secret was printed")
	}
	bad := strings.Replace(string(ini), "max-size = 20", "max-size = lots", 1)
	if err := os.WriteFile(filepath.Join(dir, "kamatera.ini"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = nodetide(t, "config", "validate", "--config", cfg)
	if code == 0 || !strings.Contains(errOut, "kamatera.ini") || !strings.Contains(errOut, "max-size") {
		t.Errorf("broken INI: exit %d, stderr %s", code, errOut)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanTableHeadroom: the table names each group's headroom and how it
// stands, and the scale-ups the rule that fired.
func TestPlanTableHeadroom(t *testing.T) {
	out, errOut, code := nodetide(t, "plan", "--snapshot", "../../pkg/planner/testdata/headroom/snapshot.json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	const golden = "testdata/plan-headroom.golden"
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Fatalf("rewrote %s: review the diff, then run again without -update", golden)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("table differs from %s:\n%s", golden, out)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
