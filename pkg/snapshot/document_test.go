package snapshot_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
)

func TestWriteEmptyDocuments(t *testing.T) {
	var b bytes.Buffer
	if err := planner.WritePlan(&b, planner.Plan{ScaleUp: []planner.ScaleUp{{NodeGroup: "g"}}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{`"scaleDown": []`, `"unschedulable": []`, `"nodeGroups": []`, `"pods": []`, `"unneededSince": {}`, `"lastScaleUp": {}`} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "null") || strings.Contains(out, "decreaseTarget") {
		t.Errorf("plan has null or an empty optional list:\n%s", out)
	}
	b.Reset()
	if err := snapshot.WriteSnapshot(&b, snapshot.Snapshot{CapturedAt: snapshottest.T0, NodeGroups: []snapshot.NodeGroup{{Name: "g"}}}); err != nil {
		t.Fatal(err)
	}
	out = b.String()
	for _, want := range []string{`"nodes": []`, `"pods": []`, `"podDisruptionBudgets": []`, `"instances": []`, `"taints": []`, `"labels": {}`, `"allocatable": {}`} {
		if !strings.Contains(out, want) {
			t.Errorf("snapshot lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "null,") {
		t.Errorf("snapshot has a null list:\n%s", out)
	}
}

func TestReadSnapshotToleratesNewKubernetesFields(t *testing.T) {
	doc := `{"capturedAt": "2026-11-30T10:00:00Z", "nodeGroups": [],
	  "nodes": [{"metadata": {"name": "n1", "futureField": 1}, "spec": {"someNewThing": {"a": 1}}}],
	  "pods": [{"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [], "fancy": true}, "status": {"newPhaseInfo": "x"}}],
	  "podDisruptionBudgets": null}`
	s, err := snapshot.ReadSnapshot(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes) != 1 || len(s.Pods) != 1 || s.Pods[0].Namespace != "d" {
		t.Errorf("snapshot = %+v", s)
	}
}

func TestReadSnapshotErrors(t *testing.T) {
	group := func(fields string) string {
		return `{"name": "g", "minSize": 0, "maxSize": 3, "targetSize": 0, "template": {"allocatable": {"cpu": "4"}}` + fields + `}`
	}
	doc := func(rest string) string { return `{"capturedAt": "2026-11-30T10:00:00Z"` + rest + "}" }
	pod := func(name, spec string) string {
		return `{"metadata": {"name": "` + name + `", "namespace": "d"}, "spec": {` + spec + `}}`
	}
	pods := func(n int) string {
		var out []string
		for i := range n {
			out = append(out, pod(fmt.Sprint("ok-", i), `"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]`))
		}
		return strings.Join(out, ", ")
	}
	cases := []struct {
		name, doc, want string
	}{
		{"bad JSON with line and column", "{\"capturedAt\": \"2026-11-30T10:00:00Z\",\n  \"nodeGroups\": [,]}", "nodeGroups[0] (line 2:18): invalid character ','"},
		{"truncated", `{"capturedAt": "2026-11-30T10:00:00Z", "nodes": [`, "unexpected end of document"},
		{"trailing data", doc("") + " {}", "unexpected data after the document"},
		{"not an object", `[]`, "expected an object, got an array"},
		{"unknown top-level key", doc(`, "nodeGroup": []`), "nodeGroup: unknown key (known: format, capturedAt, nodeGroups, nodes, pods, podDisruptionBudgets, persistentVolumeClaims, persistentVolumes, storageClasses, state)"},
		{"duplicate key", doc(`, "capturedAt": "2026-11-30T10:00:00Z"`), "capturedAt: duplicate key"},
		{"missing capturedAt", `{"nodeGroups": []}`, "capturedAt: missing"},
		{"unknown node-group key", doc(`, "nodeGroups": [` + group(`, "maxNodes": 3`) + `]`), "nodeGroups[0].maxNodes: unknown key"},
		{"unknown template source", doc(`, "nodeGroups": [` + group(`, "templateFrom": "tags"`) + `]`), `nodeGroups[0].templateFrom: must be "provider" or "node NAME", or omitted (got "tags")`},
		{"template from a node without a name", doc(`, "nodeGroups": [` + group(`, "templateFrom": "node "`) + `]`), `nodeGroups[0].templateFrom: must be "provider" or "node NAME"`},
		{"template source not a string", doc(`, "nodeGroups": [` + group(`, "templateFrom": 1`) + `]`), `nodeGroups[0].templateFrom`},
		{"unknown template key", doc(`, "nodeGroups": [{"name": "g", "template": {"labelz": {}}}]`), "nodeGroups[0].template.labelz: unknown key"},
		{"unknown state key", doc(`, "state": {"unneeded": {}}`), "state.unneeded: unknown key"},
		{"bad quantity", doc(`, "nodeGroups": [` + group("") + `, {"name": "h", "template": {"allocatable": {"cpu": "4 cores"}}}]`), "nodeGroups[1].template.allocatable.cpu: quantities must match the regular expression"},
		{"negative quantity", doc(`, "nodeGroups": [{"name": "h", "template": {"allocatable": {"memory": "-1Gi"}}}]`), "nodeGroups[0].template.allocatable.memory: must not be negative (got -1Gi)"},
		{"wrong type", doc(`, "nodeGroups": [{"name": "g", "maxSize": "3"}]`), "nodeGroups[0].maxSize (line 1:80): expected int, got string"},
		{"negative size", doc(`, "nodeGroups": [{"name": "g", "minSize": -1}]`), "nodeGroups[0].minSize: must not be negative (got -1)"},
		{"negative target", doc(`, "nodeGroups": [{"name": "g", "targetSize": -2}]`), "nodeGroups[0].targetSize: must not be negative (got -2)"},
		{"min above max", doc(`, "nodeGroups": [{"name": "g", "minSize": 5, "maxSize": 3}]`), "nodeGroups[0].minSize: 5 is greater than maxSize 3"},
		{"empty name", doc(`, "nodeGroups": [{"minSize": 0}]`), "nodeGroups[0].name: must not be empty"},
		{"duplicate name", doc(`, "nodeGroups": [{"name": "a"}, {"name": "a"}]`), `nodeGroups[1].name: duplicate node group name "a" (also nodeGroups[0])`},
		{"instance in two groups", doc(`, "nodeGroups": [{"name": "a", "instances": ["kwok://n1"]}, {"name": "b", "instances": ["kwok://n2", "kwok://n1"]}]`), `nodeGroups[1].instances[1]: instance "kwok://n1" is already in node group "a"`},
		{"bad taint effect", doc(`, "nodeGroups": [{"name": "a", "template": {"taints": [{"key": "k", "effect": "Never"}]}}]`), `nodeGroups[0].template.taints[0].effect: must be NoSchedule, PreferNoSchedule or NoExecute (got "Never")`},
		{"bad quantity in a pod", doc(`, "pods": [{"metadata": {"name": "a"}},` + "\n" + `{"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}]`), "pods[1] (line 2:1): quantities must match the regular expression"},
		{"negative pod request", doc(`, "pods": [` + pods(3) + `, ` + pod("bad", `"containers": [{"name": "c", "resources": {"requests": {"cpu": "-1"}}}]`) + `]`), "pods[3].spec.containers[0].resources.requests.cpu: must not be negative (got -1)"},
		{"pod request past int64", doc(`, "pods": [` + pod("bad", `"containers": [{"name": "a"}, {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1e309"}}}]`) + `]`), "pods[0].spec.containers[1].resources.requests.memory: is too large (got 1e309"},
		{"pod limit past int64", doc(`, "pods": [` + pod("bad", `"containers": [{"name": "c", "resources": {"limits": {"cpu": "1e309"}}}]`) + `]`), "pods[0].spec.containers[0].resources.limits.cpu: is too large"},
		{"init container request", doc(`, "pods": [` + pod("bad", `"initContainers": [{"name": "c", "resources": {"requests": {"cpu": "1e19"}}}]`) + `]`), "pods[0].spec.initContainers[0].resources.requests.cpu: is too large"},
		{"pod overhead", doc(`, "pods": [` + pod("bad", `"overhead": {"memory": "-1"}`) + `]`), "pods[0].spec.overhead.memory: must not be negative"},
		{"pod-level resources", doc(`, "pods": [` + pod("bad", `"resources": {"requests": {"cpu": "1e309"}}`) + `]`), "pods[0].spec.resources.requests.cpu: is too large"},
		{"node allocatable", doc(`, "nodes": [{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "1e309"}}}]`), "nodes[0].status.allocatable.cpu: is too large"},
		{"node capacity", doc(`, "nodes": [{"metadata": {"name": "n"}, "status": {"capacity": {"pods": "-110"}}}]`), "nodes[0].status.capacity.pods: must not be negative"},
		{"template allocatable past int64", doc(`, "nodeGroups": [{"name": "h", "template": {"allocatable": {"cpu": 1e309}}}]`), "nodeGroups[0].template.allocatable.cpu: is too large"},
		{"tiny quantity with a huge exponent", doc(`, "pods": [` + pod("bad", `"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e-9999999"}}}]`) + `]`), `line 1:170: quantity "1e-9999999": its exponent is beyond ±999`},
		{"huge exponent as a number", doc(`, "nodeGroups": [{"name": "h", "template": {"allocatable": {"cpu": 1E+99999999}}}]`), `quantity "1E+99999999": its exponent is beyond ±999`},
		{"wrong type in a node", doc(`, "nodes": [{"metadata": {"name": 5}}]`), "nodes[0].metadata.name (line 1:73): expected string, got number"},
		{"list of the wrong kind", doc(`, "nodes": {}`), "nodes (line 1:49): expected an array, got an object"},
		{"duplicate node", doc(`, "nodes": [{"metadata": {"name": "n"}}, {"metadata": {"name": "n"}}]`), `nodes[1].metadata.name: duplicate node "n" (also nodes[0])`},
		{"duplicate pod", doc(`, "pods": [{"metadata": {"name": "p", "namespace": "a"}}, {"metadata": {"name": "p", "namespace": "a"}}]`), `pods[1].metadata.name: duplicate pod a/p (also pods[0])`},
		{"bad state time", doc(`, "state": {"lastScaleUp": {"g": "yesterday"}}`), "state.lastScaleUp"},
		// What refers to a node must name one, and each list holds its own kind.
		{"pod on a node not in the snapshot", doc(`, "nodes": [{"metadata": {"name": "n"}}], "pods": [` + pods(3) + `, ` + pod("bound", `"nodeName": "x"`) + `]`), `pods[3].spec.nodeName: "x" is not a node of the snapshot`},
		{"pod on a node with no nodes", doc(`, "pods": [` + pod("bound", `"nodeName": "n"`) + `]`), `pods[0].spec.nodeName: "n" is not a node of the snapshot`},
		{"two nodes of one machine", doc(`, "nodes": [{"metadata": {"name": "a"}, "spec": {"providerID": "aws:///eu-west-1a/i-1"}}, {"metadata": {"name": "b"}, "spec": {"providerID": "aws:///eu-west-1a/i-2"}}, {"metadata": {"name": "c"}, "spec": {"providerID": "aws:///eu-west-1a/i-1"}}]`), `nodes[2].spec.providerID: "aws:///eu-west-1a/i-1" is also nodes[0]'s`},
		{"a Pod among the nodes", doc(`, "nodes": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}, {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}}]`), `nodes[2]: kind "Pod" is not a Node`},
		{"a Node among the pods", doc(`, "pods": [{"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n"}}]`), `pods[0]: kind "Node" is not a Pod`},
		{"a PDB among the pods", doc(`, "pods": [` + pods(1) + `, {"kind": "PodDisruptionBudget", "apiVersion": "policy/v1", "metadata": {"name": "b"}}]`), `pods[1]: kind "PodDisruptionBudget" is not a Pod`},
		{"a Pod among the PDBs", doc(`, "podDisruptionBudgets": [{"kind": "Pod", "metadata": {"name": "p"}}]`), `podDisruptionBudgets[0]: kind "Pod" is not a PodDisruptionBudget`},
		{"a PV among the claims", doc(`, "persistentVolumeClaims": [{"kind": "PersistentVolume", "metadata": {"name": "v"}}]`), `persistentVolumeClaims[0]: kind "PersistentVolume" is not a PersistentVolumeClaim`},
		{"a claim among the volumes", doc(`, "persistentVolumes": [{"kind": "PersistentVolumeClaim", "metadata": {"name": "c"}}]`), `persistentVolumes[0]: kind "PersistentVolumeClaim" is not a PersistentVolume`},
		{"a Node among the classes", doc(`, "storageClasses": [{"kind": "Node", "metadata": {"name": "n"}}]`), `storageClasses[0]: kind "Node" is not a StorageClass`},
		{"duplicate PDB", doc(`, "podDisruptionBudgets": [{"metadata": {"name": "b", "namespace": "a"}}, {"metadata": {"name": "b", "namespace": "a"}}]`), `podDisruptionBudgets[1].metadata.name: duplicate PodDisruptionBudget a/b (also podDisruptionBudgets[0])`},
		{"unnamed PDB", doc(`, "podDisruptionBudgets": [{"metadata": {"namespace": "a"}}]`), `podDisruptionBudgets[0].metadata.name: must not be empty`},
		{"duplicate claim", doc(`, "persistentVolumeClaims": [{"metadata": {"name": "c", "namespace": "a"}}, {"metadata": {"name": "c", "namespace": "a"}}]`), `persistentVolumeClaims[1].metadata.name: duplicate a/c (also persistentVolumeClaims[0])`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := snapshot.ReadSnapshot(strings.NewReader(tc.doc))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
			var de *snapshot.DocumentError
			if !errors.As(err, &de) {
				t.Errorf("error %T is not a *DocumentError", err)
			}
		})
	}
}

// TestReadSnapshotHugeExponentIsRefused: a quantity such as 1e-9999999 once
// took seconds to parse; it is refused, by name, before it reaches the
// parser. A UID or label that merely contains such digits is not a number.
func TestReadSnapshotHugeExponentIsRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"capturedAt": "2026-11-30T10:00:00Z", "pods": [`)
	for i := range 20 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"metadata": {"name": "p%d", "uid": "3e12345-%d", "labels": {"v": "x1e99999"}}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e-%d"}}}]}}`, i, i, 9999999-i)
	}
	b.WriteString("]}")
	_, err := snapshot.ReadSnapshot(strings.NewReader(b.String()))
	if err == nil || !strings.Contains(err.Error(), `quantity "1e-9999999"`) {
		t.Errorf("error %v, want the first huge exponent refused", err)
	}
	for _, tok := range []string{"3e12345-0", "x1e99999", "1e999", "1.5e-999", "e99999", "1e", "-", "1.2.3e9999"} {
		if snapshot.BigExponent([]byte(tok)) {
			t.Errorf("%q taken for a huge exponent", tok)
		}
	}
	for _, tok := range []string{"1e1000", "-1.5E-00001000", ".5e+99999", "7e9999999999999999999"} {
		if !snapshot.BigExponent([]byte(tok)) {
			t.Errorf("%q not taken for a huge exponent", tok)
		}
	}
}

func TestWriteSnapshotValidates(t *testing.T) {
	s := snapshottest.Cluster([]snapshot.NodeGroup{snapshottest.Group("a", 3, 1, 0, "4", "16Gi")}, nil, nil)
	if err := snapshot.WriteSnapshot(&bytes.Buffer{}, s); err == nil || !strings.Contains(err.Error(), "nodeGroups[0].minSize: 3 is greater than maxSize 1") {
		t.Errorf("error = %v", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrorsAreWrapped(t *testing.T) {
	err := planner.WritePlan(failingWriter{}, planner.Plan{})
	if err == nil || !strings.Contains(err.Error(), "write plan: disk full") {
		t.Errorf("error = %v", err)
	}
}
