package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestProvidersListEveryFolderOnce: the table of providers has one line
// for each provider folder under pkg/providers, by the folder's name, each
// with a block, its checks and a build, and ProviderKind finds each.
func TestProvidersListEveryFolderOnce(t *testing.T) {
	entries, err := os.ReadDir("../providers")
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, e := range entries {
		if e.IsDir() && hasCode(t, filepath.Join("../providers", e.Name())) {
			folders = append(folders, e.Name())
		}
	}
	var names []string
	for _, k := range Providers() {
		if k.Block == nil || k.Check == nil || k.Build == nil || k.Describe == nil {
			t.Errorf("provider %s lacks a block, its checks, a build or a description", k.Name)
		}
		if got, ok := ProviderKind(k.Name); !ok || got.Name != k.Name {
			t.Errorf("ProviderKind(%q) = %q, %v", k.Name, got.Name, ok)
		}
		names = append(names, k.Name)
	}
	slices.Sort(names)
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("a provider is listed twice: %v", names)
	}
	if !slices.Equal(names, folders) {
		t.Errorf("providers %v, provider folders %v", names, folders)
	}
	if _, ok := ProviderKind("gcp"); ok {
		t.Error("ProviderKind found a provider not in the table")
	}
}

// TestProviderBlocksDecodeByKey: each provider's block decodes, from its
// key, into that provider's type and no other block is set; a null block
// is no block; and the entry is written with its block.
func TestProviderBlocksDecodeByKey(t *testing.T) {
	for _, k := range Providers() {
		var g NodeGroup
		if err := yaml.Unmarshal([]byte("provider: "+k.Name+"\n"+k.Name+": {}\n"), &g); err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		if len(g.Blocks) != 1 || reflect.TypeOf(g.Blocks[k.Name]) != reflect.TypeOf(k.Block()) {
			t.Errorf("%s: blocks %#v, want one %T", k.Name, g.Blocks, k.Block())
		}
		if g.Entry().Block != g.Blocks[k.Name] {
			t.Errorf("%s: the entry's block is not its provider's", k.Name)
		}
		out, err := yaml.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		var again NodeGroup
		if err := yaml.Unmarshal(out, &again); err != nil || again.Blocks[k.Name] == nil {
			t.Errorf("%s: written as %q, read back without its block (%v)", k.Name, out, err)
		}
		if out2, _ := yaml.Marshal(again); string(out2) != string(out) {
			t.Errorf("%s: written as %q, then as %q", k.Name, out, out2)
		}
		var none NodeGroup
		if err := yaml.Unmarshal([]byte(k.Name+": null\n"), &none); err != nil || none.Blocks != nil {
			t.Errorf("%s: null block read as %#v (%v)", k.Name, none.Blocks, err)
		}
	}
}

func hasCode(t *testing.T, dir string) bool {
	t.Helper()
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".go") && !strings.HasSuffix(f.Name(), "_test.go") {
			return true
		}
	}
	return false
}
