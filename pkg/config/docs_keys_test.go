package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// docKey is a config path in a document's inline code: a top-level key,
// then dotted field names (lower camel case, as every key is: not a Go
// name such as evaluate.ParseEvent), `[]` marking a list's items, optionally with a
// value after a colon (`drain.onTimeout: force`).
var docKey = regexp.MustCompile("`((?:cluster|state|nodeGroups|headroom|scaleUp|scaleDown|drain|evaluate|events|status)" +
	`(?:\[\])?(?:\.[a-z][A-Za-z0-9]*(?:\[\])?)+)(?::[^` + "`" + `]*)?` + "`")

// notKeys are inline code the pattern takes for a key but that names
// something else.
var notKeys = map[string]string{
	"status.json":               "the status ConfigMap's data key",
	"nodeGroups[].zones":        "a field of the snapshot's node groups",
	"nodeGroups[].templateFrom": "a field of the snapshot's node groups",
	"evaluate.zip":              "a release artifact",
	"drain.zip":                 "a release artifact",
	"schedule.zip":              "a release artifact",
}

// TestDocumentedKeysExist: every config key the README, infra/README.md and
// the guides in docs/ name in inline code is one the parser knows, at that
// path.
func TestDocumentedKeysExist(t *testing.T) {
	docs := []string{"../../README.md", "../../infra/README.md"}
	guides, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, guides...)
	seen := map[string]bool{}
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docKey.FindAllStringSubmatch(string(b), -1) {
			key := m[1]
			if _, skip := notKeys[key]; skip {
				continue
			}
			seen[key] = true
			if err := keyPath(key); err != nil {
				t.Errorf("%s names config key %s: %v", strings.TrimPrefix(doc, "../../"), key, err)
			}
		}
	}
	if len(seen) < 30 {
		t.Errorf("the docs name %d config keys; the prose alone names more (the reference is a YAML block, validated as a config)", len(seen))
	}
}

// keyPath checks that path names a field of Config, walking its yaml tags
// as the parser does: past a map any key is a value, and a leaf takes no
// field.
func keyPath(path string) error {
	t := typeOf[Config]()
	walked := ""
	for _, seg := range strings.Split(path, ".") {
		name := strings.TrimSuffix(seg, "[]")
		t = elem(t)
		switch t.Kind() {
		case reflect.Map:
			return nil
		case reflect.Struct:
			if t == typeOf[Duration]() {
				return fmt.Errorf("%s is a duration, which has no field %s", walked, name)
			}
			fields := yamlFields(t)
			if t == typeOf[NodeGroup]() { // the provider blocks, by the table
				for _, k := range Providers() {
					fields[k.Name] = reflect.TypeOf(k.Block())
				}
			}
			ft, ok := fields[name]
			if !ok {
				return fmt.Errorf("no key %s in %s (known: %s)", name, orRoot(walked), knownList(fields))
			}
			t = ft
		default:
			return fmt.Errorf("%s is a single value, which has no field %s", walked, name)
		}
		if walked != "" {
			walked += "."
		}
		walked += seg
		if strings.HasSuffix(seg, "[]") {
			if k := elem(t).Kind(); k != reflect.Slice {
				// A list given as `x[]` must be one.
				return fmt.Errorf("%s is not a list", strings.TrimSuffix(walked, "[]"))
			}
			t = elem(t).Elem()
		}
	}
	return nil
}

func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
