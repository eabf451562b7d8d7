package main

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// clusterSpec sizes the cluster the functions are measured against.
type clusterSpec struct {
	Nodes int
	// Pods is the number of Deployment pods (a DaemonSet adds one per node).
	Pods              int
	PodsPerDeployment int
	Namespaces        int
	// Utilization is the average of CPU requests over allocatable.
	Utilization float64
	// SingleFraction of the Deployments have one replica; PDBFraction of the
	// others get a PodDisruptionBudget (maxUnavailable 1), and half of the
	// single-replica ones one with minAvailable 1.
	SingleFraction, PDBFraction float64
	Seed                        uint64
}

// The node group the cluster's nodes belong to, and its nodes' size.
const (
	workersGroup    = "workers"
	nodeCPUMilli    = 8000
	nodeMemoryMi    = 32 << 10
	nodePodCapacity = 110
	// memoryPerCPU: requests ask 3 GiB per CPU of the nodes' 4, so CPU is
	// the binding resource.
	memoryMiPerCPUMilli = 3.072
)

// plannedDeployment is one Deployment of the cluster.
type plannedDeployment struct {
	Name, Namespace string
	Replicas        int
	CPUMilli        int
	MemoryMi        int
	// PDB is "", "maxUnavailable" (1) or "minAvailable" (1).
	PDB string
	// Nodes holds the node index of each replica.
	Nodes []int
}

// clusterPlan is what to create: nodes by index, Deployments and where
// each of their pods runs.
type clusterPlan struct {
	Spec        clusterSpec
	Deployments []plannedDeployment
	// NodeCPU and NodeMemory are each node's requested millicores and MiB.
	NodeCPU, NodeMemory, NodePods []int
}

func nodeName(i int) string { return fmt.Sprintf("worker-%03d", i) }

// planCluster lays out the cluster: Deployments of varied sizes and replica
// counts, and their pods placed on nodes with uneven fill (each node aims at
// its own share, drawn around the average), as a scheduler and months of
// scale-ups and deployments leave a real cluster. It is deterministic for a
// seed.
func planCluster(s clusterSpec) (clusterPlan, error) {
	if err := s.check(); err != nil {
		return clusterPlan{}, err
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x6e6f64657469))
	replicas, err := s.replicas(rng)
	if err != nil {
		return clusterPlan{}, err
	}
	p := clusterPlan{Spec: s, NodeCPU: make([]int, s.Nodes), NodeMemory: make([]int, s.Nodes), NodePods: make([]int, s.Nodes)}
	p.Deployments = s.deployments(rng, replicas)
	if err := p.place(rng); err != nil {
		return clusterPlan{}, err
	}
	return p, nil
}

// check refuses a spec no cluster can be laid out for.
func (s clusterSpec) check() error {
	switch {
	case s.Nodes < 3:
		return fmt.Errorf("nodes %d: want at least 3", s.Nodes)
	case s.PodsPerDeployment < 2:
		return fmt.Errorf("pods per deployment %d: want at least 2", s.PodsPerDeployment)
	case s.Pods < s.PodsPerDeployment:
		return fmt.Errorf("pods %d: want at least pods per deployment (%d)", s.Pods, s.PodsPerDeployment)
	case s.Namespaces < 1:
		return fmt.Errorf("namespaces %d: want at least 1", s.Namespaces)
	case s.Utilization <= 0 || s.Utilization > 0.9:
		return fmt.Errorf("utilization %.2f: want more than 0 and at most 0.9", s.Utilization)
	case s.SingleFraction < 0 || s.SingleFraction > 0.5 || s.PDBFraction < 0 || s.PDBFraction > 1:
		return fmt.Errorf("single-replica fraction %.2f (0-0.5) or PDB fraction %.2f (0-1) out of range", s.SingleFraction, s.PDBFraction)
	}
	if s.Pods > s.Nodes*(nodePodCapacity-2) {
		return fmt.Errorf("%d pods do not fit %d nodes of %d pods", s.Pods, s.Nodes, nodePodCapacity)
	}
	return nil
}

// replicas gives each Deployment its replica count: single-replica
// Deployments first, then the rest share the remaining pods in proportion
// to random weights (some large, most small).
func (s clusterSpec) replicas(rng *rand.Rand) ([]int, error) {
	n := s.Pods / s.PodsPerDeployment
	single := int(float64(n) * s.SingleFraction)
	if single == n {
		single = n - 1
	}
	multi := n - single
	if s.Pods-single < 2*multi {
		return nil, fmt.Errorf("%d pods are too few for %d Deployments", s.Pods, n)
	}
	weights := make([]float64, multi)
	var sum float64
	for i := range weights {
		weights[i] = rng.ExpFloat64()
		sum += weights[i]
	}
	spare := s.Pods - single - 2*multi
	replicas := make([]int, n)
	given := 0
	for i := range n {
		if i < single {
			replicas[i] = 1
			continue
		}
		extra := int(math.Floor(float64(spare) * weights[i-single] / sum))
		replicas[i] = 2 + extra
		given += extra
	}
	for given < spare { // rounding leftovers
		replicas[single+rng.IntN(multi)]++
		given++
	}
	return replicas, nil
}

// deployments sizes each Deployment's requests (a random size each, scaled
// so the total is the wanted share of the cluster's CPU) and picks its
// budget.
func (s clusterSpec) deployments(rng *rand.Rand, replicas []int) []plannedDeployment {
	n := len(replicas)
	factors := make([]float64, n)
	var raw float64
	for i := range n {
		factors[i] = 0.3 + 1.4*rng.Float64()
		raw += factors[i] * float64(replicas[i])
	}
	scale := s.Utilization * float64(nodeCPUMilli*s.Nodes) / raw
	var out []plannedDeployment
	for i := range n {
		cpu := max(10, int(math.Round(factors[i]*scale/10))*10)
		d := plannedDeployment{
			Name:      fmt.Sprintf("app-%03d", i),
			Namespace: fmt.Sprintf("team-%d", i%s.Namespaces),
			Replicas:  replicas[i],
			CPUMilli:  cpu,
			MemoryMi:  max(16, int(math.Round(float64(cpu)*memoryMiPerCPUMilli))),
		}
		switch {
		case d.Replicas == 1 && i%2 == 0:
			d.PDB = "minAvailable"
		case d.Replicas > 1 && rng.Float64() < s.PDBFraction:
			d.PDB = "maxUnavailable"
		}
		out = append(out, d)
	}
	return out
}

// place puts each pod on a node: each node aims at a fill of its own
// around the average; pods, largest first, go to a random node still under
// its aim, or else to the emptiest node with room.
func (p *clusterPlan) place(rng *rand.Rand) error {
	s := p.Spec
	aim := make([]int, s.Nodes)
	for i := range aim {
		f := s.Utilization + 0.7*(rng.Float64()-0.5)
		aim[i] = int(math.Max(0.05, math.Min(0.97, f)) * nodeCPUMilli)
	}
	type pod struct{ dep, idx int }
	var pods []pod
	for di, d := range p.Deployments {
		p.Deployments[di].Nodes = make([]int, d.Replicas)
		for r := range d.Replicas {
			pods = append(pods, pod{di, r})
		}
	}
	slices.SortStableFunc(pods, func(a, b pod) int {
		return cmp.Compare(p.Deployments[b.dep].CPUMilli, p.Deployments[a.dep].CPUMilli)
	})
	candidates := make([]int, 0, s.Nodes)
	for _, pd := range pods {
		d := p.Deployments[pd.dep]
		candidates = candidates[:0]
		for node := range s.Nodes {
			if p.fits(node, d, aim[node]) {
				candidates = append(candidates, node)
			}
		}
		chosen := -1
		if len(candidates) > 0 {
			chosen = candidates[rng.IntN(len(candidates))]
		} else {
			for node := range s.Nodes {
				if p.fits(node, d, nodeCPUMilli) && (chosen < 0 || p.NodeCPU[node] < p.NodeCPU[chosen]) {
					chosen = node
				}
			}
		}
		if chosen < 0 {
			return errors.New("the pods do not fit the nodes: lower the utilization or the pods")
		}
		p.Deployments[pd.dep].Nodes[pd.idx] = chosen
		p.NodeCPU[chosen] += d.CPUMilli
		p.NodeMemory[chosen] += d.MemoryMi
		p.NodePods[chosen]++
	}
	return nil
}

// fits reports whether a pod of d fits node with its CPU up to limit,
// leaving one slot for the DaemonSet.
func (p *clusterPlan) fits(node int, d plannedDeployment, limit int) bool {
	return p.NodeCPU[node]+d.CPUMilli <= limit && p.NodeMemory[node]+d.MemoryMi <= nodeMemoryMi &&
		p.NodePods[node] < nodePodCapacity-1
}

// clusterSummary describes the cluster for the report.
type clusterSummary struct {
	Group                       string
	Nodes                       int
	NodeCPU, NodeMemory         string
	NodePods                    int
	DeploymentPods, Deployments int
	Namespaces, SingleReplica   int
	DaemonSetPods, PDBs         int
	CPUUtilization              float64
	UnderThreshold              int
}

// Pods is every pod of the cluster.
func (c clusterSummary) Pods() int { return c.DeploymentPods + c.DaemonSetPods }

func (p clusterPlan) summary(daemonSet bool) clusterSummary {
	c := clusterSummary{
		Group: workersGroup, Nodes: p.Spec.Nodes, NodeCPU: fmt.Sprint(nodeCPUMilli / 1000), NodeMemory: fmt.Sprintf("%d GiB", nodeMemoryMi>>10),
		NodePods: nodePodCapacity, Deployments: len(p.Deployments), Namespaces: p.Spec.Namespaces,
	}
	for _, d := range p.Deployments {
		c.DeploymentPods += d.Replicas
		if d.Replicas == 1 {
			c.SingleReplica++
		}
		if d.PDB != "" {
			c.PDBs++
		}
	}
	if daemonSet {
		c.DaemonSetPods = p.Spec.Nodes
	}
	var used int
	for i, cpu := range p.NodeCPU {
		used += cpu
		util := max(float64(cpu)/nodeCPUMilli, float64(p.NodeMemory[i])/nodeMemoryMi)
		if util < 0.5 {
			c.UnderThreshold++
		}
	}
	c.CPUUtilization = float64(used) / float64(nodeCPUMilli*p.Spec.Nodes)
	return c
}
