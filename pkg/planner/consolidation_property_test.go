package planner

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

const oscillationRuns = 5000

// randomConsolidation turns randomSnapshot's settings into consolidation
// with random delays and budgets (counts, percentages, cron windows, some
// for a few groups only).
func randomConsolidation(t *testing.T, r *rand.Rand, s *snapshot.Snapshot, set *Settings) {
	set.ScaleDown.Consolidation = ConsolidationDelete
	set.ScaleDown.DelayAfterAdd = time.Duration(r.IntN(3)) * 5 * time.Minute
	set.ScaleDown.UnneededTime = time.Duration(r.IntN(3)/2) * 10 * time.Minute
	if r.IntN(3) > 0 {
		set.ScaleDown.UtilizationThreshold = 0.8
	}
	set.ScaleDown.DisruptionBudgets = nil
	for range r.IntN(3) {
		b := DisruptionBudget{Nodes: r.IntN(6)}
		if r.IntN(2) == 0 {
			b.Nodes, b.Percent = pick(r, []int{0, 10, 50, 100, 100}), true
		}
		switch r.IntN(3) {
		case 0:
			b.Schedule, b.Duration = cronIn(t, "0 9 * * 1-5", "Europe/Amsterdam"), 8*time.Hour
		case 1:
			b.Schedule, b.Duration = cronIn(t, "*/30 * * * *", ""), 10*time.Minute
		}
		for _, g := range s.NodeGroups {
			if r.IntN(3) == 0 {
				b.NodeGroups = append(b.NodeGroups, g.Name)
			}
		}
		set.ScaleDown.DisruptionBudgets = append(set.ScaleDown.DisruptionBudgets, b)
	}
	for i := range s.NodeGroups {
		if r.IntN(2) == 0 {
			s.NodeGroups[i].MinSize = 0
		}
	}
	// A third of the runs have nothing pending, which keeps no group whole.
	if r.IntN(3) == 0 {
		var kept []corev1.Pod
		for _, p := range s.Pods {
			if !unschedulableNow(&p) {
				kept = append(kept, p)
			}
		}
		s.Pods = kept
	}
	// Some runs start right after a scale-up's nodes registered: nodes
	// created a moment ago, with or without the scale-up on record.
	for i := range s.Nodes {
		if r.IntN(6) == 0 {
			s.Nodes[i].CreationTimestamp = metav1.NewTime(s.CapturedAt.Add(-time.Duration(r.IntN(20)) * time.Minute))
		}
	}
}

// TestConsolidationNeverOscillates: plan a random cluster, apply the plan
// (removed nodes gone, their pods where the simulation moved them; new
// nodes registered with the pods they were added for), plan again soon
// after: the second plan never grows a group the first shrank, nor
// removes a node the first added; neither removes a node created within
// max(delayAfterAdd, unneededTime), whether a scale-up on record added it
// or not.
func TestConsolidationNeverOscillates(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 23))
	seen := map[string]int{}
	defer func() {
		t.Logf("coverage over %d runs: %v", oscillationRuns, seen)
		for _, what := range []string{"removed", "severalInAGroup", "added", "secondRemoves", "secondAdds"} {
			if seen[what] < 50 {
				t.Errorf("only %d runs exercised %s", seen[what], what)
			}
		}
	}()
	for run := range oscillationRuns {
		s, set := randomSnapshot(r)
		randomConsolidation(t, r, &s, &set)
		first, tr := decide(&s, set, s.CapturedAt, true)
		window := max(set.ScaleDown.DelayAfterAdd, set.ScaleDown.UnneededTime)
		later := s.CapturedAt.Add(time.Second + time.Duration(r.Int64N(int64(max(window, time.Minute)))))
		s2, added := applyPlan(s, first, tr, later)
		second := Decide(s2, set, later)

		shrunk := map[string]int{}
		for _, d := range first.ScaleDown {
			shrunk[d.NodeGroup]++
		}
		fail := func(format string, args ...any) {
			var a, b, c bytes.Buffer
			_ = snapshot.WriteSnapshot(&a, s)
			_ = WritePlan(&b, first)
			_ = WritePlan(&c, second)
			t.Fatalf("run %d: %s\nsettings %+v\nsnapshot:\n%s\nfirst plan:\n%s\nsecond plan (at %s):\n%s", run, fmt.Sprintf(format, args...), set.ScaleDown, a.String(), b.String(), later, c.String())
		}
		for _, up := range second.ScaleUp {
			if shrunk[up.NodeGroup] > 0 {
				fail("the second plan grows %s by %d, which the first shrank by %d", up.NodeGroup, up.Delta, shrunk[up.NodeGroup])
			}
		}
		for _, d := range second.ScaleDown {
			if added[d.Node] {
				fail("the second plan removes %s, which the first added", d.Node)
			}
		}
		if n := youngRemoval(&s, first, window); n != "" {
			fail("the first plan removes %s, created within %s", n, window)
		}
		if n := youngRemoval(&s2, second, window); n != "" {
			fail("the second plan removes %s, created within %s", n, window)
		}
		count := func(what string, ok bool) {
			if ok {
				seen[what]++
			}
		}
		count("removed", len(first.ScaleDown) > 0)
		several := false
		for _, n := range shrunk {
			several = several || n > 1
		}
		count("severalInAGroup", several)
		count("added", len(added) > 0)
		count("secondRemoves", len(second.ScaleDown) > 0)
		count("secondAdds", len(second.ScaleUp) > 0)
	}
}

// youngRemoval is the first node plan p, made for s, removes though it
// was created within window of the plan; "" when there is none. A removal
// that brings a group down to a schedule's max takes any node.
func youngRemoval(s *snapshot.Snapshot, p Plan, window time.Duration) string {
	for _, d := range p.ScaleDown {
		if strings.Contains(d.Reason, "above its max size") {
			continue
		}
		for i := range s.Nodes {
			if n := &s.Nodes[i]; n.Name == d.Node && s.CapturedAt.Sub(n.CreationTimestamp.Time) < window {
				return d.Node
			}
		}
	}
	return ""
}

// applyPlan is the cluster after plan p, at later: as carryOut leaves it,
// and each scale-up's nodes registered, created at the plan's instant,
// holding the pods they were added for where they fit. It returns the
// names of the added nodes.
func applyPlan(s snapshot.Snapshot, p Plan, tr *trace, later time.Time) (snapshot.Snapshot, map[string]bool) {
	out, _ := carryOut(s, p, tr, later)
	added := map[string]bool{}
	for _, up := range p.ScaleUp {
		g := &out.NodeGroups[groupIndex(out.NodeGroups, up.NodeGroup)]
		var fresh []string
		for i := range up.Delta {
			n := newNodeOf(g, fmt.Sprintf("new-%s-%d", g.Name, i), s.CapturedAt, i)
			added[n.Name] = true
			fresh = append(fresh, n.Name)
			out.Nodes = append(out.Nodes, n)
		}
		placeOnNew(&out, fresh, up.Pods)
	}
	return out, added
}

// movedOff is what became of the pods of the nodes a plan removed that
// had to move: placed by the simulation's trace, re-placed first fit, or
// left pending.
type movedOff struct {
	traced, refit, lost []string
}

// carryOut is the cluster after plan p, at later, before any node it asks
// for registers: the removed nodes gone and each of their pods on the node
// the simulation moved it to, else on the first node it fits (pending if
// none); the pending pods bound where the plan put them on existing nodes;
// the groups' targets where the plan leaves them (scale-ups' included).
func carryOut(s snapshot.Snapshot, p Plan, tr *trace, later time.Time) (snapshot.Snapshot, movedOff) {
	out := deepCopySnapshot(s)
	out.CapturedAt = later
	out.State = p.State
	removed := map[string]bool{}
	for _, d := range p.ScaleDown {
		removed[d.Node] = true
	}
	var pods []corev1.Pod
	var homeless []int // pods of removed nodes the trace moved nowhere
	var off movedOff
	for _, pod := range out.Pods {
		key := podKey(&pod)
		switch {
		case removed[pod.Spec.NodeName] && !movesWithNode(&pod):
			continue
		case removed[pod.Spec.NodeName]:
			cur := pod.Spec.NodeName
			for _, hop := range tr.hops[key] {
				if !removed[cur] {
					break
				}
				cur = hop
			}
			pending()(&pod)
			pod.Spec.NodeName = ""
			if removed[cur] {
				homeless = append(homeless, len(pods))
			} else {
				on(cur)(&pod)
				off.traced = append(off.traced, key)
			}
		case tr.existing[key] != "":
			on(tr.existing[key])(&pod)
		}
		pods = append(pods, pod)
	}
	out.Pods = pods

	var nodes []corev1.Node
	for _, n := range out.Nodes {
		if !removed[n.Name] {
			nodes = append(nodes, n)
		}
	}
	out.Nodes = nodes
	// The scheduler places what the simulation did not, as it finds room.
	var free map[string]corev1.ResourceList
	if len(homeless) > 0 {
		free = freeByNode(&out)
	}
	for _, pi := range homeless {
		p := &out.Pods[pi]
		if name := fitFirst(&out, free, p); name != "" {
			on(name)(p)
			off.refit = append(off.refit, podKey(p))
		} else {
			off.lost = append(off.lost, podKey(p))
		}
	}

	for gi := range out.NodeGroups {
		g := &out.NodeGroups[gi]
		// A decrease gives back what never registered; each removal then
		// lowers the target by its node.
		for _, d := range p.DecreaseTarget {
			if d.NodeGroup == g.Name {
				g.TargetSize = d.NewTargetSize
			}
		}
		for _, up := range p.ScaleUp {
			if up.NodeGroup == g.Name {
				g.TargetSize += up.Delta
			}
		}
		var kept []string
		for _, id := range g.Instances {
			if name, ok := nodeNameOf(s.Nodes, id); !ok || !removed[name] {
				kept = append(kept, id)
			} else {
				g.TargetSize--
			}
		}
		g.Instances = kept
	}
	return out, off
}

func nodeNameOf(nodes []corev1.Node, id string) (string, bool) {
	for i := range nodes {
		if nodes[i].Spec.ProviderID == id {
			return nodes[i].Name, true
		}
	}
	return "", false
}

func groupIndex(groups []snapshot.NodeGroup, name string) int {
	for i := range groups {
		if groups[i].Name == name {
			return i
		}
	}
	panic("no group " + name)
}

// newNodeOf is a registered, Ready node of g from its template, added to
// g's instances.
func newNodeOf(g *snapshot.NodeGroup, name string, created time.Time, i int) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}, CreationTimestamp: metav1.NewTime(created)},
		Spec:       corev1.NodeSpec{ProviderID: providerID(name), Taints: append([]corev1.Taint(nil), g.Template.Taints...)},
		Status: corev1.NodeStatus{
			Allocatable: g.Template.Allocatable.DeepCopy(),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for k, v := range g.Template.Labels {
		n.Labels[k] = v
	}
	if len(g.Zones) > 0 {
		n.Labels[corev1.LabelTopologyZone] = g.Zones[i%len(g.Zones)]
	}
	g.Instances = append(g.Instances, n.Spec.ProviderID)
	return n
}

// placeOnNew binds the listed pods still pending to the named nodes, first
// fit on their requests; a pod that fits none stays pending.
func placeOnNew(s *snapshot.Snapshot, fresh []string, keys []string) {
	if len(keys) == 0 {
		return
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	free := freeByNode(s)
	for pi := range s.Pods {
		p := &s.Pods[pi]
		if !want[podKey(p)] || p.Spec.NodeName != "" {
			continue
		}
		for _, name := range fresh {
			if takes(free[name], schedulerRequests(p)) {
				on(name)(p)
				break
			}
		}
	}
}

// schedulerRequests is what the scheduler counts of p, a pod slot included.
func schedulerRequests(p *corev1.Pod) corev1.ResourceList {
	req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	req[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return req
}

// freeByNode is each node's allocatable less the requests of the pods
// bound to it that still hold room.
func freeByNode(s *snapshot.Snapshot) map[string]corev1.ResourceList {
	free := make(map[string]corev1.ResourceList, len(s.Nodes))
	for i := range s.Nodes {
		n := &s.Nodes[i]
		l := n.Status.Allocatable.DeepCopy()
		if _, ok := l[corev1.ResourcePods]; !ok {
			l[corev1.ResourcePods] = *resource.NewQuantity(110, resource.DecimalSI)
		}
		free[n.Name] = l
	}
	for i := range s.Pods {
		p := &s.Pods[i]
		l, ok := free[p.Spec.NodeName]
		if !ok || isTerminal(p) {
			continue
		}
		for name, q := range schedulerRequests(p) {
			f := l[name]
			f.Sub(q)
			l[name] = f
		}
	}
	return free
}

// fitFirst is the first node that takes pod p, as the scheduler's filters
// see it (Ready, schedulable, taints, required node affinity, requests),
// its room taken; "" when none does.
func fitFirst(s *snapshot.Snapshot, free map[string]corev1.ResourceList, p *corev1.Pod) string {
	aff := nodeaffinity.GetRequiredNodeAffinity(p)
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if !nodeReady(n) || n.Spec.Unschedulable || n.DeletionTimestamp != nil || hasTaint(n, TaintDraining) || !tolerated(p, n.Spec.Taints) {
			continue
		}
		if ok, _ := aff.Match(n); ok && takes(free[n.Name], schedulerRequests(p)) {
			return n.Name
		}
	}
	return ""
}

// takes subtracts req from free when all of it fits.
func takes(free, req corev1.ResourceList) bool {
	for name, q := range req {
		f, ok := free[name]
		if q.IsZero() {
			continue
		}
		if !ok || f.Cmp(q) < 0 {
			return false
		}
	}
	for name, q := range req {
		f := free[name]
		f.Sub(q)
		free[name] = f
	}
	return true
}

// TestConsolidationReplays: a consolidation plan is replayable: the full
// and the compact form of a snapshot plan alike under the same settings
// (young nodes, budget windows and all), and as the cluster itself.
func TestConsolidationReplays(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for i := range 200 {
		s, set := randomSnapshot(r)
		randomConsolidation(t, r, &s, &set)
		want := planJSON(t, s, set)
		for _, compact := range []bool{false, true} {
			read := snapshottest.Read(t, snapshottest.Write(t, s, compact))
			if got := planJSON(t, read, set); got != want {
				t.Fatalf("run %d (compact %v): the plan read back differs:\n--- got\n%s\n--- want\n%s", i, compact, got, want)
			}
		}
	}
}
