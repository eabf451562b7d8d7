package snapshot_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWriteSnapshotUnchanged: the streamed full form is byte for byte the
// document nodetide wrote as one indented value, so recorded snapshots and
// fixtures keep their shape.
func TestWriteSnapshotUnchanged(t *testing.T) {
	snaps := snapshottest.Golden(t, filepath.Join("..", "planner", "testdata"))
	snaps["synthetic"] = snapshottest.Synthetic(20, 10, 0.1, 4)
	snaps["empty"] = snapshot.Snapshot{CapturedAt: snapshottest.T0}
	for name, s := range snaps {
		old := s
		old.CapturedAt = s.CapturedAt.UTC()
		old.NodeGroups = snapshot.NormalGroups(s.NodeGroups)
		old.Nodes, old.Pods, old.PodDisruptionBudgets = snapshot.OrEmpty(s.Nodes), snapshot.OrEmpty(s.Pods), snapshot.OrEmpty(s.PodDisruptionBudgets)
		old.State = s.State.Normal()
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(old); err != nil {
			t.Fatal(err)
		}
		if got := snapshottest.Write(t, s, false); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: streamed full form differs:\n%s\n--- want\n%s", name, got, want.String())
		}
	}
}

// TestCompactSharesShapes: pods of one controller are written as one shape,
// and the compact form of a synthetic cluster is a fraction of the full one.
func TestCompactSharesShapes(t *testing.T) {
	s := snapshottest.Synthetic(50, 30, 0.05, 1)
	compact := snapshottest.Write(t, s, true)
	var doc struct {
		Counts    snapshot.CompactCounts `json:"counts"`
		PodShapes []json.RawMessage      `json:"podShapes"`
	}
	if err := json.Unmarshal(compact, &doc); err != nil {
		t.Fatal(err)
	}
	// 81 workloads and 2 DaemonSets (whose pods' node affinity differs only
	// in the node they are pinned to), a few bare and local-storage pods.
	if doc.Counts.Pods != len(s.Pods) || len(doc.PodShapes) != doc.Counts.PodShapes || doc.Counts.PodShapes > 81+2+len(s.Pods)/50 {
		t.Errorf("counts %+v for %d pods, %d shapes: pods of one controller do not share a shape", doc.Counts, len(s.Pods), len(doc.PodShapes))
	}
	full := snapshottest.Write(t, s, false)
	if len(compact)*3 > len(full) {
		t.Errorf("compact form is %d bytes, full %d: want under a third", len(compact), len(full))
	}
}

func TestReadCompactErrors(t *testing.T) {
	const head = `{"format": "nodetide.io/snapshot-compact/v1", "capturedAt": "2026-11-30T10:00:00Z"`
	const shape = `{"labels": {"app": "a"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}`
	doc := func(rest string) string { return head + rest + "}" }
	pods := func(ps ...string) string {
		return `, "podShapes": [` + shape + `], "pods": [` + strings.Join(ps, ",\n") + `]`
	}
	const ok = `{"name": "ok", "namespace": "d", "shape": 0}`
	const ok2 = `{"name": "ok2", "namespace": "d", "shape": 0}`
	cases := []struct{ name, doc, want string }{
		{"unknown format", `{"format": "nodetide.io/snapshot-compact/v9"}`, `format (line 1:12): unknown format "nodetide.io/snapshot-compact/v9" (this build reads nodetide.io/snapshot-full/v1 and nodetide.io/snapshot-compact/v1)`},
		{"null format", `{"format": null}`, `format (line 1:12): unknown format ""`},
		{"format not first", `{"capturedAt": "2026-11-30T10:00:00Z", "format": "nodetide.io/snapshot-compact/v1"}`, "format: must be the document's first key"},
		{"compact key in the full form", `{"capturedAt": "2026-11-30T10:00:00Z", "podShapes": []}`, "podShapes: unknown key (known: format, capturedAt, nodeGroups, nodes, pods, podDisruptionBudgets, persistentVolumeClaims, persistentVolumes, storageClasses, state)"},
		{"unknown top-level key", doc(`, "shapes": []`), "shapes: unknown key (known: format, capturedAt, counts, nodeGroups, state, nodes, podDisruptionBudgets, persistentVolumeClaims, persistentVolumes, storageClasses, podShapes, pods)"},
		{"unknown pod key", doc(pods(ok, `{"name": "b", "shape": 0, "node": "n1"}`)), "pods[1].node (line 2:27): unknown key (known: name, namespace, uid, shape, nodeName"},
		{"duplicate pod key", doc(pods(`{"name": "b", "shape": 0, "name": "c"}`)), "pods[0].name (line 1:246): duplicate key"},
		{"missing shape", doc(pods(`{"name": "b"}`)), "pods[0].shape: missing"},
		{"shape out of range", doc(pods(ok, `{"name": "b", "shape": 1}`)), "pods[1].shape: no podShapes[1]: 1 shapes come before the pods"},
		{"pods before shapes", doc(`, "pods": [` + ok + `], "podShapes": [` + shape + `]`), "pods[0].shape: no podShapes[0]: 0 shapes come before the pods (podShapes must come first)"},
		{"shape as a string", doc(pods(`{"name": "b", "shape": "0"}`)), "pods[0].shape (line 1:243): expected a non-negative integer, got a string"},
		{"negative shape", doc(pods(`{"name": "b", "shape": -1}`)), "pods[0].shape (line 1:243): expected a non-negative integer, got -1"},
		{"fractional shape", doc(pods(`{"name": "b", "shape": 0.5}`)), "expected a non-negative integer, got 0.5"},
		{"name as a number", doc(pods(`{"name": 5, "shape": 0}`)), "pods[0].name (line 1:229): expected a string, got a number"},
		{"bad time", doc(pods(`{"name": "b", "shape": 0, "creationTimestamp": "yesterday"}`)), `pods[0].creationTimestamp (line 1:267): bad time "yesterday"`},
		{"pod not an object", doc(pods(`["b", 0]`)), "pods[0] (line 1:220): expected an object, got an array"},
		{"null pod", doc(pods(`null`)), "pods[0] (line 1:220): expected an object, got null"},
		{"unknown scheduled key", doc(pods(`{"name": "b", "shape": 0, "scheduled": {"status": "False", "why": "x"}}`)), "pods[0].scheduled.why (line 1:279): unknown key (known: status, reason, lastTransitionTime)"},
		{"duplicate pod", doc(pods(ok, ok)), "pods[1].name: duplicate pod d/ok (also pods[0])"},
		{"empty pod name", doc(pods(`{"shape": 0}`)), "pods[0].name: must not be empty"},
		{"unknown shape key", doc(`, "podShapes": [{"labelz": {}}]`), "podShapes[0].labelz: unknown key (known: labels, annotations, ownerReferences, spec)"},
		{"bad quantity in a shape", doc(`, "podShapes": [` + shape + `, {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "-1"}}}]}}]`), "podShapes[1].spec.containers[0].resources.limits.cpu: must not be negative"},
		{"node name in a shape", doc(`, "podShapes": [{"spec": {"nodeName": "n1"}}]`), "podShapes[0].spec.nodeName: belongs to each pod"},
		{"huge exponent in a shape", doc(`, "podShapes": [{"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e-9999999"}}}]}}]`), `line 1:173: quantity "1e-9999999": its exponent is beyond ±999`},
		{"counts disagree", doc(`, "counts": {"nodes": 0, "podShapes": 1, "pods": 2, "podDisruptionBudgets": 0}` + pods(ok)), "counts.pods: says 2, but the document has 1"},
		{"negative count", doc(`, "counts": {"pods": -1}`), "counts.pods: must not be negative (got -1)"},
		{"unknown count", doc(`, "counts": {"shapes": 1}`), "counts.shapes: unknown key"},
		{"trailing data", doc(pods(ok)) + ` {}`, "unexpected data after the document"},
		{"truncated", head + pods(ok)[:40], "unexpected end of document"},
		{"truncated in a pod", doc(pods(ok, ok))[:279], "pods[1] (line 2:15): unexpected end of document"},
		{"truncated in a pod's string", doc(pods(ok, ok))[:285], "pods[1] (line 2:21): unexpected end of document"},
		{"truncated after the pods", doc(pods(ok))[:264], "line 1:265: unexpected end of document"},
		{"keys after pods", doc(pods(ok) + `, "counts": {}`), "line 1:265: more keys after pods: pods must be the compact form's last key"},
		{"pinned to nothing", doc(pods(`{"name": "b", "shape": 0, "pinnedNode": "n1"}`)), `pods[0].pinnedNode: podShapes[0] has no required node affinity`},
		{"unknown template source", doc(`, "nodeGroups": [{"name": "g", "templateFrom": "node"}]`), `nodeGroups[0].templateFrom: must be "provider" or "node NAME", or omitted (got "node")`},
		{"empty zone", doc(`, "nodeGroups": [{"name": "g", "zones": ["a", ""]}]`), "nodeGroups[0].zones[1]: zone must not be empty"},
		{"zone twice", doc(`, "nodeGroups": [{"name": "g", "zones": ["a", "a"]}]`), `nodeGroups[0].zones[1]: zone "a" listed twice`},
		{"node with a bad quantity", doc(`, "nodes": [{"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "1e309"}}}]`), "nodes[0].status.allocatable.cpu: is too large"},
		// What refers to a node must name one, and each list holds its own kind.
		{"pod on a node not in the snapshot", doc(`, "nodes": [{"metadata": {"name": "n"}}]` + pods(ok, `{"name": "a", "namespace": "d", "shape": 0, "nodeName": "n"}`, ok2, `{"name": "b", "namespace": "d", "shape": 0, "nodeName": "x"}`)), `pods[3].nodeName: "x" is not a node of the snapshot`},
		{"two nodes of one machine", doc(`, "nodes": [{"metadata": {"name": "a"}, "spec": {"providerID": "kwok://a"}}, {"metadata": {"name": "b"}, "spec": {"providerID": "kwok://a"}}]`), `nodes[1].spec.providerID: "kwok://a" is also nodes[0]'s`},
		{"duplicate node", doc(`, "nodes": [{"metadata": {"name": "a"}}, {"metadata": {"name": "a"}}]`), `nodes[1].metadata.name: duplicate node "a" (also nodes[0])`},
		{"a Pod among the nodes", doc(`, "nodes": [{"metadata": {"name": "a"}}, {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}}]`), `nodes[1]: kind "Pod" is not a Node`},
		{"a Pod among the PDBs", doc(`, "podDisruptionBudgets": [{"kind": "Pod", "metadata": {"name": "p"}}]`), `podDisruptionBudgets[0]: kind "Pod" is not a PodDisruptionBudget`},
		{"duplicate PDB", doc(`, "podDisruptionBudgets": [{"metadata": {"name": "b", "namespace": "a"}}, {"metadata": {"name": "b", "namespace": "a"}}]`), `podDisruptionBudgets[1].metadata.name: duplicate PodDisruptionBudget a/b (also podDisruptionBudgets[0])`},
		{"a Node among the pods", doc(pods(`{"kind": "Node", "metadata": {"name": "n"}}`)), `pods[0].kind (line 1:221): unknown key (known: name, namespace`},
		{"a PDB among the pods", doc(pods(ok, `{"metadata": {"name": "b"}, "spec": {"minAvailable": 1}}`)), `pods[1].metadata (line 2:2): unknown key (known: name, namespace`},
		{"a full-form pod among the compact pods", doc(pods(`{"metadata": {"name": "p"}, "spec": {}}`)), `pods[0].metadata (line 1:221): unknown key`},
		{"duplicate group name", doc(`, "nodeGroups": [{"name": "a"}, {"name": "a"}]`), `nodeGroups[1].name: duplicate node group name "a" (also nodeGroups[0])`},
		{"instance in two groups", doc(`, "nodeGroups": [{"name": "a", "instances": ["kwok://n1"]}, {"name": "b", "instances": ["kwok://n1"]}]`), `nodeGroups[1].instances[0]: instance "kwok://n1" is already in node group "a"`},
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

// TestReadSnapshotInSmallReads: the same document read a byte at a time
// (numbers and strings split across reads) gives the same snapshot and the
// same errors, positions included.
func TestReadSnapshotInSmallReads(t *testing.T) {
	s := snapshottest.Synthetic(10, 10, 0.2, 2)
	for _, compact := range []bool{false, true} {
		doc := snapshottest.Write(t, s, compact)
		got, err := snapshot.ReadSnapshot(iotest.OneByteReader(bytes.NewReader(doc)))
		if err != nil {
			t.Fatal(err)
		}
		if planJSON(t, got, planner.DefaultSettings()) != planJSON(t, snapshottest.Read(t, doc), planner.DefaultSettings()) {
			t.Errorf("compact %v: byte-at-a-time read plans differently", compact)
		}
	}
	bad := "{\"capturedAt\": \"2026-11-30T10:00:00Z\",\n \"pods\": [{\"metadata\": {\"name\": \"p\"}, \"spec\": {\"containers\": [{\"resources\": {\"requests\": {\"cpu\": 1e-99999}}}]}}]}"
	for _, r := range []io.Reader{strings.NewReader(bad), iotest.OneByteReader(strings.NewReader(bad)), iotest.HalfReader(strings.NewReader(bad))} {
		_, err := snapshot.ReadSnapshot(r)
		if err == nil || !strings.Contains(err.Error(), `line 2:98: quantity "1e-99999"`) {
			t.Errorf("error %v, want the huge exponent at line 2:98", err)
		}
	}
}

// maxReadReader records the largest read asked of it.
type maxReadReader struct {
	r   io.Reader
	max int
}

func (m *maxReadReader) Read(p []byte) (int, error) {
	m.max = max(m.max, len(p))
	return m.r.Read(p)
}

// TestReadSnapshotStreams: the reader never asks for the document in one
// buffer: its reads stay small however large the document is.
func TestReadSnapshotStreams(t *testing.T) {
	s := snapshottest.Synthetic(200, 30, 0.05, 3)
	for _, compact := range []bool{false, true} {
		doc := snapshottest.Write(t, s, compact)
		m := &maxReadReader{r: bytes.NewReader(doc)}
		if _, err := snapshot.ReadSnapshot(m); err != nil {
			t.Fatal(err)
		}
		if m.max > 64<<10 || m.max*10 > len(doc) {
			t.Errorf("compact %v: a read of %d bytes for a document of %d", compact, m.max, len(doc))
		}
	}
}

func TestFirstDuplicate(t *testing.T) {
	mk := func(keys ...string) []corev1.Pod {
		var out []corev1.Pod
		for _, k := range keys {
			ns, name, _ := strings.Cut(k, "/")
			out = append(out, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		}
		return out
	}
	cases := []struct {
		pods      []corev1.Pod
		dup, also int
	}{
		{mk(), -1, -1},
		{mk("a/x", "b/x", "a/y"), -1, -1},
		{mk("a/x", "a/y", "a/x"), 2, 0},
		{mk("b/z", "a/x", "b/z", "a/x", "a/x"), 2, 0},
		{mk("a/y", "a/x", "a/y", "a/x"), 2, 0},
		{mk("a/q", "a/x", "a/x", "a/q"), 2, 1},
	}
	for i, c := range cases {
		if dup, also := snapshot.FirstDuplicate(c.pods); dup != c.dup || also != c.also {
			t.Errorf("case %d: got %d (also %d), want %d (also %d)", i, dup, also, c.dup, c.also)
		}
	}
	// 100,000 pods of one name take no quadratic time.
	same := make([]corev1.Pod, 100000)
	for i := range same {
		same[i].Name = "p"
	}
	if dup, also := snapshot.FirstDuplicate(same); dup != 1 || also != 0 {
		t.Errorf("got %d (also %d), want 1 (also 0)", dup, also)
	}
}

// TestReadFullFormWithFormat: the full form may name itself.
func TestReadFullFormWithFormat(t *testing.T) {
	s := snapshottest.Synthetic(5, 10, 0.2, 6)
	doc := snapshottest.Write(t, s, false)
	named := append([]byte(`{"format": "`+snapshot.FormatFull+`",`), bytes.TrimPrefix(doc, []byte("{"))...)
	if got, want := planJSON(t, snapshottest.Read(t, named), planner.DefaultSettings()), planJSON(t, snapshottest.Read(t, doc), planner.DefaultSettings()); got != want {
		t.Errorf("a full form that names itself plans differently:\n%s\n---\n%s", got, want)
	}
}

// TestCountsCannotMakeReadingAllocate: a small document claiming a million
// pods does not make the reader allocate for them.
func TestCountsCannotMakeReadingAllocate(t *testing.T) {
	doc := `{"format": "nodetide.io/snapshot-compact/v1", "capturedAt": "2026-11-30T10:00:00Z",
	  "counts": {"nodes": 1000000, "podShapes": 1000000, "pods": 1000000, "podDisruptionBudgets": 1000000}, "pods": []}`
	for _, r := range []io.Reader{strings.NewReader(doc), iotest.HalfReader(strings.NewReader(doc))} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := snapshot.ReadSnapshot(r)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "counts.nodes: says 1000000, but the document has 0") {
			t.Errorf("error %v, want the counts refused", err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 40<<20 {
			t.Errorf("reading allocated %d MB", alloc>>20)
		}
	}
}

// TestReadCompactFromAPipe: read from a reader of unknown size, the pods
// list grows towards what counts says and ends exactly that long, and the
// plan is the same.
func TestReadCompactFromAPipe(t *testing.T) {
	s := snapshottest.Synthetic(600, 30, 0.05, 8)
	doc := snapshottest.Write(t, s, true)
	fromPipe, err := snapshot.ReadSnapshot(struct{ io.Reader }{bytes.NewReader(doc)})
	if err != nil {
		t.Fatal(err)
	}
	if len(fromPipe.Pods) <= snapshot.MaxPrealloc || cap(fromPipe.Pods) != len(fromPipe.Pods) {
		t.Errorf("%d pods in a list of capacity %d: want more than %d, sized exactly", len(fromPipe.Pods), cap(fromPipe.Pods), snapshot.MaxPrealloc)
	}
	if planJSON(t, fromPipe, planner.DefaultSettings()) != planJSON(t, snapshottest.Read(t, doc), planner.DefaultSettings()) {
		t.Error("read from a pipe, the snapshot plans differently")
	}
}

// TestFormsKeepPriority: spec.priority decides which pods are expendable,
// so both forms (and the Trimmer under them) keep it, per pod.
func TestFormsKeepPriority(t *testing.T) {
	s := snapshottest.Cluster(nil, []corev1.Node{snapshottest.Node("n1", "workers", "4", "16Gi")}, []corev1.Pod{
		snapshottest.Pod("pause-1", "1", "1Gi", snapshottest.On("n1"), snapshottest.Priority(-20)),
		snapshottest.Pod("web-1", "1", "1Gi", snapshottest.On("n1"), snapshottest.Priority(1000)),
		snapshottest.Pod("web-2", "1", "1Gi", snapshottest.Pending()),
	})
	s.Pods[0].Spec.PriorityClassName = "overprovisioning"
	want := map[string]string{"pause-1": "-20 overprovisioning", "web-1": "1000 ", "web-2": "none "}
	for _, compact := range []bool{false, true} {
		got := snapshottest.Read(t, snapshottest.Write(t, s, compact))
		for _, p := range got.Pods {
			prio := "none"
			if p.Spec.Priority != nil {
				prio = fmt.Sprint(*p.Spec.Priority)
			}
			if g := prio + " " + p.Spec.PriorityClassName; g != want[p.Name] {
				t.Errorf("compact %v: %s has priority %q, want %q", compact, p.Name, g, want[p.Name])
			}
		}
	}
}

// TestFormsKeepTemplateSource: both forms keep where each group's template
// came from, and what is omitted stays omitted.
func TestFormsKeepTemplateSource(t *testing.T) {
	groups := []snapshot.NodeGroup{
		snapshottest.Group("a", 0, 3, 1, "4", "16Gi"),
		snapshottest.Group("b", 0, 3, 0, "4", "16Gi"),
		snapshottest.Group("c", 0, 3, 0, "4", "16Gi"),
	}
	groups[0].TemplateFrom = snapshot.TemplateFromNode("a-1")
	groups[1].TemplateFrom = snapshot.TemplateFromProvider
	s := snapshottest.Cluster(groups, nil, nil)
	want := []string{"node a-1", "provider", ""}
	for _, compact := range []bool{false, true} {
		got := snapshottest.Read(t, snapshottest.Write(t, s, compact))
		for i, g := range got.NodeGroups {
			if g.TemplateFrom != want[i] {
				t.Errorf("compact %v: group %s has templateFrom %q, want %q", compact, g.Name, g.TemplateFrom, want[i])
			}
		}
		if name, ok := got.NodeGroups[0].TemplateNode(); !ok || name != "a-1" {
			t.Errorf("compact %v: TemplateNode = %q, %v; want a-1", compact, name, ok)
		}
	}
}
