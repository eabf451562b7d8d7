package kamatera

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Defaults of cluster-autoscaler's Kamatera provider.
const (
	DefaultAPIURL           = "https://cloudcli.cloudwm.com"
	DefaultProviderIDPrefix = "kamatera://"
	DefaultMinSize          = 1
	DefaultMaxSize          = 254
	BillingHourly           = "hourly"
	BillingMonthly          = "monthly"

	// maxNameLength bounds cluster and group names: they end up in server
	// tags (`k8sca-<cluster>`, `k8scang-<group>`), which Kamatera limits to
	// 24 characters.
	maxNameLength = 15
)

// Secret is a value that must never be printed: every fmt verb, JSON and text
// marshalling show "[redacted]" (or nothing when it is empty). Reveal gives
// the value to the one place that sends it.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// Format implements fmt.Formatter, so that no verb (%d, %x, %#v …) prints the
// value.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' || (verb == 'v' && f.Flag('#')) {
		fmt.Fprintf(f, "%q", s.String())
		return
	}
	_, _ = io.WriteString(f, s.String())
}

// MarshalText implements encoding.TextMarshaler (used by JSON and YAML).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// CloudConfig is cluster-autoscaler's Kamatera cloud config (an INI file).
type CloudConfig struct {
	// Source names the file, for messages.
	Source string

	// APIClientID and APISecret are the API key. They may be left out of the
	// file when KAMATERA_API_CLIENT_ID / KAMATERA_API_SECRET are set (New
	// prefers the environment).
	APIClientID string
	APISecret   Secret
	APIURL      string

	ClusterName string
	// FilterNamePrefix, when set, limits the servers considered to those
	// whose name starts with it.
	FilterNamePrefix string
	// ProviderIDPrefix starts every provider ID (default "kamatera://").
	ProviderIDPrefix string

	DefaultMinSize int
	DefaultMaxSize int

	// PoweroffOnScaleDown powers a removed server off instead of terminating
	// it (it keeps its disks, and what Kamatera bills for a stopped server),
	// so that PoweronOnScaleUp can start it again, faster than a create.
	PoweroffOnScaleDown bool
	// PoweronOnScaleUp starts the group's powered-off servers before
	// creating new ones.
	PoweronOnScaleUp bool
	// PoweroffMaxServers bounds the powered-off servers a group keeps: past
	// it, a removed server is terminated. -1 (unset) is no bound.
	PoweroffMaxServers int

	// NodeGroups are in file order.
	NodeGroups []*NodeGroupConfig

	// lines remembers where each key was set, for Validate's messages.
	lines keyLines
}

// NodeGroupConfig is one `[nodegroup "name"]` section with the defaults of
// [global] applied.
type NodeGroupConfig struct {
	Name    string
	MinSize int
	MaxSize int
	Server  ServerConfig
	// TemplateLabels come from the repeated `template-label = "k=v"` key
	// (newer cluster-autoscaler releases): labels new nodes are expected to
	// carry.
	TemplateLabels map[string]string
	// Line is where the section header is.
	Line int
}

// ServerConfig is how a group's servers are created: the keys of the
// cloudcli `server create` command.
type ServerConfig struct {
	NamePrefix string
	// Password is the root password; empty lets Kamatera generate one (never
	// read back: use SSHKey to log in).
	Password   Secret
	SSHKey     string
	Datacenter string
	Image      string
	// CPU is `<vCPUs><type>`, e.g. "2A" (type A availability, B general
	// purpose, T burstable, D dedicated).
	CPU string
	// RAM is in MB (MiB, as Kamatera counts).
	RAM int
	// Disks and Networks are cloudcli --disk / --network specs, e.g.
	// "size=100" and "name=wan,ip=auto".
	Disks          []string
	DailyBackup    bool
	Managed        bool
	Networks       []string
	BillingCycle   string
	MonthlyPackage string
	// ScriptBase64 is the init script that joins the server to the cluster,
	// base64-encoded. Without it a group can be listed and shrunk, never
	// grown. It is a Secret because join scripts carry join tokens.
	ScriptBase64 Secret
}

// Script returns the decoded init script (validated when parsed).
func (s ServerConfig) Script() (string, error) {
	b, err := base64.StdEncoding.DecodeString(s.ScriptBase64.Reveal())
	if err != nil {
		return "", errors.New("script-base64 is not valid base64")
	}
	return string(b), nil
}

// NodeGroupNames returns the groups' names in file order.
func (c *CloudConfig) NodeGroupNames() []string {
	names := make([]string, 0, len(c.NodeGroups))
	for _, g := range c.NodeGroups {
		names = append(names, g.Name)
	}
	return names
}

// NodeGroup returns the named group's config.
func (c *CloudConfig) NodeGroup(name string) (*NodeGroupConfig, bool) {
	for _, g := range c.NodeGroups {
		if g.Name == name {
			return g, true
		}
	}
	return nil, false
}

// String summarises the config without any secret.
func (c *CloudConfig) String() string {
	if c == nil {
		return "<nil kamatera cloud config>"
	}
	set := func(s string) string {
		if s == "" {
			return "not set"
		}
		return "set"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kamatera cloud config %s: cluster %q, api %s, client id %s, secret %s",
		c.Source, c.ClusterName, c.APIURL, set(c.APIClientID), set(c.APISecret.Reveal()))
	if c.FilterNamePrefix != "" {
		fmt.Fprintf(&b, ", filter-name-prefix %q", c.FilterNamePrefix)
	}
	for _, g := range c.NodeGroups {
		fmt.Fprintf(&b, "; group %q min %d max %d cpu %s ram %d", g.Name, g.MinSize, g.MaxSize, g.Server.CPU, g.Server.RAM)
	}
	return b.String()
}

// GoString keeps %#v as free of secrets as %v.
func (c *CloudConfig) GoString() string { return c.String() }

// ConfigError is one problem of the cloud config, with where it is.
type ConfigError struct {
	File string
	// Line is 0 when the problem is a key missing from the whole file.
	Line int
	// Section is "global" or `nodegroup "name"`; Key is empty for a section
	// or syntax problem.
	Section string
	Key     string
	Msg     string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Section != "" {
		fmt.Fprintf(&b, "[%s] ", e.Section)
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ConfigErrors are all the problems found, in file order.
type ConfigErrors []*ConfigError

func (es ConfigErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap lets errors.As find each ConfigError.
func (es ConfigErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// LoadCloudConfig reads and validates the cloud config at path: a complete
// config, with every mandatory key present (see Validate).
func LoadCloudConfig(path string) (*CloudConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kamatera cloud config: %w", err)
	}
	defer f.Close()
	cfg, err := ParseCloudConfig(f, path)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ReadCloudConfig parses and validates a cloud config held in memory (read
// from a secret); source names it in errors.
func ReadCloudConfig(data []byte, source string) (*CloudConfig, error) {
	cfg, err := ParseCloudConfig(bytes.NewReader(data), source)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ParseCloudConfig reads a cloud config and checks every key it holds: the
// syntax, that each key is known, each value's form (numbers, booleans,
// base64, names), and sizes. It does not ask for the mandatory keys, so
// fragments such as the documentation's examples parse; Validate (run by
// LoadCloudConfig and New) does. Problems come back as ConfigErrors naming
// source, line and key; secret values are never quoted.
func ParseCloudConfig(r io.Reader, source string) (*CloudConfig, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("kamatera cloud config %s: %w", source, err)
	}
	entries, serr := parseINI(src)
	if serr != nil {
		return nil, ConfigErrors{{File: source, Line: serr.line, Msg: serr.msg}}
	}
	b := &builder{source: source}
	return b.build(entries)
}

// Validate reports the mandatory keys that are missing (cluster-name and,
// for each group, datacenter, image, cpu, ram, disk and network, set there or
// as default-<key> in [global]) and groups whose servers could not be found
// again (a name-prefix that filter-name-prefix would exclude). The API key is
// checked by New, since it may come from the environment.
func (c *CloudConfig) Validate() error {
	var errs ConfigErrors
	if c.ClusterName == "" {
		errs = append(errs, &ConfigError{File: c.Source, Line: c.lines.get("global", "cluster-name"), Section: "global", Key: "cluster-name", Msg: "is required"})
	}
	for _, g := range c.NodeGroups {
		sec := groupSection(g.Name)
		missing := func(key string) {
			errs = append(errs, &ConfigError{File: c.Source, Line: g.Line, Section: sec, Key: key,
				Msg: fmt.Sprintf("is required (set it here or default-%s in [global])", key)})
		}
		s := g.Server
		if s.Datacenter == "" {
			missing("datacenter")
		}
		if s.Image == "" {
			missing("image")
		}
		if s.CPU == "" {
			missing("cpu")
		}
		if s.RAM == 0 {
			missing("ram")
		}
		if len(s.Disks) == 0 {
			missing("disk")
		}
		if len(s.Networks) == 0 {
			missing("network")
		}
		if c.FilterNamePrefix != "" && !strings.HasPrefix(serverNamePrefix(s.NamePrefix), c.FilterNamePrefix) {
			where, key, line := sec, "name-prefix", c.lines.get(sec, "name-prefix")
			if line == 0 {
				if l := c.lines.get("global", "default-name-prefix"); l > 0 {
					where, key, line = "global", "default-name-prefix", l
				} else {
					line = g.Line
				}
			}
			errs = append(errs, &ConfigError{File: c.Source, Line: line, Section: where, Key: key,
				Msg: fmt.Sprintf("the servers this group creates (%q…) don't start with filter-name-prefix %q, so they would never be seen again", serverNamePrefix(s.NamePrefix), c.FilterNamePrefix)})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

func groupSection(name string) string { return fmt.Sprintf("nodegroup %q", name) }

// Format prints the redacted String for every verb: fmt's other verbs would
// walk the fields, and nested secrets with them.
func (c CloudConfig) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }
