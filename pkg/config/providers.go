package config

import (
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodetide/nodetide/pkg/providerkind"
	awsprovider "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/providers/kamatera"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/providers/scaleway"
)

// Providers is the table of providers, one line each, in the order their
// blocks' problems are reported. Config decodes and checks each entry's
// block by it; setup builds the providers, the CLI shows their groups and
// the stack grants their secrets and IAM from it.
func Providers() []providerkind.Kind {
	return []providerkind.Kind{
		awsprovider.Kind(),
		scaleway.Kind(),
		kamatera.Kind(),
		kwok.Kind(),
	}
}

// ProviderKind finds a provider of the table by its name.
func ProviderKind(name string) (providerkind.Kind, bool) {
	for _, k := range Providers() {
		if k.Name == name {
			return k, true
		}
	}
	return providerkind.Kind{}, false
}

// providerNames lists the providers' names for an error: "a, b or c".
func providerNames(kinds []providerkind.Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Entry is the entry as its provider sees it, with its provider's block.
func (g NodeGroup) Entry() providerkind.Entry {
	return providerkind.Entry{Name: g.Name, MinSize: g.MinSize, MaxSize: g.MaxSize, Block: g.Blocks[g.Provider]}
}

// UnmarshalYAML decodes the entry's own keys, then each provider block
// present (not null) into its provider's type.
func (g *NodeGroup) UnmarshalYAML(n *yaml.Node) error {
	type plain NodeGroup
	if err := n.Decode((*plain)(g)); err != nil {
		return err
	}
	g.Blocks = nil
	for _, k := range Providers() {
		v := mapValue(n, k.Name)
		for v != nil && v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		if v == nil || isNull(v) {
			continue
		}
		b := k.Block()
		if err := v.Decode(b); err != nil {
			return err
		}
		if g.Blocks == nil {
			g.Blocks = map[string]any{}
		}
		g.Blocks[k.Name] = b
	}
	return nil
}

// MarshalYAML writes the entry's own keys, then its provider blocks.
func (g NodeGroup) MarshalYAML() (any, error) {
	type plain NodeGroup
	var n yaml.Node
	if err := n.Encode(plain(g)); err != nil {
		return nil, err
	}
	for _, k := range Providers() {
		b, ok := g.Blocks[k.Name]
		if !ok || b == nil {
			continue
		}
		var v yaml.Node
		if err := v.Encode(b); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k.Name}, &v)
	}
	return &n, nil
}

// blockChecks reports a provider's checks of its block as config's own.
type blockChecks struct{ errs *fieldErrors }

func (c blockChecks) Add(path, msg string)     { c.errs.add(0, path, msg) }
func (c blockChecks) SecretARN(path, v string) { checkSecretARN(c.errs, path, v) }
func (c blockChecks) AWSRegion(path, v string) { checkRegion(c.errs, path, v) }

// blockFields are the keys of the providers' blocks in a nodeGroups entry,
// with the types they decode into, for checkKeys.
func blockFields(fields map[string]reflect.Type) {
	for _, k := range Providers() {
		fields[k.Name] = reflect.TypeOf(k.Block())
	}
}
