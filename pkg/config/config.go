// Package config reads nodetide.yaml: the cluster, where state lives, the
// node groups and their providers, and the scale-up, scale-down and drain
// settings. Loading checks every key and value and reports each problem with
// its path and line; secrets are never part of it (they come from the
// environment or Secrets Manager).
package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodetide/nodetide/pkg/planner"
)

// Provider names.
const (
	ProviderAWS      = "aws"
	ProviderScaleway = "scaleway"
	ProviderKamatera = "kamatera"
	ProviderKwok     = "kwok"
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
	ScaleUp    ScaleUp     `yaml:"scaleUp"`
	ScaleDown  ScaleDown   `yaml:"scaleDown"`
	Drain      Drain       `yaml:"drain"`
	Evaluate   Evaluate    `yaml:"evaluate"`

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
	Name     string         `yaml:"name"`
	Provider string         `yaml:"provider"`
	MinSize  *int           `yaml:"minSize"`
	MaxSize  *int           `yaml:"maxSize"`
	AWS      *AWSGroup      `yaml:"aws"`
	Scaleway *ScalewayGroup `yaml:"scaleway"`
	Kamatera *KamateraGroup `yaml:"kamatera"`
	Kwok     *KwokGroup     `yaml:"kwok"`

	line int
}

// AWSGroup selects Auto Scaling Groups by name or by cluster-autoscaler's
// discovery tags.
type AWSGroup struct {
	AutoScalingGroup string   `yaml:"autoScalingGroup"`
	AutoDiscovery    []string `yaml:"autoDiscovery"`
	Region           string   `yaml:"region"`
}

// ScalewayGroup selects Kapsule pools; CloudConfig is cluster-autoscaler's JSON
// cloud config (its secret_key may instead come from SCW_SECRET_KEY).
type ScalewayGroup struct {
	Pool                string `yaml:"pool"`
	CloudConfig         string `yaml:"cloudConfig"`
	AllowAutoscaledPool bool   `yaml:"allowAutoscaledPool"`
	// SecretKeySecret is the ARN of a Secrets Manager secret holding the
	// Scaleway secret key (SCW_SECRET_KEY, when set, still wins).
	SecretKeySecret string `yaml:"secretKeySecret"`
}

// KamateraGroup points at cluster-autoscaler's Kamatera INI cloud config: a
// file, or (in Lambda, where there are no files) a Secrets Manager secret
// whose string is the INI — a secret because the INI's script-base64 carries
// join tokens.
type KamateraGroup struct {
	CloudConfig       string `yaml:"cloudConfig"`
	CloudConfigSecret string `yaml:"cloudConfigSecret"`
	// CredentialsSecret is the ARN of a Secrets Manager secret holding
	// {"clientId": "...", "secret": "..."}; it wins over the INI and the
	// environment.
	CredentialsSecret string `yaml:"credentialsSecret"`
}

// KwokGroup is a local group of kwok-managed Node objects (demo and tests).
type KwokGroup struct {
	Template Template `yaml:"template"`
}

// Template describes a node of a group.
type Template struct {
	Allocatable map[string]string `yaml:"allocatable"`
	Labels      map[string]string `yaml:"labels"`
	Taints      []Taint           `yaml:"taints"`
}

// Taint is a node taint.
type Taint struct {
	Key    string `yaml:"key"`
	Value  string `yaml:"value"`
	Effect string `yaml:"effect"`
}

// ScaleUp tunes scale-up.
type ScaleUp struct {
	PendingPodMinAge     *Duration      `yaml:"pendingPodMinAge"`
	MaxNodesPerStep      *int           `yaml:"maxNodesPerStep"`
	MaxNodeProvisionTime *Duration      `yaml:"maxNodeProvisionTime"`
	Backoff              *Duration      `yaml:"backoff"`
	Expander             string         `yaml:"expander"`
	Priorities           map[string]int `yaml:"priorities"`
}

// ScaleDown tunes scale-down.
type ScaleDown struct {
	Enabled              *bool     `yaml:"enabled"`
	UtilizationThreshold *float64  `yaml:"utilizationThreshold"`
	UnneededTime         *Duration `yaml:"unneededTime"`
	DelayAfterAdd        *Duration `yaml:"delayAfterAdd"`
	MaxConcurrentDrains  *int      `yaml:"maxConcurrentDrains"`
}

// Drain tunes node removal.
type Drain struct {
	Timeout   *Duration `yaml:"timeout"`
	OnTimeout string    `yaml:"onTimeout"`
	Surge     *bool     `yaml:"surge"`
}

// Evaluate tunes the evaluate function's timing.
type Evaluate struct {
	// Interval between scheduled cycles (EventBridge's minimum is 1m).
	Interval *Duration `yaml:"interval"`
	// WatchFor keeps a scheduled run watching for new pending pods that long
	// after its tick; 0 turns the watch off.
	WatchFor *Duration `yaml:"watchFor"`
}

// EvaluateSettings are the evaluate timings with defaults.
type EvaluateSettings struct {
	Interval time.Duration
	WatchFor time.Duration
}

// EvaluateSettings returns the evaluate timings, defaults filled in.
func (c *Config) EvaluateSettings() EvaluateSettings {
	e := EvaluateSettings{Interval: time.Minute, WatchFor: 45 * time.Second}
	setDur(&e.Interval, c.Evaluate.Interval)
	setDur(&e.WatchFor, c.Evaluate.WatchFor)
	return e
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
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: empty config", source)
	}
	doc := root.Content[0]
	var errs fieldErrors
	checkKeys(doc, typeOf[Config](), "", &errs)
	if len(errs) > 0 {
		return nil, errs.join(source)
	}
	var cfg Config
	if err := doc.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", source, decodeError(err))
	}
	recordLines(doc, &cfg)
	cfg.validate(&errs)
	if len(errs) > 0 {
		return nil, errs.join(source)
	}
	return &cfg, nil
}

// decodeError turns yaml.v3's multi-line type errors into one line each.
func decodeError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return err
}

func recordLines(doc *yaml.Node, cfg *Config) {
	groups := mapValue(doc, "nodeGroups")
	if groups == nil {
		return
	}
	for i, g := range groups.Content {
		if i < len(cfg.NodeGroups) {
			cfg.NodeGroups[i].line = g.Line
		}
	}
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
	if k.Kapsule != nil && k.Kapsule.ClusterID == "" {
		errs.add(0, "cluster.kubernetes.kapsule.clusterId", "is required")
	}
	if k.KubeconfigSecret != "" && !strings.HasPrefix(k.KubeconfigSecret, "arn:") {
		errs.add(0, "cluster.kubernetes.kubeconfigSecret", "must be a Secrets Manager ARN")
	}

	switch {
	case c.State.DynamoDB != nil && c.State.Memory != nil:
		errs.add(0, "state", "set only one of dynamodb, memory")
	case c.State.DynamoDB == nil && c.State.Memory == nil:
		errs.add(0, "state", "is required: dynamodb: {table: …} (or memory: {} for local runs)")
	case c.State.DynamoDB != nil && c.State.DynamoDB.Table == "":
		errs.add(0, "state.dynamodb.table", "is required")
	}

	if len(c.NodeGroups) == 0 {
		errs.add(0, "nodeGroups", "at least one node group is required")
	}
	names := map[string]string{}
	for i := range c.NodeGroups {
		g := &c.NodeGroups[i]
		path := fmt.Sprintf("nodeGroups[%d]", i)
		g.validate(path, errs)
		if g.Name != "" {
			if prev, dup := names[g.Name]; dup {
				errs.add(g.line, path+".name", fmt.Sprintf("duplicate node group name %q (also %s)", g.Name, prev))
			}
			names[g.Name] = path
		}
	}

	su := c.ScaleUp
	if su.MaxNodesPerStep != nil && *su.MaxNodesPerStep < 1 {
		errs.add(0, "scaleUp.maxNodesPerStep", "must be at least 1")
	}
	switch su.Expander {
	case "", planner.ExpanderLeastWaste, planner.ExpanderPriority:
	default:
		errs.add(0, "scaleUp.expander", fmt.Sprintf("unknown expander %q (use %s or %s)", su.Expander, planner.ExpanderLeastWaste, planner.ExpanderPriority))
	}
	for name := range su.Priorities {
		if _, ok := names[name]; !ok && !c.hasDiscovery() {
			errs.add(0, "scaleUp.priorities."+name, "names no node group")
		}
	}

	sd := c.ScaleDown
	if t := sd.UtilizationThreshold; t != nil && (*t <= 0 || *t > 1) {
		errs.add(0, "scaleDown.utilizationThreshold", fmt.Sprintf("must be in (0, 1], got %v", *t))
	}
	if sd.MaxConcurrentDrains != nil && *sd.MaxConcurrentDrains < 1 {
		errs.add(0, "scaleDown.maxConcurrentDrains", "must be at least 1")
	}

	ev := c.EvaluateSettings()
	if ev.Interval < time.Second {
		errs.add(0, "evaluate.interval", "must be at least 1s")
	}
	if ev.WatchFor >= ev.Interval {
		errs.add(0, "evaluate.watchFor", fmt.Sprintf("must be shorter than evaluate.interval (%s)", ev.Interval))
	}

	switch c.Drain.OnTimeout {
	case "", OnTimeoutAbort, OnTimeoutForce:
	default:
		errs.add(0, "drain.onTimeout", fmt.Sprintf("unknown policy %q (use abort or force)", c.Drain.OnTimeout))
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
	line := g.line
	if g.MinSize != nil && *g.MinSize < 0 {
		errs.add(line, path+".minSize", fmt.Sprintf("must not be negative, got %d", *g.MinSize))
	}
	if g.MaxSize != nil && *g.MaxSize < 0 {
		errs.add(line, path+".maxSize", fmt.Sprintf("must not be negative, got %d", *g.MaxSize))
	}
	if g.MinSize != nil && g.MaxSize != nil && *g.MinSize > *g.MaxSize {
		errs.add(line, path, fmt.Sprintf("minSize %d is greater than maxSize %d", *g.MinSize, *g.MaxSize))
	}
	blocks := map[string]bool{ProviderAWS: g.AWS != nil, ProviderScaleway: g.Scaleway != nil, ProviderKamatera: g.Kamatera != nil, ProviderKwok: g.Kwok != nil}
	for name, set := range blocks {
		if set && name != g.Provider {
			errs.add(line, path+"."+name, fmt.Sprintf("does not match provider %q", g.Provider))
		}
	}
	switch g.Provider {
	case "":
		errs.add(line, path+".provider", "is required (aws, scaleway, kamatera or kwok)")
	case ProviderAWS:
		a := g.AWS
		switch {
		case a == nil:
			errs.add(line, path+".aws", "is required for provider aws")
		case (a.AutoScalingGroup == "") == (len(a.AutoDiscovery) == 0):
			errs.add(line, path+".aws", "set exactly one of autoScalingGroup, autoDiscovery")
		case len(a.AutoDiscovery) > 0 && g.Name != "":
			errs.add(line, path+".name", "discovered groups take their Auto Scaling Group names; drop name")
		}
	case ProviderScaleway:
		// Pools may be named or found by their tag; the cloud config is optional
		// since the environment can carry it.
		if g.Scaleway != nil && g.Scaleway.SecretKeySecret != "" && !strings.HasPrefix(g.Scaleway.SecretKeySecret, "arn:") {
			errs.add(line, path+".scaleway.secretKeySecret", "must be a Secrets Manager ARN")
		}
	case ProviderKamatera:
		switch {
		case g.Kamatera == nil || g.Kamatera.CloudConfig == "" && g.Kamatera.CloudConfigSecret == "":
			errs.add(line, path+".kamatera.cloudConfig", "is required for provider kamatera (or cloudConfigSecret)")
		case g.Kamatera.CloudConfig != "" && g.Kamatera.CloudConfigSecret != "":
			errs.add(line, path+".kamatera", "set cloudConfig (a file) or cloudConfigSecret (a Secrets Manager secret holding the INI), not both")
		case g.Kamatera.CloudConfigSecret != "" && !strings.HasPrefix(g.Kamatera.CloudConfigSecret, "arn:"):
			errs.add(line, path+".kamatera.cloudConfigSecret", "must be a Secrets Manager ARN")
		}
		if g.Kamatera != nil && g.Kamatera.CredentialsSecret != "" && !strings.HasPrefix(g.Kamatera.CredentialsSecret, "arn:") {
			errs.add(line, path+".kamatera.credentialsSecret", "must be a Secrets Manager ARN")
		}
		if g.Name != "" {
			errs.add(line, path+".name", "Kamatera groups take their names from the INI's [nodegroup] sections; drop name")
		}
	case ProviderKwok:
		if g.Name == "" {
			errs.add(line, path+".name", "is required for provider kwok")
		}
		if g.MinSize == nil || g.MaxSize == nil {
			errs.add(line, path, "minSize and maxSize are required for provider kwok")
		}
		if g.Kwok == nil {
			errs.add(line, path+".kwok.template", "is required for provider kwok")
		} else if _, err := g.Kwok.Template.Planner(); err != nil {
			errs.add(line, path+".kwok.template", err.Error())
		}
	default:
		errs.add(line, path+".provider", fmt.Sprintf("unknown provider %q (use aws, scaleway, kamatera or kwok)", g.Provider))
	}
}

// Planner converts the template, checking quantities and taint effects.
func (t Template) Planner() (planner.Template, error) {
	out := planner.Template{Allocatable: corev1.ResourceList{}, Labels: t.Labels}
	if len(t.Allocatable) == 0 {
		return out, errors.New("allocatable is required (cpu, memory, pods)")
	}
	for name, v := range t.Allocatable {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return out, fmt.Errorf("allocatable.%s: bad quantity %q", name, v)
		}
		if q.Sign() < 0 {
			return out, fmt.Errorf("allocatable.%s: must not be negative", name)
		}
		out.Allocatable[corev1.ResourceName(name)] = q
	}
	for _, want := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := out.Allocatable[want]; !ok {
			return out, fmt.Errorf("allocatable.%s is required", want)
		}
	}
	if _, ok := out.Allocatable[corev1.ResourcePods]; !ok {
		out.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
	}
	for i, taint := range t.Taints {
		switch corev1.TaintEffect(taint.Effect) {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return out, fmt.Errorf("taints[%d].effect: unknown effect %q (NoSchedule, PreferNoSchedule, NoExecute)", i, taint.Effect)
		}
		if taint.Key == "" {
			return out, fmt.Errorf("taints[%d].key is required", i)
		}
		out.Taints = append(out.Taints, corev1.Taint{Key: taint.Key, Value: taint.Value, Effect: corev1.TaintEffect(taint.Effect)})
	}
	return out, nil
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
	if su.Expander != "" {
		s.ScaleUp.Expander = su.Expander
	}
	s.ScaleUp.Priorities = su.Priorities
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
	return s
}

// DrainSettings are the drain settings, defaults filled in.
type DrainSettings struct {
	Timeout   time.Duration
	OnTimeout string
	Surge     bool
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
	return d
}

func setDur(dst *time.Duration, v *Duration) {
	if v != nil {
		*dst = v.Duration
	}
}
