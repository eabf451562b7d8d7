package setup

import (
	"testing"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/providers/kamatera"
)

// TestConfigBoundsByKind: only the kinds that leave an entry's
// minSize/maxSize to nodetide are narrowed above the provider.
func TestConfigBoundsByKind(t *testing.T) {
	minSize, maxSize := 1, 3
	for _, k := range config.Providers() {
		b := configBounds(k, config.NodeGroup{Provider: k.Name, MinSize: &minSize, MaxSize: &maxSize})
		narrowed := b.Min != nil || b.Max != nil
		if want := k.Name == kamatera.ProviderName; narrowed != want {
			t.Errorf("%s: narrowed above the provider %v, want %v", k.Name, narrowed, want)
		}
	}
}
