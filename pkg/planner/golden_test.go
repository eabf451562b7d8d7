package planner

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

var update = flag.Bool("update", false, "rewrite testdata/*/plan.json from the current planner (review the diff before accepting it)")

// rewrite writes a golden file for -update and fails the test anyway: a
// run that rewrote its expectations proved nothing, so it must never pass
// (and in CI, where nobody reviews the diff, it writes nothing).
func rewrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("-update refused when CI is set: golden files are updated locally and the diff reviewed")
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Errorf("rewrote %s: review the diff, then run again without -update", path)
}

// TestGolden plans every testdata/<rule>/snapshot.json with the default
// settings at the snapshot's capturedAt and compares with plan.json.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "*", "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("found %d golden snapshots, want at least 10", len(dirs))
	}
	for _, snapPath := range dirs {
		dir := filepath.Dir(snapPath)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			f, err := os.Open(snapPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s, err := snapshot.ReadSnapshot(f)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := WritePlan(&got, Decide(s, DefaultSettings(), s.CapturedAt)); err != nil {
				t.Fatal(err)
			}
			planPath := filepath.Join(dir, "plan.json")
			if *update {
				rewrite(t, planPath, got.Bytes())
				return
			}
			want, err := os.ReadFile(planPath)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("plan differs from %s:\n--- got\n%s\n--- want\n%s", planPath, got.String(), want)
			}
		})
	}
}

// TestGoldenUpdateNeverPasses: -update rewrites a file and still fails,
// and under CI it refuses to write.
func TestGoldenUpdateNeverPasses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.json")
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		inner := &testing.T{}
		done := make(chan struct{})
		// rewrite fails its test (and Fatalf ends the goroutine), so it
		// runs on a test of its own whose outcome is inspected.
		go func() { defer close(done); rewrite(inner, path, []byte("{}\n")) }()
		<-done
		_, err := os.Stat(path)
		switch {
		case !inner.Failed():
			t.Errorf("CI=%q: -update passed", ci)
		case ci == "" && err != nil:
			t.Errorf("CI unset: file not written: %v", err)
		case ci != "" && err == nil:
			t.Errorf("CI=%q: file written", ci)
		}
		os.Remove(path)
	}
}
