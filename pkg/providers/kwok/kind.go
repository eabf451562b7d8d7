package kwok

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodetide/nodetide/pkg/providerkind"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Block is the kwok block of a nodeGroups entry: a local group of
// kwok-managed Node objects (demo and tests).
type Block struct {
	Template Template `yaml:"template"`
	// Zones make the group span several zones, as a multi-AZ Auto Scaling
	// Group: each new Node goes to the zone with the fewest of the group's
	// Nodes (ties at random) and gets that topology.kubernetes.io/zone.
	Zones []string `yaml:"zones"`
}

// Template describes a node of a group.
type Template struct {
	Allocatable providerkind.Map[string] `yaml:"allocatable"`
	Labels      providerkind.Map[string] `yaml:"labels"`
	Taints      []Taint                  `yaml:"taints"`
}

// Taint is a node taint.
type Taint struct {
	Key    string `yaml:"key"`
	Value  string `yaml:"value"`
	Effect string `yaml:"effect"`
}

// Kind is the kwok provider's entry in the table of providers. Its groups'
// bounds are the entry's own minSize and maxSize.
func Kind() providerkind.Kind {
	return providerkind.Kind{
		Name:      ProviderName,
		Block:     func() any { return &Block{} },
		Check:     check,
		Build:     build,
		LocalOnly: true,
		Describe: func(e providerkind.Entry, _, _ string) ([]providerkind.Summary, error) {
			return []providerkind.Summary{{Name: e.Name, MinSize: e.MinSize, MaxSize: e.MaxSize}}, nil
		},
	}
}

// BlockOf is the entry's kwok block, nil when it has none.
func BlockOf(e providerkind.Entry) *Block {
	b, _ := e.Block.(*Block)
	return b
}

func check(e providerkind.Entry, path string, c providerkind.Checks) {
	if e.Name == "" {
		c.Add(path+".name", "is required for provider kwok")
	}
	if e.MinSize == nil || e.MaxSize == nil {
		c.Add(path, "minSize and maxSize are required for provider kwok")
	}
	b := BlockOf(e)
	if b == nil {
		c.Add(path+".kwok.template", "is required for provider kwok")
		return
	}
	b.Template.check(path+".kwok.template", c.Add)
	b.checkZones(path+".kwok", c.Add)
}

func build(_ context.Context, d providerkind.Deps, path string, e providerkind.Entry) (providers.Provider, error) {
	b := BlockOf(e)
	tpl, err := b.Template.Planner()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return providers.Static{New(d.Client, e.Name, *e.MinSize, *e.MaxSize, tpl).WithZones(b.Zones)}, nil
}

// checkZones: each zone a label value, none twice, and not also fixed by the
// template's zone label.
func (b *Block) checkZones(path string, add func(path, msg string)) {
	seen := map[string]bool{}
	for i, z := range b.Zones {
		p := fmt.Sprintf("%s.zones[%d]", path, i)
		if z == "" {
			add(p, "must not be empty")
			continue
		}
		for _, msg := range validation.IsValidLabelValue(z) {
			add(p, fmt.Sprintf("%q: %s", z, msg))
		}
		if seen[z] {
			add(p, fmt.Sprintf("zone %q listed twice", z))
		}
		seen[z] = true
	}
	if _, fixed := b.Template.Labels[corev1.LabelTopologyZone]; fixed && len(b.Zones) > 0 {
		add(path+".zones", "the template's labels already fix "+corev1.LabelTopologyZone+"; set zones or that label, not both")
	}
}

// Planner converts the template, checking quantities, labels and taints;
// the error lists every problem, one a line.
func (t Template) Planner() (snapshot.Template, error) {
	var problems []string
	out := t.check("template", func(path, msg string) {
		problems = append(problems, fmt.Sprintf("kwok: %s: %s", path, msg))
	})
	if len(problems) > 0 {
		return snapshot.Template{}, errors.New(strings.Join(problems, "\n"))
	}
	return out, nil
}

// check converts the template, reporting each problem under path.
func (t Template) check(path string, add func(path, msg string)) snapshot.Template {
	out := snapshot.Template{Allocatable: corev1.ResourceList{}, Labels: t.Labels}
	if len(t.Allocatable) == 0 {
		add(path+".allocatable", "is required (cpu, memory, pods)")
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(t.Allocatable)) {
		v, p := t.Allocatable[name], path+".allocatable."+name
		q, err := resource.ParseQuantity(v)
		if err != nil {
			add(p, fmt.Sprintf("bad quantity %q", v))
			continue
		}
		if err := snapshot.CheckQuantity(q); err != nil {
			add(p, fmt.Sprintf("%q: %v", v, err))
			continue
		}
		out.Allocatable[corev1.ResourceName(name)] = q
	}
	if _, ok := t.Allocatable[string(corev1.ResourcePods)]; !ok {
		out.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
	}
	// A node with none of these fits no pod: the group could only grow
	// uselessly.
	for _, want := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		raw, given := t.Allocatable[string(want)]
		q, ok := out.Allocatable[want]
		switch {
		case !given && want != corev1.ResourcePods: // pods defaults to 110
			add(path+".allocatable."+string(want), "is required")
		case ok && q.Sign() <= 0:
			add(path+".allocatable."+string(want), fmt.Sprintf("must be more than 0, got %q", raw))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
		p := path + ".labels." + k
		for _, msg := range validation.IsQualifiedName(k) {
			add(p, fmt.Sprintf("label key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(t.Labels[k]) {
			add(p, fmt.Sprintf("label value %q: %s", t.Labels[k], msg))
		}
	}
	for i, taint := range t.Taints {
		if tt, ok := checkTaint(fmt.Sprintf("%s.taints[%d]", path, i), taint, add); ok {
			out.Taints = append(out.Taints, tt)
		}
	}
	return out
}

// checkTaint checks a taint as the API server does: a known effect, a
// qualified name as its key and a label value as its value.
func checkTaint(p string, taint Taint, add func(path, msg string)) (corev1.Taint, bool) {
	ok := true
	switch corev1.TaintEffect(taint.Effect) {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		add(p+".effect", fmt.Sprintf("unknown effect %q (NoSchedule, PreferNoSchedule, NoExecute)", taint.Effect))
		ok = false
	}
	if taint.Key == "" {
		add(p+".key", "is required")
		ok = false
	}
	for _, msg := range validation.IsQualifiedName(taint.Key) {
		if taint.Key != "" {
			add(p+".key", fmt.Sprintf("%q: %s", taint.Key, msg))
			ok = false
		}
	}
	for _, msg := range validation.IsValidLabelValue(taint.Value) {
		add(p+".value", fmt.Sprintf("%q: %s", taint.Value, msg))
		ok = false
	}
	return corev1.Taint{Key: taint.Key, Value: taint.Value, Effect: corev1.TaintEffect(taint.Effect)}, ok
}
