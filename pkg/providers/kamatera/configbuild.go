package kamatera

// The builder turns INI entries into a CloudConfig: which keys exist where,
// how [global]'s defaults apply to each group, and every value check.

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// keyLines maps "section\x00key" to the line a key was last set on.
type keyLines map[string]int

func (k keyLines) get(section, key string) int { return k[section+"\x00"+key] }

// Key kinds.
type keyKind int

const (
	kindString keyKind = iota
	kindSecret
	kindInt
	kindBool
	kindMulti
)

// serverKeys are the server configuration keys, usable in a group and as
// default-<key> in [global].
var serverKeys = map[string]keyKind{
	"name-prefix":    kindString,
	"password":       kindSecret,
	"ssh-key":        kindString,
	"datacenter":     kindString,
	"image":          kindString,
	"cpu":            kindString,
	"ram":            kindString,
	"disk":           kindMulti,
	"dailybackup":    kindBool,
	"managed":        kindBool,
	"network":        kindMulti,
	"billingcycle":   kindString,
	"monthlypackage": kindString,
	"script-base64":  kindSecret,
}

var globalKeys = map[string]keyKind{
	"kamatera-api-client-id": kindString,
	"kamatera-api-secret":    kindSecret,
	"kamatera-api-url":       kindString,
	"cluster-name":           kindString,
	"filter-name-prefix":     kindString,
	"provider-id-prefix":     kindString,
	"default-min-size":       kindInt,
	"default-max-size":       kindInt,
	// cluster-autoscaler's power-off mode
	"poweroff-on-scale-down":             kindBool,
	"poweron-on-scale-up":                kindBool,
	"poweroff-on-scale-down-max-servers": kindInt,
}

var groupKeys = map[string]keyKind{
	"min-size":       kindInt,
	"max-size":       kindInt,
	"template-label": kindMulti,
}

// keySpec returns the kind of key in a section ("global" or "nodegroup").
func keySpec(section, key string) (keyKind, bool) {
	switch section {
	case "global":
		if k, ok := globalKeys[key]; ok {
			return k, true
		}
		if sk, ok := strings.CutPrefix(key, "default-"); ok {
			k, ok := serverKeys[sk]
			return k, ok
		}
	case "nodegroup":
		if k, ok := groupKeys[key]; ok {
			return k, true
		}
		k, ok := serverKeys[key]
		return k, ok
	}
	return 0, false
}

// value is one assignment.
type value struct {
	line  int
	blank bool
	text  string
}

// multi is a repeated key. set is false until a value is given (a blank key
// clears it back to unset, which in a group means "use the default").
type multi struct {
	set    bool
	values []value
}

// section collects the assignments of one section.
type section struct {
	name   string // "global" or `nodegroup "x"`
	group  string // the group's name; empty for [global]
	line   int
	single map[string]value
	multi  map[string]*multi
}

// kind is the section's kind for keySpec.
func (s *section) kind() string {
	if s.group == "" {
		return "global"
	}
	return "nodegroup"
}

func newSection(name string, line int) *section {
	return &section{name: name, line: line, single: map[string]value{}, multi: map[string]*multi{}}
}

type builder struct {
	source string
	errs   ConfigErrors
	lines  keyLines
}

// errorf records a problem once: a bad default-<key> is seen by every group
// that inherits it.
func (b *builder) errorf(line int, sec, key, format string, args ...any) {
	e := &ConfigError{File: b.source, Line: line, Section: sec, Key: key, Msg: fmt.Sprintf(format, args...)}
	for _, prev := range b.errs {
		if *prev == *e {
			return
		}
	}
	b.errs = append(b.errs, e)
}

var (
	// nameRE is the documented alphabet of cluster and group names (they
	// become server tags).
	nameRE = regexp.MustCompile(`^[A-Za-z0-9 ._-]+$`)
	// namePrefixRE is what Kamatera takes in a server name, less the
	// parentheses: terminate matches names as a regular expression, so a
	// name must mean only itself.
	namePrefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	// cpuRE is a vCPU count and one of Kamatera's CPU types: A
	// (availability), B (general purpose), T (burstable), D (dedicated).
	cpuRE = regexp.MustCompile(`^([1-9][0-9]{0,2})([ABTD])$`)
	// wholeRE is a number written in digits only: strconv.Atoi also takes
	// a sign ("+5"), which gcfg's readers of these keys don't.
	wholeRE = regexp.MustCompile(`^[0-9]+$`)
)

// sections are the file's sections: [global] and the node groups in file
// order.
type sections struct {
	global *section
	groups []*section
	byName map[string]*section
}

func (b *builder) build(entries []iniEntry) (*CloudConfig, error) {
	b.lines = keyLines{}
	secs := &sections{global: newSection("global", 0), byName: map[string]*section{}}
	var cur *section
	for _, e := range entries {
		if e.key == "" { // a section header
			cur = b.header(secs, e)
			continue
		}
		if cur == nil {
			continue // under a bad header, already reported
		}
		b.assign(cur, e)
	}
	return b.config(secs.global, secs.groups)
}

// header opens the section e starts; nil when the header is wrong (the
// keys under it are then skipped).
func (b *builder) header(secs *sections, e iniEntry) *section {
	switch e.section {
	case "global":
		if e.hasSub {
			b.errorf(e.line, "", "", "[global] takes no subsection name")
			return nil
		}
		// gcfg would merge a repeated section, so a key set in
		// both would silently take the later value.
		if secs.global.line != 0 {
			b.errorf(e.line, "", "", "[global] is repeated (first at line %d): keep one [global] section", secs.global.line)
			return nil
		}
		secs.global.line = e.line
		return secs.global
	case "nodegroup":
		if !e.hasSub {
			b.errorf(e.line, "", "", `a node group section needs a name: [nodegroup "name"]`)
			return nil
		}
		if s, ok := secs.byName[e.sub]; ok {
			b.errorf(e.line, "", "", "[nodegroup %q] is repeated (first at line %d): one section per node group", e.sub, s.line)
			return nil
		}
		cur := newSection(groupSection(e.sub), e.line)
		cur.group = e.sub
		secs.byName[e.sub] = cur
		secs.groups = append(secs.groups, cur)
		b.checkName(e.line, cur.name, "", "node group name", e.sub)
		return cur
	default:
		b.errorf(e.line, "", "", "unknown section [%s] (use [global] and [nodegroup \"name\"])", e.section)
		return nil
	}
}

// assign records one key = value line of section cur.
func (b *builder) assign(cur *section, e iniEntry) {
	kind, ok := keySpec(cur.kind(), e.key)
	if !ok {
		b.errorf(e.line, cur.name, e.key, "unknown key%s", suggest(cur.kind(), e.key))
		return
	}
	b.lines[cur.name+"\x00"+e.key] = e.line
	v := value{line: e.line, blank: e.blank, text: e.value}
	switch {
	case kind == kindMulti:
		m := cur.multi[e.key]
		if m == nil {
			m = &multi{}
			cur.multi[e.key] = m
		}
		if e.blank {
			*m = multi{} // a bare key clears the list
			return
		}
		m.set = true
		m.values = append(m.values, v)
	case e.blank && kind != kindBool:
		b.errorf(e.line, cur.name, e.key, "needs a value (key = value)")
	default:
		// gcfg lets the last value win; a key set twice is more likely
		// a mistake than a choice, so neither is guessed at.
		if prev, dup := cur.single[e.key]; dup {
			b.errorf(e.line, cur.name, e.key, "is set again (first at line %d): keep one", prev.line)
			return
		}
		cur.single[e.key] = v
	}
}

// config checks the sections' values and makes the config, or returns
// every problem found, in line order.
func (b *builder) config(global *section, groups []*section) (*CloudConfig, error) {
	cfg := &CloudConfig{Source: b.source, lines: b.lines}
	b.global(cfg, global)
	// The defaults alone are checked even when no group uses them.
	b.group(cfg, global, newSection("global", global.line))
	for _, sec := range append([]*section{global}, groups...) {
		for key, v := range sec.single {
			if k, _ := keySpec(sec.kind(), key); k == kindBool {
				b.boolean(v, sec.name, key)
			}
		}
	}
	for _, g := range groups {
		cfg.NodeGroups = append(cfg.NodeGroups, b.group(cfg, global, g))
	}
	if len(b.errs) > 0 {
		sort.SliceStable(b.errs, func(i, j int) bool { return b.errs[i].Line < b.errs[j].Line })
		return nil, b.errs
	}
	return cfg, nil
}

// suggest hints at the key that was probably meant.
func suggest(kindSection, key string) string {
	candidates := []string{key + "-base64", strings.ReplaceAll(key, "_", "-")}
	if kindSection == "global" {
		candidates = append(candidates, "default-"+key)
	} else if k, ok := strings.CutPrefix(key, "default-"); ok {
		candidates = append(candidates, k)
	}
	for _, c := range candidates {
		if c == key {
			continue
		}
		if _, ok := keySpec(kindSection, c); ok {
			return fmt.Sprintf(" (did you mean %q?)", c)
		}
	}
	if kindSection == "nodegroup" {
		if _, ok := globalKeys[key]; ok {
			return " (it belongs in [global])"
		}
	}
	return ""
}

func (b *builder) checkName(line int, sec, key, what, name string) {
	switch {
	case len(name) > maxNameLength:
		b.errorf(line, sec, key, "%s %q is longer than %d characters (it becomes a Kamatera server tag)", what, name, maxNameLength)
	case !nameRE.MatchString(name):
		b.errorf(line, sec, key, "%s %q may only hold English letters, digits, dash, underscore, space and dot", what, name)
	}
}

func (b *builder) global(cfg *CloudConfig, g *section) {
	str := func(key string) string { return g.single[key].text }
	cfg.APIClientID = str("kamatera-api-client-id")
	cfg.APISecret = Secret(str("kamatera-api-secret"))
	cfg.ClusterName = str("cluster-name")
	if v, ok := g.single["cluster-name"]; ok {
		if v.text == "" {
			b.errorf(v.line, g.name, "cluster-name", "must not be empty")
		} else {
			b.checkName(v.line, g.name, "cluster-name", "cluster name", v.text)
		}
	}
	cfg.APIURL = DefaultAPIURL
	if v, ok := g.single["kamatera-api-url"]; ok && v.text != "" {
		u, err := url.Parse(v.text)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			b.errorf(v.line, g.name, "kamatera-api-url", "%q is not an http(s) URL", v.text)
		}
		cfg.APIURL = strings.TrimRight(v.text, "/")
	}
	cfg.FilterNamePrefix = str("filter-name-prefix")
	cfg.ProviderIDPrefix = DefaultProviderIDPrefix
	if v := str("provider-id-prefix"); v != "" {
		cfg.ProviderIDPrefix = v
	}
	if v, ok := g.single["poweroff-on-scale-down"]; ok {
		cfg.PoweroffOnScaleDown = b.boolean(v, g.name, "poweroff-on-scale-down")
	}
	if v, ok := g.single["poweron-on-scale-up"]; ok {
		cfg.PoweronOnScaleUp = b.boolean(v, g.name, "poweron-on-scale-up")
	}
	cfg.PoweroffMaxServers = b.size(g, "poweroff-on-scale-down-max-servers", -1)
	if v, ok := g.single["poweroff-on-scale-down-max-servers"]; ok && v.text != "" && !cfg.PoweroffOnScaleDown {
		b.errorf(v.line, g.name, "poweroff-on-scale-down-max-servers", "has no effect without poweroff-on-scale-down = true")
	}
	cfg.DefaultMinSize = b.size(g, "default-min-size", DefaultMinSize)
	cfg.DefaultMaxSize = b.size(g, "default-max-size", DefaultMaxSize)
	if cfg.DefaultMinSize > cfg.DefaultMaxSize {
		key, line := "default-min-size", g.single["default-min-size"].line
		if line == 0 {
			key, line = "default-max-size", g.single["default-max-size"].line
		}
		b.errorf(line, g.name, key, "default-min-size %d is above default-max-size %d", cfg.DefaultMinSize, cfg.DefaultMaxSize)
	}
}

// size reads a size key. An empty value means the default, as in
// cluster-autoscaler. Zero is accepted although the documentation says
// "must be > 0": cluster-autoscaler itself only refuses negative sizes, and a
// group that scales to zero is a normal setup (its template lets it grow
// back).
func (b *builder) size(s *section, key string, def int) int {
	v, ok := s.single[key]
	if !ok || v.text == "" {
		return def
	}
	n, err := strconv.Atoi(v.text)
	switch {
	case err == nil && n < 0:
		b.errorf(v.line, s.name, key, "must not be negative, got %d", n)
		return def
	case err != nil || !wholeRE.MatchString(v.text):
		b.errorf(v.line, s.name, key, "%q is not a whole number", v.text)
		return def
	}
	return n
}

func (b *builder) boolean(v value, sec, key string) bool {
	if v.blank {
		return true // a bare boolean key means true
	}
	switch strings.ToLower(v.text) {
	case "true", "yes", "on", "1":
		return true
	case "false", "no", "off", "0":
		return false
	}
	b.errorf(v.line, sec, key, "%q is not a boolean (use true/false, yes/no, on/off or 1/0)", v.text)
	return false
}

// group applies the defaults of [global] to one group and checks its values.
// A group's own value wins when it is non-empty (strings, sizes), present
// (booleans: unlike cluster-autoscaler, which lets a group turn an option on
// but never off) or given at least once (lists, which replace the default
// list entirely).
func (b *builder) group(cfg *CloudConfig, global, s *section) *NodeGroupConfig {
	g := &NodeGroupConfig{Name: s.group, Line: s.line}
	b.groupSize(cfg, s, g)
	in := inherited{group: s, global: global}
	b.serverMachine(&g.Server, in)
	b.serverSpecs(&g.Server, in)
	b.serverOptions(&g.Server, in)
	g.TemplateLabels = b.templateLabels(s)
	return g
}

// groupSize reads min-size and max-size, each defaulting to the global one.
func (b *builder) groupSize(cfg *CloudConfig, s *section, g *NodeGroupConfig) {
	g.MinSize = b.size(s, "min-size", cfg.DefaultMinSize)
	g.MaxSize = b.size(s, "max-size", cfg.DefaultMaxSize)
	if g.MinSize > g.MaxSize && s.group != "" {
		line := s.single["min-size"].line
		if line == 0 {
			line = s.single["max-size"].line
		}
		if line == 0 {
			line = s.line
		}
		b.errorf(line, s.name, "min-size", "min size %d is above max size %d", g.MinSize, g.MaxSize)
	}
}

// inherited reads a group's server keys: the group's own value, else
// [global]'s default-<key>.
type inherited struct{ group, global *section }

// pick returns the group's value of a server key, else the default, and the
// section it came from (for messages).
func (in inherited) pick(key string) (value, *section) {
	if v, ok := in.group.single[key]; ok && (v.text != "" || v.blank) {
		return v, in.group
	}
	if v, ok := in.global.single["default-"+key]; ok {
		return v, in.global
	}
	return value{}, nil
}

// pickList is pick for a repeated key.
func (in inherited) pickList(key string) ([]value, *section) {
	if m := in.group.multi[key]; m != nil && m.set {
		return m.values, in.group
	}
	if m := in.global.multi["default-"+key]; m != nil && m.set {
		return m.values, in.global
	}
	return nil, nil
}

// keyIn is how key is spelled in src.
func (in inherited) keyIn(src *section, key string) string {
	if src == in.global {
		return "default-" + key
	}
	return key
}

// serverMachine reads the server's name, access, place and size.
func (b *builder) serverMachine(sc *ServerConfig, in inherited) {
	if v, src := in.pick("name-prefix"); src != nil {
		sc.NamePrefix = v.text
		if !namePrefixRE.MatchString(v.text) {
			b.errorf(v.line, src.name, in.keyIn(src, "name-prefix"), "%q may only hold letters, digits, dash and underscore (Kamatera server names)", v.text)
		}
	}
	if v, src := in.pick("password"); src != nil {
		sc.Password = Secret(v.text)
	}
	sc.SSHKey = pickText(in.pick("ssh-key"))
	sc.Datacenter = pickText(in.pick("datacenter"))
	sc.Image = pickText(in.pick("image"))
	if v, src := in.pick("cpu"); src != nil {
		sc.CPU = v.text
		if !cpuRE.MatchString(v.text) {
			b.errorf(v.line, src.name, in.keyIn(src, "cpu"), "%q is not a Kamatera CPU (a vCPU count and a type: A availability, B general purpose, T burstable or D dedicated, e.g. 2A)", v.text)
		}
	}
	if v, src := in.pick("ram"); src != nil {
		n, err := strconv.Atoi(v.text)
		if err != nil || n <= 0 || !wholeRE.MatchString(v.text) {
			b.errorf(v.line, src.name, in.keyIn(src, "ram"), "%q is not a RAM size in MB (a positive whole number, e.g. 4096)", v.text)
		} else {
			sc.RAM = n
		}
	}
}

// serverSpecs reads the disk and network specs, one per line.
func (b *builder) serverSpecs(sc *ServerConfig, in inherited) {
	for _, key := range []string{"disk", "network"} {
		vals, src := in.pickList(key)
		var specs []string
		for _, v := range vals {
			switch {
			case strings.TrimSpace(v.text) == "":
				b.errorf(v.line, src.name, in.keyIn(src, key), "must not be empty")
			case strings.ContainsAny(v.text, " \t\n"):
				// the create API joins the specs with spaces
				b.errorf(v.line, src.name, in.keyIn(src, key), "%q must not contain spaces (one spec per line, e.g. %s)", v.text, example(key))
			default:
				specs = append(specs, v.text)
			}
		}
		if key == "disk" {
			sc.Disks = specs
		} else {
			sc.Networks = specs
		}
	}
}

// serverOptions reads backups, management, billing and the start-up script.
func (b *builder) serverOptions(sc *ServerConfig, in inherited) {
	if v, src := in.pick("dailybackup"); src != nil {
		sc.DailyBackup = b.boolean(v, src.name, in.keyIn(src, "dailybackup"))
	}
	if v, src := in.pick("managed"); src != nil {
		sc.Managed = b.boolean(v, src.name, in.keyIn(src, "managed"))
	}
	sc.BillingCycle = BillingHourly
	if v, src := in.pick("billingcycle"); src != nil {
		switch v.text {
		case BillingHourly, BillingMonthly:
			sc.BillingCycle = v.text
		default:
			b.errorf(v.line, src.name, in.keyIn(src, "billingcycle"), "%q is not a billing cycle (hourly or monthly)", v.text)
		}
	}
	sc.MonthlyPackage = pickText(in.pick("monthlypackage"))
	if v, src := in.pick("script-base64"); src != nil {
		raw, err := base64.StdEncoding.DecodeString(v.text)
		switch {
		case err != nil:
			b.errorf(v.line, src.name, in.keyIn(src, "script-base64"), "is not valid base64 (encode the script with: base64 -w0 script.sh)")
		case strings.TrimSpace(string(raw)) == "":
			b.errorf(v.line, src.name, in.keyIn(src, "script-base64"), "decodes to an empty script")
		default:
			sc.ScriptBase64 = Secret(v.text)
		}
	}
}

// templateLabels reads a group's template-label lines (nil when none).
func (b *builder) templateLabels(s *section) map[string]string {
	m := s.multi["template-label"]
	if m == nil || !m.set {
		return nil
	}
	labels := map[string]string{}
	for _, v := range m.values {
		k, val, ok := strings.Cut(v.text, "=")
		if !ok {
			b.errorf(v.line, s.name, "template-label", "%q is not key=value", v.text)
			continue
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			b.errorf(v.line, s.name, "template-label", "label key %q: %s", k, strings.Join(errs, "; "))
			continue
		}
		if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
			b.errorf(v.line, s.name, "template-label", "label value %q: %s", val, strings.Join(errs, "; "))
			continue
		}
		labels[k] = val
	}
	return labels
}

func pickText(v value, src *section) string {
	if src == nil {
		return ""
	}
	return v.text
}

func example(key string) string {
	if key == "disk" {
		return `disk = "size=100"`
	}
	return `network = "name=wan,ip=auto"`
}

// serverNamePrefix is what every server name of a group starts with.
func serverNamePrefix(namePrefix string) string {
	if namePrefix == "" {
		return ""
	}
	return namePrefix + "-"
}
