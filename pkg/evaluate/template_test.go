package evaluate_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// listedGroup is a provider group with fixed instances and template.
type listedGroup struct {
	providers.NodeGroup
	insts []providers.Instance
	tpl   snapshot.Template
}

func (listedGroup) Name() string                                              { return "g" }
func (listedGroup) Provider() string                                          { return "test" }
func (listedGroup) Bounds() providers.Bounds                                  { return providers.Bounds{Min: 0, Max: 10} }
func (g listedGroup) TargetSize(context.Context) (int, error)                 { return len(g.insts), nil }
func (g listedGroup) Instances(context.Context) ([]providers.Instance, error) { return g.insts, nil }
func (g listedGroup) Template(context.Context) (snapshot.Template, error)     { return g.tpl, nil }

// objectsReader serves fixed objects as the cycle's read.
type objectsReader struct{ objs k8s.Objects }

func (r objectsReader) Read(context.Context) (k8s.Objects, k8s.ReadStats, error) {
	return r.objs, k8s.ReadStats{}, nil
}

var tplNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

type nodeOpt func(*corev1.Node)

// groupNode is a Ready node of group g created age ago, as a cloud's
// bootstrap leaves it: the labels the kubelet sets, a taint of the image.
func groupNode(name string, age time.Duration, opts ...nodeOpt) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(tplNow.Add(-age)), Labels: map[string]string{
			corev1.LabelHostname:            name,
			corev1.LabelOSStable:            "linux",
			corev1.LabelTopologyZone:        "zone-b",
			"pool":                          "g",
			"example.com/instance":          "i-" + name,
			"example.com/bootstrap":         "done",
			"topology.ebs.csi.aws.com/zone": "zone-b",
			"topology.k8s.aws/zone-id":      "use1-az2",
		}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///zone-b/i-" + name, Taints: []corev1.Taint{
			{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
			{Key: podfacts.StatusTaintPrefix + "degraded", Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3920m"), corev1.ResourceMemory: resource.MustParse("15Gi"), corev1.ResourcePods: resource.MustParse("58")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func withNodeTaint(key string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
}

// providerTemplate is what a provider knows of g: no kubernetes.io/os, a
// label no node carries, its zone.
func providerTemplate() snapshot.Template {
	return snapshot.Template{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Labels:      map[string]string{"pool": "g", "example.com/tag-only": "x", corev1.LabelTopologyZone: "zone-a"},
		Taints:      []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}, {Key: podfacts.StartupTaintPrefix + "cni", Effect: corev1.TaintEffectNoSchedule}},
	}
}

func templateEvaluator(nodes []corev1.Node, pods []corev1.Pod, states map[string]providers.InstanceState, ignored podfacts.IgnoredTaints) *evaluate.Evaluator {
	return templateEvaluatorOf(providerTemplate(), nodes, pods, states, ignored)
}

func templateEvaluatorOf(tpl snapshot.Template, nodes []corev1.Node, pods []corev1.Pod, states map[string]providers.InstanceState, ignored podfacts.IgnoredTaints) *evaluate.Evaluator {
	g := listedGroup{tpl: tpl}
	for _, n := range nodes {
		st := providers.StateRunning
		if s, ok := states[n.Name]; ok {
			st = s
		}
		g.insts = append(g.insts, providers.Instance{ProviderID: n.Spec.ProviderID, State: st})
	}
	set := planner.DefaultSettings()
	set.ScaleUp.PendingPodMinAge = 0
	set.ScaleUp.IgnoredTaints = ignored
	return &evaluate.Evaluator{
		Reader:   objectsReader{k8s.Objects{Nodes: nodes, Pods: pods}},
		Groups:   func(context.Context) ([]providers.NodeGroup, error) { return []providers.NodeGroup{g}, nil },
		Store:    state.NewMemory("t"),
		Settings: set,
		Now:      func() time.Time { return tplNow },
	}
}

// TestTemplateFromNodeIsSanitised: a group with a running node takes its
// template from it: the node's labels (kubernetes.io/os and what the
// bootstrap set; not what only the provider says), less its hostname,
// what names its machine and its zone (the provider's stands); its taints
// less the condition and ignored ones; its allocatable.
func TestTemplateFromNodeIsSanitised(t *testing.T) {
	ev := templateEvaluator([]corev1.Node{groupNode("n1", time.Hour)}, nil, nil, podfacts.IgnoredTaints{})
	snap, _, err := ev.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	g := snap.NodeGroups[0]
	if g.TemplateFrom != "node n1" {
		t.Errorf("templateFrom %q, want node n1", g.TemplateFrom)
	}
	wantLabels := map[string]string{corev1.LabelOSStable: "linux", "pool": "g", "example.com/bootstrap": "done", corev1.LabelTopologyZone: "zone-a"}
	if !maps.Equal(g.Template.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", g.Template.Labels, wantLabels)
	}
	if len(g.Template.Taints) != 1 || g.Template.Taints[0].Key != "dedicated" || g.Template.Taints[0].Value != "batch" {
		t.Errorf("taints %v, want only dedicated=batch", g.Template.Taints)
	}
	if cpu := g.Template.Allocatable[corev1.ResourceCPU]; cpu.String() != "3920m" {
		t.Errorf("allocatable cpu %s, want the node's 3920m", cpu.String())
	}
	if !slices.Equal(g.Zones, []string{"zone-a"}) {
		t.Errorf("zones %v, want the provider's zone-a", g.Zones)
	}
	// The read's node is not changed by taking a template from it.
	if n := snap.Nodes[0]; n.Labels[corev1.LabelHostname] != "n1" || len(n.Spec.Taints) != 3 {
		t.Errorf("node n1 changed: labels %v, taints %v", n.Labels, n.Spec.Taints)
	}
	plan := planner.Decide(snap, ev.Settings, snap.CapturedAt)
	if got := plan.NodeGroups[0].TemplateFrom; got != "node n1" {
		t.Errorf("plan's templateFrom %q, want node n1", got)
	}
}

// TestTemplateNodeChoice: the template comes from the oldest node that is
// Ready, not cordoned, not being deleted, not carrying a startup taint and
// whose machine is running; with none, from the provider, less its
// ignored taints.
func TestTemplateNodeChoice(t *testing.T) {
	deleting := metav1.NewTime(tplNow)
	cases := []struct {
		name    string
		oldest  corev1.Node
		state   providers.InstanceState
		ignored podfacts.IgnoredTaints
		want    string
	}{
		{name: "the oldest", oldest: groupNode("old", 3*time.Hour), want: "node old"},
		{name: "not Ready", oldest: groupNode("old", 3*time.Hour, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse })},
		{name: "no Ready condition", oldest: groupNode("old", 3*time.Hour, func(n *corev1.Node) { n.Status.Conditions = nil })},
		{name: "cordoned", oldest: groupNode("old", 3*time.Hour, func(n *corev1.Node) { n.Spec.Unschedulable = true })},
		{name: "draining", oldest: groupNode("old", 3*time.Hour, withNodeTaint(podfacts.TaintDraining))},
		{name: "cluster-autoscaler removing it", oldest: groupNode("old", 3*time.Hour, withNodeTaint("ToBeDeletedByClusterAutoscaler"))},
		{name: "being deleted", oldest: groupNode("old", 3*time.Hour, func(n *corev1.Node) { n.DeletionTimestamp = &deleting })},
		{name: "its machine going", oldest: groupNode("old", 3*time.Hour), state: providers.StateDeleting},
		{name: "a prefixed startup taint", oldest: groupNode("old", 3*time.Hour, withNodeTaint(podfacts.StartupTaintPrefix+"cni"))},
		{name: "a configured startup taint", oldest: groupNode("old", 3*time.Hour, withNodeTaint("node.cilium.io/agent-not-ready")),
			ignored: podfacts.IgnoredTaints{Startup: []string{"node.cilium.io/agent-not-ready"}}},
		{name: "an unconfigured taint is no startup taint", oldest: groupNode("old", 3*time.Hour, withNodeTaint("node.cilium.io/agent-not-ready")), want: "node old"},
		{name: "a status taint leaves it ready", oldest: groupNode("old", 3*time.Hour, withNodeTaint("example.com/degraded")),
			ignored: podfacts.IgnoredTaints{Status: []string{"example.com/degraded"}}, want: "node old"},
		{name: "ties go to the first name", oldest: groupNode("a-tie", time.Hour), want: "node a-tie"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := []corev1.Node{groupNode("young", time.Hour), tc.oldest}
			want := tc.want
			if want == "" {
				want = "node young"
			}
			states := map[string]providers.InstanceState{}
			if tc.state != "" {
				states[tc.oldest.Name] = tc.state
			}
			ev := templateEvaluator(nodes, nil, states, tc.ignored)
			snap, _, err := ev.Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := snap.NodeGroups[0].TemplateFrom; got != want {
				t.Errorf("templateFrom %q, want %q", got, want)
			}
			for _, taint := range snap.NodeGroups[0].Template.Taints {
				if tc.ignored.IsStartup(taint.Key) || tc.ignored.IsStatus(taint.Key) {
					t.Errorf("template keeps the ignored taint %s", taint.Key)
				}
			}
		})
	}

	// None fit: the provider's template, less its startup taint.
	ev := templateEvaluator([]corev1.Node{groupNode("young", time.Hour, func(n *corev1.Node) { n.Spec.Unschedulable = true })}, nil, nil, podfacts.IgnoredTaints{})
	snap, _, err := ev.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	g := snap.NodeGroups[0]
	if g.TemplateFrom != snapshot.TemplateFromProvider || !maps.Equal(g.Template.Labels, providerTemplate().Labels) {
		t.Errorf("templateFrom %q, labels %v: want the provider's", g.TemplateFrom, g.Template.Labels)
	}
	if len(g.Template.Taints) != 1 || g.Template.Taints[0].Key != "dedicated" {
		t.Errorf("taints %v, want the provider's less its startup taint", g.Template.Taints)
	}
}

// TestPodSelectingNodeOSScalesUpWithNodeTemplate: a pending pod selecting
// kubernetes.io/os, which every node of the group has and the provider's
// template lacks, plans a scale-up from a template taken from a node, and
// is unschedulable with the provider's bare template.
func TestPodSelectingNodeOSScalesUpWithNodeTemplate(t *testing.T) {
	pending := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "d", CreationTimestamp: metav1.NewTime(tplNow.Add(-time.Minute))},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
			Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
	// The node's room is taken by a pod of its own.
	busy := pending.DeepCopy()
	busy.Name, busy.Spec.NodeName, busy.Status = "busy", "n1", corev1.PodStatus{Phase: corev1.PodRunning}
	for _, tc := range []struct {
		name   string
		node   corev1.Node
		wantUp bool
	}{
		{"a node's template", groupNode("n1", time.Hour), true},
		{"the provider's bare template", groupNode("n1", time.Hour, withNodeTaint(podfacts.StartupTaintPrefix+"cni"), func(n *corev1.Node) {
			// Starting for longer than the provision time: no capacity either.
			n.CreationTimestamp = metav1.NewTime(tplNow.Add(-time.Hour))
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := templateEvaluator([]corev1.Node{tc.node}, []corev1.Pod{*busy, pending}, nil, podfacts.IgnoredTaints{})
			plan, err := ev.Plan(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := len(plan.ScaleUp) == 1 && plan.ScaleUp[0].Delta == 1; got != tc.wantUp {
				t.Errorf("scale-up %+v, unschedulable %+v; want a scale-up: %v", plan.ScaleUp, plan.Unschedulable, tc.wantUp)
			}
			if !tc.wantUp && (len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, corev1.LabelOSStable)) {
				t.Errorf("unschedulable %+v, want d/p for its kubernetes.io/os selector", plan.Unschedulable)
			}
		})
	}
}

// TestTemplateFromTrimmedNode: the Trimmer keeps all a node's template is
// taken from, so a cycle reading trimmed nodes (k8s.Reader) takes the same
// template from the same node.
func TestTemplateFromTrimmedNode(t *testing.T) {
	nodes := []corev1.Node{groupNode("young", time.Hour), groupNode("old", 2*time.Hour, func(n *corev1.Node) {
		n.Annotations = map[string]string{"example.com/big": "blob"}
		n.Status.Images = []corev1.ContainerImage{{Names: []string{"app:1"}}}
	})}
	tr := snapshot.NewTrimmer()
	trimmed := make([]corev1.Node, len(nodes))
	for i := range nodes {
		trimmed[i] = tr.Node(&nodes[i])
	}
	var got [2]snapshot.NodeGroup
	for i, ns := range [][]corev1.Node{nodes, trimmed} {
		snap, _, err := templateEvaluator(ns, nil, nil, podfacts.IgnoredTaints{}).Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got[i] = snap.NodeGroups[0]
	}
	if got[1].TemplateFrom != "node old" || got[0].TemplateFrom != got[1].TemplateFrom {
		t.Errorf("templateFrom %q from trimmed nodes, %q from whole ones; want node old", got[1].TemplateFrom, got[0].TemplateFrom)
	}
	if !maps.Equal(got[0].Template.Labels, got[1].Template.Labels) || !slices.Equal(got[0].Template.Taints, got[1].Template.Taints) ||
		!got[0].Template.Allocatable.Cpu().Equal(*got[1].Template.Allocatable.Cpu()) {
		t.Errorf("trimmed nodes give template %+v, whole ones %+v", got[1].Template, got[0].Template)
	}
}

// TestTemplateZoneLabelsFromTheGroup: a node's zone labels (the cloud's
// and the CSI drivers' too) say where that node is, not where a new one
// goes: they are kept only for a group in that one zone.
func TestTemplateZoneLabelsFromTheGroup(t *testing.T) {
	zoneB := providerTemplate()
	zoneB.Labels = maps.Clone(zoneB.Labels)
	zoneB.Labels[corev1.LabelTopologyZone] = "zone-b"
	noZone := providerTemplate()
	noZone.Labels = map[string]string{"pool": "g"}
	cases := []struct {
		name string
		tpl  snapshot.Template
		want map[string]string // the zone labels of the template
	}{
		{"the group in the node's zone", zoneB, map[string]string{corev1.LabelTopologyZone: "zone-b", "topology.ebs.csi.aws.com/zone": "zone-b", "topology.k8s.aws/zone-id": "use1-az2"}},
		{"the group in another zone", providerTemplate(), map[string]string{corev1.LabelTopologyZone: "zone-a"}},
		{"the group's zones unknown", noZone, map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, _, err := templateEvaluatorOf(tc.tpl, []corev1.Node{groupNode("n1", time.Hour)}, nil, nil, podfacts.IgnoredTaints{}).Snapshot(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for k, v := range snap.NodeGroups[0].Template.Labels {
				if strings.Contains(k, "zone") {
					got[k] = v
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("zone labels %v, want %v", got, tc.want)
			}
		})
	}
}
