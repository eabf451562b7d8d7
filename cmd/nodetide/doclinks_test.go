package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinksResolve: every relative link in the README, infra/README.md
// and the guides in docs/ names a file that exists and, with a #fragment, a
// heading of that file (GitHub's anchors), so a reader never lands nowhere.
func TestDocLinksResolve(t *testing.T) {
	root := "../.."
	docs := []string{"README.md", "infra/README.md"}
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range guides {
		docs = append(docs, filepath.Join("docs", filepath.Base(g)))
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path]
	}
	links := 0
	for _, doc := range docs {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, frag, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Clean(filepath.Join(filepath.Dir(doc), file))
				if _, err := os.Stat(filepath.Join(root, path)); err != nil {
					t.Errorf("%s links to %s: no such file", doc, target)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchorsOf(path)[frag] {
				t.Errorf("%s links to %s: %s has no heading with anchor #%s", doc, target, path, frag)
			}
		}
	}
	if links < 20 {
		t.Errorf("only %d relative links found in the docs", links)
	}
}

// stripCode drops fenced blocks, where a ](x) is not a link.
func stripCode(doc string) string {
	return regexp.MustCompile("(?s)```.*?```").ReplaceAllString(doc, "")
}

// headingAnchors are the anchors GitHub gives a document's headings:
// lower case, punctuation but hyphens and underscores dropped, spaces as
// hyphens, repeats numbered -1, -2, ...
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, line := range strings.Split(stripCode(doc), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if text == "" || !strings.HasPrefix(strings.TrimLeft(line, "#"), " ") {
			continue
		}
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		if n := count[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		count[slug]++
	}
	return out
}
