package kamatera

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/nodetide/nodetide/pkg/providerkind"
	"github.com/nodetide/nodetide/pkg/providers"
)

// Block is the kamatera block of a nodeGroups entry. It points at
// cluster-autoscaler's Kamatera INI cloud config: a file, or (in Lambda,
// where there are no files) a Secrets Manager secret whose string is the
// INI — a secret because the INI's script-base64 carries join tokens.
type Block struct {
	CloudConfig       string `yaml:"cloudConfig"`
	CloudConfigSecret string `yaml:"cloudConfigSecret"`
	// CredentialsSecret is the ARN of a Secrets Manager secret holding
	// {"clientId": "...", "secret": "..."}; it wins over the INI and the
	// environment.
	CredentialsSecret string `yaml:"credentialsSecret"`
}

// Kind is the Kamatera provider's entry in the table of providers. The
// entry's minSize/maxSize are applied above the provider.
func Kind() providerkind.Kind {
	return providerkind.Kind{
		Name:         ProviderName,
		Block:        func() any { return &Block{} },
		Check:        check,
		Build:        build,
		NarrowedHere: true,
		Secrets: func(e providerkind.Entry) []string {
			var out []string
			if b := BlockOf(e); b != nil {
				for _, arn := range []string{b.CredentialsSecret, b.CloudConfigSecret} {
					if arn != "" {
						out = append(out, arn)
					}
				}
			}
			return out
		},
		Describe: describe,
	}
}

// BlockOf is the entry's kamatera block, nil when it has none.
func BlockOf(e providerkind.Entry) *Block {
	b, _ := e.Block.(*Block)
	return b
}

func check(e providerkind.Entry, path string, c providerkind.Checks) {
	b := BlockOf(e)
	switch {
	case b == nil || b.CloudConfig == "" && b.CloudConfigSecret == "":
		c.Add(path+".kamatera.cloudConfig", "is required for provider kamatera (or cloudConfigSecret)")
	case b.CloudConfig != "" && b.CloudConfigSecret != "":
		c.Add(path+".kamatera", "set cloudConfig (a file) or cloudConfigSecret (a Secrets Manager secret holding the INI), not both")
	case b.CloudConfigSecret != "":
		c.SecretARN(path+".kamatera.cloudConfigSecret", b.CloudConfigSecret)
	}
	if b != nil && b.CredentialsSecret != "" {
		c.SecretARN(path+".kamatera.credentialsSecret", b.CredentialsSecret)
	}
	if e.Name != "" {
		c.Add(path+".name", "Kamatera groups take their names from the INI's [nodegroup] sections; drop name")
	}
}

func build(ctx context.Context, d providerkind.Deps, path string, e providerkind.Entry) (providers.Provider, error) {
	b := BlockOf(e)
	cc, err := blockCloudConfig(ctx, d, b)
	if err != nil {
		return nil, fmt.Errorf("%s.%w", path, err)
	}
	var opts []Option
	if arn := b.CredentialsSecret; arn != "" {
		var creds struct {
			ClientID string `json:"clientId"`
			Secret   string `json:"secret"`
		}
		s, err := d.Secret(ctx, arn)
		if err == nil && json.Unmarshal([]byte(s), &creds) != nil {
			err = fmt.Errorf("secret %s is not the JSON expected", arn) // the value may be the secret: not quoted
		}
		if err != nil {
			return nil, fmt.Errorf("%s.kamatera.credentialsSecret: %w", path, err)
		}
		if creds.ClientID == "" || creds.Secret == "" {
			return nil, fmt.Errorf("%s.kamatera.credentialsSecret: secret %s needs \"clientId\" and \"secret\"", path, arn)
		}
		opts = append(opts, WithCredentials(creds.ClientID, creds.Secret))
	}
	p, err := New(cc, nil, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// blockCloudConfig reads the entry's INI from its file or its secret.
// Errors start with the field.
func blockCloudConfig(ctx context.Context, d providerkind.Deps, b *Block) (*CloudConfig, error) {
	if arn := b.CloudConfigSecret; arn != "" {
		ini, err := d.Secret(ctx, arn)
		if err != nil {
			return nil, fmt.Errorf("kamatera.cloudConfigSecret: %w", err)
		}
		cc, err := ReadCloudConfig([]byte(ini), "secret "+arn)
		if err != nil {
			return nil, fmt.Errorf("kamatera.cloudConfigSecret: %w", err)
		}
		return cc, nil
	}
	cc, err := LoadCloudConfig(d.Path(b.CloudConfig))
	if err != nil {
		return nil, fmt.Errorf("kamatera.cloudConfig: %w", err)
	}
	return cc, nil
}

// describe: the INI names the groups and their sizes, and reading it
// contacts no cloud; an INI in Secrets Manager is not read.
func describe(e providerkind.Entry, path, dir string) ([]providerkind.Summary, error) {
	b := BlockOf(e)
	if b == nil {
		return nil, fmt.Errorf("%s.kamatera.cloudConfig: is required for provider kamatera", path)
	}
	if b.CloudConfigSecret != "" {
		return []providerkind.Summary{{Name: "(from secret " + b.CloudConfigSecret + ")"}}, nil
	}
	file := b.CloudConfig
	if dir != "" && !filepath.IsAbs(file) {
		file = filepath.Join(dir, file)
	}
	cc, err := LoadCloudConfig(file)
	if err != nil {
		return nil, fmt.Errorf("%s.kamatera.cloudConfig: %w", path, err)
	}
	out := make([]providerkind.Summary, 0, len(cc.NodeGroups))
	for _, kg := range cc.NodeGroups {
		lo, hi := kg.MinSize, kg.MaxSize
		out = append(out, providerkind.Summary{Name: kg.Name, MinSize: &lo, MaxSize: &hi})
	}
	return out, nil
}
