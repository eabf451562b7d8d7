package setup

import (
	"context"

	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/providers"
	awsprovider "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/providers/kamatera"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/providers/scaleway"
)

// buildDeps are what every provider's build may use.
type buildDeps struct {
	cfg    *config.Config
	client kubernetes.Interface
	aws    *AWS
}

// kind is what setup knows of one provider: the one place a provider is
// wired, so adding one is one line in kinds.
type kind struct {
	// name is the provider's name in nodetide.yaml (its ProviderName).
	name string
	// build makes the provider of one config entry; errors start with path.
	build func(ctx context.Context, d buildDeps, path string, g config.NodeGroup) (providers.Provider, error)
	// narrowedHere: nodetide narrows the entry's groups by its
	// minSize/maxSize. A kwok group's are its own bounds, and the AWS and
	// Scaleway providers apply them themselves (an ASG's are re-read on
	// every size change; a Scaleway pool's may be replaced, wider, when its
	// own autoscaling is off); Kamatera's are applied above the provider.
	narrowedHere bool
}

// kinds is the table of providers, one line each.
func kinds() []kind {
	return []kind{
		{name: awsprovider.ProviderName, build: awsProvider},
		{name: scaleway.ProviderName, build: scalewayProvider},
		{name: kamatera.ProviderName, build: kamateraProvider, narrowedHere: true},
		{name: kwok.ProviderName, build: kwokProvider},
	}
}

// kindOf finds a provider by its config name.
func kindOf(name string) (kind, bool) {
	for _, k := range kinds() {
		if k.name == name {
			return k, true
		}
	}
	return kind{}, false
}
