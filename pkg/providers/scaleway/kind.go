package scaleway

import (
	"context"
	"fmt"
	"os"

	"github.com/nodetide/nodetide/pkg/providerkind"
	"github.com/nodetide/nodetide/pkg/providers"
)

// Block is the scaleway block of a nodeGroups entry: Kapsule pools by name,
// or found by their tag. CloudConfig is cluster-autoscaler's JSON cloud
// config (its secret_key may instead come from SCW_SECRET_KEY).
type Block struct {
	Pool                string `yaml:"pool"`
	CloudConfig         string `yaml:"cloudConfig"`
	AllowAutoscaledPool bool   `yaml:"allowAutoscaledPool"`
	// SecretKeySecret is the ARN of a Secrets Manager secret holding the
	// Scaleway secret key (SCW_SECRET_KEY, when set, still wins).
	SecretKeySecret string `yaml:"secretKeySecret"`
}

// Kind is the Scaleway provider's entry in the table of providers. It
// applies the entry's minSize/maxSize itself: a pool's own may be
// replaced, wider, when its own autoscaling is off.
func Kind() providerkind.Kind {
	return providerkind.Kind{
		Name:  ProviderName,
		Block: func() any { return &Block{} },
		Check: check,
		Build: build,
		Secrets: func(e providerkind.Entry) []string {
			if b := BlockOf(e); b != nil && b.SecretKeySecret != "" {
				return []string{b.SecretKeySecret}
			}
			return nil
		},
		Describe: func(e providerkind.Entry, _, _ string) ([]providerkind.Summary, error) {
			name := e.Name
			switch b := BlockOf(e); {
			case name != "":
			case b != nil && b.Pool != "":
				name = b.Pool
			default:
				name = "(discovered)"
			}
			return []providerkind.Summary{{Name: name, MinSize: e.MinSize, MaxSize: e.MaxSize}}, nil
		},
	}
}

// BlockOf is the entry's scaleway block, nil when it has none.
func BlockOf(e providerkind.Entry) *Block {
	b, _ := e.Block.(*Block)
	return b
}

// check: pools may be named or found by their tag; the cloud config is
// optional since the environment can carry it.
func check(e providerkind.Entry, path string, c providerkind.Checks) {
	if b := BlockOf(e); b != nil && b.SecretKeySecret != "" {
		c.SecretARN(path+".scaleway.secretKeySecret", b.SecretKeySecret)
	}
}

func build(ctx context.Context, d providerkind.Deps, path string, e providerkind.Entry) (providers.Provider, error) {
	sg := BlockOf(e)
	if sg == nil { // everything may come from the environment
		sg = &Block{}
	}
	file := ""
	if sg.CloudConfig != "" {
		file = d.Path(sg.CloudConfig)
	}
	getenv := os.Getenv
	if arn := sg.SecretKeySecret; arn != "" && os.Getenv(EnvSecretKey) == "" {
		key, err := d.Secret(ctx, arn)
		if err != nil {
			return nil, fmt.Errorf("%s.scaleway.secretKeySecret: %w", path, err)
		}
		// The environment still wins, as cluster-autoscaler has it;
		// the secret stands in for SCW_SECRET_KEY otherwise.
		getenv = func(k string) string {
			if k == EnvSecretKey {
				return key
			}
			return os.Getenv(k)
		}
	}
	cc, err := LoadCloudConfig(file, getenv)
	if err != nil {
		return nil, fmt.Errorf("%s.scaleway: %w", path, err)
	}
	opts := Options{CloudConfig: cc, Name: e.Name, AllowAutoscaledPool: sg.AllowAutoscaledPool, MinSize: e.MinSize, MaxSize: e.MaxSize}
	if sg.Pool != "" {
		opts.Pools = []string{sg.Pool}
	}
	p, err := New(opts, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
