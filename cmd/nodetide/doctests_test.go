package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsNameRealTests: every test the READMEs and docs/ name as proof (`TestXxx`,
// `FuzzXxx`, `BenchmarkXxx`) is a function of some test file in the
// repository, so a renamed or removed test cannot leave a claim behind.
func TestDocsNameRealTests(t *testing.T) {
	root := "../.."
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "cdk.out" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)`")
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{"README.md", "infra/README.md"}
	for _, g := range guides {
		docs = append(docs, filepath.Join("docs", filepath.Base(g)))
	}
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			n++
			if !defined[m[1]] {
				t.Errorf("%s names %s, which no test file defines", doc, m[1])
			}
		}
	}
	if n < 50 {
		t.Errorf("the docs name %d tests; the safety tables alone name more", n)
	}
}

// TestDocumentedMakeTargetsExist: every `make TARGET` the READMEs and the
// guides in docs/ show in code (inline or fenced) is a target of the
// Makefile, so a quick start never names one that is not there.
func TestDocumentedMakeTargetsExist(t *testing.T) {
	root := "../.."
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][\w-]*):`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{filepath.Join(root, "README.md"), filepath.Join(root, "infra", "README.md")}
	docs = append(docs, guides...)
	code := regexp.MustCompile("(?s)```.*?```|`[^`\n]+`")
	comment := regexp.MustCompile(`(?m)(^|\s)#.*$`)
	use := regexp.MustCompile(`(?:^|[\s;&|(` + "`" + `])make ([a-z][\w-]*)`)
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, span := range code.FindAllString(string(b), -1) {
			span = comment.ReplaceAllString(span, "") // "# make one node schedulable" is prose
			for _, m := range use.FindAllStringSubmatch(span, -1) {
				n++
				if !targets[m[1]] {
					t.Errorf("%s shows make %s, which the Makefile has no target for", doc, m[1])
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("the docs show only %d make commands", n)
	}
}
