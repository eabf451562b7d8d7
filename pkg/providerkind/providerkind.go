// Package providerkind is what a provider folder declares about itself, in
// one Kind value: the name users write in provider:, its block of a
// nodeGroups entry (decoded and checked), its build, the secrets it reads,
// what it needs of the functions' IAM roles and the groups `nodetide config
// validate` shows for an entry. The table of providers (config.Providers)
// lists one Kind per provider folder.
package providerkind

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"gopkg.in/yaml.v3"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/providers"
)

// Kind is one provider.
type Kind struct {
	// Name is the provider's name in nodetide.yaml (provider: NAME), and
	// the key of its block in a nodeGroups entry.
	Name string
	// Block returns a new, empty block: a pointer to the struct the
	// entry's block decodes into by its yaml tags. Config refuses the keys
	// the struct does not have, with their path and line.
	Block func() any
	// Check reports what is wrong with an entry of this provider (its
	// Block nil when the entry has none), each problem under its path
	// (nodeGroups[i].KEY…), as config reports its own.
	Check func(e Entry, path string, c Checks)
	// Build makes the provider of one checked entry; errors start with
	// path.
	Build func(ctx context.Context, d Deps, path string, e Entry) (providers.Provider, error)
	// NarrowedHere: nodetide narrows the entry's groups by its
	// minSize/maxSize, above the provider. A kind that applies them itself
	// (or whose groups' bounds are its own) leaves it false.
	NarrowedHere bool
	// LocalOnly: for local runs and tests; the stack refuses it.
	LocalOnly bool
	// Secrets are the Secrets Manager ARNs the entry's block names, which
	// every function reads (building the providers). Nil: none.
	Secrets func(e Entry) []string
	// Describe gives the groups `nodetide config validate` shows for an
	// entry, reading local files only (never a cloud or a secret);
	// errors start with path. dir is where relative paths resolve.
	Describe func(e Entry, path, dir string) ([]Summary, error)
	// Policy is what the kind's entries (in config order) need of the
	// functions' IAM roles. Nil: nothing beyond their secrets.
	Policy func(entries []Entry) Policy
}

// Entry is one nodeGroups entry as a provider sees it.
type Entry struct {
	Name             string
	MinSize, MaxSize *int
	// Block is the entry's block of this provider (what Kind.Block
	// returned, decoded), nil when the entry has none.
	Block any
}

// Checks collects the problems Kind.Check finds; config reports them with
// their path and line.
type Checks interface {
	// Add reports a problem at path.
	Add(path, msg string)
	// SecretARN reports v at path unless it is a Secrets Manager secret's
	// ARN, without repeating v (a secret pasted there must not reach the
	// logs).
	SecretARN(path, v string)
	// AWSRegion reports v at path unless it is empty or an AWS region.
	AWSRegion(path, v string)
}

// Deps are what a build may use.
type Deps struct {
	// ClusterName is cluster.name.
	ClusterName string
	// EKS: the cluster is an EKS cluster (cluster.kubernetes.eks).
	EKS bool
	// Dir is the directory relative paths in the config resolve against.
	Dir string
	// Client is the cluster's Kubernetes client.
	Client kubernetes.Interface
	// AWS returns the functions' AWS SDK config, loaded on first use.
	AWS func(ctx context.Context) (aws.Config, error)
	// Secret reads a Secrets Manager secret's string; errors name the
	// secret, never its value.
	Secret func(ctx context.Context, arn string) (string, error)
}

// Path resolves a path the config gives against Dir.
func (d Deps) Path(p string) string {
	if d.Dir == "" || strings.HasPrefix(p, "/") {
		return p
	}
	return d.Dir + "/" + p
}

// Summary is one group as `nodetide config validate` shows it; nil sizes
// are the provider's to decide.
type Summary struct {
	Name             string
	MinSize, MaxSize *int
}

// Policy is what a kind's entries need of the functions' IAM roles,
// besides their secrets.
type Policy struct {
	// Wildcard are read-only actions granted on Resource "*": AWS offers
	// no resource-level permission for them.
	Wildcard []string
	// Prices are read-only actions on Resource "*" that price the groups,
	// granted to the function that reads prices (evaluate).
	Prices []string
	// Groups are the entries' groups, one statement each, granted the
	// Resize actions and, to the function that removes machines (drain),
	// the Remove actions too.
	Groups         []Statement
	Resize, Remove []string
	// EKSNodegroups are actions on the EKS cluster's managed node groups,
	// granted when the cluster is an EKS cluster.
	EKSNodegroups []string
	// Endpoints are the AWS services the entries call, for the VPC
	// interface endpoints of functions without a NAT.
	Endpoints []string
}

// Statement is the resources of one grant and its conditions
// (operator, then key, then value), as IAM has them.
type Statement struct {
	Resources  []ARN
	Conditions map[string]map[string]string
}

// ARN is a resource of the stack's account, by its parts; an empty Region
// is the stack's.
type ARN struct {
	Service, Resource, ResourceName, Region string
	// Colon separates Resource and ResourceName with ":" rather than "/".
	Colon bool
}

// Map is a YAML mapping of string keys. It decodes in one pass: yaml.v3
// compares every key of a mapping with every other, which makes a template
// of tens of thousands of labels take a minute (a key given twice is
// reported by config's key checks instead).
type Map[V any] map[string]V

// UnmarshalYAML decodes the mapping key by key.
func (m *Map[V]) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		*m = nil
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: must be a mapping", n.Line)
	}
	out := make(Map[V], len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		var v V
		if err := n.Content[i+1].Decode(&v); err != nil {
			return err
		}
		out[n.Content[i].Value] = v
	}
	*m = out
	return nil
}
