package schedulerdiff

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// The full count runs everywhere, -short included: a smaller one would
// hide exactly the rare shapes this test is for.
const (
	trials    = 200
	batches   = 4
	labelZone = corev1.LabelTopologyZone
	// labelBatch marks the nodes of one batch, so it can delete them.
	labelBatch = "nodetide.io/diff-batch"
	labelTrial = "nodetide.io/trial"
	// labelVolume names how a pod's claim ties it to nodes (for the log).
	labelVolume = "nodetide.io/volume"
	// annotationSelectedNode is where the scheduler records the node it
	// chose for a WaitForFirstConsumer claim, before provisioning.
	annotationSelectedNode = "volume.kubernetes.io/selected-node"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// trial is one random workload: node groups with their registered nodes,
// nodes of no group, pods bound to the nodes and pending pods. Every pod
// selects its trial's nodes, and every label a rule matches names the
// trial, so trials share a cluster without seeing each other.
type trial struct {
	id       string
	down     bool // a scale-down trial: no pending pods
	balance  bool // plan with balanceSimilarNodeGroups
	seed     uint64
	groups   []snapshot.NodeGroup
	nodes    []testbed.Node
	bound    []corev1.Pod
	pending  []corev1.Pod
	template map[string]testbed.Node // group → what a new node of it looks like
	// Claims of pods with volumes (each pod its own, named <pod>-data):
	// pre-bound to their volumes, or unbound of a WaitForFirstConsumer
	// class with allowed topologies.
	claims  []corev1.PersistentVolumeClaim
	volumes []corev1.PersistentVolume
	classes []storagev1.StorageClass
}

func quantity(s string) resource.Quantity { return resource.MustParse(s) }

func milli(s string) int64 { q := resource.MustParse(s); return q.MilliValue() }

func generate(r *rand.Rand, idx int, ns string) trial {
	tr := trial{id: fmt.Sprintf("t%03d", idx), down: r.IntN(4) == 0, template: map[string]testbed.Node{}}
	zones := []string{"za", "zb", "zc"}
	type nodeRoom struct {
		name, zone string
		cpu        int64
	}
	var rooms []nodeRoom
	addNode := func(name, cpu string, l map[string]string) {
		tr.nodes = append(tr.nodes, testbed.Node{Name: name, CPU: cpu, Memory: "8Gi", Labels: l})
		rooms = append(rooms, nodeRoom{name, l[labelZone], milli(cpu)})
	}
	for g := range 1 + r.IntN(2) {
		name := fmt.Sprintf("%s-g%d", tr.id, g)
		cpu := []string{"4", "8"}[r.IntN(2)]
		l := map[string]string{labelTrial: tr.id, "pool": name, labelZone: zones[r.IntN(len(zones))]}
		existing := r.IntN(3)
		if tr.down {
			existing = 2 + r.IntN(3)
		}
		// Now and then the group is still bringing nodes up (upcoming
		// capacity): the live cluster gets them too.
		upcoming := 0
		if !tr.down && r.IntN(4) == 0 {
			upcoming = 1 + r.IntN(2)
		}
		ng := snapshot.NodeGroup{
			Name: name, Provider: "kwok", MinSize: 0, MaxSize: existing + upcoming + r.IntN(4), TargetSize: existing + upcoming,
			Template: snapshot.Template{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: quantity(cpu), corev1.ResourceMemory: quantity("8Gi"), corev1.ResourcePods: quantity("110")},
				Labels:      l,
			},
		}
		for k := range existing {
			n := fmt.Sprintf("%s-n%d", name, k)
			addNode(n, cpu, l)
			ng.Instances = append(ng.Instances, "kwok://"+n)
		}
		tr.groups = append(tr.groups, ng)
		tr.template[name] = testbed.Node{CPU: cpu, Memory: "8Gi", Labels: l}
	}
	for k := range r.IntN(3) {
		addNode(fmt.Sprintf("%s-s%d", tr.id, k), "4", map[string]string{labelTrial: tr.id, "pool": "static", labelZone: zones[r.IntN(len(zones))]})
	}

	// Apps never compete for room: requests stay small next to the nodes,
	// each pending app binds a host port of its own, and an app avoids
	// (anti-affinity) or shares a port with only apps that are all bound
	// already; required pod affinity, too, only targets apps all bound.
	// Where pending apps compete, which one wins is the scheduler's queue
	// order, and where pending pods an affinity targets land is its
	// scoring: no plan can promise either.
	var apps, settled []string
	var settledPorts []int32
	for a := range 1 + r.IntN(4) {
		app := fmt.Sprintf("%s-a%d", tr.id, a)
		apps = append(apps, app)
		replicas := 1 + r.IntN(6)
		allBound := !tr.down && r.IntN(4) == 0
		cpu := []string{"50m", "100m", "150m", "200m"}[r.IntN(4)]
		spec := corev1.PodSpec{
			NodeSelector: map[string]string{labelTrial: tr.id},
			Containers: []corev1.Container{{Name: "c", Image: "fake", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: quantity(cpu), corev1.ResourceMemory: quantity("128Mi")},
			}}},
		}
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
		if r.IntN(10) < 4 {
			c := corev1.TopologySpreadConstraint{MaxSkew: int32(1 + r.IntN(2)), TopologyKey: labelZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}
			if r.IntN(5) == 0 {
				c.MinDomains = new(int32(2 + r.IntN(2)))
			}
			spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, c)
		}
		if r.IntN(10) < 2 {
			spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
				MaxSkew: int32(1 + r.IntN(2)), TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel})
		}
		var aff corev1.Affinity
		if r.IntN(10) < 3 {
			term := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: sel}
			if r.IntN(3) == 0 {
				term.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
			}
			aff.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
		}
		if len(settled) > 0 && r.IntN(10) < 4 {
			other := settled[r.IntN(len(settled))]
			key := []string{labelZone, corev1.LabelHostname}[r.IntN(2)]
			aff.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": other}}, Namespaces: []string{ns}}}}
		}
		if len(settled) > 0 && aff.PodAntiAffinity == nil && r.IntN(10) < 3 {
			other := settled[r.IntN(len(settled))]
			aff.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": other}}}}}
		}
		if aff.PodAffinity != nil || aff.PodAntiAffinity != nil {
			spec.Affinity = &aff
		}
		if r.IntN(10) < 3 {
			port := int32(8000 + a)
			if len(settledPorts) > 0 && r.IntN(2) == 0 {
				port = settledPorts[r.IntN(len(settledPorts))]
			}
			spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}
			if allBound {
				settledPorts = append(settledPorts, port)
			}
		}
		if allBound {
			settled = append(settled, app)
		}
		// Now and then each pod of the app has a claim: bound to a volume
		// pinned to a zone (node affinity, or the legacy zone label
		// VolumeZone reads) or to a host, or unbound of a
		// WaitForFirstConsumer class that provisions in some zones. The
		// volumes draw from their own source, so the rest of each trial
		// is what it was without them. Apps with spread constraints get
		// none: the live cluster has the plan's new and upcoming nodes
		// before the pods exist, so a spread domain those nodes add is one
		// the plan could not count when it placed pods on existing nodes,
		// and a volume pin takes away the pods' way around it.
		vr := rand.New(rand.NewPCG(4052, uint64(idx)*8+uint64(a)))
		vol := ""
		switch vr.IntN(12) {
		case 0, 1:
			vol = "zone"
		case 2:
			vol = "host"
		case 3:
			vol = "legacy-zone"
		case 4:
			if !tr.down && !allBound {
				vol = "wffc"
			}
		}
		if len(spec.TopologySpreadConstraints) > 0 {
			vol = ""
		}
		var class string
		if vol == "wffc" {
			class = ns + "-" + app
			mode := storagev1.VolumeBindingWaitForFirstConsumer
			allowed := []string{zones[vr.IntN(len(zones))]}
			if z := zones[vr.IntN(len(zones))]; vr.IntN(2) == 0 && z != allowed[0] {
				allowed = append(allowed, z)
			}
			tr.classes = append(tr.classes, storagev1.StorageClass{
				ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "nodetide.io/none", VolumeBindingMode: &mode,
				AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
					{Key: labelZone, Values: allowed}}}},
			})
		}
		// claimFor gives pod p its claim; node is where it is bound ("" if
		// pending), whose zone and name a bound pod's volume follows.
		claimFor := func(p *corev1.Pod, node, zone string) {
			// A pod of a WaitForFirstConsumer app made bound has no
			// claim: its claim would have been provisioned where it runs.
			if vol == "" || vol == "wffc" && node != "" {
				return
			}
			name := p.Name + "-data"
			p.Labels[labelVolume] = vol
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}
			c := corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: quantity("1Gi")}},
				},
			}
			if vol == "wffc" {
				c.Spec.StorageClassName = &class
				tr.claims = append(tr.claims, c)
				return
			}
			if zone == "" {
				zone = zones[vr.IntN(len(zones))]
			}
			if node == "" && len(rooms) > 0 {
				node = rooms[vr.IntN(len(rooms))].name
			}
			pv := corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: quantity("1Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
					ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name},
				},
			}
			pin := func(key, value string) {
				pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}}}
			}
			switch {
			case vol == "zone":
				pin(labelZone, zone)
			case vol == "host" && node != "":
				pin(corev1.LabelHostname, node)
			case vol == "host":
				pin(corev1.LabelHostname, tr.id+"-nowhere")
			default:
				v := zone
				if z := zones[vr.IntN(len(zones))]; vr.IntN(3) == 0 && z != zone {
					v += "__" + z
				}
				pv.Labels = map[string]string{corev1.LabelFailureDomainBetaZone: v}
			}
			empty := ""
			c.Spec.StorageClassName = &empty
			c.Spec.VolumeName = pv.Name
			tr.claims = append(tr.claims, c)
			tr.volumes = append(tr.volumes, pv)
		}
		mk := func(name string) corev1.Pod {
			return corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: name, Namespace: ns, Labels: map[string]string{"app": app},
					CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
					// Bare pods: this annotation, not a controller, lets
					// scale-down move them.
					Annotations: map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
				},
				Spec: *spec.DeepCopy(),
			}
		}
		req := milli(cpu)
		for k := range replicas {
			bind := tr.down || allBound || r.IntN(3) == 0
			if bind && len(rooms) > 0 {
				j := r.IntN(len(rooms))
				if rooms[j].cpu >= req {
					rooms[j].cpu -= req
					p := mk(fmt.Sprintf("%s-b%d", app, k))
					p.Spec.NodeName = rooms[j].name
					claimFor(&p, rooms[j].name, rooms[j].zone)
					p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
					tr.bound = append(tr.bound, p)
					continue
				}
			}
			if tr.down {
				continue
			}
			p := mk(fmt.Sprintf("%s-p%d", app, k))
			claimFor(&p, "", "")
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
			tr.pending = append(tr.pending, p)
		}
	}
	tr.addZones(rand.New(rand.NewPCG(2027, uint64(idx))))
	return tr
}

// addZones turns some scale-up trials' groups into what zones make of
// them, from a generator of its own so the workloads stay as they were:
//   - a group over several zones, as a multi-AZ ASG: its template has no
//     zone and each new node lands where the cloud puts it (outcome). Its
//     zones are ones the trial's nodes are in already, since a zone with
//     no node yet would become a new spread domain wherever the node
//     lands, which no plan can know;
//   - a group in one zone with similar siblings in other zones, planned
//     with balanceSimilarNodeGroups.
func (tr *trial) addZones(r *rand.Rand) {
	tr.seed = r.Uint64()
	if tr.down {
		return
	}
	seen := map[string]bool{}
	var have []string
	for _, n := range tr.nodes {
		if z := n.Labels[labelZone]; !seen[z] {
			seen[z] = true
			have = append(have, z)
		}
	}
	slices.Sort(have)
	switch r.IntN(3) {
	case 0:
		if len(have) < 2 {
			return
		}
		g := &tr.groups[r.IntN(len(tr.groups))]
		g.Zones = have
		l := maps.Clone(g.Template.Labels)
		delete(l, labelZone)
		g.Template.Labels = l
		t := tr.template[g.Name]
		t.Labels = l
		tr.template[g.Name] = t
	case 1:
		tr.balance = true
		g0 := tr.groups[0]
		z0 := g0.Template.Labels[labelZone]
		g0.Zones = []string{z0}
		// Siblings differ only by zone and group name (ignored for
		// similarity); the group's own pool label would set them apart.
		l := maps.Clone(g0.Template.Labels)
		delete(l, "pool")
		l["nodetide.io/node-group"] = g0.Name
		g0.Template.Labels = l
		tr.groups[0] = g0
		t := tr.template[g0.Name]
		t.Labels = l
		tr.template[g0.Name] = t
		for k, z := range []string{"za", "zb", "zc"} {
			if z == z0 || r.IntN(4) == 0 {
				continue
			}
			sib := g0
			sib.Name = fmt.Sprintf("%s-s%d", g0.Name, k)
			sib.MinSize, sib.TargetSize, sib.Instances, sib.BoundsFrom = 0, 0, nil, ""
			sib.MaxSize = 1 + r.IntN(4)
			sib.Zones = []string{z}
			sl := maps.Clone(l)
			sl[labelZone] = z
			sl["nodetide.io/node-group"] = sib.Name
			sib.Template.Labels = sl
			tr.groups = append(tr.groups, sib)
			tr.template[sib.Name] = testbed.Node{CPU: t.CPU, Memory: t.Memory, Labels: sl}
		}
	}
}

// cloudZone picks a new node's zone for a group over several, as an Auto
// Scaling Group does: the zone with the fewest of the group's nodes, ties
// at random.
func cloudZone(r *rand.Rand, zones []string, inZone map[string]int) string {
	var best []string
	for _, z := range zones {
		switch {
		case len(best) == 0 || inZone[z] < inZone[best[0]]:
			best = []string{z}
		case inZone[z] == inZone[best[0]]:
			best = append(best, z)
		}
	}
	return best[r.IntN(len(best))]
}

func (tr *trial) snapshot() snapshot.Snapshot {
	s := snapshot.Snapshot{CapturedAt: t0, NodeGroups: tr.groups}
	for _, n := range tr.nodes {
		node := testbed.NodeObject(n)
		node.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		s.Nodes = append(s.Nodes, *node)
	}
	s.Pods = append(append(s.Pods, tr.bound...), tr.pending...)
	// The claims and volumes as the binder leaves them: bound.
	for _, c := range tr.claims {
		if c.Spec.VolumeName != "" {
			c.Status.Phase = corev1.ClaimBound
		}
		s.PersistentVolumeClaims = append(s.PersistentVolumeClaims, c)
	}
	for _, v := range tr.volumes {
		v.Status.Phase = corev1.VolumeBound
		s.PersistentVolumes = append(s.PersistentVolumes, v)
	}
	s.StorageClasses = tr.classes
	return s
}

func settings(down, balance bool) planner.Settings {
	set := planner.DefaultSettings()
	set.ScaleUp.BalanceSimilarNodeGroups = balance
	set.ScaleUp.PendingPodMinAge = 0
	set.ScaleUp.MaxNodesPerStep = 1000
	set.ScaleDown.Enabled = down
	set.ScaleDown.UtilizationThreshold = 0.7
	set.ScaleDown.UnneededTime = 0
	set.ScaleDown.DelayAfterAdd = 0
	set.ScaleDown.MaxConcurrentDrains = 100
	return set
}

// outcome is what a trial asks of the live cluster: the nodes to create,
// the pods to bind directly, and the pods the scheduler must place (fit) or
// must leave pending (stay).
type outcome struct {
	nodes []testbed.Node
	bound []corev1.Pod
	fit   []corev1.Pod
	stay  []corev1.Pod
	plan  planner.Plan
}

func (tr *trial) outcome() outcome {
	p := planner.Decide(tr.snapshot(), settings(tr.down, tr.balance), t0)
	o := outcome{plan: p}
	if tr.down {
		removed := map[string]bool{}
		for _, d := range p.ScaleDown {
			removed[d.Node] = true
		}
		for _, n := range tr.nodes {
			if !removed[n.Name] {
				o.nodes = append(o.nodes, n)
			}
		}
		for _, pod := range tr.bound {
			if removed[pod.Spec.NodeName] {
				pod.Spec.NodeName = ""
				o.fit = append(o.fit, pod)
			} else {
				o.bound = append(o.bound, pod)
			}
		}
		return o
	}
	o.nodes = slices.Clone(tr.nodes)
	// New nodes of a group over several zones go where the cloud puts
	// them, not where the plan might hope.
	cloud := rand.New(rand.NewPCG(tr.seed, 1))
	inZone := map[string]map[string]int{}
	groupOf := map[string]*snapshot.NodeGroup{}
	for i := range tr.groups {
		g := &tr.groups[i]
		groupOf[g.Name] = g
		inZone[g.Name] = map[string]int{}
		for _, id := range g.Instances {
			for _, n := range tr.nodes {
				if "kwok://"+n.Name == id {
					inZone[g.Name][n.Labels[labelZone]]++
				}
			}
		}
	}
	newNode := func(group, name string) testbed.Node {
		n := tr.template[group]
		n.Name = name
		if g := groupOf[group]; len(g.Zones) > 1 {
			z := cloudZone(cloud, g.Zones, inZone[group])
			n.Labels = maps.Clone(n.Labels)
			n.Labels[labelZone] = z
			inZone[group][z]++
		}
		return n
	}
	for _, g := range tr.groups {
		for k := range g.TargetSize - len(g.Instances) {
			o.nodes = append(o.nodes, newNode(g.Name, fmt.Sprintf("%s-up%d", g.Name, k)))
		}
	}
	for _, u := range p.ScaleUp {
		for k := range u.Delta {
			o.nodes = append(o.nodes, newNode(u.NodeGroup, fmt.Sprintf("%s-new%d", u.NodeGroup, k)))
		}
	}
	o.bound = tr.bound
	stay := map[string]bool{}
	for _, u := range p.Unschedulable {
		stay[u.Pod] = true
	}
	for _, pod := range tr.pending {
		if stay[pod.Namespace+"/"+pod.Name] {
			o.stay = append(o.stay, pod)
		} else {
			o.fit = append(o.fit, pod)
		}
	}
	return o
}

// forEach runs fn over items, a few at a time.
func forEach[T any](items []T, fn func(T) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, 16)
	for _, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(it); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func TestPlanMatchesScheduler(t *testing.T) {
	cp := testbed.Cluster(t)
	perBatch := trials / batches
	for b := range batches {
		t.Run(fmt.Sprintf("batch%d", b), func(t *testing.T) {
			ns := cp.Namespace(t)
			var outs []outcome
			var trs []trial
			for i := range perBatch {
				// A seed per trial: a failing trial replays alone.
				idx := b*perBatch + i
				tr := generate(rand.New(rand.NewPCG(2026, uint64(idx))), idx, ns)
				trs = append(trs, tr)
				outs = append(outs, tr.outcome())
			}
			runBatch(t, cp, ns, fmt.Sprintf("b%d", b), trs, outs)
		})
	}
}

func runBatch(t *testing.T, cp *testbed.ControlPlane, ns, batch string, trs []trial, outs []outcome) {
	ctx := t.Context()
	client := cp.Client
	var nodes []*corev1.Node
	var bound, fit []corev1.Pod
	var claims []corev1.PersistentVolumeClaim
	var volumes []corev1.PersistentVolume
	var classes []storagev1.StorageClass
	claimOf := map[string]string{} // pod → its claim
	stay := map[string]bool{}
	for i := range trs {
		claims = append(claims, trs[i].claims...)
		for _, v := range trs[i].volumes {
			v.Labels = maps.Clone(v.Labels)
			if v.Labels == nil {
				v.Labels = map[string]string{}
			}
			v.Labels[labelBatch] = batch
			volumes = append(volumes, v)
		}
		for _, c := range trs[i].classes {
			c.Labels = map[string]string{labelBatch: batch}
			classes = append(classes, c)
		}
	}
	for _, o := range outs {
		for _, p := range append(append(slices.Clone(o.bound), o.fit...), o.stay...) {
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					claimOf[p.Name] = v.PersistentVolumeClaim.ClaimName
				}
			}
		}
		for _, n := range o.nodes {
			l := map[string]string{labelBatch: batch}
			for k, v := range n.Labels {
				l[k] = v
			}
			n.Labels = l
			nodes = append(nodes, testbed.NodeObject(n))
		}
		bound = append(bound, o.bound...)
		fit = append(fit, o.fit...)
		for _, p := range o.stay {
			stay[p.Name] = true
			fit = append(fit, p)
		}
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = client.CoreV1().Pods(ns).DeleteCollection(c, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}, metav1.ListOptions{})
		if err := client.CoreV1().Nodes().DeleteCollection(c, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelBatch + "=" + batch}); err != nil {
			t.Errorf("delete the nodes of batch %s: %v", batch, err)
		}
		_ = client.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(c, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err := client.CoreV1().PersistentVolumes().DeleteCollection(c, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelBatch + "=" + batch}); err != nil {
			t.Errorf("delete the volumes of batch %s: %v", batch, err)
		}
		if err := client.StorageV1().StorageClasses().DeleteCollection(c, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelBatch + "=" + batch}); err != nil {
			t.Errorf("delete the storage classes of batch %s: %v", batch, err)
		}
	})
	// Volumes first, and the pre-bound claims bound by the
	// controller-manager's binder before any pod exists: a claim not bound
	// yet would read as unbound to the scheduler.
	for _, c := range classes {
		if _, err := client.StorageV1().StorageClasses().Create(ctx, &c, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create storage class: %v", err)
		}
	}
	if err := forEach(volumes, func(v corev1.PersistentVolume) error {
		_, err := client.CoreV1().PersistentVolumes().Create(ctx, &v, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("create volumes: %v", err)
	}
	if err := forEach(claims, func(c corev1.PersistentVolumeClaim) error {
		_, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &c, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("create claims: %v", err)
	}
	if len(volumes) > 0 {
		cp.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d claims bound", len(volumes)), func(ctx context.Context) (bool, error) {
			l, err := client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			n := 0
			for i := range l.Items {
				if l.Items[i].Status.Phase == corev1.ClaimBound {
					n++
				}
			}
			return n == len(volumes), nil
		})
	}
	if err := forEach(nodes, func(n *corev1.Node) error {
		_, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("create nodes: %v", err)
	}
	cp.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d nodes Ready", len(nodes)), func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labelBatch + "=" + batch})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range l.Items {
			if usable(&l.Items[i]) {
				ready++
			}
		}
		return ready == len(nodes), nil
	})
	strip := func(p corev1.Pod) *corev1.Pod {
		p.Status = corev1.PodStatus{}
		p.CreationTimestamp = metav1.Time{}
		return &p
	}
	if err := forEach(bound, func(p corev1.Pod) error {
		_, err := client.CoreV1().Pods(ns).Create(ctx, strip(p), metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("create bound pods: %v", err)
	}
	if err := forEach(fit, func(p corev1.Pod) error {
		_, err := client.CoreV1().Pods(ns).Create(ctx, strip(p), metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("create pending pods: %v", err)
	}

	// Settled: every pod bound or marked unschedulable, and no binding for
	// longer than the scheduler's longest retry backoff. A pod whose
	// WaitForFirstConsumer claim the scheduler gave a node waits there for
	// a provisioner the bed does not run: the claim's selected node is its
	// placement.
	var got map[string]string
	last, lastChange := "", time.Now()
	cp.WaitFor(t, 5*time.Minute, "the scheduler to settle", func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		selected := map[string]string{}
		if len(classes) > 0 {
			cl, err := client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for i := range cl.Items {
				selected[cl.Items[i].Name] = cl.Items[i].Annotations[annotationSelectedNode]
			}
		}
		got = map[string]string{}
		decided := 0
		var sig []string
		for i := range l.Items {
			p := &l.Items[i]
			got[p.Name] = p.Spec.NodeName
			if p.Spec.NodeName == "" {
				got[p.Name] = selected[claimOf[p.Name]]
				p.Spec.NodeName = got[p.Name]
			}
			if p.Spec.NodeName != "" || unschedulable(p) {
				decided++
			}
			sig = append(sig, p.Name+"@"+p.Spec.NodeName)
		}
		slices.Sort(sig)
		s := strings.Join(sig, ",")
		if s != last {
			last, lastChange = s, time.Now()
		}
		return decided == len(l.Items) && len(l.Items) == len(bound)+len(fit) && time.Since(lastChange) > 12*time.Second, nil
	})

	var planned, declared, moved, multiZone, balanced, lucky int
	uses := map[string]int{}
	for i, o := range outs {
		tr := &trs[i]
		for _, g := range tr.groups {
			if len(g.Zones) > 1 {
				multiZone++
			}
		}
		for _, u := range o.plan.ScaleUp {
			if strings.Contains(u.Reason, "balanced with similar groups") {
				balanced++
			}
		}
		for _, p := range append(slices.Clone(o.fit), o.stay...) {
			for _, f := range featuresOf(&p) {
				uses[f]++
			}
		}
		// Pods of one app are interchangeable: the scheduler cannot know
		// which of them the plan meant, so compare how many it placed.
		want, placed := map[string]int{}, map[string]int{}
		// Pods the plan declined because a group's new node may land in
		// any of its zones: the cloud's pick may suit them after all.
		uncertain := map[string]int{}
		for _, u := range o.plan.Unschedulable {
			if strings.Contains(u.Reason, "the cloud picks a new node's zone") {
				if i := strings.LastIndex(u.Pod, "-p"); i > 0 {
					uncertain[u.Pod[strings.Index(u.Pod, "/")+1:i]]++
				}
			}
		}
		var apps []string
		for _, p := range o.fit {
			app := p.Labels["app"]
			if _, seen := want[app]; !seen {
				apps = append(apps, app)
			}
			want[app]++
			if got[p.Name] != "" {
				placed[app]++
			}
		}
		for _, p := range o.stay {
			app := p.Labels["app"]
			if _, seen := want[app]; !seen {
				apps = append(apps, app)
				want[app] = 0
			}
			if got[p.Name] != "" {
				placed[app]++
			}
		}
		var bad []string
		for _, app := range apps {
			if placed[app] < want[app] {
				bad = append(bad, fmt.Sprintf("%s: planned %d to fit, the scheduler placed %d", app, want[app], placed[app]))
			}
			if placed[app] > want[app]+uncertain[app] {
				bad = append(bad, fmt.Sprintf("%s: the scheduler placed %d, more than the %d the plan said fit", app, placed[app], want[app]))
			}
			if placed[app] > want[app] {
				lucky += placed[app] - want[app]
			}
		}
		if len(bad) > 0 {
			var where []string
			for name, n := range got {
				if strings.HasPrefix(name, tr.id+"-") {
					where = append(where, name+"@"+n)
				}
			}
			slices.Sort(where)
			bad = append(bad, "placements: "+strings.Join(where, " "))
		}
		if tr.down {
			moved += len(o.fit)
		} else {
			planned += len(o.fit)
		}
		declared += len(o.stay)
		if len(bad) > 0 {
			t.Errorf("trial %s (%s):\n  %s\n  plan: up %+v down %+v unschedulable %+v", tr.id, kind(tr.down), strings.Join(bad, "\n  "), o.plan.ScaleUp, o.plan.ScaleDown, o.plan.Unschedulable)
		}
	}
	t.Logf("batch %s: %d trials, %d nodes, %d pods planned to fit, %d declared unschedulable, %d moved by scale-down; %d groups over several zones, %d balanced scale-ups, %d pods declined for a zone the cloud then happened to pick; pods using %v",
		batch, len(trs), len(nodes), planned, declared, moved, multiZone, balanced, lucky, uses)
}

// featuresOf names the pod-dependent rules a pod uses.
func featuresOf(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.TopologySpreadConstraints {
		out = append(out, "spread:"+c.TopologyKey)
		if c.MinDomains != nil {
			out = append(out, "minDomains")
		}
	}
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			out = append(out, "affinity")
		}
		if a.PodAntiAffinity != nil {
			out = append(out, "anti-affinity")
		}
	}
	if len(p.Spec.Containers[0].Ports) > 0 {
		out = append(out, "hostPort")
	}
	if v := p.Labels[labelVolume]; v != "" {
		out = append(out, "volume:"+v)
	}
	return out
}

func kind(down bool) string {
	if down {
		return "scale-down"
	}
	return "scale-up"
}

func usable(n *corev1.Node) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == corev1.TaintNodeNotReady || tn.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}
