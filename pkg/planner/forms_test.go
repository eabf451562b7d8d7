package planner

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// The snapshot forms and the Trimmer keep every decision: the plans read
// from what pkg/snapshot writes and trims are the plans of the cluster.

// TestFormsGiveTheSamePlan: the full and the compact form of one cluster
// plan byte for byte alike, and alike to the cluster they were written
// from, for every golden fixture, random snapshots (which use every rule
// the planner has) and a synthetic cluster; the compact form reads back to
// the same document.
func TestFormsGiveTheSamePlan(t *testing.T) {
	check := func(name string, s snapshot.Snapshot, set Settings) {
		t.Helper()
		want := planJSON(t, s, set)
		full := snapshottest.Read(t, snapshottest.Write(t, s, false))
		compactDoc := snapshottest.Write(t, s, true)
		compact := snapshottest.Read(t, compactDoc)
		if got := planJSON(t, full, set); got != want {
			t.Fatalf("%s: plan from the full form differs:\n--- got\n%s\n--- want\n%s", name, got, want)
		}
		if got := planJSON(t, compact, set); got != want {
			t.Fatalf("%s: plan from the compact form differs:\n--- got\n%s\n--- want\n%s", name, got, want)
		}
		if again := snapshottest.Write(t, compact, true); !bytes.Equal(again, compactDoc) {
			t.Fatalf("%s: compact write, read, write differs:\n%s\n---\n%s", name, compactDoc, again)
		}
	}
	for path, s := range snapshottest.Golden(t, "testdata") {
		check(path, s, DefaultSettings())
		check(path+", balanced", s, balanced())
	}
	r := rand.New(rand.NewPCG(3, 5))
	vr := rand.New(rand.NewPCG(4, 6))
	for i := range 300 {
		s, set := randomSnapshot(r)
		check(fmt.Sprint("random snapshot ", i), s, set)
		addRandomVolumes(vr, &s)
		check(fmt.Sprint("random snapshot with volumes ", i), s, set)
	}
	check("synthetic cluster", syntheticCluster(60, 30, 0.05, 9), DefaultSettings())
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := scaleDownBase(light("a", hostPath("data")))
	s.NodeGroups = append(s.NodeGroups, withTemplateTaint(group("gpu", 0, 2, 0, "8", "32Gi"), "nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule))
	s.PodDisruptionBudgets = []policyv1.PodDisruptionBudget{pdb("default/web", 1, "app", "web")}
	s.State.LastScaleUp = map[string]time.Time{"workers": t0.Add(-time.Hour)}
	// Reading keeps what the planner reads (see snapshot.Trimmer).
	snapshot.NewTrimmer().Snapshot(&s)
	var first bytes.Buffer
	if err := snapshot.WriteSnapshot(&first, s); err != nil {
		t.Fatal(err)
	}
	got, err := snapshot.ReadSnapshot(bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var second bytes.Buffer
	if err := snapshot.WriteSnapshot(&second, got); err != nil {
		t.Fatal(err)
	}
	if first.String() != second.String() {
		t.Errorf("write, read, write differs:\n%s\n---\n%s", first.String(), second.String())
	}
	if !equalSnapshots(snapshottest.Normalized(s), snapshottest.Normalized(got)) {
		t.Errorf("read snapshot differs from the written one")
	}
}

// TestTrimKeepsEveryDecision: a trimmed snapshot gives the same plan as the
// full one, for every golden fixture and for random snapshots (which use
// every rule the planner has).
func TestTrimKeepsEveryDecision(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*", "snapshot.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden snapshots: %v", err)
	}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := snapshot.ReadSnapshot(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := planJSON(t, s, DefaultSettings())
		snapshot.NewTrimmer().Snapshot(&s)
		if got := planJSON(t, s, DefaultSettings()); got != want {
			t.Errorf("%s: trimmed plan differs:\n--- got\n%s\n--- want\n%s", path, got, want)
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	vr := rand.New(rand.NewPCG(8, 12))
	for i := range 300 {
		s, set := randomSnapshot(r)
		withVols := deepCopySnapshot(s)
		want := planJSON(t, s, set)
		snapshot.NewTrimmer().Snapshot(&s)
		if got := planJSON(t, s, set); got != want {
			t.Fatalf("random snapshot %d: trimmed plan differs:\n--- got\n%s\n--- want\n%s", i, got, want)
		}
		s = withVols
		addRandomVolumes(vr, &s)
		want = planJSON(t, s, set)
		snapshot.NewTrimmer().Snapshot(&s)
		if got := planJSON(t, s, set); got != want {
			t.Fatalf("random snapshot %d with volumes: trimmed plan differs:\n--- got\n%s\n--- want\n%s", i, got, want)
		}
	}
}

func planJSON(t *testing.T, s snapshot.Snapshot, set Settings) string {
	t.Helper()
	var b bytes.Buffer
	if err := WritePlan(&b, Decide(s, set, s.CapturedAt)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
