package planner

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*/plan.json from the current planner (review the diff before accepting it)")

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
			s, err := ReadSnapshot(f)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := WritePlan(&got, Decide(s, DefaultSettings(), s.CapturedAt)); err != nil {
				t.Fatal(err)
			}
			planPath := filepath.Join(dir, "plan.json")
			if *update {
				if err := os.WriteFile(planPath, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
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
