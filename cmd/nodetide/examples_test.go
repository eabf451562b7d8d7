package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cloudConfigs are the example files a config example names (read through
// the config, not validated on their own).
var cloudConfigs = map[string]bool{"scaleway.json": true, "kamatera.ini": true}

// TestExamplesValidate: every file in examples/ is valid: each config
// through config validate, each schedule file through schedules validate,
// each worked example (a folder) through plan with its snapshot and config.
// A new kind of file fails until this test knows how to check it.
func TestExamplesValidate(t *testing.T) {
	files, err := os.ReadDir("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		path := filepath.Join("../../examples", f.Name())
		var args []string
		switch {
		case cloudConfigs[f.Name()]:
			continue
		case f.IsDir():
			// A worked example: its config, planned with its snapshot.
			args = []string{"plan", "--snapshot", filepath.Join(path, "snapshot.json"), "--config", filepath.Join(path, "nodetide.yaml")}
		case strings.HasSuffix(f.Name(), ".yaml"):
			args = []string{"config", "validate", "--config", path}
		case strings.HasSuffix(f.Name(), ".json"):
			args = []string{"schedules", "validate", path}
		default:
			t.Errorf("%s: no check for this kind of example", path)
			continue
		}
		t.Run(f.Name(), func(t *testing.T) {
			if out, errOut, code := nodetide(t, args...); code != 0 {
				t.Errorf("nodetide %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
			}
		})
	}
	// The AWS example the stack is built from by default.
	if out, errOut, code := nodetide(t, "config", "validate", "--config", "../../nodetide.example.yaml"); code != 0 {
		t.Errorf("nodetide.example.yaml: exit %d\n%s%s", code, out, errOut)
	}
}

// TestReadmeExamples: what the README shows works as shown: the files its
// commands name exist, and its config and schedule blocks validate.
func TestReadmeExamples(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	t.Run("named files exist", func(t *testing.T) {
		all := readme
		guides, err := filepath.Glob("../../docs/*.md")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range guides {
			b, err := os.ReadFile(g)
			if err != nil {
				t.Fatal(err)
			}
			all += string(b)
		}
		named := regexp.MustCompile(`(?:schedules (?:validate|next|create)|--config|cp) ([\w./-]+\.(?:json|yaml))`).FindAllStringSubmatch(all, -1)
		if len(named) == 0 {
			t.Fatal("the README and the guides name no example file")
		}
		for _, m := range named {
			if m[1] == "nodetide.yaml" || m[1] == "nodetide.local.yaml" {
				continue // the user's own, and the one make up writes
			}
			if _, err := os.Stat(filepath.Join("../..", m[1])); err != nil {
				t.Errorf("README names %s: %v", m[1], err)
			}
		}
	})
	blocks := regexp.MustCompile("(?s)```(yaml|json)\n(.*?)```").FindAllStringSubmatch(readme, -1)
	var yamls, jsons int
	checkBlocks(t, "README", blocks, &yamls, &jsons)
}

// TestGuideExamples: the config and schedule blocks of the guides in docs/
// validate, as the README's do.
func TestGuideExamples(t *testing.T) {
	guides, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(guides) == 0 {
		t.Fatalf("guides: %v %v", guides, err)
	}
	var yamls, jsons int
	for _, g := range guides {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		blocks := regexp.MustCompile("(?s)```(yaml|json)\n(.*?)```").FindAllStringSubmatch(string(b), -1)
		checkBlocks(t, filepath.Base(g), blocks, &yamls, &jsons)
	}
	// configuration.md's reference and schedules.md's documents at least.
	if yamls < 5 || jsons < 1 {
		t.Errorf("the guides have %d yaml and %d json blocks; want the configuration reference and the schedules", yamls, jsons)
	}
}

// checkBlocks validates each yaml block as a config and each json block as a
// schedules file, counting them.
func checkBlocks(t *testing.T, doc string, blocks [][]string, yamls, jsons *int) {
	t.Helper()
	for _, blk := range blocks {
		dir := t.TempDir()
		var args []string
		if blk[1] == "yaml" {
			*yamls++
			path := filepath.Join(dir, "nodetide.yaml")
			args = []string{"config", "validate", "--config", path}
			writeTo(t, path, blk[2])
		} else {
			*jsons++
			path := filepath.Join(dir, "schedules.json")
			args = []string{"schedules", "validate", path}
			writeTo(t, path, blk[2])
		}
		if out, errOut, code := nodetide(t, args...); code != 0 {
			t.Errorf("%s %s block does not validate (exit %d): %s%s\n%s", doc, blk[1], code, out, errOut, blk[2])
		}
	}
}

func writeTo(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
