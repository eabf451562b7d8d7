package kamatera

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// GroupLabel is the label that carries the node group, as on kwok nodes. The
// template has it; for real nodes to match, the init script should start the
// kubelet with --node-labels=nodetide.io/node-group=<group>.
const GroupLabel = "nodetide.io/node-group"

// podsPerNode is the kubelet's default max-pods.
const podsPerNode = 110

// evictionMemory is the kubelet's default memory.available eviction
// threshold, which allocatable excludes too.
const evictionMemory = 100 << 20

// buildTemplate describes a new server of the group as a node:
//
//   - cpu: the vCPU count of the cpu key ("2A" is 2 vCPUs of type A; the type
//     letter does not change the count), less the reserve;
//   - memory: the ram key (MB, that is MiB), less the reserve and the
//     kubelet's 100 MiB eviction threshold;
//   - pods: 110 (the kubelet default);
//   - ephemeral-storage: the first disk's size (GB), less the kubelet's 10%
//     nodefs eviction threshold, when the disk spec names a size;
//   - labels: kubernetes.io/os=linux and kubernetes.io/arch=amd64 (Kamatera
//     servers are x86-64 and the kubelet sets both), the group label, then
//     the group's template-label keys;
//   - no taints.
//
// The default reserve is the kube-reserved ladder GKE and AKS document: CPU
// 6% of the first core, 1% of the second, 0.5% of the third and fourth,
// 0.25% above; memory 25% of the first 4 GiB, 20% of the next 4, 10% of the
// next 8, 6% of the next 112 and 2% above 128 GiB. A 2A/4096 server thus
// offers 1930m CPU and 2972 MiB.
func buildTemplate(g *NodeGroupConfig, reserve func(cpuMilli, memBytes int64) (int64, int64)) (snapshot.Template, error) {
	cores, err := cpuCount(g.Server.CPU)
	if err != nil {
		return snapshot.Template{}, err
	}
	if g.Server.RAM <= 0 {
		return snapshot.Template{}, fmt.Errorf("no ram size to build a node template from")
	}
	cpuMilli := int64(cores) * 1000
	memBytes := int64(g.Server.RAM) << 20
	rCPU, rMem := reserve(cpuMilli, memBytes)
	allocCPU := cpuMilli - rCPU
	allocMem := memBytes - rMem - evictionMemory
	if allocCPU <= 0 || allocMem <= 0 {
		return snapshot.Template{}, fmt.Errorf("cpu %s / ram %d MB leaves nothing once the system reserve is taken", g.Server.CPU, g.Server.RAM)
	}
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(allocCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(allocMem, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(podsPerNode, resource.DecimalSI),
	}
	if gb := firstDiskGB(g.Server.Disks); gb > 0 {
		alloc[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(gb)*1e9*9/10, resource.DecimalSI)
	}
	labels := map[string]string{
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		GroupLabel:             g.Name,
	}
	for k, v := range g.TemplateLabels {
		labels[k] = v
	}
	return snapshot.Template{Allocatable: alloc, Labels: labels, Taints: []corev1.Taint{}}, nil
}

// cpuCount reads the vCPU count of a Kamatera CPU spec such as "4B".
func cpuCount(cpu string) (int, error) {
	m := cpuRE.FindStringSubmatch(cpu)
	if m == nil {
		return 0, fmt.Errorf("cpu %q is not a Kamatera CPU (a vCPU count and a type letter, e.g. 2A)", cpu)
	}
	return strconv.Atoi(m[1])
}

// firstDiskGB reads size= from the first disk spec (0 when absent).
func firstDiskGB(disks []string) int {
	if len(disks) == 0 {
		return 0
	}
	for _, attr := range strings.Split(disks[0], ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(attr), "size="); ok {
			n, err := strconv.Atoi(v)
			if err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// defaultReserve is the kube-reserved ladder described at buildTemplate.
func defaultReserve(cpuMilli, memBytes int64) (int64, int64) {
	return ladder(cpuMilli, []step{{1000, 600}, {1000, 100}, {2000, 50}, {-1, 25}}),
		ladder(memBytes, []step{{4 << 30, 2500}, {4 << 30, 2000}, {8 << 30, 1000}, {112 << 30, 600}, {-1, 200}})
}

// step reserves basisPoints/10000 of the next size units (-1: all the rest).
type step struct {
	size        int64
	basisPoints int64
}

func ladder(total int64, steps []step) int64 {
	var reserved int64
	left := total
	for _, s := range steps {
		if left <= 0 {
			break
		}
		n := left
		if s.size >= 0 && n > s.size {
			n = s.size
		}
		reserved += n * s.basisPoints / 10000
		left -= n
	}
	return reserved
}
