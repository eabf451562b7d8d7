package planner

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"gopkg.in/yaml.v3"
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

// TestGolden plans every testdata/<rule>/snapshot.json at the snapshot's
// capturedAt, with the default settings or those of the rule's
// nodetide.yaml (see goldenSettings), and compares with plan.json.
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
			if err := WritePlan(&got, Decide(s, goldenSettings(t, dir), s.CapturedAt)); err != nil {
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

// goldenSettings are the default settings with the expanders and
// priorities of dir/nodetide.yaml, when the rule has one. The config
// package (which imports this one) is not at hand here, so only those keys
// are read; the CLI's fixture test plans the same file through the config.
func goldenSettings(t *testing.T, dir string) Settings {
	t.Helper()
	set := DefaultSettings()
	data, err := os.ReadFile(filepath.Join(dir, "nodetide.yaml"))
	if errors.Is(err, fs.ErrNotExist) {
		return set
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ScaleUp struct {
			Expander   yaml.Node      `yaml:"expander"`
			Priorities map[string]int `yaml:"priorities"`
		} `yaml:"scaleUp"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	switch x := &doc.ScaleUp.Expander; x.Kind {
	case 0:
	case yaml.ScalarNode:
		names = []string{x.Value}
	default:
		if err := x.Decode(&names); err != nil {
			t.Fatal(err)
		}
	}
	if len(names) > 0 {
		set.ScaleUp.Expanders = names
	}
	set.ScaleUp.Priorities = doc.ScaleUp.Priorities
	return set
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
