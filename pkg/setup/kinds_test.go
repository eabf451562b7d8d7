package setup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/config"
)

// TestKindsListEveryProviderOnce: the table of providers has one line for
// each provider folder under pkg/providers, by the folder's name, each
// with a build, and the names are the ones the config accepts.
func TestKindsListEveryProviderOnce(t *testing.T) {
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
	for _, k := range kinds() {
		if k.build == nil {
			t.Errorf("kind %s has no build", k.name)
		}
		if got, ok := kindOf(k.name); !ok || got.name != k.name {
			t.Errorf("kindOf(%q) = %q, %v", k.name, got.name, ok)
		}
		names = append(names, k.name)
	}
	slices.Sort(names)
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("a provider is listed twice: %v", names)
	}
	if !slices.Equal(names, folders) {
		t.Errorf("kinds %v, provider folders %v", names, folders)
	}
	known := []string{config.ProviderAWS, config.ProviderKamatera, config.ProviderKwok, config.ProviderScaleway}
	if !slices.Equal(names, known) {
		t.Errorf("kinds %v, the config's providers %v", names, known)
	}
	if _, ok := kindOf("gcp"); ok {
		t.Error("kindOf found a provider not in the table")
	}
}

// TestConfigBoundsByKind: only the kinds that leave an entry's
// minSize/maxSize to nodetide are narrowed above the provider.
func TestConfigBoundsByKind(t *testing.T) {
	minSize, maxSize := 1, 3
	for _, k := range kinds() {
		b := configBounds(k, config.NodeGroup{Provider: k.name, MinSize: &minSize, MaxSize: &maxSize})
		narrowed := b.Min != nil || b.Max != nil
		if want := k.name == config.ProviderKamatera; narrowed != want {
			t.Errorf("%s: narrowed above the provider %v, want %v", k.name, narrowed, want)
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
