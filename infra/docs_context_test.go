package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/nodetide/nodetide/infra/stack"
)

// TestDocumentedContextKeysExist: every CDK context key the README, this
// folder's README and the guides in docs/ give with -c (`-c subnetIds=…`)
// is one the app reads, so a reader copying a deploy command never sets a
// key that is silently ignored.
func TestDocumentedContextKeysExist(t *testing.T) {
	read := map[string]bool{}
	if _, err := stack.LoadOptions(func(k string) string { read[k] = true; return "" }, func(string) string { return "" }); err != nil {
		t.Fatalf("LoadOptions with no context: %v", err)
	}
	if len(read) < 15 {
		t.Fatalf("the app reads only %d context keys: %v", len(read), read)
	}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../README.md", "README.md")
	given := regexp.MustCompile(`-c ([A-Za-z]+)=`)
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range given.FindAllStringSubmatch(string(b), -1) {
			if m[1] == "key" { // the syntax itself: -c key=value
				continue
			}
			n++
			if !read[m[1]] {
				t.Errorf("%s sets context %s, which the app does not read", doc, m[1])
			}
		}
	}
	if n < 20 {
		t.Errorf("the docs set only %d context keys; the deploy guide alone sets more", n)
	}
}
