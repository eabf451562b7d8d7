package schedulerdiff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Replacement trials: old groups of 4-CPU nodes, well filled, beside an
// empty cheap group of 2-CPU nodes (now and then tainted, with some apps
// tolerating it); some apps are pinned to their old group, some bind a
// host port. Replace consolidation plans the cheap nodes, the trial adds
// them as the cloud would, plans again, and the live scheduler must place
// every pod of the nodes the second plan drains: the evicted pods really
// fit on what remains.
const replaceTrials = 100

func generateReplace(r *rand.Rand, idx int, ns string) trial {
	tr := trial{id: fmt.Sprintf("r%03d", idx), down: true, template: map[string]testbed.Node{}}
	zone := []string{"za", "zb", "zc"}[r.IntN(3)]
	type room struct {
		name, group string
		cpu, mem    int64 // milli-CPU, MiB
		ports       map[int32]bool
	}
	var rooms []*room
	for g := range 1 + r.IntN(2) {
		name := fmt.Sprintf("%s-old%d", tr.id, g)
		l := map[string]string{labelTrial: tr.id, "pool": name, labelZone: zone}
		n := 2 + r.IntN(2)
		ng := snapshot.NodeGroup{
			Name: name, Provider: "kwok", MinSize: 0, MaxSize: n + 2, TargetSize: n,
			Template: snapshot.Template{Allocatable: corev1.ResourceList{corev1.ResourceCPU: quantity("4"), corev1.ResourceMemory: quantity("8Gi"), corev1.ResourcePods: quantity("110")}, Labels: l},
			Price:    &snapshot.Price{PerHour: 0.192, Currency: "USD", Source: snapshot.PriceConfig},
		}
		for k := range n {
			node := fmt.Sprintf("%s-n%d", name, k)
			tr.nodes = append(tr.nodes, testbed.Node{Name: node, CPU: "4", Memory: "8Gi", Labels: l})
			ng.Instances = append(ng.Instances, "kwok://"+node)
			rooms = append(rooms, &room{name: node, group: name, cpu: 4000, mem: 8192, ports: map[int32]bool{}})
		}
		tr.groups = append(tr.groups, ng)
		tr.template[name] = testbed.Node{CPU: "4", Memory: "8Gi", Labels: l}
	}
	cheap := tr.id + "-cheap"
	cl := map[string]string{labelTrial: tr.id, "pool": cheap, labelZone: zone}
	var taints []corev1.Taint
	if r.IntN(3) == 0 {
		taints = []corev1.Taint{{Key: "cheap", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	tr.groups = append(tr.groups, snapshot.NodeGroup{
		Name: cheap, Provider: "kwok", MinSize: 0, MaxSize: 8,
		Template: snapshot.Template{Allocatable: corev1.ResourceList{corev1.ResourceCPU: quantity("2"), corev1.ResourceMemory: quantity("4Gi"), corev1.ResourcePods: quantity("110")}, Labels: cl, Taints: taints},
		Price:    &snapshot.Price{PerHour: 0.03, Currency: "USD", Source: snapshot.PriceConfig},
	})
	tr.template[cheap] = testbed.Node{CPU: "2", Memory: "4Gi", Labels: cl, Taints: taints}

	// Apps fill the old nodes (first fit, in a random order of nodes) to
	// 75-95% of their CPU.
	fill := map[string]int64{}
	for _, rm := range rooms {
		fill[rm.name] = 4000 * int64(75+r.IntN(21)) / 100
	}
	type app struct {
		name     string
		cpu, mem int64
		spec     corev1.PodSpec
		pinned   string
		port     int32
		pods     int
	}
	var apps []*app
	for a := range 3 + r.IntN(4) {
		ap := &app{name: fmt.Sprintf("%s-a%d", tr.id, a), cpu: []int64{200, 300, 500, 700, 900}[r.IntN(5)], mem: []int64{256, 512, 1024}[r.IntN(3)]}
		ap.spec = corev1.PodSpec{
			NodeSelector: map[string]string{labelTrial: tr.id},
			Containers: []corev1.Container{{Name: "c", Image: "fake", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: quantity(fmt.Sprintf("%dm", ap.cpu)), corev1.ResourceMemory: quantity(fmt.Sprintf("%dMi", ap.mem))},
			}}},
		}
		if r.IntN(6) == 0 {
			ap.pinned = tr.groups[r.IntN(len(tr.groups)-1)].Name
			ap.spec.NodeSelector["pool"] = ap.pinned
		}
		if len(taints) > 0 && r.IntN(2) == 0 {
			ap.spec.Tolerations = []corev1.Toleration{{Key: "cheap", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}
		if r.IntN(6) == 0 {
			ap.port = int32(9000 + a)
			ap.spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: ap.port, HostPort: ap.port}}
		}
		apps = append(apps, ap)
	}
	// Pods of random apps, first fit in a random order of nodes, until 30
	// in a row find no room.
	for misses := 0; misses < 30; {
		ap := apps[r.IntN(len(apps))]
		order := slices.Clone(rooms)
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		placed := false
		for _, rm := range order {
			if (ap.pinned != "" && rm.group != ap.pinned) || rm.cpu-ap.cpu < 4000-fill[rm.name] || rm.mem < ap.mem || (ap.port != 0 && rm.ports[ap.port]) {
				continue
			}
			rm.cpu, rm.mem = rm.cpu-ap.cpu, rm.mem-ap.mem
			if ap.port != 0 {
				rm.ports[ap.port] = true
			}
			p := corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("%s-b%d", ap.name, ap.pods), Namespace: ns, Labels: map[string]string{"app": ap.name},
					CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
					Annotations:       map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
				},
				Spec: *ap.spec.DeepCopy(),
			}
			ap.pods++
			p.Spec.NodeName = rm.name
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
			tr.bound = append(tr.bound, p)
			placed = true
			break
		}
		if placed {
			misses = 0
		} else {
			misses++
		}
	}
	return tr
}

func replaceSettings() planner.Settings {
	set := settings(true, false)
	set.ScaleDown.Consolidation = planner.ConsolidationReplace
	set.ScaleDown.MaxConcurrentDrains = 0
	set.ScaleDown.DisruptionBudgets = []planner.DisruptionBudget{{Nodes: 100, Percent: true}}
	return set
}

// replaceOutcome plans the trial, brings up the new nodes of a requested
// replacement Ready, plans again, and returns what the live cluster gets:
// the nodes left and the new ones, the pods of the nodes left bound, and
// the pods of the drained nodes to place. replaced says whether a
// replacement was requested; a second plan that does not drain its old
// nodes, or drains others, is an error.
func replaceOutcome(t *testing.T, tr trial) (o outcome, replaced bool) {
	t.Helper()
	set := replaceSettings()
	s1 := tr.snapshot()
	p1 := planner.Decide(s1, set, t0)
	o.plan = p1
	if len(p1.Replace) != 1 || p1.Replace[0].Phase != planner.ReplaceRequested || len(p1.ScaleDown) > 0 {
		o.nodes, o.bound = tr.nodes, tr.bound
		return o, false
	}
	rep := p1.Replace[0]
	s2 := s1
	s2.NodeGroups = slices.Clone(s1.NodeGroups)
	s2.Nodes = slices.Clone(s1.Nodes)
	var added []testbed.Node
	for i := range s2.NodeGroups {
		g := &s2.NodeGroups[i]
		if g.Name != rep.NodeGroup {
			continue
		}
		g.Instances = slices.Clone(g.Instances)
		for k := range rep.Delta {
			n := tr.template[g.Name]
			n.Name = fmt.Sprintf("%s-new%d", g.Name, k)
			added = append(added, n)
			obj := testbed.NodeObject(n)
			obj.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
			obj.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			s2.Nodes = append(s2.Nodes, *obj)
			g.Instances = append(g.Instances, "kwok://"+n.Name)
		}
		g.TargetSize += rep.Delta
	}
	s2.State = p1.State
	s2.CapturedAt = t0.Add(2 * time.Minute)
	p2 := planner.Decide(s2, set, s2.CapturedAt)
	o.plan = p2
	removed := map[string]bool{}
	for _, d := range p2.ScaleDown {
		removed[d.Node] = true
	}
	var drained []string
	for n := range removed {
		drained = append(drained, n)
	}
	slices.Sort(drained)
	if len(p2.Replace) != 1 || p2.Replace[0].Phase != planner.ReplaceDraining || !slices.Equal(drained, rep.Nodes) {
		t.Errorf("trial %s: the second plan does not drain the replaced nodes %v: replace %+v, scale-down %v", tr.id, rep.Nodes, p2.Replace, drained)
	}
	for _, n := range tr.nodes {
		if !removed[n.Name] {
			o.nodes = append(o.nodes, n)
		}
	}
	o.nodes = append(o.nodes, added...)
	for _, pod := range tr.bound {
		if removed[pod.Spec.NodeName] {
			pod.Spec.NodeName = ""
			o.fit = append(o.fit, pod)
		} else {
			o.bound = append(o.bound, pod)
		}
	}
	return o, true
}

func TestReplacementsMatchScheduler(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	var trs []trial
	var outs []outcome
	replaced := 0
	for i := range replaceTrials {
		tr := generateReplace(rand.New(rand.NewPCG(2028, uint64(i))), i, ns)
		o, ok := replaceOutcome(t, tr)
		if ok {
			replaced++
		}
		trs, outs = append(trs, tr), append(outs, o)
	}
	// The generator is for replacements: a good share of trials must plan
	// one, or the test says little (the others are kept by a pinned app,
	// a taint their pods do not tolerate, or too small a saving).
	if replaced < replaceTrials/6 {
		t.Fatalf("%d of %d trials planned a replacement", replaced, replaceTrials)
	}
	t.Logf("%d of %d trials replaced nodes", replaced, replaceTrials)
	runBatch(t, cp, ns, "replace", trs, outs)
}
