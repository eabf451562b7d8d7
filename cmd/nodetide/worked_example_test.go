package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeWorkedExamples: every `$ nodetide plan` block of the README
// and the guides in docs/ prints, run from the repository root, exactly
// what the document shows.
func TestReadmeWorkedExamples(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, doc := range append([]string{"../../README.md"}, docs...) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	blocks := regexp.MustCompile("(?s)\n( *)```text\n *\\$ nodetide (plan [^\n]+)\n(.*?)\n *```").FindAllStringSubmatch(all.String(), -1)
	if len(blocks) == 0 {
		t.Fatal("the docs show no `$ nodetide plan` example")
	}
	t.Chdir("../..")
	for _, m := range blocks {
		indent, args := m[1], strings.Fields(m[2])
		var want strings.Builder
		for _, line := range strings.Split(m[3], "\n") {
			want.WriteString(strings.TrimPrefix(line, indent) + "\n")
		}
		t.Run(m[2], func(t *testing.T) {
			out, errOut, code := nodetide(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if out != want.String() {
				t.Errorf("the docs show:\n%s\nthe command prints:\n%s", want.String(), out)
			}
		})
	}
}
