package planner

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/nodetide/nodetide/pkg/podfacts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	schedhelper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

func TestRequirementMatches(t *testing.T) {
	labels := map[string]string{"zone": "a", "gen": "5"}
	cases := []struct {
		r    corev1.NodeSelectorRequirement
		want bool
	}{
		{req("zone", corev1.NodeSelectorOpIn, "a", "b"), true},
		{req("zone", corev1.NodeSelectorOpIn, "b"), false},
		{req("zone", corev1.NodeSelectorOpIn), false},
		{req("missing", corev1.NodeSelectorOpIn, "a"), false},
		{req("zone", corev1.NodeSelectorOpNotIn, "b"), true},
		{req("zone", corev1.NodeSelectorOpNotIn, "a"), false},
		{req("missing", corev1.NodeSelectorOpNotIn, "a"), true},
		{req("zone", corev1.NodeSelectorOpExists), true},
		{req("missing", corev1.NodeSelectorOpExists), false},
		{req("zone", corev1.NodeSelectorOpExists, "a"), false},
		{req("missing", corev1.NodeSelectorOpDoesNotExist), true},
		{req("zone", corev1.NodeSelectorOpDoesNotExist), false},
		{req("gen", corev1.NodeSelectorOpGt, "4"), true},
		{req("gen", corev1.NodeSelectorOpGt, "5"), false},
		{req("gen", corev1.NodeSelectorOpLt, "6"), true},
		{req("gen", corev1.NodeSelectorOpLt, "5"), false},
		{req("zone", corev1.NodeSelectorOpGt, "1"), false},
		{req("gen", corev1.NodeSelectorOpGt, "x"), false},
		{req("gen", corev1.NodeSelectorOpGt, "1", "2"), false},
		{req("missing", corev1.NodeSelectorOpLt, "9"), false},
		{req("zone", "Like", "a"), false},
	}
	for _, c := range cases {
		if got := requirementMatches(&c.r, labels); got != c.want {
			t.Errorf("%s %s %v = %v, want %v", c.r.Key, c.r.Operator, c.r.Values, got, c.want)
		}
	}
}

func TestTolerates(t *testing.T) {
	taint := corev1.Taint{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}
	num := corev1.Taint{Key: "n", Value: "5", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		tol   corev1.Toleration
		taint corev1.Taint
		want  bool
	}{
		{corev1.Toleration{Key: "k", Value: "v"}, taint, true},
		{corev1.Toleration{Key: "k", Operator: corev1.TolerationOpEqual, Value: "w"}, taint, false},
		{corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists}, taint, true},
		{corev1.Toleration{Operator: corev1.TolerationOpExists}, taint, true},
		{corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, taint, false},
		{corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, taint, true},
		{corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists}, taint, false},
		{corev1.Toleration{Key: "n", Operator: corev1.TolerationOpGt, Value: "4"}, num, true},
		{corev1.Toleration{Key: "n", Operator: corev1.TolerationOpLt, Value: "4"}, num, false},
		{corev1.Toleration{Key: "n", Operator: corev1.TolerationOpLt, Value: "x"}, num, false},
		{corev1.Toleration{Key: "k", Operator: "Matches", Value: "v"}, taint, false},
	}
	for _, c := range cases {
		if got := tolerates(&c.tol, &c.taint); got != c.want {
			t.Errorf("%+v tolerates %+v = %v, want %v", c.tol, c.taint, got, c.want)
		}
	}
}

func TestHardTaints(t *testing.T) {
	taints := []corev1.Taint{
		{Key: "a", Effect: corev1.TaintEffectNoSchedule},
		{Key: "b", Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: "c", Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Effect: corev1.TaintEffectNoSchedule},
	}
	if got := len(hardTaints(taints, false)); got != 4 {
		t.Errorf("ready node: %d hard taints, want 4", got)
	}
	if got := len(hardTaints(taints, true)); got != 2 {
		t.Errorf("booting node: %d hard taints, want 2", got)
	}
}

// zeroFirst calls a component-helpers function whose first parameter is a
// logger with that parameter's zero value (which discards).
func zeroFirst[L, A, B, R any](f func(L, A, B, bool) R, a A, b B) R {
	var l L
	return f(l, a, b, true)
}

var (
	randKeys   = []string{"zone", "pool", "gen", "disk"}
	randValues = []string{"a", "b", "1", "5", "12"}
	randOps    = []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt}
	randEffect = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule, ""}
)

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func randRequirement(r *rand.Rand) corev1.NodeSelectorRequirement {
	q := corev1.NodeSelectorRequirement{Key: pick(r, randKeys), Operator: pick(r, randOps)}
	switch q.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		for range 1 + r.IntN(2) {
			q.Values = append(q.Values, pick(r, randValues))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		q.Values = []string{pick(r, randValues)}
	}
	return q
}

func randLabels(r *rand.Rand) map[string]string {
	l := map[string]string{}
	for _, k := range randKeys {
		if r.IntN(3) > 0 {
			l[k] = pick(r, randValues)
		}
	}
	return l
}

func randTaints(r *rand.Rand) []corev1.Taint {
	var out []corev1.Taint
	for range r.IntN(3) {
		e := pick(r, randEffect)
		if e == "" {
			e = corev1.TaintEffectNoSchedule
		}
		out = append(out, corev1.Taint{Key: pick(r, randKeys), Value: pick(r, randValues), Effect: e})
	}
	return out
}

// randConstraints gives a pod a random selector, required affinity and
// tolerations.
func randConstraints(r *rand.Rand, p *corev1.Pod) {
	if r.IntN(3) == 0 {
		p.Spec.NodeSelector = map[string]string{pick(r, randKeys): pick(r, randValues)}
	}
	if r.IntN(2) == 0 {
		ns := &corev1.NodeSelector{}
		for range 1 + r.IntN(2) {
			var term corev1.NodeSelectorTerm
			for range r.IntN(3) {
				term.MatchExpressions = append(term.MatchExpressions, randRequirement(r))
			}
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, term)
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}}
	}
	for range r.IntN(3) {
		tol := corev1.Toleration{Key: pick(r, randKeys), Effect: pick(r, randEffect)}
		if r.IntN(2) == 0 {
			tol.Operator = corev1.TolerationOpExists
		} else {
			tol.Value = pick(r, randValues)
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, tol)
	}
}

// TestPlacementMatchesScheduler checks the planner's selector, affinity and
// taint logic against the scheduler's own helpers on random inputs.
func TestPlacementMatchesScheduler(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		var p corev1.Pod
		randConstraints(r, &p)
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n" + strconv.Itoa(r.IntN(3)), Labels: randLabels(r)}, Spec: corev1.NodeSpec{Taints: randTaints(r)}}
		if r.IntN(4) == 0 && p.Spec.Affinity != nil {
			terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			terms[0].MatchFields = []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: pick(r, []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn}), Values: []string{"n1"}}}
		}
		affOK, _ := nodeaffinity.GetRequiredNodeAffinity(&p).Match(&n)
		untol := false
		for j := range n.Spec.Taints {
			taint := &n.Spec.Taints[j]
			hard := taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute
			if hard && !zeroFirst(schedhelper.TolerationsTolerateTaint, p.Spec.Tolerations, taint) {
				untol = true
			}
		}
		want := affOK && !untol
		at := place{labels: n.Labels, taints: hardTaints(n.Spec.Taints, false), name: n.Name, mode: fieldsOfNode}
		sub := subject{pod: &p, class: -1}
		why := nodeMisfit(&sub, &at)
		if got := why == misfitNone; got != want {
			t.Fatalf("case %d: planner %v, scheduler %v\npod %+v\nnode %+v", i, got, want, p.Spec, n)
		}
		if why != misfitNone && nodeMisfitText(&sub, &at, why, "node") == "" {
			t.Fatalf("case %d: misfit %d has no explanation", i, why)
		}
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	c := func(cpu, mem string) corev1.Container {
		return corev1.Container{Resources: corev1.ResourceRequirements{Requests: rl(cpu, mem)}}
	}
	sidecar := func(cpu, mem string) corev1.Container {
		x := c(cpu, mem)
		x.RestartPolicy = &always
		return x
	}
	cases := []struct {
		name string
		spec corev1.PodSpec
		want res
	}{
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{c("100m", "1Mi"), c("200m", "2Mi")}}, res{300, 3 << 20, 0, 1}},
		{"a big init container wins", corev1.PodSpec{InitContainers: []corev1.Container{c("1", "1Mi")}, Containers: []corev1.Container{c("100m", "8Mi")}}, res{1000, 8 << 20, 0, 1}},
		{"sidecars run with the app and later init containers",
			corev1.PodSpec{InitContainers: []corev1.Container{sidecar("100m", "1Mi"), c("1", "1Mi")}, Containers: []corev1.Container{c("200m", "2Mi")}},
			res{1100, 3 << 20, 0, 1}},
		{"overhead is added", corev1.PodSpec{Containers: []corev1.Container{c("100m", "1Mi")}, Overhead: rl("50m", "1Mi")}, res{150, 2 << 20, 0, 1}},
		{"pod-level requests win", corev1.PodSpec{Containers: []corev1.Container{c("100m", "1Mi")}, Resources: &corev1.ResourceRequirements{Requests: rl("2", "")}}, res{2000, 1 << 20, 0, 1}},
		{"no requests still take a pod slot", corev1.PodSpec{Containers: []corev1.Container{{}}}, res{0, 0, 0, 1}},
	}
	for _, tc := range cases {
		if got := podRequests(&corev1.Pod{Spec: tc.spec}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestPodRequestsMatchesComponentHelpers compares the int64 computation with
// the scheduler's PodRequests on random pods.
func TestPodRequestsMatchesComponentHelpers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	always := corev1.ContainerRestartPolicyAlways
	q := func(unit string) resource.Quantity {
		return resource.MustParse(strconv.Itoa(r.IntN(2000)) + unit)
	}
	list := func() corev1.ResourceList {
		l := corev1.ResourceList{}
		if r.IntN(4) > 0 {
			l[corev1.ResourceCPU] = q("m")
		}
		if r.IntN(4) > 0 {
			l[corev1.ResourceMemory] = q("Mi")
		}
		if r.IntN(6) == 0 {
			l[podfacts.ResourceGPU] = resource.MustParse(strconv.Itoa(r.IntN(3)))
		}
		return l
	}
	for i := range 5000 {
		var p corev1.Pod
		for range 1 + r.IntN(3) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: corev1.ResourceRequirements{Requests: list()}})
		}
		for range r.IntN(4) {
			c := corev1.Container{Resources: corev1.ResourceRequirements{Requests: list()}}
			if r.IntN(2) == 0 {
				c.RestartPolicy = &always
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
		if r.IntN(4) == 0 {
			p.Spec.Overhead = list()
		}
		if r.IntN(5) == 0 {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: list()}
			delete(p.Spec.Resources.Requests, podfacts.ResourceGPU)
		}
		want := resourceList(resourcehelper.PodRequests(&p, resourcehelper.PodResourcesOptions{}))
		want.pods = 1
		if got := podRequests(&p); got != want {
			t.Fatalf("case %d: %+v, component-helpers %+v\n%+v", i, got, want, p.Spec)
		}
	}
}
