package snapshottest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// syntheticPool is one node group of a synthetic cluster.
type syntheticPool struct {
	name     string
	share    float64 // of the nodes
	cpu, mem string
	gpu      string
	taint    *corev1.Taint
}

var syntheticPools = []syntheticPool{
	{name: "general", share: 0.45, cpu: "8", mem: "32Gi"},
	{name: "memory", share: 0.2, cpu: "8", mem: "64Gi"},
	{name: "compute", share: 0.15, cpu: "16", mem: "32Gi"},
	{name: "spot", share: 0.15, cpu: "4", mem: "16Gi", taint: &corev1.Taint{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
	{name: "gpu", share: 0.05, cpu: "8", mem: "64Gi", gpu: "1", taint: &corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}},
}

// syntheticWorkload is a Deployment's pod shape.
type syntheticWorkload struct {
	name     string
	cpu, mem int64 // milli-CPU, MiB
	gpu      int64
	pool     string // nodeSelector pool=…, "" for any untainted pool
	spot     bool   // tolerates spot
	ns       string
}

// syntheticCluster builds a deterministic cluster: nodes across five
// groups (two tainted), podsPerNode pods a node (two of them DaemonSet
// pods), pendingShare of all pods pending, PDBs, and the odd bare pod,
// local-storage pod, opted-out node and kube-system pod.
func Synthetic(nodes, podsPerNode int, pendingShare float64, seed uint64) snapshot.Snapshot {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	now := T0
	s := snapshot.Snapshot{CapturedAt: now, State: snapshot.State{UnneededSince: map[string]time.Time{}, LastScaleUp: map[string]time.Time{}}}

	var workloads []syntheticWorkload
	cpus := []int64{25, 50, 100, 150, 200, 250, 400, 600}
	mems := []int64{64, 128, 256, 512, 768, 1024, 2048}
	for i := range 80 {
		w := syntheticWorkload{name: fmt.Sprintf("app-%02d", i), cpu: pick(r, cpus), mem: pick(r, mems), ns: fmt.Sprintf("team-%d", i%7)}
		switch {
		case i%10 == 0:
			w.pool = "memory"
			w.mem *= 2
		case i%10 == 1:
			w.pool = "compute"
			w.cpu *= 2
		case i%10 == 2:
			w.spot = true
		case i == 3 || i == 13:
			w.pool, w.gpu, w.cpu = "gpu", 1, 1000
		}
		workloads = append(workloads, w)
	}
	// Some pending pods fit no group at all.
	workloads = append(workloads, syntheticWorkload{name: "huge", cpu: 40000, mem: 1024, ns: "batch"})

	nodePool := make([]int, nodes)
	perPool := make([][]string, len(syntheticPools))
	idx := 0
	for pi, p := range syntheticPools {
		n := int(float64(nodes) * p.share)
		if pi == len(syntheticPools)-1 {
			n = nodes - idx
		}
		for range n {
			nodePool[idx] = pi
			idx++
		}
	}
	for i := range nodes {
		p := syntheticPools[nodePool[i]]
		name := fmt.Sprintf("node-%05d", i)
		perPool[nodePool[i]] = append(perPool[nodePool[i]], name)
		n := corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:              name,
				Labels:            map[string]string{"pool": p.name, "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("z%d", i%3)},
				CreationTimestamp: metav1.NewTime(now.Add(-48 * time.Hour)),
			},
			Spec: corev1.NodeSpec{ProviderID: ProviderID(name)},
			Status: corev1.NodeStatus{
				Allocatable: Resources(p.cpu, p.mem, "pods", "110"),
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		if p.gpu != "" {
			n.Status.Allocatable[podfacts.ResourceGPU] = resource.MustParse(p.gpu)
		}
		if p.taint != nil {
			n.Spec.Taints = []corev1.Taint{*p.taint}
		}
		if i%97 == 0 {
			n.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
		}
		if i%13 == 0 {
			s.State.UnneededSince[name] = now.Add(-time.Duration(r.IntN(30)) * time.Minute)
		}
		s.Nodes = append(s.Nodes, n)
	}
	for pi, p := range syntheticPools {
		g := snapshot.NodeGroup{
			Name: p.name, Provider: "kwok", MinSize: 1, MaxSize: 2*len(perPool[pi]) + 10, TargetSize: len(perPool[pi]),
			Template: snapshot.Template{Allocatable: Resources(p.cpu, p.mem, "pods", "110"), Labels: map[string]string{"pool": p.name}},
		}
		if p.gpu != "" {
			g.Template.Allocatable[podfacts.ResourceGPU] = resource.MustParse(p.gpu)
		}
		if p.taint != nil {
			g.Template.Taints = []corev1.Taint{*p.taint}
		}
		for _, n := range perPool[pi] {
			g.Instances = append(g.Instances, ProviderID(n))
		}
		if p.name == "compute" {
			// Two nodes asked for two minutes ago are still coming up.
			g.TargetSize += 2
			s.State.LastScaleUp[p.name] = now.Add(-2 * time.Minute)
		}
		s.NodeGroups = append(s.NodeGroups, g)
	}

	defaultTolerations := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	}
	seq := 0
	mkPod := func(w syntheticWorkload) corev1.Pod {
		seq++
		ctrl := true
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%07d", w.name, seq), Namespace: w.ns,
				Labels:            map[string]string{"app": w.name},
				CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
				OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: w.name + "-rs", UID: types.UID("uid-" + w.name), Controller: &ctrl}},
			},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(w.cpu, resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(w.mem<<20, resource.BinarySI),
				}}}},
				Tolerations: append([]corev1.Toleration(nil), defaultTolerations...),
			},
		}
		if w.gpu > 0 {
			p.Spec.Containers[0].Resources.Requests[podfacts.ResourceGPU] = *resource.NewQuantity(w.gpu, resource.DecimalSI)
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		}
		if w.pool != "" {
			p.Spec.NodeSelector = map[string]string{"pool": w.pool}
		}
		if w.spot {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		}
		return p
	}
	compatible := func(w syntheticWorkload, pool syntheticPool) bool {
		if w.pool != "" {
			return w.pool == pool.name
		}
		return pool.taint == nil || (w.spot && pool.name == "spot")
	}

	daemonSets := []syntheticWorkload{{name: "logs", cpu: 100, mem: 200, ns: "kube-system"}, {name: "exporter", cpu: 50, mem: 64, ns: "monitoring"}}
	perNodeWorkload := podsPerNode - len(daemonSets)
	for i := range nodes {
		pool := syntheticPools[nodePool[i]]
		nodeName := s.Nodes[i].Name
		for _, d := range daemonSets {
			p := mkPod(d)
			p.OwnerReferences[0].Kind = "DaemonSet"
			p.Spec.NodeName = nodeName
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}}}},
			}}}
			p.Status.Phase = corev1.PodRunning
			s.Pods = append(s.Pods, p)
		}
		// Each node leans to small or large pods, so utilisation spreads
		// from light to full and scale-down has work to do.
		maxCPU := pick(r, []int64{100, 250, 600, 2000})
		free := freeOf(s.Nodes[i].Status.Allocatable)
		free.cpu -= 150
		free.mem -= 264 << 20
		placed := 0
		for tries := 0; placed < perNodeWorkload && tries < 20*perNodeWorkload; tries++ {
			w := workloads[r.IntN(len(workloads)-1)]
			if !compatible(w, pool) || w.cpu > maxCPU && tries < 10*perNodeWorkload {
				continue
			}
			if w.cpu > free.cpu || w.mem<<20 > free.mem || w.gpu > free.gpu {
				continue
			}
			free.cpu -= w.cpu
			free.mem -= w.mem << 20
			free.gpu -= w.gpu
			p := mkPod(w)
			p.Spec.NodeName = nodeName
			p.Status.Phase = corev1.PodRunning
			switch seq % 200 {
			case 0:
				p.OwnerReferences = nil // a bare pod
			case 1:
				p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			case 2:
				p.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
				p.OwnerReferences = nil
			}
			s.Pods = append(s.Pods, p)
			placed++
		}
	}
	bound := len(s.Pods)
	pendingCount := int(float64(bound) * pendingShare / (1 - pendingShare))
	for i := range pendingCount {
		w := workloads[r.IntN(len(workloads))]
		if i%50 != 0 && w.name == "huge" {
			w = workloads[0]
		}
		p := mkPod(w)
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		p.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
		s.Pods = append(s.Pods, p)
	}
	replicas := map[string]int32{}
	for i := range s.Pods {
		replicas[s.Pods[i].Labels["app"]]++
	}
	for i, w := range workloads {
		// Budgets as maxUnavailable 25% would give; one allows no disruption.
		allowed := replicas[w.name] / 4
		if i == 7 {
			allowed = 0
		}
		b := PDB(w.ns+"/"+w.name, allowed, "app", w.name)
		s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, b)
	}
	s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "logs", Namespace: "kube-system"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "logs"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1},
	})
	return s
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

// free is a node's room left for synthetic pods: milli-CPU, bytes, GPUs.
type free struct{ cpu, mem, gpu int64 }

func freeOf(l corev1.ResourceList) free {
	var f free
	if q, ok := l[corev1.ResourceCPU]; ok {
		f.cpu = q.MilliValue()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		f.mem = q.Value()
	}
	if q, ok := l[podfacts.ResourceGPU]; ok {
		f.gpu = q.Value()
	}
	return f
}
