package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// TestSnapshotThenPlan records a live snapshot with the CLI and plans it
// offline: the offline plan asks for the node the pending pod needs.
func TestSnapshotThenPlan(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	pool := ns
	cfg := writeFile(t, "nodetide.yaml", fmt.Sprintf(`cluster: {name: cli}
state: {memory: {}}
nodeGroups:
  - name: %s
    provider: kwok
    minSize: 0
    maxSize: 3
    kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}, labels: {pool: %s}}}
`, pool, pool))

	// Grow the group by hand first: `nodetide add` within max, then above it.
	if out, errOut, code := nodetide(t, "add", pool, "1", "--config", cfg, "--kubeconfig", cp.KubeconfigPath); code != 0 {
		t.Fatalf("add: exit %d: %s %s", code, out, errOut)
	}
	if _, errOut, code := nodetide(t, "add", pool, "3", "--config", cfg, "--kubeconfig", cp.KubeconfigPath); code == 0 || !strings.Contains(errOut, "above its max size 3") {
		t.Fatalf("add above max: exit %d: %s", code, errOut)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "nodetide.io/node-group=" + pool})
	})

	// The pods' owner must exist, or the garbage collector deletes them.
	owner, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: boolPtr(true)}}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": pool}, Containers: []corev1.Container{{Name: "c", Image: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}},
	}
	for _, name := range []string{"big-1", "big-2"} {
		p := pod.DeepCopy()
		p.Name = name
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The 2-CPU node holds one of them; the other stays Pending.
	cp.WaitFor(t, time.Minute, "one pod running, one unschedulable", func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running, unschedulable := 0, 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		return running == 1 && unschedulable == 1, nil
	})

	// The compact form by default, the full one with --full: both read
	// back to the same cluster.
	snapPath := filepath.Join(t.TempDir(), "snap.json")
	fullPath := filepath.Join(t.TempDir(), "full.json")
	if _, errOut, code := nodetide(t, "snapshot", "--config", cfg, "--kubeconfig", cp.KubeconfigPath, "-f", snapPath); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, errOut)
	}
	if _, errOut, code := nodetide(t, "snapshot", "--full", "--config", cfg, "--kubeconfig", cp.KubeconfigPath, "-f", fullPath); code != 0 {
		t.Fatalf("snapshot --full: exit %d: %s", code, errOut)
	}
	compactDoc, err := os.ReadFile(snapPath)
	if err != nil {
		t.Fatal(err)
	}
	fullDoc, err := os.ReadFile(fullPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(compactDoc[:min(len(compactDoc), 100)], []byte(`"format": "`+snapshot.FormatCompact+`"`)) || bytes.Contains(fullDoc, []byte(`"format"`)) {
		t.Errorf("snapshot writes the compact form by default and the full one with --full; got\n%.300s\n---\n%.300s", compactDoc, fullDoc)
	}
	if !bytes.Contains(fullDoc, []byte(`"kind": "Pod"`)) || !bytes.Contains(fullDoc, []byte(`"managedFields"`)) {
		t.Errorf("--full does not hold the objects as the API serves them:\n%.2000s", fullDoc)
	}
	snap, err := snapshot.ReadSnapshot(bytes.NewReader(compactDoc))
	if err != nil {
		t.Fatalf("the recorded snapshot does not read back: %v", err)
	}
	fromFull, err := snapshot.ReadSnapshot(bytes.NewReader(fullDoc))
	if err != nil {
		t.Fatalf("the recorded full snapshot does not read back: %v", err)
	}
	if len(snap.NodeGroups) != 1 || snap.NodeGroups[0].TargetSize != 1 || len(snap.NodeGroups[0].Instances) != 1 {
		t.Errorf("node groups = %+v", snap.NodeGroups)
	}
	if len(snap.Pods) != len(fromFull.Pods) || len(snap.Nodes) != len(fromFull.Nodes) {
		t.Errorf("compact snapshot has %d pods and %d nodes, full %d and %d", len(snap.Pods), len(snap.Nodes), len(fromFull.Pods), len(fromFull.Nodes))
	}

	// Plan it offline, as of a minute later so the pod counts as pending.
	snap.CapturedAt = snap.CapturedAt.Add(time.Minute)
	later := filepath.Join(t.TempDir(), "later.json")
	lf, err := os.Create(later)
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.WriteCompactSnapshot(lf, snap); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	out, errOut, code := nodetide(t, "plan", "--snapshot", later, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	var plan planner.Plan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.ScaleUp) != 1 || plan.ScaleUp[0].NodeGroup != pool || plan.ScaleUp[0].Delta != 1 {
		t.Errorf("offline plan scale-up = %+v, want %s +1", plan.ScaleUp, pool)
	}
	// `nodes` shows the group's node with the running pod and its requests.
	out, errOut, code = nodetide(t, "nodes", "--config", cfg, "--kubeconfig", cp.KubeconfigPath, "-o", "json")
	if code != 0 {
		t.Fatalf("nodes: exit %d: %s", code, errOut)
	}
	var doc nodesDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range doc.Nodes {
		if n.NodeGroup == pool {
			found = true
			if !n.Ready || !n.Schedulable || n.Draining || n.Pods != 1 || n.CPURequested != "1500m" || n.CPUUtilization != 0.75 {
				t.Errorf("node row = %+v", n)
			}
		}
	}
	if !found || doc.Totals.Nodes != len(doc.Nodes) {
		t.Errorf("nodes = %+v", doc)
	}
}

func boolPtr(b bool) *bool {
	return &b
}

// TestSnapshotBeforeTheFirstDeploy: with the state table not created yet
// (a user trying nodetide on a cluster before deploying it), snapshot
// records the cluster with no stored state and says why; any other state
// error still fails it.
func TestSnapshotBeforeTheFirstDeploy(t *testing.T) {
	cp := testbed.Cluster(t)
	db := testbed.DynamoDB(t)
	pool := cp.Namespace(t)
	cfg := writeFile(t, "nodetide.yaml", fmt.Sprintf(`cluster: {name: cli}
state: {dynamodb: {table: not-deployed-yet, endpoint: %s}}
nodeGroups:
  - {name: %s, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}, labels: {pool: %s}}}}
`, db.Endpoint, pool, pool))
	path := filepath.Join(t.TempDir(), "snap.json")
	_, errOut, code := nodetide(t, "snapshot", "--config", cfg, "--kubeconfig", cp.KubeconfigPath, "-f", path)
	if code != 0 || !strings.Contains(errOut, `table "not-deployed-yet": the state table does not exist; recording no stored state`) {
		t.Fatalf("snapshot before the table exists: exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.ReadSnapshot(bytes.NewReader(b))
	if err != nil || len(snap.NodeGroups) != 1 || len(snap.State.UnneededSince) != 0 {
		t.Fatalf("snapshot: %+v, %v", snap.NodeGroups, err)
	}
	// A state table the endpoint cannot be reached for is not "not
	// deployed": the snapshot fails, naming it.
	bad := writeFile(t, "bad.yaml", fmt.Sprintf(`cluster: {name: cli}
state: {dynamodb: {table: not-deployed-yet, endpoint: http://127.0.0.1:1}}
nodeGroups:
  - {name: %s, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}}}}
`, pool))
	if _, errOut, code := nodetide(t, "snapshot", "--config", bad, "--kubeconfig", cp.KubeconfigPath, "-f", path); code == 0 || !strings.Contains(errOut, "connection refused") || strings.Contains(errOut, "recording no stored state") {
		t.Fatalf("snapshot with an unreachable table: exit %d: %s", code, errOut)
	}
}
