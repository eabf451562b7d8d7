package planner

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	schedhelper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

const propertyRuns = 10000

// randomSnapshot builds a small cluster with a bit of everything: groups
// with and without taints, booting and broken nodes, drains, opt-outs,
// DaemonSets, mirror and bare pods, local storage, PDBs, pending pods with
// selectors, affinity and tolerations, and a random state.
func randomSnapshot(r *rand.Rand) (snapshot.Snapshot, Settings) {
	now := t0
	s := snapshot.Snapshot{CapturedAt: now, State: snapshot.State{UnneededSince: map[string]time.Time{}, LastScaleUp: map[string]time.Time{}, BackoffUntil: map[string]time.Time{}}}
	// A quarter of the runs stress scale-down: nothing pending, no delays,
	// a high threshold, several drains at once.
	shrink := r.IntN(4) == 0
	cpus := []string{"1", "2", "4", "8"}
	mems := []string{"2Gi", "4Gi", "8Gi", "16Gi"}
	groupTaints := []corev1.Taint{
		{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule},
		{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoExecute},
		{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
	}
	nGroups := 1 + r.IntN(4)
	nodeSeq := 0
	for gi := range nGroups {
		name := fmt.Sprintf("g%d", gi)
		minSize := r.IntN(3)
		if shrink {
			minSize = 0
		}
		maxSize := minSize + r.IntN(6)
		g := snapshot.NodeGroup{
			Name: name, Provider: "kwok", MinSize: minSize, MaxSize: maxSize, TargetSize: r.IntN(maxSize + 2),
			Template: snapshot.Template{Allocatable: rl(pick(r, cpus), pick(r, mems), "pods", pick(r, []string{"4", "110"})), Labels: randLabels(r)},
		}
		g.Template.Labels["pool"] = name
		if r.IntN(5) == 0 {
			g.Template.Allocatable[podfacts.ResourceGPU] = resource.MustParse("1")
		}
		if r.IntN(3) == 0 {
			g.Template.Taints = []corev1.Taint{pick(r, groupTaints)}
		}
		if r.IntN(4) == 0 {
			g.BoundsFrom = "schedule night"
		}
		// Zones are chosen without drawing from r, so the rest of the
		// snapshot is what it was before groups had zones.
		switch gi % 3 {
		case 1:
			g.Zones = []string{"za", "zb"}
		case 2:
			g.Zones = []string{"zb"}
		}
		registered := r.IntN(g.TargetSize + 2)
		for range registered {
			nodeName := fmt.Sprintf("n%02d", nodeSeq)
			nodeSeq++
			g.Instances = append(g.Instances, providerID(nodeName))
			n := corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/hostname": nodeName}, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
				Spec:       corev1.NodeSpec{ProviderID: providerID(nodeName), Taints: append([]corev1.Taint(nil), g.Template.Taints...)},
				Status: corev1.NodeStatus{
					Allocatable: g.Template.Allocatable.DeepCopy(),
					Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				},
			}
			for k, v := range g.Template.Labels {
				n.Labels[k] = v
			}
			switch r.IntN(12) {
			case 0:
				notReady(now.Add(-time.Duration(r.IntN(30)) * time.Minute))(&n)
			case 1:
				cordoned()(&n)
			case 2:
				draining()(&n)
			case 3:
				deleting()(&n)
			case 4:
				nodeAnnotation(pick(r, []string{annotationScaleDownDisabled, annotationDoNotDisrupt}), "true")(&n)
			}
			if r.IntN(3) == 0 {
				s.State.UnneededSince[nodeName] = now.Add(-time.Duration(r.IntN(30)) * time.Minute)
			}
			s.Nodes = append(s.Nodes, n)
		}
		// An instance that never registered.
		if r.IntN(6) == 0 {
			g.Instances = append(g.Instances, providerID(fmt.Sprintf("ghost-%d", gi)))
		}
		switch r.IntN(4) {
		case 0:
			s.State.LastScaleUp[name] = now.Add(-time.Duration(r.IntN(40)) * time.Minute)
		case 1:
			s.State.BackoffUntil[name] = now.Add(time.Duration(r.IntN(10)-5) * time.Minute)
		}
		s.NodeGroups = append(s.NodeGroups, g)
	}
	for range r.IntN(3) {
		nodeName := fmt.Sprintf("n%02d", nodeSeq)
		nodeSeq++
		s.Nodes = append(s.Nodes, node(nodeName, "static", pick(r, cpus), pick(r, mems)))
	}

	podSeq := 0
	newPod := func(ns string) corev1.Pod {
		podSeq++
		p := pod(fmt.Sprintf("%s/p%03d", ns, podSeq), pick(r, []string{"100m", "250m", "500m", "1", "2", "3"}), pick(r, []string{"128Mi", "512Mi", "1Gi", "3Gi"}))
		p.Labels = map[string]string{"app": fmt.Sprintf("a%d", r.IntN(3))}
		p.OwnerReferences[0].UID = types.UID("rs-" + p.Labels["app"])
		if r.IntN(8) == 0 {
			p.Spec.Containers[0].Resources.Requests[podfacts.ResourceGPU] = resource.MustParse("1")
		}
		if r.IntN(10) == 0 {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("2", "1Gi")}}}
		}
		return p
	}
	for i := range s.Nodes {
		nodeName := s.Nodes[i].Name
		for range r.IntN(5) {
			ns := pick(r, []string{"default", "default", "kube-system"})
			p := newPod(ns)
			on(nodeName)(&p)
			switch r.IntN(14) {
			case 0:
				bare()(&p)
			case 1:
				daemon("ds-" + p.Labels["app"])(&p)
			case 2:
				mirror()(&p)
			case 3:
				hostPath("data")(&p)
			case 4:
				emptyDir("tmp", pick(r, []corev1.StorageMedium{"", corev1.StorageMediumMemory}))(&p)
				if r.IntN(2) == 0 {
					annotate(annotationSafeLocalVolumes, "tmp")(&p)
				}
			case 5:
				annotate(annotationSafeToEvict, pick(r, []string{"true", "false"}))(&p)
			case 6:
				annotate(annotationDoNotDisrupt, "true")(&p)
			case 7:
				phase(pick(r, []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed}))(&p)
			case 8:
				podDeleting()(&p)
			}
			s.Pods = append(s.Pods, p)
		}
	}
	for range r.IntN(12) {
		if shrink {
			break
		}
		p := newPod("default")
		pending()(&p)
		if r.IntN(4) == 0 {
			created(now.Add(-time.Duration(r.IntN(20)) * time.Second))(&p)
		}
		if r.IntN(3) == 0 {
			randConstraints(r, &p)
		}
		if r.IntN(2) == 0 {
			p.Spec.NodeSelector = map[string]string{"pool": fmt.Sprintf("g%d", r.IntN(nGroups+1))}
		}
		if r.IntN(4) == 0 {
			tolerate(pick(r, groupTaints).Key, "", "")(&p)
		}
		if r.IntN(15) == 0 {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("64")
		}
		if r.IntN(10) == 0 {
			phase(corev1.PodFailed)(&p)
		}
		s.Pods = append(s.Pods, p)
	}
	if shrink {
		// One tight budget over many pods: removals must share it.
		s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, pdb("default/tight", 1+int32(r.IntN(2)), "app", "a0"))
	}
	for i := range r.IntN(4) {
		ns := pick(r, []string{"default", "kube-system"})
		s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, pdb(fmt.Sprintf("%s/b%d", ns, i), int32(r.IntN(4)), "app", fmt.Sprintf("a%d", r.IntN(3))))
	}

	set := DefaultSettings()
	set.ScaleUp.MaxNodesPerStep = 1 + r.IntN(5)
	if r.IntN(3) == 0 {
		set.ScaleUp.Expanders = []string{ExpanderPriority}
		set.ScaleUp.Priorities = map[string]int{}
		for gi := range nGroups {
			set.ScaleUp.Priorities[fmt.Sprintf("g%d", gi)] = r.IntN(3)
		}
	}
	set.ScaleUp.BalanceSimilarNodeGroups = nodeSeq%2 == 0
	set.ScaleDown.UnneededTime = time.Duration(r.IntN(2)) * 10 * time.Minute
	set.ScaleDown.MaxConcurrentDrains = 1 + r.IntN(4)
	set.ScaleDown.UtilizationThreshold = pick(r, []float64{0.3, 0.5, 0.8})
	if shrink {
		set.ScaleDown.UnneededTime, set.ScaleDown.DelayAfterAdd = 0, 0
		set.ScaleDown.UtilizationThreshold = 0.8
		set.ScaleDown.MaxConcurrentDrains = 4
	}
	return s, set
}

// oracle answers the property checks from the scheduler's helpers and the
// rules as written, independently of the planner's internals.
type oracle struct {
	s      *snapshot.Snapshot
	groups map[string]*snapshot.NodeGroup
	nodeOf map[string]string // node → group
	ds     map[string]*corev1.Pod
}

func newOracle(s *snapshot.Snapshot) *oracle {
	o := &oracle{s: s, groups: map[string]*snapshot.NodeGroup{}, nodeOf: map[string]string{}, ds: map[string]*corev1.Pod{}}
	byID := map[string]string{}
	for i := range s.NodeGroups {
		g := &s.NodeGroups[i]
		o.groups[g.Name] = g
		for _, id := range g.Instances {
			byID[id] = g.Name
		}
	}
	for _, n := range s.Nodes {
		if g, ok := byID[n.Spec.ProviderID]; ok {
			o.nodeOf[n.Name] = g
		}
	}
	for i := range s.Pods {
		p := &s.Pods[i]
		if isTerminal(p) || len(p.OwnerReferences) == 0 || p.OwnerReferences[0].Kind != "DaemonSet" {
			continue
		}
		uid := string(p.OwnerReferences[0].UID)
		if cur, ok := o.ds[uid]; !ok || podKey(p) < podKey(cur) {
			o.ds[uid] = p
		}
	}
	return o
}

func (o *oracle) templateNode(g *snapshot.NodeGroup) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "template-node-for-" + g.Name, Labels: g.Template.Labels}, Spec: corev1.NodeSpec{Taints: g.Template.Taints}}
}

func tolerated(p *corev1.Pod, taints []corev1.Taint) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !zeroFirst(schedhelper.TolerationsTolerateTaint, p.Spec.Tolerations, t) {
			return false
		}
	}
	return true
}

// fitsTemplate: would one pod p fit on a new node of g, next to the
// DaemonSets that would run there?
func (o *oracle) fitsTemplate(p *corev1.Pod, g *snapshot.NodeGroup) bool {
	n := o.templateNode(g)
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); !ok || !tolerated(p, g.Template.Taints) {
		return false
	}
	used := corev1.ResourceList{}
	pods := int64(1)
	for _, d := range o.ds {
		unpinned := d.DeepCopy()
		if a := unpinned.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			for i := range terms {
				terms[i].MatchFields = nil
			}
		}
		if ok, _ := nodeaffinity.GetRequiredNodeAffinity(unpinned).Match(n); ok && tolerated(unpinned, g.Template.Taints) {
			addList(used, resourcehelper.PodRequests(d, resourcehelper.PodResourcesOptions{}))
			pods++
		}
	}
	want := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, podfacts.ResourceGPU} {
		req := want[name]
		if req.Sign() <= 0 {
			continue // the scheduler checks only what the pod asks for
		}
		need := used[name]
		need.Add(req)
		if need.Cmp(g.Template.Allocatable[name]) > 0 {
			return false
		}
	}
	alloc := g.Template.Allocatable
	maxPods := int64(110)
	if q, ok := alloc[corev1.ResourcePods]; ok {
		maxPods = q.Value()
	}
	return pods <= maxPods
}

func addList(into, l corev1.ResourceList) {
	for k, v := range l {
		q := into[k]
		q.Add(v)
		into[k] = q
	}
}

// blocking: does pod p keep its node, by the written rules (budgets aside)?
func (o *oracle) blocking(p *corev1.Pod) bool {
	if isTerminal(p) || p.DeletionTimestamp != nil || p.Annotations[corev1.MirrorPodAnnotationKey] != "" {
		return false
	}
	if len(p.OwnerReferences) > 0 && p.OwnerReferences[0].Kind == "DaemonSet" {
		return false
	}
	if p.Annotations["karpenter.sh/do-not-disrupt"] == "true" || p.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false" {
		return true
	}
	if p.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "true" {
		return false
	}
	if len(p.OwnerReferences) == 0 {
		return true
	}
	if p.Namespace == "kube-system" && len(o.budgets(p)) == 0 {
		return true
	}
	safe := map[string]bool{}
	for _, v := range strings.Split(p.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"], ",") {
		safe[strings.TrimSpace(v)] = true
	}
	for _, v := range p.Spec.Volumes {
		if (v.HostPath != nil || v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory) && !safe[v.Name] {
			return true
		}
	}
	return false
}

func (o *oracle) budgets(p *corev1.Pod) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for i := range o.s.PodDisruptionBudgets {
		b := &o.s.PodDisruptionBudgets[i]
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err == nil && b.Namespace == p.Namespace && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, b)
		}
	}
	return out
}

func unschedulableNow(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || isTerminal(p) || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func TestProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 7))
	// What the runs exercised; each must happen often enough to matter.
	seen := map[string]int{}
	defer func() {
		t.Logf("coverage over %d snapshots: %v", propertyRuns, seen)
		for _, what := range []string{"scaleUp", "multiGroupScaleUp", "scaleDown", "multiRemoval", "unneeded", "unschedulable", "onExisting", "onUpcoming", "decreaseTarget", "atMax", "perStep", "backedOff", "fitsNoGroup", "overMax"} {
			if seen[what] < 50 {
				t.Errorf("only %d snapshots exercised %s", seen[what], what)
			}
		}
	}()
	for run := range propertyRuns {
		s, set := randomSnapshot(r)
		var before snapshot.Snapshot
		if run%100 == 0 {
			before = deepCopySnapshot(s)
		}
		p, tr := decide(&s, set, s.CapturedAt, true)
		if err := checkProperties(&s, set, p, tr); err != nil {
			var doc bytes.Buffer
			_ = snapshot.WriteSnapshot(&doc, s)
			var plan bytes.Buffer
			_ = WritePlan(&plan, p)
			t.Fatalf("run %d: %v\nsettings %+v\nsnapshot:\n%s\nplan:\n%s", run, err, set, doc.String(), plan.String())
		}
		count := func(what string, ok bool) {
			if ok {
				seen[what]++
			}
		}
		count("scaleUp", len(p.ScaleUp) > 0)
		count("multiGroupScaleUp", len(p.ScaleUp) > 1)
		count("scaleDown", len(p.ScaleDown) > 0)
		count("multiRemoval", len(p.ScaleDown) > 1)
		count("unneeded", len(p.State.UnneededSince) > 0)
		count("unschedulable", len(p.Unschedulable) > 0)
		count("onExisting", len(tr.existing) > 0)
		count("onUpcoming", len(tr.upcoming) > 0)
		count("decreaseTarget", len(p.DecreaseTarget) > 0)
		count("overMax", slices.ContainsFunc(p.ScaleDown, func(d ScaleDown) bool { return strings.Contains(d.Reason, "above its max size") }))
		var reasons strings.Builder
		for _, u := range p.Unschedulable {
			reasons.WriteString(u.Reason + "\n")
		}
		count("atMax", strings.Contains(reasons.String(), "at max size"))
		count("perStep", strings.Contains(reasons.String(), "max nodes per step"))
		count("backedOff", strings.Contains(reasons.String(), "backed off"))
		count("fitsNoGroup", strings.Contains(reasons.String(), "fits no node group"))
		if run%100 == 0 {
			again := Decide(s, set, s.CapturedAt)
			var a, b bytes.Buffer
			_ = WritePlan(&a, p)
			_ = WritePlan(&b, again)
			if a.String() != b.String() {
				t.Fatalf("run %d: two decisions on the same snapshot differ", run)
			}
			if !equalSnapshots(before, s) {
				t.Fatalf("run %d: Decide changed its input", run)
			}
		}
	}
}

func checkProperties(s *snapshot.Snapshot, set Settings, p Plan, tr *trace) error {
	o := newOracle(s)
	now := s.CapturedAt
	decreased := map[string]int{}
	for _, d := range p.DecreaseTarget {
		decreased[d.NodeGroup] = d.Delta
	}

	// Scale-up within bounds.
	total := 0
	grown := map[string]bool{}
	packed := map[string]string{}
	for _, u := range p.ScaleUp {
		g := o.groups[u.NodeGroup]
		if g == nil || grown[u.NodeGroup] {
			return fmt.Errorf("scale-up of unknown or repeated group %q", u.NodeGroup)
		}
		grown[u.NodeGroup] = true
		if u.Delta < 1 || u.NewTargetSize > g.MaxSize || u.NewTargetSize != g.TargetSize-decreased[g.Name]+u.Delta {
			return fmt.Errorf("scale-up %+v breaks the bounds of %+v", u, *g)
		}
		if until, ok := s.State.BackoffUntil[g.Name]; ok && until.After(now) {
			return fmt.Errorf("scale-up of backed-off group %s", g.Name)
		}
		total += u.Delta
		for _, k := range u.Pods {
			packed[k] = g.Name
		}
	}
	if total > set.ScaleUp.MaxNodesPerStep {
		return fmt.Errorf("%d new nodes, max per step %d", total, set.ScaleUp.MaxNodesPerStep)
	}

	// Every pending pod is accounted for exactly once.
	unsched := map[string]bool{}
	for _, u := range p.Unschedulable {
		if u.Reason == "" || unsched[u.Pod] {
			return fmt.Errorf("unschedulable entry %+v empty or repeated", u)
		}
		unsched[u.Pod] = true
	}
	for i := range s.Pods {
		pd := &s.Pods[i]
		k := podKey(pd)
		pendingPod := unschedulableNow(pd) && now.Sub(pd.CreationTimestamp.Time) >= set.ScaleUp.PendingPodMinAge
		places := 0
		for _, in := range []bool{tr.existing[k] != "", tr.upcoming[k] != "", packed[k] != "", unsched[k]} {
			if in {
				places++
			}
		}
		switch {
		case pendingPod && places != 1:
			return fmt.Errorf("pending pod %s accounted for %d times", k, places)
		case !pendingPod && places != 0:
			return fmt.Errorf("pod %s is not pending but was placed", k)
		}
		if g := packed[k]; g != "" && !o.fitsTemplate(pd, o.groups[g]) {
			return fmt.Errorf("pod %s packed onto group %s whose template does not fit it", k, g)
		}
	}

	// Scale-down.
	removals := map[string]int{}
	used := map[*policyv1.PodDisruptionBudget]int32{}
	nodes := map[string]*corev1.Node{}
	for i := range s.Nodes {
		nodes[s.Nodes[i].Name] = &s.Nodes[i]
	}
	capped := map[string]int{}
	for _, d := range p.ScaleDown {
		n := nodes[d.Node]
		g := o.groups[d.NodeGroup]
		if n == nil || g == nil || o.nodeOf[d.Node] != d.NodeGroup {
			return fmt.Errorf("removal %+v of a node not in that group", d)
		}
		if strings.Contains(d.Reason, "above its max size") {
			if err := o.checkCappedRemoval(s, p, n, g); err != nil {
				return err
			}
			capped[g.Name]++
			continue
		}
		optOut := n.Annotations["cluster-autoscaler.kubernetes.io/scale-down-disabled"] == "true" || n.Annotations["karpenter.sh/do-not-disrupt"] == "true"
		if !nodeReady(n) || n.Spec.Unschedulable || n.DeletionTimestamp != nil || hasTaint(n, TaintDraining) || optOut {
			return fmt.Errorf("removal of ineligible node %s", d.Node)
		}
		since, ok := p.State.UnneededSince[d.Node]
		if !ok || now.Sub(since) < set.ScaleDown.UnneededTime {
			return fmt.Errorf("removal of %s unneeded since %v", d.Node, since)
		}
		removals[g.Name]++
		for i := range s.Pods {
			pd := &s.Pods[i]
			if pd.Spec.NodeName != d.Node {
				continue
			}
			if o.blocking(pd) {
				return fmt.Errorf("removal of %s, which runs blocking pod %s", d.Node, podKey(pd))
			}
			if isTerminal(pd) || pd.DeletionTimestamp != nil || isMirrorPod(pd) || isDaemonSetPod(pd) {
				continue
			}
			for _, b := range o.budgets(pd) {
				used[b]++
			}
		}
		for i := range s.Pods {
			pd := &s.Pods[i]
			if unschedulableNow(pd) && o.fitsTemplate(pd, g) {
				return fmt.Errorf("removal in group %s whose template could host unschedulable pod %s", g.Name, podKey(pd))
			}
		}
	}
	for b, n := range used {
		if n > b.Status.DisruptionsAllowed {
			return fmt.Errorf("removals disrupt %d pods of budget %s/%s, which allows %d", n, b.Namespace, b.Name, b.Status.DisruptionsAllowed)
		}
	}
	for name, n := range removals {
		g := o.groups[name]
		drainingNow := 0
		for node, gn := range o.nodeOf {
			if gn == name && hasTaint(nodes[node], TaintDraining) {
				drainingNow++
			}
		}
		if g.TargetSize-decreased[name]-drainingNow-n < g.MinSize {
			return fmt.Errorf("group %s: %d removals take it below minSize %d", name, n, g.MinSize)
		}
		if drainingNow+n > set.ScaleDown.MaxConcurrentDrains {
			return fmt.Errorf("group %s: %d removals with %d draining exceed %d", name, n, drainingNow, set.ScaleDown.MaxConcurrentDrains)
		}
	}
	if err := o.checkCapped(s, p, capped, decreased); err != nil {
		return err
	}
	for node, since := range p.State.UnneededSince {
		if o.nodeOf[node] == "" || since.After(now) || since.Location() != time.UTC {
			return fmt.Errorf("unneeded state %s=%v", node, since)
		}
	}
	return nil
}

// checkCappedRemoval: a removal that brings a group down to a schedule's
// max may take a busy or not-Ready node, never one that must not be
// disrupted, and remembers when it was chosen.
func (o *oracle) checkCappedRemoval(s *snapshot.Snapshot, p Plan, n *corev1.Node, g *snapshot.NodeGroup) error {
	if o.cappedIneligible(s, n) {
		return fmt.Errorf("capped removal of ineligible node %s", n.Name)
	}
	if _, ok := p.State.UnneededSince[n.Name]; !ok {
		return fmt.Errorf("capped removal of %s without an unneeded-since time", n.Name)
	}
	return nil
}

func (o *oracle) cappedIneligible(s *snapshot.Snapshot, n *corev1.Node) bool {
	optOut := n.Annotations["cluster-autoscaler.kubernetes.io/scale-down-disabled"] == "true" || n.Annotations["karpenter.sh/do-not-disrupt"] == "true"
	if n.DeletionTimestamp != nil || hasTaint(n, TaintDraining) || optOut {
		return true
	}
	for i := range s.Pods {
		pd := &s.Pods[i]
		if pd.Spec.NodeName == n.Name && o.blocking(pd) {
			return true
		}
	}
	return false
}

// checkCapped: a group above a schedule's max comes down to exactly its
// max, or as near as its eligible nodes allow, and no further.
func (o *oracle) checkCapped(s *snapshot.Snapshot, p Plan, capped, decreased map[string]int) error {
	for name, g := range o.groups {
		if g.BoundsFrom == "" || g.TargetSize <= g.MaxSize {
			if capped[name] > 0 {
				return fmt.Errorf("group %s: capped removals while not above a schedule's max", name)
			}
			continue
		}
		registered, draining, eligible := 0, 0, 0
		for i := range s.Nodes {
			n := &s.Nodes[i]
			if o.nodeOf[n.Name] != name {
				continue
			}
			registered++
			if hasTaint(n, TaintDraining) {
				draining++
			}
			if !o.cappedIneligible(s, n) {
				eligible++
			}
		}
		target := g.TargetSize - decreased[name]
		for _, d := range p.DecreaseTarget {
			if d.NodeGroup != name || !strings.Contains(d.Reason, "above its max size") {
				continue
			}
			if target < g.MaxSize {
				return fmt.Errorf("group %s: target decreased to %d, below its max %d", name, target, g.MaxSize)
			}
			if up := g.TargetSize - registered; d.Delta > up {
				return fmt.Errorf("group %s: decreased by %d with %d unregistered", name, d.Delta, up)
			}
		}
		want := min(max(target-draining-g.MaxSize, 0), eligible)
		if capped[name] != want {
			return fmt.Errorf("group %s (target %d, max %d, %d draining, %d eligible): %d capped removals, want %d",
				name, target, g.MaxSize, draining, eligible, capped[name], want)
		}
	}
	return nil
}
