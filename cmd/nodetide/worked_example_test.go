package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeWorkedExamples: every `$ nodetide plan` block of the README
// prints, run from the repository root, exactly what the README shows.
func TestReadmeWorkedExamples(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)\n( *)```text\n *\\$ nodetide (plan [^\n]+)\n(.*?)\n *```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) == 0 {
		t.Fatal("the README shows no `$ nodetide plan` example")
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
				t.Errorf("the README shows:\n%s\nthe command prints:\n%s", want.String(), out)
			}
		})
	}
}
