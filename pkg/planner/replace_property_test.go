package planner

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// A few thousand short sequences of small clusters keep this in the unit
// lane (a few seconds) while each replacement gets the plans it needs:
// asked for, waited on, drained or given up, then watched for a while.
const (
	replaceSequences = 3000
	plansPerSequence = 12
)

// randomReplace turns randomConsolidation's settings into consolidation
// replace: most groups priced (by CPU and memory, some at a discount, now
// and then in another currency or not at all), a random replaceMinSaving
// and provision time. Two clusters in three are settled, as a replacement
// waits for that: nothing pending, coming, draining or above its max, most
// pods free to move, room to grow, and often an empty group at a discount.
func randomReplace(t *testing.T, r *rand.Rand, s *snapshot.Snapshot, set *Settings) {
	randomConsolidation(t, r, s, set)
	set.ScaleDown.Consolidation = ConsolidationReplace
	set.ScaleDown.ReplaceMinSaving = pick(r, []float64{0, 0.1, 0.2, 0.4})
	set.ScaleUp.MaxNodeProvisionTime = pick(r, []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute})
	price := func(g *snapshot.NodeGroup, discount []float64) {
		cur := "USD"
		switch r.IntN(16) {
		case 0:
			g.Price = nil
			return
		case 1:
			cur = "EUR"
		}
		cpu := g.Template.Allocatable.Cpu().AsApproximateFloat64()
		mem := g.Template.Allocatable.Memory().AsApproximateFloat64() / (1 << 30)
		perHour := (0.04*cpu + 0.005*mem) * pick(r, discount)
		g.Price = &snapshot.Price{PerHour: round4(perHour), Currency: cur, Source: snapshot.PriceConfig}
	}
	for i := range s.NodeGroups {
		price(&s.NodeGroups[i], []float64{0.3, 0.6, 1, 1, 1.4})
	}
	if r.IntN(3) > 0 {
		settle(r, s)
		if r.IntN(3) > 0 {
			// A cheaper copy of the group with the most nodes, whose
			// pods its template fits.
			from := 0
			for i, g := range s.NodeGroups {
				if len(g.Instances) > len(s.NodeGroups[from].Instances) {
					from = i
				}
			}
			g := s.NodeGroups[from]
			g.Template.Allocatable = g.Template.Allocatable.DeepCopy()
			g.Name = fmt.Sprintf("g%d", len(s.NodeGroups))
			g.Template.Labels = withKey(g.Template.Labels, "pool", g.Name)
			g.Instances, g.MinSize, g.TargetSize, g.MaxSize, g.BoundsFrom = nil, 0, 0, 2+r.IntN(4), ""
			if r.IntN(2) == 0 {
				// Half the size: cheaper a node, not always a CPU.
				for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					q := g.Template.Allocatable[name]
					if v := q.MilliValue() / 2; v >= 500 {
						q.SetMilli(v)
						g.Template.Allocatable[name] = q
					}
				}
			}
			price(&g, []float64{0.2, 0.4})
			s.NodeGroups = append(s.NodeGroups, g)
		}
	}
}

// withKey is a copy of m with k set to v.
func withKey(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for key, val := range m {
		out[key] = val
	}
	out[k] = v
	return out
}

// settle makes s a cluster a replacement may start in: no pending pod, no
// node coming (each target its registered nodes), none draining or being
// deleted, no group above its max, some room to grow, seven pods in eight
// marked safe to evict, half the nodes' opt-outs gone and small
// DaemonSets.
func settle(r *rand.Rand, s *snapshot.Snapshot) {
	var pods []corev1.Pod
	for _, p := range s.Pods {
		if p.Spec.NodeName == "" {
			continue
		}
		if isDaemonSetPod(&p) {
			// DaemonSets as large as the random pods leave a new node of a
			// small template no room at all.
			p.Spec.Containers[0].Resources.Requests = rl("50m", "64Mi")
		}
		if r.IntN(8) > 0 {
			p.Annotations = withKey(p.Annotations, annotationSafeToEvict, "true")
			delete(p.Annotations, annotationDoNotDisrupt)
		}
		pods = append(pods, p)
	}
	s.Pods = pods
	registered := map[string]bool{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		registered[n.Spec.ProviderID] = true
		n.DeletionTimestamp = nil
		if r.IntN(2) == 0 {
			delete(n.Annotations, annotationScaleDownDisabled)
			delete(n.Annotations, annotationDoNotDisrupt)
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintDraining })
	}
	for i := range s.NodeGroups {
		g := &s.NodeGroups[i]
		g.Instances = slices.DeleteFunc(g.Instances, func(id string) bool { return !registered[id] })
		g.TargetSize = len(g.Instances)
		g.MinSize = min(g.MinSize, g.TargetSize)
		g.MaxSize = max(g.MaxSize, g.TargetSize+r.IntN(4))
	}
}

// TestReplaceNeverOscillates runs consolidation replace over random
// clusters for several plans each, carrying every plan out before the next:
// the nodes asked for register Ready after a random delay within
// scaleUp.maxNodeProvisionTime (now and then never), removed nodes go with
// their pods where the plan's simulation put them (first fit when it put
// them nowhere), pending pods bind where the plan placed them, time moves
// on a few minutes, and the workload moves a little (register). Across
// each sequence:
//
//   - no plan removes (by scale-down or a replacement's drain) a node
//     created within max(delayAfterAdd, unneededTime), the window, nor a
//     new node of a replacement under way, nor within the window after a
//     replacement's drain a node that received its old nodes' pods (its
//     new nodes and the nodes the pods went to: they got the pods then,
//     up to maxNodeProvisionTime after the new nodes were created); a
//     removal that brings a group down to a schedule's max takes any node
//     and is left out;
//   - no plan undoes an earlier one. A replacement is one move: its
//     scale-up asks for the new nodes, the drain of its old nodes follows,
//     and together they lower the cost. Undoing is reversing a move within
//     the window: growing, by a scale-up for pending pods or headroom, a
//     group an earlier plan shrank (the nodes removed were needed after
//     all); removing a node the sequence added (above); a replacement
//     taking as its old nodes nodes created within the window, such as
//     the new nodes of an earlier one (ping-pong between groups), or nodes
//     that received an earlier one's pods within the window after its
//     drain (the pods would move twice within minutes). A
//     replacement's own scale-up may grow a group shrunk before: its new
//     nodes are sized for the pods of its old nodes, not for those an
//     earlier removal moved, and the cost goes down again. Past the
//     window after its drain a replacement's new nodes are ordinary
//     nodes, and another replacement may take them: that saves
//     replaceMinSaving of their cost again, a further saving rather than
//     a return (counted as retaken);
//   - a replacement starts only in a plan that changes nothing else, with
//     no other under way, as the plan says (one at a time);
//   - no group's target goes below its min size by removals, nor above
//     its max by a scale-up (a replacement counts its old nodes gone);
//   - the pods of a plan's removals need no more than each
//     PodDisruptionBudget allows, a replacement's drain and the deletions
//     of the same plan together, and none keeps its node by the rules;
//   - the pods of the removed nodes land where the plan put them, within
//     the nodes' allocatable, none left pending;
//   - once a replacement's old nodes are gone, the priced cost of the
//     cluster, less what the other plans of the way changed, is lower than
//     before it started by at least replaceMinSaving of what the old nodes
//     cost: the saving is real once applied.
//
// Every completed replacement lowers the cost by a fixed share, so no
// sequence of them can come back to where it was.
func TestReplaceNeverOscillates(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 29))
	seen := map[string]int{}
	defer func() {
		t.Logf("coverage over %d sequences of %d plans: %v", replaceSequences, plansPerSequence, seen)
		// About four fifths of what the seed gives: a change to the
		// generator or the planner that starves a path fails here.
		for what, least := range map[string]int{
			"requested": 300, "waited": 450, "completed": 190, "abandoned": 80, "multiNode": 40,
			"completedWithWindow": 145, "newNodesNever": 70, "replacementGrowsShrunk": 40,
			"removed": 1500, "removedAddedAfterWindow": 65, "scaledUp": 220, "holding": 265, "retaken": 6,
		} {
			if seen[what] < least {
				t.Errorf("only %d of %s, want %d or more", seen[what], what, least)
			}
		}
	}()
	for run := range replaceSequences {
		s, set := randomSnapshot(r)
		randomReplace(t, r, &s, &set)
		w := newReplaceWorld(r, s, set, seen)
		for range plansPerSequence {
			w.register()
			p, tr := decide(&w.s, set, w.now, true)
			if err := w.step(p, tr); err != nil {
				t.Fatalf("run %d: %v\n%s", run, err, w.story(s))
			}
			w.now = w.now.Add(w.pause())
		}
	}
}

// replaceWorld is a cluster a sequence of plans is carried out on, and
// what the sequence did so far.
type replaceWorld struct {
	r      *rand.Rand
	set    Settings
	window time.Duration
	s      snapshot.Snapshot
	now    time.Time
	seq    int
	coming []arrival
	// added: node → created, of the nodes the sequence's plans asked for;
	// newOf: node → the replacement whose new node it is.
	added map[string]time.Time
	newOf map[string]string
	// shrunk: group → the last plan that removed one of its nodes.
	shrunk map[string]time.Time
	// drained: replacement → the plan that drained its old nodes;
	// received: node → the last replacement whose drain moved pods onto it.
	drained  map[string]time.Time
	received map[string]string
	reps     map[string]*repRecord
	plans    []timedPlan
	seen     map[string]int
}

type timedPlan struct {
	at time.Time
	p  Plan
}

// arrival is a node a plan asked for, registering at at (never when zero).
type arrival struct {
	group, name, rep string
	at               time.Time
	index            int
	pods             []string
}

// repRecord is a replacement the sequence started: what it replaces and
// what the cluster cost, in its currency, before it, with what the other
// entries of the plans since changed.
type repRecord struct {
	from, to string
	nodes    []string
	delta    int
	currency string
	oldCost  float64
	before   float64
	others   float64
	done     bool
}

func newReplaceWorld(r *rand.Rand, s snapshot.Snapshot, set Settings, seen map[string]int) *replaceWorld {
	return &replaceWorld{
		r: r, set: set, window: max(set.ScaleDown.DelayAfterAdd, set.ScaleDown.UnneededTime),
		s: deepCopySnapshot(s), now: s.CapturedAt,
		added: map[string]time.Time{}, newOf: map[string]string{}, shrunk: map[string]time.Time{},
		drained: map[string]time.Time{}, received: map[string]string{},
		reps: map[string]*repRecord{}, seen: seen,
	}
}

// pause is the time to the next plan: a few minutes, now and then longer.
func (w *replaceWorld) pause() time.Duration {
	d := time.Duration(30+w.r.IntN(270)) * time.Second
	if w.r.IntN(8) == 0 {
		d += 10 * time.Minute
	}
	return d
}

// register brings up the nodes due by now, Ready, with the pods they were
// asked for that are still pending. Meanwhile the workload moves a little:
// now and then a PodDisruptionBudget allows a different number of
// disruptions, and a new pod starts on a node where it fits (a random one:
// the new nodes of a replacement too), taking room the plans counted on.
// A pod that fits nowhere does not come, so that no demand appears that
// the plans did not make.
func (w *replaceWorld) register() {
	w.s.CapturedAt = w.now
	for i := range w.s.PodDisruptionBudgets {
		if w.r.IntN(4) == 0 {
			w.s.PodDisruptionBudgets[i].Status.DisruptionsAllowed = int32(w.r.IntN(3))
		}
	}
	if w.r.IntN(3) == 0 {
		p := pod(fmt.Sprintf("default/w%03d", w.seq), pick(w.r, []string{"100m", "250m", "500m", "1", "2"}), pick(w.r, []string{"128Mi", "512Mi", "1Gi", "3Gi"}),
			podLabels("app", fmt.Sprintf("a%d", w.r.IntN(3))), annotate(annotationSafeToEvict, "true"))
		w.seq++
		free := freeByNode(&w.s)
		for _, i := range w.r.Perm(len(w.s.Nodes)) {
			n := &w.s.Nodes[i]
			if nodeReady(n) && !n.Spec.Unschedulable && !hasTaint(n, TaintDraining) && tolerated(&p, n.Spec.Taints) && takes(free[n.Name], schedulerRequests(&p)) {
				on(n.Name)(&p)
				w.s.Pods = append(w.s.Pods, p)
				break
			}
		}
	}
	var left []arrival
	for _, a := range w.coming {
		if a.at.IsZero() || a.at.After(w.now) {
			left = append(left, a)
			continue
		}
		g := &w.s.NodeGroups[groupIndex(w.s.NodeGroups, a.group)]
		w.s.Nodes = append(w.s.Nodes, newNodeOf(g, a.name, a.at, a.index))
		placeOnNew(&w.s, []string{a.name}, a.pods)
		w.added[a.name] = a.at
		if a.rep != "" {
			w.newOf[a.name] = a.rep
		}
	}
	w.coming = left
}

// gotMovedPods names the replacement whose drain, within the window,
// moved pods onto node n: n is one of its new nodes, or a node its old
// nodes' pods went to; "" when none did.
func (w *replaceWorld) gotMovedPods(n string) (id string, ago time.Duration) {
	for _, id := range []string{w.newOf[n], w.received[n]} {
		if at, ok := w.drained[id]; ok && w.now.Sub(at) < w.window {
			return id, w.now.Sub(at)
		}
	}
	return "", 0
}

func (w *replaceWorld) count(what string, ok bool) {
	if ok {
		w.seen[what]++
	}
}

// cost is what the groups priced in cur cost per hour at their targets.
func (w *replaceWorld) cost(cur string) float64 {
	var sum float64
	for _, g := range w.s.NodeGroups {
		if g.Price != nil && g.Price.Currency == cur {
			sum += float64(g.TargetSize) * g.Price.PerHour
		}
	}
	return sum
}

// perHour is what a node of group name costs in cur; 0 when it is priced
// otherwise or not at all.
func (w *replaceWorld) perHour(name, cur string) float64 {
	g := w.s.NodeGroups[groupIndex(w.s.NodeGroups, name)]
	if g.Price == nil || g.Price.Currency != cur {
		return 0
	}
	return g.Price.PerHour
}

// step checks plan p against the cluster and the sequence so far, carries
// it out and checks what it left.
func (w *replaceWorld) step(p Plan, tr *trace) error {
	w.plans = append(w.plans, timedPlan{w.now, p})

	o := newOracle(&w.s)
	nodes := map[string]*corev1.Node{}
	for i := range w.s.Nodes {
		nodes[w.s.Nodes[i].Name] = &w.s.Nodes[i]
	}
	minSaving := w.set.ScaleDown.ReplaceMinSaving
	if minSaving == 0 {
		minSaving = DefaultReplaceMinSaving
	}

	var started *Replace
	draining := map[string]string{} // old node → its replacement draining now
	held := map[string]bool{}       // the replacements that hold their new nodes
	active := 0                     // the replacements not only holding
	for i := range p.Replace {
		rep := &p.Replace[i]
		switch rep.Phase {
		case ReplaceRequested:
			started = rep
		case ReplaceDraining:
			for _, n := range rep.Nodes {
				draining[n] = rep.ID
			}
		}
		held[rep.ID] = rep.Phase == ReplaceWaiting || rep.Phase == ReplaceDraining || rep.Phase == ReplaceHolding
		if rep.Phase != ReplaceHolding {
			active++
		}
		w.count(map[string]string{ReplaceRequested: "requested", ReplaceWaiting: "waited", ReplaceDraining: "completed", ReplaceAbandoned: "abandoned", ReplaceHolding: "holding"}[rep.Phase], true)
	}
	// Under way: a replacement of the state not yet drained whose old nodes
	// are still there.
	underWay := map[string]bool{}
	for id, rep := range w.s.State.Replacing {
		for _, n := range rep.Nodes {
			if !rep.Drained.IsZero() {
				break
			}
			if nodes[n] != nil {
				underWay[id] = true
			}
		}
	}

	// Removals.
	removed := map[string]bool{}
	capped := map[string]bool{}
	removals := map[string]int{}
	used := map[*policyv1.PodDisruptionBudget]int32{}
	for _, d := range p.ScaleDown {
		n := nodes[d.Node]
		if n == nil || o.nodeOf[d.Node] != d.NodeGroup {
			return fmt.Errorf("removal %+v of a node not in that group", d)
		}
		removed[d.Node] = true
		if strings.Contains(d.Reason, "above its max size") {
			capped[d.Node] = true
			continue
		}
		removals[d.NodeGroup]++
		if age := w.now.Sub(n.CreationTimestamp.Time); age < w.window {
			how := "registered before the sequence"
			if _, ok := w.added[d.Node]; ok {
				how = "added by the sequence"
			}
			return fmt.Errorf("removes %s (%s), created %s ago, within the window %s", d.Node, how, age, w.window)
		}
		_, added := w.added[d.Node]
		w.count("removedAddedAfterWindow", added)
		if id := w.newOf[d.Node]; id != "" && held[id] {
			return fmt.Errorf("removes %s, a new node of replacement %s under way", d.Node, id)
		}
		if id, ago := w.gotMovedPods(d.Node); id != "" {
			return fmt.Errorf("removes %s, which received the pods of replacement %s's drain %s ago, within the window %s", d.Node, id, ago, w.window)
		}
		if strings.HasPrefix(d.Reason, "consolidation: replaced by") != (draining[d.Node] != "") {
			return fmt.Errorf("removal %+v and the plan's draining replacements %v disagree", d, draining)
		}
		for i := range w.s.Pods {
			pd := &w.s.Pods[i]
			if pd.Spec.NodeName != d.Node || !movesWithNode(pd) {
				continue
			}
			if o.blocking(pd) {
				return fmt.Errorf("removes %s, which runs %s, a pod that keeps it", d.Node, podKey(pd))
			}
			for _, b := range o.budgets(pd) {
				used[b]++
			}
		}
	}
	for b, n := range used {
		if n > b.Status.DisruptionsAllowed {
			return fmt.Errorf("removals disrupt %d pods of PodDisruptionBudget %s/%s, which allows %d", n, b.Namespace, b.Name, b.Status.DisruptionsAllowed)
		}
	}
	for n, id := range draining {
		if nodes[n] != nil && !removed[n] {
			return fmt.Errorf("replacement %s drains, but its old node %s stays", id, n)
		}
	}

	// Growth.
	for _, up := range p.ScaleUp {
		g := o.groups[up.NodeGroup]
		if up.NewTargetSize > max(g.MaxSize, g.TargetSize) {
			return fmt.Errorf("scale-up %+v above the max size %d", up, g.MaxSize)
		}
		own := started != nil && started.NodeGroup == up.NodeGroup
		at, ok := w.shrunk[up.NodeGroup]
		if ok && !own && w.now.Sub(at) < w.window {
			return fmt.Errorf("grows %s by %d, which the plan at %s shrank, within the window %s", up.NodeGroup, up.Delta, at.Format(time.TimeOnly), w.window)
		}
		w.count("regrownAfterWindow", ok && !own)
		w.count("replacementGrowsShrunk", ok && own)
	}
	// Min size: removals never take a group below it (a group already
	// below stays where it is), counting a requested replacement's old
	// nodes gone.
	decreased := map[string]int{}
	for _, d := range p.DecreaseTarget {
		decreased[d.NodeGroup] += d.Delta
	}
	future := map[string]int{}
	if started != nil {
		future[o.nodeOf[started.Nodes[0]]] -= len(started.Nodes)
	}
	for _, g := range o.groups {
		after := g.TargetSize - decreased[g.Name] - removals[g.Name] + future[g.Name]
		for _, up := range p.ScaleUp {
			if up.NodeGroup == g.Name {
				after += up.Delta
			}
		}
		if (removals[g.Name] > 0 || future[g.Name] < 0) && after < min(g.MinSize, g.TargetSize-decreased[g.Name]) {
			return fmt.Errorf("group %s (target %d, min %d) down to %d", g.Name, g.TargetSize, g.MinSize, after)
		}
	}

	// A replacement started: one that only holds the nodes that received
	// its pods changes nothing.
	if started != nil {
		if active != 1 || len(p.ScaleUp) != 1 || len(p.ScaleDown) != 0 || len(p.DecreaseTarget) != 0 {
			return fmt.Errorf("replacement %s starts in a plan that changes more: %d replacements, %d scale-ups, %d removals, %d decreases",
				started.ID, active, len(p.ScaleUp), len(p.ScaleDown), len(p.DecreaseTarget))
		}
		for id := range underWay {
			return fmt.Errorf("replacement %s starts while %s is under way", started.ID, id)
		}
		from := o.nodeOf[started.Nodes[0]]
		for _, n := range started.Nodes {
			if age := w.now.Sub(nodes[n].CreationTimestamp.Time); age < w.window {
				what := "registered before the sequence"
				if id := w.newOf[n]; id != "" {
					what = "a new node of replacement " + id
				} else if _, ok := w.added[n]; ok {
					what = "added by the sequence"
				}
				return fmt.Errorf("replacement %s takes %s (%s), created %s ago, within the window %s", started.ID, n, what, age, w.window)
			}
			if id, ago := w.gotMovedPods(n); id != "" {
				return fmt.Errorf("replacement %s takes %s, which received the pods of replacement %s's drain %s ago, within the window %s",
					started.ID, n, id, ago, w.window)
			}
			if o.nodeOf[n] != from {
				return fmt.Errorf("replacement %s takes nodes of groups %s and %s", started.ID, from, o.nodeOf[n])
			}
		}
		if started.Saving < minSaving*started.Before-1e-9 {
			return fmt.Errorf("replacement %s saves %v of %v, under %v", started.ID, started.Saving, started.Before, minSaving)
		}
		cur := started.Currency
		w.reps[started.ID] = &repRecord{
			from: from, to: started.NodeGroup, nodes: started.Nodes, delta: started.Delta, currency: cur,
			oldCost: float64(len(started.Nodes)) * w.perHour(from, cur), before: w.cost(cur),
		}
		w.count("multiNode", len(started.Nodes) > 1)
		w.count("retaken", slices.ContainsFunc(started.Nodes, func(n string) bool { return w.newOf[n] != "" }))
	}
	// What the other entries change of each replacement's cost, until it
	// completes.
	for id, rec := range w.reps {
		if rec.done {
			continue
		}
		for _, up := range p.ScaleUp {
			if started == nil || started.ID != id {
				rec.others += float64(up.Delta) * w.perHour(up.NodeGroup, rec.currency)
			}
		}
		for _, d := range p.ScaleDown {
			if draining[d.Node] != id {
				rec.others -= w.perHour(d.NodeGroup, rec.currency)
			}
		}
		for _, d := range p.DecreaseTarget {
			rec.others -= float64(d.Delta) * w.perHour(d.NodeGroup, rec.currency)
		}
	}

	// Carry it out.
	before := w.s
	podNode := map[string]string{}
	for i := range before.Pods {
		podNode[podKey(&before.Pods[i])] = before.Pods[i].Spec.NodeName
	}
	var off movedOff
	w.s, off = carryOut(before, p, tr, w.now)
	for _, k := range append(off.refit, off.lost...) {
		if n := podNode[k]; !capped[n] {
			return fmt.Errorf("pod %s of %s, removed, moved nowhere in the plan's simulation", k, n)
		}
	}
	// The simulation moves a pod only where what it asks for is free: none
	// of its destinations ends up short of it.
	var free map[string]corev1.ResourceList
	if len(off.traced) > 0 {
		free = freeByNode(&w.s)
	}
	moved := map[string]bool{}
	for _, k := range off.traced {
		moved[k] = true
	}
	for i := range w.s.Pods {
		pd := &w.s.Pods[i]
		if !moved[podKey(pd)] {
			continue
		}
		if id := draining[podNode[podKey(pd)]]; id != "" {
			w.received[pd.Spec.NodeName] = id
		}
		for name, q := range schedulerRequests(pd) {
			if f := free[pd.Spec.NodeName][name]; !q.IsZero() && f.Sign() < 0 {
				return fmt.Errorf("pod %s moved to %s, which is short of %s by %s", podKey(pd), pd.Spec.NodeName, name, f.String())
			}
		}
	}
	for _, d := range p.ScaleDown {
		w.shrunk[d.NodeGroup] = w.now
	}
	for _, d := range p.DecreaseTarget {
		w.coming = slices.DeleteFunc(w.coming, func(a arrival) bool { return a.group == d.NodeGroup })
	}
	for _, up := range p.ScaleUp {
		rep := ""
		if started != nil && started.NodeGroup == up.NodeGroup {
			rep = started.ID
		}
		for i := range up.Delta {
			a := arrival{group: up.NodeGroup, name: fmt.Sprintf("new-%s-%d", up.NodeGroup, w.seq), rep: rep, index: i, pods: up.Pods}
			w.seq++
			if w.r.IntN(6) > 0 {
				a.at = w.now.Add(time.Duration(w.r.Int64N(int64(w.set.ScaleUp.MaxNodeProvisionTime/time.Second))) * time.Second)
			} else {
				w.count("newNodesNever", rep != "")
			}
			w.coming = append(w.coming, a)
		}
	}
	w.count("removed", len(p.ScaleDown) > 0)
	w.count("scaledUp", len(p.ScaleUp) > 0 && started == nil)

	// The saving, once the old nodes are gone.
	for i := range p.Replace {
		rep := &p.Replace[i]
		rec := w.reps[rep.ID]
		if rec == nil {
			continue // started before the sequence
		}
		switch rep.Phase {
		case ReplaceAbandoned:
			rec.done = true
		case ReplaceDraining:
			w.drained[rep.ID] = w.now
			rec.done = true
			own := w.cost(rec.currency) - rec.before - rec.others
			if own > -minSaving*rec.oldCost+1e-9 {
				return fmt.Errorf("replacement %s (%s → %d of %s) changed the cost by %.4f/h, the old nodes cost %.4f/h: less than %v saved",
					rep.ID, strings.Join(rec.nodes, ","), rec.delta, rec.to, own, rec.oldCost, minSaving)
			}
			w.count("completedWithWindow", w.window > 0)
		}
	}
	return nil
}

// story is the sequence so far, for a failure: the settings, the cluster
// as it started and each plan.
func (w *replaceWorld) story(start snapshot.Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "at %s (window %s)\nsettings %+v\n", w.now.Format(time.TimeOnly), w.window, w.set)
	_ = snapshot.WriteSnapshot(&b, start)
	for i, tp := range w.plans {
		var doc bytes.Buffer
		_ = WritePlan(&doc, tp.p)
		fmt.Fprintf(&b, "\nplan %d at %s:\n%s", i, tp.at.Format(time.TimeOnly), doc.String())
	}
	return b.String()
}
