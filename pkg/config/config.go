// Package config reads nodetide.yaml: the cluster, where state lives, the
// node groups and their providers, and the scale-up, scale-down and drain
// settings. Loading checks every key and value and reports each problem with
// its path and line; secrets are never part of it (they come from the
// environment or Secrets Manager).
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/providerkind"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Drain timeout policies.
const (
	OnTimeoutAbort = "abort"
	OnTimeoutForce = "force"
)

// Config is nodetide.yaml.
type Config struct {
	Cluster    Cluster     `yaml:"cluster"`
	State      State       `yaml:"state"`
	NodeGroups []NodeGroup `yaml:"nodeGroups"`
	// Headroom keeps spare capacity in groups by their exact name: the way
	// to give one to groups that discovery names.
	Headrooms []GroupHeadroom `yaml:"headroom"`
	ScaleUp   ScaleUp         `yaml:"scaleUp"`
	ScaleDown ScaleDown       `yaml:"scaleDown"`
	Drain     Drain           `yaml:"drain"`
	Evaluate  Evaluate        `yaml:"evaluate"`
	Events    Events          `yaml:"events"`
	Status    Status          `yaml:"status"`

	// Dir is the directory relative paths in the config resolve against.
	Dir string `yaml:"-"`
}

// Cluster names the cluster and how to reach its API.
type Cluster struct {
	Name       string     `yaml:"name"`
	Kubernetes Kubernetes `yaml:"kubernetes"`
}

// Kubernetes is how to reach the API server; at most one way is set. None set
// means the default kubeconfig (KUBECONFIG or ~/.kube/config), for the CLI.
type Kubernetes struct {
	EKS              *EKS     `yaml:"eks"`
	Kapsule          *Kapsule `yaml:"kapsule"`
	KubeconfigSecret string   `yaml:"kubeconfigSecret"`
	Kubeconfig       string   `yaml:"kubeconfig"`
	Context          string   `yaml:"context"`
}

// EKS is an Amazon EKS cluster, reached with the function's IAM identity.
type EKS struct {
	Name   string `yaml:"name"`
	Region string `yaml:"region"`
}

// Kapsule is a Scaleway Kapsule cluster, whose kubeconfig the Scaleway API gives.
type Kapsule struct {
	ClusterID string `yaml:"clusterId"`
	Region    string `yaml:"region"`
}

// State is where nodetide keeps what it remembers; exactly one is set.
type State struct {
	DynamoDB *DynamoDB `yaml:"dynamodb"`
	// Memory keeps state in the process: for `nodetide run` and tests only.
	Memory *struct{} `yaml:"memory"`
}

// DynamoDB is the state table. Endpoint is for local DynamoDB implementations.
type DynamoDB struct {
	Table    string `yaml:"table"`
	Region   string `yaml:"region"`
	Endpoint string `yaml:"endpoint"`
}

// NodeGroup is one entry of nodeGroups: a provider and what it needs to find
// its groups. MinSize/MaxSize narrow what the provider reports (never widen).
type NodeGroup struct {
	Name     string `yaml:"name"`
	Provider string `yaml:"provider"`
	MinSize  *int   `yaml:"minSize"`
	MaxSize  *int   `yaml:"maxSize"`
	// Headroom is spare capacity the group keeps ready (over-provisioning
	// without placeholder pods).
	Headroom *Headroom `yaml:"headroom"`
	// Price is what one node of the entry's groups costs per hour; without
	// it a group's price is unknown (never zero).
	Price *Price `yaml:"price"`
	// Blocks are the entry's provider blocks by their key (aws, scaleway,
	// …), each of its provider's own type (providerkind.Kind.Block).
	Blocks map[string]any `yaml:"-"`
}

// Price is a node's price per hour in a currency (ISO 4217 code).
type Price struct {
	PerHour  *float64 `yaml:"perHour"`
	Currency string   `yaml:"currency"`
}

// snapshot converts the price, reporting each problem under path.
func (p *Price) snapshot(path string, errs *fieldErrors) snapshot.Price {
	out := snapshot.Price{Currency: p.Currency, Source: snapshot.PriceConfig}
	if p.PerHour == nil {
		errs.add(0, path+".perHour", "is required (the price of one node for one hour, e.g. 0.096)")
	} else if err := snapshot.CheckPerHour(*p.PerHour); err != nil {
		errs.add(0, path+".perHour", err.Error())
	} else {
		out.PerHour = *p.PerHour
	}
	if p.Currency == "" {
		errs.add(0, path+".currency", "is required (e.g. USD or EUR)")
	} else if err := snapshot.CheckCurrency(p.Currency); err != nil {
		errs.add(0, path+".currency", err.Error())
	}
	return out
}

// GroupPrice is the price nodeGroups[i] sets for the groups it defines;
// nil when it sets none. The config is valid (Parse checked it).
func (c *Config) GroupPrice(i int) *snapshot.Price {
	p := c.NodeGroups[i].Price
	if p == nil {
		return nil
	}
	out := p.snapshot("", &fieldErrors{})
	return &out
}

// Headroom is one of: a number of empty nodes; free cpu and/or memory
// (quantities) across the group; or the utilisation (requests ÷
// allocatable, 0 < P ≤ 1) at which the group grows.
type Headroom struct {
	Nodes       *int     `yaml:"nodes"`
	CPU         string   `yaml:"cpu"`
	Memory      string   `yaml:"memory"`
	Utilization *float64 `yaml:"utilization"`
}

// planner converts the headroom, reporting each problem under path.
func (h *Headroom) planner(path string, errs *fieldErrors) snapshot.Headroom {
	var out snapshot.Headroom
	forms := 0
	for _, set := range []bool{h.Nodes != nil, h.CPU != "" || h.Memory != "", h.Utilization != nil} {
		if set {
			forms++
		}
	}
	if forms != 1 {
		errs.add(0, path, "set exactly one form: nodes, cpu/memory, or utilization")
	}
	if h.Nodes != nil {
		if *h.Nodes < 1 {
			errs.add(0, path+".nodes", fmt.Sprintf("must be at least 1, got %d", *h.Nodes))
		}
		out.Nodes = *h.Nodes
	}
	quantity := func(key, v string) (resource.Quantity, bool) {
		if v == "" {
			return resource.Quantity{}, false
		}
		q, err := resource.ParseQuantity(v)
		switch {
		case err != nil:
			errs.add(0, path+"."+key, fmt.Sprintf("bad quantity %q", v))
		case snapshot.CheckQuantity(q) != nil:
			errs.add(0, path+"."+key, fmt.Sprintf("%q: %v", v, snapshot.CheckQuantity(q)))
		case q.Sign() <= 0:
			errs.add(0, path+"."+key, fmt.Sprintf("must be more than 0, got %q", v))
		default:
			return q, true
		}
		return resource.Quantity{}, false
	}
	if q, ok := quantity("cpu", h.CPU); ok {
		out.CPUMillis = q.MilliValue()
	}
	if q, ok := quantity("memory", h.Memory); ok {
		out.MemoryBytes = q.Value()
	}
	if u := h.Utilization; u != nil {
		// Written so NaN fails too.
		if !(*u > 0 && *u <= 1) {
			errs.add(0, path+".utilization", fmt.Sprintf("must be in (0, 1], got %v", *u))
		}
		out.Utilization = *u
	}
	return out
}

// GroupHeadroom is one entry of the top-level headroom list: a node group
// by its exact name (as discovery names it: the ASG's name, the Scaleway
// pool's, the INI's [nodegroup "name"]) and one form of Headroom.
type GroupHeadroom struct {
	NodeGroup   string   `yaml:"nodeGroup"`
	Nodes       *int     `yaml:"nodes"`
	CPU         string   `yaml:"cpu"`
	Memory      string   `yaml:"memory"`
	Utilization *float64 `yaml:"utilization"`
}

func (g *GroupHeadroom) headroom() *Headroom {
	return &Headroom{Nodes: g.Nodes, CPU: g.CPU, Memory: g.Memory, Utilization: g.Utilization}
}

// Headroom is, by node group name, the headroom of the groups that keep one:
// nodeGroups[].headroom and the top-level headroom list.
func (c *Config) Headroom() map[string]snapshot.Headroom {
	out := map[string]snapshot.Headroom{}
	for i, g := range c.NodeGroups {
		if g.Headroom != nil && g.Name != "" {
			out[g.Name] = g.Headroom.planner(fmt.Sprintf("nodeGroups[%d].headroom", i), &fieldErrors{})
		}
	}
	for i := range c.Headrooms {
		h := &c.Headrooms[i]
		out[h.NodeGroup] = h.headroom().planner(fmt.Sprintf("headroom[%d]", i), &fieldErrors{})
	}
	return out
}

// maxGroupName is the longest group name a headroom entry may give: the
// longest an ASG name may be.
const maxGroupName = 255

// validateHeadroom checks the top-level headroom list; named are the paths
// of the named nodeGroups entries, by name.
func (c *Config) validateHeadroom(named map[string]string, errs *fieldErrors) {
	own := map[string]bool{} // named groups with nodeGroups[].headroom
	for _, g := range c.NodeGroups {
		if g.Name != "" && g.Headroom != nil {
			own[g.Name] = true
		}
	}
	seen := map[string]string{}
	known := knownNames(named)
	for i := range c.Headrooms {
		h := &c.Headrooms[i]
		path := fmt.Sprintf("headroom[%d]", i)
		h.headroom().planner(path, errs)
		name, at := h.NodeGroup, path+".nodeGroup"
		switch {
		case name == "":
			errs.add(0, at, "is required: the group's exact name")
			continue
		case strings.TrimSpace(name) != name:
			errs.add(0, at, fmt.Sprintf("%q has leading or trailing spaces: names are matched exactly", name))
		case len(name) > maxGroupName:
			errs.add(0, at, fmt.Sprintf("is %d characters long, more than a group name can be (%d)", len(name), maxGroupName))
		}
		if prev, dup := seen[name]; dup {
			errs.add(0, at, fmt.Sprintf("duplicate node group %q (also %s)", name, prev))
		}
		seen[name] = path
		switch g, ok := named[name]; {
		case ok && own[name]:
			errs.add(0, at, fmt.Sprintf("%q keeps a headroom at %s.headroom already: set it in one place", name, g))
		case !ok && !c.hasDiscovery():
			errs.add(0, at, fmt.Sprintf("%q names no node group (known: %s)", name, known))
		}
	}
}

// knownNames lists the names for an error, the first few only: a config
// of thousands of groups must not make every error that long.
func knownNames(named map[string]string) string {
	const shown = 20
	names := sortedKeys(named)
	if len(names) > shown {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
	}
	return strings.Join(names, ", ")
}

// ScaleUp tunes scale-up.
type ScaleUp struct {
	PendingPodMinAge     *Duration `yaml:"pendingPodMinAge"`
	MaxNodesPerStep      *int      `yaml:"maxNodesPerStep"`
	MaxNodeProvisionTime *Duration `yaml:"maxNodeProvisionTime"`
	Backoff              *Duration `yaml:"backoff"`
	Expander             Expanders `yaml:"expander"`
	Priorities           Map[int]  `yaml:"priorities"`
	// BalanceSimilarNodeGroups splits a scale-up across groups like the one
	// the expander picked (cluster-autoscaler's --balance-similar-node-groups).
	BalanceSimilarNodeGroups *bool `yaml:"balanceSimilarNodeGroups"`
	// ExpendablePodsPriorityCutoff: pods with a lower spec.priority are
	// expendable (cluster-autoscaler's --expendable-pods-priority-cutoff).
	ExpendablePodsPriorityCutoff *int `yaml:"expendablePodsPriorityCutoff"`
	// StartupTaints and StatusTaints are taint keys ignored on templates
	// and nodes (cluster-autoscaler's --startup-taint and --status-taint;
	// its prefixes are always ignored). A node with a startup taint is
	// still starting.
	StartupTaints []string `yaml:"startupTaints"`
	StatusTaints  []string `yaml:"statusTaints"`
}

// ScaleDown tunes scale-down.
type ScaleDown struct {
	Enabled              *bool     `yaml:"enabled"`
	UtilizationThreshold *float64  `yaml:"utilizationThreshold"`
	UnneededTime         *Duration `yaml:"unneededTime"`
	DelayAfterAdd        *Duration `yaml:"delayAfterAdd"`
	MaxConcurrentDrains  *int      `yaml:"maxConcurrentDrains"`
	// Consolidation: "delete" removes several under-used nodes of a group
	// at once, within DisruptionBudgets (consolidation.go); "replace" also
	// replaces nodes by fewer or cheaper ones that save ReplaceMinSaving.
	Consolidation     string             `yaml:"consolidation"`
	DisruptionBudgets []DisruptionBudget `yaml:"disruptionBudgets"`
	ReplaceMinSaving  *float64           `yaml:"replaceMinSaving"`
}

// Drain tunes node removal.
type Drain struct {
	Timeout   *Duration `yaml:"timeout"`
	OnTimeout string    `yaml:"onTimeout"`
	Surge     *bool     `yaml:"surge"`
	// Rebalance: what EC2's rebalance recommendations do (RebalanceIgnore
	// or RebalanceDrain).
	Rebalance string `yaml:"rebalance"`
}

// What drain.rebalance may say.
const (
	RebalanceIgnore = "ignore"
	RebalanceDrain  = "drain"
)

// Evaluate tunes the evaluate function's timing.
type Evaluate struct {
	// Interval between scheduled cycles (EventBridge's minimum is 1m).
	Interval *Duration `yaml:"interval"`
	// WatchFor keeps a scheduled run watching for new pending pods that long
	// after its tick; 0 (the default) turns the watch off: the webhook
	// trigger reacts to pending pods without billing an idle watch.
	WatchFor *Duration `yaml:"watchFor"`
	// Shadow plans and reports every cycle and changes nothing (no
	// scale-up, drain, recovery or Event): for running beside another
	// autoscaler before taking over from it.
	Shadow *bool `yaml:"shadow"`
	// ShadowCompare is how a shadow cycle compares its plan with what
	// cluster-autoscaler did.
	ShadowCompare ShadowCompare `yaml:"shadowCompare"`
}

// ShadowCompare tunes the comparison with cluster-autoscaler in shadow mode.
type ShadowCompare struct {
	// Enabled: compare (the default) whenever evaluate.shadow is on.
	Enabled *bool `yaml:"enabled"`
	// ConfigMap is cluster-autoscaler's status ConfigMap, "namespace/name".
	ConfigMap string `yaml:"configMap"`
}

// DefaultShadowCompareConfigMap is cluster-autoscaler's status ConfigMap
// where its Helm chart and manifests run it.
const DefaultShadowCompareConfigMap = "kube-system/cluster-autoscaler-status"

// Events tunes the Kubernetes Events nodetide records.
type Events struct {
	Enabled *bool `yaml:"enabled"`
	// MaxPodEventsPerCycle caps the pod events (TriggeredScaleUp,
	// NotTriggerScaleUp) one evaluate cycle writes.
	MaxPodEventsPerCycle *int `yaml:"maxPodEventsPerCycle"`
	// NotTriggerScaleUpInterval: a pod gets NotTriggerScaleUp again only
	// after this long.
	NotTriggerScaleUpInterval *Duration `yaml:"notTriggerScaleUpInterval"`
}

// EventSettings are the events settings with defaults.
type EventSettings struct {
	Enabled                   bool
	MaxPodEventsPerCycle      int
	NotTriggerScaleUpInterval time.Duration
}

// EventSettings returns the events settings, defaults filled in.
func (c *Config) EventSettings() EventSettings {
	e := EventSettings{Enabled: true, MaxPodEventsPerCycle: 100, NotTriggerScaleUpInterval: 5 * time.Minute}
	if c.Events.Enabled != nil {
		e.Enabled = *c.Events.Enabled
	}
	if c.Events.MaxPodEventsPerCycle != nil {
		e.MaxPodEventsPerCycle = *c.Events.MaxPodEventsPerCycle
	}
	setDur(&e.NotTriggerScaleUpInterval, c.Events.NotTriggerScaleUpInterval)
	return e
}

// Status is where evaluate publishes its status besides the state store.
type Status struct {
	// ConfigMap is the status ConfigMap; `configMap: false` turns it off.
	ConfigMap *StatusConfigMap `yaml:"configMap"`
}

// StatusConfigMap names the status ConfigMap, or turns it off.
type StatusConfigMap struct {
	Off       bool   `yaml:"-"`
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
}

// UnmarshalYAML reads `false` (off), `true` (the defaults) or the mapping.
func (s *StatusConfigMap) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		var on bool
		if err := n.Decode(&on); err != nil {
			return err
		}
		*s = StatusConfigMap{Off: !on}
		return nil
	}
	type plain StatusConfigMap
	return n.Decode((*plain)(s))
}

// Defaults of the status ConfigMap.
const (
	DefaultStatusNamespace = "kube-system"
	DefaultStatusName      = "nodetide-status"
)

// StatusConfigMapRef is the status ConfigMap's namespace and name, defaults
// filled in; ok is false when it is off.
func (c *Config) StatusConfigMapRef() (namespace, name string, ok bool) {
	cm := c.Status.ConfigMap
	if cm == nil {
		return DefaultStatusNamespace, DefaultStatusName, true
	}
	if cm.Off {
		return "", "", false
	}
	return cmp.Or(cm.Namespace, DefaultStatusNamespace), cmp.Or(cm.Name, DefaultStatusName), true
}

func (c *Config) validateStatus(errs *fieldErrors) {
	ns, name, ok := c.StatusConfigMapRef()
	if !ok {
		return
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		errs.add(0, "status.configMap.namespace", fmt.Sprintf("%q is not a namespace name: %s", ns, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		errs.add(0, "status.configMap.name", fmt.Sprintf("%q is not a ConfigMap name: %s", name, strings.Join(msgs, "; ")))
	}
}

// EvaluateSettings are the evaluate timings with defaults.
type EvaluateSettings struct {
	Interval time.Duration
	WatchFor time.Duration
	Shadow   bool
	// Compare is on when the shadow cycle compares with
	// cluster-autoscaler, whose status ConfigMap is CompareNamespace and
	// CompareName.
	Compare                       bool
	CompareNamespace, CompareName string
}

// EvaluateSettings returns the evaluate timings, defaults filled in.
func (c *Config) EvaluateSettings() EvaluateSettings {
	e := EvaluateSettings{Interval: time.Minute}
	setDur(&e.Interval, c.Evaluate.Interval)
	setDur(&e.WatchFor, c.Evaluate.WatchFor)
	if c.Evaluate.Shadow != nil {
		e.Shadow = *c.Evaluate.Shadow
	}
	sc := c.Evaluate.ShadowCompare
	e.Compare = e.Shadow && (sc.Enabled == nil || *sc.Enabled)
	e.CompareNamespace, e.CompareName, _ = strings.Cut(cmp.Or(sc.ConfigMap, DefaultShadowCompareConfigMap), "/")
	return e
}

func (c *Config) validateShadowCompare(errs *fieldErrors) {
	ref := c.Evaluate.ShadowCompare.ConfigMap
	if ref == "" {
		return
	}
	const path = "evaluate.shadowCompare.configMap"
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		errs.add(0, path, fmt.Sprintf("%q is not namespace/name (e.g. %s)", ref, DefaultShadowCompareConfigMap))
		return
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		errs.add(0, path, fmt.Sprintf("%q is not a namespace name: %s", ns, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		errs.add(0, path, fmt.Sprintf("%q is not a ConfigMap name: %s", name, strings.Join(msgs, "; ")))
	}
}

// Duration is a Go duration string in YAML ("10s", "15m", "1h30m").
type Duration struct{ time.Duration }

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("invalid duration %q (use e.g. 10s, 15m, 1h30m)", n.Value)
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", n.Value)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// LoadFile reads and validates a config file.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dirOf(path)
	return cfg, nil
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i]
	}
	return "."
}

// Parse reads and validates a config document; source names it in errors.
// Every problem is reported, each as "source:line: path: what is wrong".
func Parse(data []byte, source string) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty config", source)
		}
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: empty config", source)
	}
	// A second document would be ignored by the decoder: whatever it says
	// would silently not apply.
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, fmt.Errorf("%s: %w", source, err)
	default:
		return nil, fmt.Errorf("%s:%d: a second YAML document (after ---): a config is one document", source, next.Line)
	}
	doc := root.Content[0]
	errs := fieldErrors{lines: map[string]int{}}
	checkKeys(doc, typeOf[Config](), "", &errs)
	if len(errs.list) > 0 {
		errs.checkRest(doc)
		return nil, errs.join(source)
	}
	var cfg Config
	if err := doc.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", source, decodeError(err))
	}
	cfg.validate(&errs)
	if len(errs.list) > 0 {
		return nil, errs.join(source)
	}
	return &cfg, nil
}

// Map is a YAML mapping of string keys, decoded in one pass
// (providerkind.Map).
type Map[V any] = providerkind.Map[V]

// decodeError turns yaml.v3's multi-line type errors into one line each.
func decodeError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return err
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func (c *Config) validate(errs *fieldErrors) {
	c.validateCluster(errs)
	c.validateState(errs)
	names := c.validateNodeGroups(errs)
	c.validateHeadroom(names, errs)
	c.validateScaling(names, errs)
	c.validateTiming(errs)
	c.validateDrain(errs)
	c.validateStatus(errs)
	c.validateShadowCompare(errs)
}

func (c *Config) validateCluster(errs *fieldErrors) {
	if c.Cluster.Name == "" {
		errs.add(0, "cluster.name", "is required")
	}
	k := c.Cluster.Kubernetes
	ways := 0
	for _, set := range []bool{k.EKS != nil, k.Kapsule != nil, k.KubeconfigSecret != "", k.Kubeconfig != ""} {
		if set {
			ways++
		}
	}
	if ways > 1 {
		errs.add(0, "cluster.kubernetes", "set only one of eks, kapsule, kubeconfigSecret, kubeconfig")
	}
	if k.EKS != nil && k.EKS.Name == "" {
		errs.add(0, "cluster.kubernetes.eks.name", "is required")
	}
	if k.EKS != nil {
		checkRegion(errs, "cluster.kubernetes.eks.region", k.EKS.Region)
	}
	if k.Kapsule != nil && k.Kapsule.ClusterID == "" {
		errs.add(0, "cluster.kubernetes.kapsule.clusterId", "is required")
	}
	if k.KubeconfigSecret != "" {
		checkSecretARN(errs, "cluster.kubernetes.kubeconfigSecret", k.KubeconfigSecret)
	}
}

func (c *Config) validateState(errs *fieldErrors) {
	switch {
	case c.State.DynamoDB != nil && c.State.Memory != nil:
		errs.add(0, "state", "set only one of dynamodb, memory")
	case c.State.DynamoDB == nil && c.State.Memory == nil:
		errs.add(0, "state", "is required: dynamodb: {table: …} (or memory: {} for local runs)")
	case c.State.DynamoDB != nil && c.State.DynamoDB.Table == "":
		errs.add(0, "state.dynamodb.table", "is required")
	}
	if d := c.State.DynamoDB; d != nil && d.Endpoint == "" {
		// A DynamoDB-compatible endpoint (dynalite, DynamoDB Local) takes
		// any region name; AWS's takes only its own.
		checkRegion(errs, "state.dynamodb.region", d.Region)
	}
}

// validateNodeGroups checks each group and returns the path of each named
// one, by name.
func (c *Config) validateNodeGroups(errs *fieldErrors) map[string]string {
	if len(c.NodeGroups) == 0 {
		errs.add(0, "nodeGroups", "at least one node group is required")
	}
	names := map[string]string{}
	for i := range c.NodeGroups {
		g := &c.NodeGroups[i]
		path := fmt.Sprintf("nodeGroups[%d]", i)
		g.validate(path, errs)
		if g.Name != "" {
			// Names become the value of the nodetide.io/node-group label.
			for _, msg := range validation.IsValidLabelValue(g.Name) {
				errs.add(0, path+".name", fmt.Sprintf("%q is not a valid label value: %s", g.Name, msg))
			}
			if prev, dup := names[g.Name]; dup {
				errs.add(0, path+".name", fmt.Sprintf("duplicate node group name %q (also %s)", g.Name, prev))
			}
			names[g.Name] = path
		}
	}
	return names
}

// validateScaling checks scaleUp and scaleDown; names are the named groups.
func (c *Config) validateScaling(names map[string]string, errs *fieldErrors) {
	su := c.ScaleUp
	if su.MaxNodesPerStep != nil && *su.MaxNodesPerStep < 1 {
		errs.add(0, "scaleUp.maxNodesPerStep", "must be at least 1")
	}
	// Pod priorities are 32-bit: a cutoff beyond them is a typo.
	if v := su.ExpendablePodsPriorityCutoff; v != nil && (*v < math.MinInt32 || *v > math.MaxInt32) {
		errs.add(0, "scaleUp.expendablePodsPriorityCutoff", fmt.Sprintf("must be a pod priority (%d to %d), got %d", math.MinInt32, math.MaxInt32, *v))
	}
	validateIgnoredTaints(su, errs)
	for name := range su.Priorities {
		if _, ok := names[name]; !ok && !c.hasDiscovery() {
			errs.add(0, "scaleUp.priorities."+name, "names no node group")
		}
	}

	sd := c.ScaleDown
	// Written so NaN fails too. 0 is refused rather than read as "never
	// scale down": no node is below 0% use, and scaleDown.enabled: false says
	// that plainly.
	if t := sd.UtilizationThreshold; t != nil && !(*t > 0 && *t <= 1) {
		errs.add(0, "scaleDown.utilizationThreshold", fmt.Sprintf("must be in (0, 1], got %v (to turn scale-down off, set scaleDown.enabled: false)", *t))
	}
	if sd.MaxConcurrentDrains != nil && *sd.MaxConcurrentDrains < 1 {
		errs.add(0, "scaleDown.maxConcurrentDrains", "must be at least 1")
	}
	c.validateConsolidation(names, errs)
}

// validateTiming checks evaluate and events.
func (c *Config) validateTiming(errs *fieldErrors) {
	ev := c.EvaluateSettings()
	if ev.Interval < time.Second {
		errs.add(0, "evaluate.interval", "must be at least 1s")
	}
	if ev.WatchFor >= ev.Interval {
		errs.add(0, "evaluate.watchFor", fmt.Sprintf("must be shorter than evaluate.interval (%s)", ev.Interval))
	}

	evs := c.EventSettings()
	if evs.MaxPodEventsPerCycle < 1 || evs.MaxPodEventsPerCycle > 10000 {
		errs.add(0, "events.maxPodEventsPerCycle", fmt.Sprintf("must be from 1 to 10000, got %d (to record no events, set events.enabled: false)", evs.MaxPodEventsPerCycle))
	}
	if evs.NotTriggerScaleUpInterval < time.Second {
		errs.add(0, "events.notTriggerScaleUpInterval", "must be at least 1s")
	}
}

func (c *Config) validateDrain(errs *fieldErrors) {
	switch c.Drain.OnTimeout {
	case "", OnTimeoutAbort, OnTimeoutForce:
	default:
		errs.add(0, "drain.onTimeout", fmt.Sprintf("unknown policy %q (use abort or force)", c.Drain.OnTimeout))
	}
	switch c.Drain.Rebalance {
	case "", RebalanceIgnore, RebalanceDrain:
	default:
		errs.add(0, "drain.rebalance", fmt.Sprintf("unknown value %q (use ignore or drain)", c.Drain.Rebalance))
	}
	if c.Drain.Timeout != nil && c.Drain.Timeout.Duration < 30*time.Second {
		errs.add(0, "drain.timeout", "must be at least 30s")
	}
}

// hasDiscovery reports whether some groups are named by the provider, so a
// name elsewhere in the config cannot be checked without asking the cloud.
func (c *Config) hasDiscovery() bool {
	for _, g := range c.NodeGroups {
		if g.Name == "" {
			return true
		}
	}
	return false
}

func (g *NodeGroup) validate(path string, errs *fieldErrors) {
	if g.MinSize != nil && *g.MinSize < 0 {
		errs.add(0, path+".minSize", fmt.Sprintf("must not be negative, got %d", *g.MinSize))
	}
	if g.MaxSize != nil && *g.MaxSize < 0 {
		errs.add(0, path+".maxSize", fmt.Sprintf("must not be negative, got %d", *g.MaxSize))
	}
	if g.MinSize != nil && g.MaxSize != nil && *g.MinSize > *g.MaxSize {
		errs.add(0, path, fmt.Sprintf("minSize %d is greater than maxSize %d", *g.MinSize, *g.MaxSize))
	}
	if g.Headroom != nil {
		g.Headroom.planner(path+".headroom", errs)
		if g.Name == "" {
			errs.add(0, path+".headroom", "needs the group's name: a group that discovery or Kamatera's INI names keeps its headroom in the top-level headroom list, by its exact name")
		}
	}
	if g.Price != nil {
		g.Price.snapshot(path+".price", errs)
	}
	kinds := Providers()
	for _, k := range kinds {
		if g.Blocks[k.Name] != nil && k.Name != g.Provider {
			errs.add(0, path+"."+k.Name, fmt.Sprintf("does not match provider %q", g.Provider))
		}
	}
	if g.Provider == "" {
		errs.add(0, path+".provider", fmt.Sprintf("is required (%s)", providerNames(kinds)))
		return
	}
	if k, ok := ProviderKind(g.Provider); ok {
		k.Check(g.Entry(), path, blockChecks{errs})
		return
	}
	errs.add(0, path+".provider", fmt.Sprintf("unknown provider %q (use %s)", g.Provider, providerNames(kinds)))
}

// checkSecretARN reports a value that is not the ARN of a Secrets Manager
// secret; the value is not repeated, as a secret pasted here by mistake
// must not reach the logs.
// checkRegion checks an AWS region the config gives (empty: the
// environment's, AWS_REGION, as the SDK reads it).
func checkRegion(errs *fieldErrors, path, v string) {
	if v == "" {
		return
	}
	if err := CheckAWSRegion(v); err != nil {
		errs.add(0, path, err.Error())
	}
}

func checkSecretARN(errs *fieldErrors, path, v string) {
	a, err := arn.Parse(v)
	if err != nil || a.Service != "secretsmanager" || !strings.HasPrefix(a.Resource, "secret:") {
		errs.add(0, path, "must be a Secrets Manager ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME)")
	}
}

// validateIgnoredTaints checks scaleUp.startupTaints and statusTaints: each
// a taint key as the API server takes it, none twice, none in both lists
// (a startup taint is more than a status one: say which), and not
// nodetide's own draining taint, which must keep pods off the nodes it
// drains.
func validateIgnoredTaints(su ScaleUp, errs *fieldErrors) {
	seen := map[string]string{}
	for _, list := range []struct {
		name string
		keys []string
	}{{"scaleUp.startupTaints", su.StartupTaints}, {"scaleUp.statusTaints", su.StatusTaints}} {
		for i, key := range list.keys {
			p := fmt.Sprintf("%s[%d]", list.name, i)
			switch {
			case key == "":
				errs.add(0, p, "must not be empty")
				continue
			case key == podfacts.TaintDraining:
				errs.add(0, p, fmt.Sprintf("%q is nodetide's draining taint, which keeps pods off the nodes it drains", key))
				continue
			}
			for _, msg := range validation.IsQualifiedName(key) {
				errs.add(0, p, fmt.Sprintf("%q: %s", key, msg))
			}
			if at, dup := seen[key]; dup {
				errs.add(0, p, fmt.Sprintf("%q is also %s", key, at))
				continue
			}
			seen[key] = p
		}
	}
}

// Settings are the planner settings this config asks for, defaults filled in.
func (c *Config) Settings() planner.Settings {
	s := planner.DefaultSettings()
	su, sd := c.ScaleUp, c.ScaleDown
	setDur(&s.ScaleUp.PendingPodMinAge, su.PendingPodMinAge)
	setDur(&s.ScaleUp.MaxNodeProvisionTime, su.MaxNodeProvisionTime)
	setDur(&s.ScaleUp.Backoff, su.Backoff)
	if su.MaxNodesPerStep != nil {
		s.ScaleUp.MaxNodesPerStep = *su.MaxNodesPerStep
	}
	if len(su.Expander) > 0 {
		s.ScaleUp.Expanders = slices.Clone(su.Expander)
	}
	s.ScaleUp.Priorities = su.Priorities
	if su.BalanceSimilarNodeGroups != nil {
		s.ScaleUp.BalanceSimilarNodeGroups = *su.BalanceSimilarNodeGroups
	}
	if su.ExpendablePodsPriorityCutoff != nil {
		s.ScaleUp.ExpendablePodsPriorityCutoff = *su.ExpendablePodsPriorityCutoff
	}
	s.ScaleUp.IgnoredTaints = podfacts.IgnoredTaints{Startup: su.StartupTaints, Status: su.StatusTaints}
	if sd.Enabled != nil {
		s.ScaleDown.Enabled = *sd.Enabled
	}
	if sd.UtilizationThreshold != nil {
		s.ScaleDown.UtilizationThreshold = *sd.UtilizationThreshold
	}
	setDur(&s.ScaleDown.UnneededTime, sd.UnneededTime)
	setDur(&s.ScaleDown.DelayAfterAdd, sd.DelayAfterAdd)
	if sd.MaxConcurrentDrains != nil {
		s.ScaleDown.MaxConcurrentDrains = *sd.MaxConcurrentDrains
	}
	s.ScaleDown.Consolidation = sd.Consolidation
	s.ScaleDown.DisruptionBudgets = sd.budgets()
	if sd.ReplaceMinSaving != nil {
		s.ScaleDown.ReplaceMinSaving = *sd.ReplaceMinSaving
	}
	return s
}

// DrainSettings are the drain settings, defaults filled in.
type DrainSettings struct {
	Timeout   time.Duration
	OnTimeout string
	Surge     bool
	// Rebalance drains the machines EC2 recommends rebalancing.
	Rebalance bool
}

// DrainSettings returns the drain settings with defaults.
func (c *Config) DrainSettings() DrainSettings {
	d := DrainSettings{Timeout: 10 * time.Minute, OnTimeout: OnTimeoutAbort, Surge: true}
	setDur(&d.Timeout, c.Drain.Timeout)
	if c.Drain.OnTimeout != "" {
		d.OnTimeout = c.Drain.OnTimeout
	}
	if c.Drain.Surge != nil {
		d.Surge = *c.Drain.Surge
	}
	d.Rebalance = c.Drain.Rebalance == RebalanceDrain
	return d
}

func setDur(dst *time.Duration, v *Duration) {
	if v != nil {
		*dst = v.Duration
	}
}
