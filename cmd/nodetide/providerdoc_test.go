package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestProviderWalkthroughNamesRealCode: every file and folder that
// docs/adding-a-provider.md names exists, every name it gives after a file
// appears in that file (or folder), and every test it names is defined, so
// the walkthrough cannot drift from the code. Fenced blocks are commands,
// not claims.
func TestProviderWalkthroughNamesRealCode(t *testing.T) {
	checkGuideNamesRealCode(t, "docs/adding-a-provider.md", 10, 20)
}

// TestDevelopmentGuideNamesRealCode: the same of docs/development.md, the
// map of packages and the seams it points at.
func TestDevelopmentGuideNamesRealCode(t *testing.T) {
	checkGuideNamesRealCode(t, "docs/development.md", 40, 40)
}

// checkGuideNamesRealCode checks a guide's files, names and tests, and that
// it names at least minPaths paths and minNames names.
func checkGuideNamesRealCode(t *testing.T, guide string, minPaths, minNames int) {
	t.Helper()
	root := "../.."
	b, err := os.ReadFile(filepath.Join(root, guide))
	if err != nil {
		t.Fatal(err)
	}
	pathRe := regexp.MustCompile(`^(pkg|internal|cmd|infra|functions|docs)/[\w./-]*$`)
	identRe := regexp.MustCompile(`^[A-Za-z_][\w.]*$`)
	testRe := regexp.MustCompile(`^Test[A-Z]\w*$`)
	inline := regexp.MustCompile("`([^`\n]+)`")
	var current string // the file or folder names are looked up in
	var text string    // its Go source
	paths, names := 0, 0
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range inline.FindAllStringSubmatch(line, -1) {
			tok := m[1]
			switch {
			case pathRe.MatchString(tok):
				paths++
				current, text = tok, goSource(t, guide, filepath.Join(root, tok))
			case testRe.MatchString(tok):
				names++
				if !definedTest(t, root, tok) {
					t.Errorf("%s names %s, which no test file defines", guide, tok)
				}
			case identRe.MatchString(tok) && current != "":
				names++
				name := tok[strings.LastIndexByte(tok, '.')+1:]
				if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(text) {
					t.Errorf("%s names %s in %s, which has no such name", guide, tok, current)
				}
			}
		}
	}
	if paths < minPaths || names < minNames {
		t.Errorf("%s: checked %d paths and %d names; it names more", guide, paths, names)
	}
}

// goSource is the file's text, or the Go files' of a folder; a missing
// path fails the test.
func goSource(t *testing.T, guide, path string) string {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Errorf("%s names %s, which does not exist", guide, path)
		return ""
	}
	if !st.IsDir() {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	files, err := filepath.Glob(filepath.Join(path, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(b)
	}
	return sb.String()
}

// definedTest reports whether a test file under root declares the test.
func definedTest(t *testing.T, root, name string) bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ` + name + `\(`)
	found := false
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			found = decl.Match(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
