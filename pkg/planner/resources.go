package planner

import (
	"math"
	"strconv"

	"github.com/nodetide/nodetide/pkg/podfacts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultTemplatePods is the kubelet's default max-pods. Templates written by
// hand (or derived from provider tags) often leave "pods" out; treating that
// as zero would make every group look unable to host anything.
const defaultTemplatePods = 110

// res is a request or capacity vector in the planner's integer units:
// milli-CPU, memory bytes, GPUs and pod slots. Plain int64 arithmetic keeps
// packing exact and avoids resource.Quantity's allocations on hot paths.
type res struct {
	cpu, mem, gpu, pods int64
}

func (a res) add(b res) res {
	return res{a.cpu + b.cpu, a.mem + b.mem, a.gpu + b.gpu, a.pods + b.pods}
}

func (a res) sub(b res) res {
	return res{a.cpu - b.cpu, a.mem - b.mem, a.gpu - b.gpu, a.pods - b.pods}
}

func (a res) mul(n int64) res {
	return res{a.cpu * n, a.mem * n, a.gpu * n, a.pods * n}
}

func (a res) max(b res) res {
	return res{max(a.cpu, b.cpu), max(a.mem, b.mem), max(a.gpu, b.gpu), max(a.pods, b.pods)}
}

// fitCount is how many pods requesting req fit into free. Only the
// dimensions the pod requests are checked, as the scheduler does: a pod
// without GPUs fits a node whose GPUs are over-committed.
func fitCount(free, req res) int64 {
	n := int64(math.MaxInt64)
	dim := func(f, r int64) {
		if r <= 0 {
			return
		}
		if f < r {
			n = 0
			return
		}
		n = min(n, f/r)
	}
	dim(free.pods, req.pods)
	dim(free.cpu, req.cpu)
	dim(free.mem, req.mem)
	dim(free.gpu, req.gpu)
	return n
}

// resourceList converts the four resources the planner tracks.
func resourceList(l corev1.ResourceList) res {
	var r res
	if len(l) == 0 {
		return r
	}
	if q, ok := l[corev1.ResourceCPU]; ok {
		r.cpu = q.MilliValue()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		r.mem = q.Value()
	}
	if q, ok := l[podfacts.ResourceGPU]; ok {
		r.gpu = q.Value()
	}
	if q, ok := l[corev1.ResourcePods]; ok {
		r.pods = q.Value()
	}
	return r
}

// templateAllocatable is a template's capacity; see defaultTemplatePods.
func templateAllocatable(l corev1.ResourceList) res {
	r := resourceList(l)
	if _, ok := l[corev1.ResourcePods]; !ok {
		r.pods = defaultTemplatePods
	}
	return r
}

// podRequests is the pod's effective request as the scheduler computes it
// (component-helpers' PodRequests): the sum of the app containers and
// restartable init containers (sidecars), at least the largest regular init
// container plus the sidecars started before it, pod-level cpu/memory requests
// when set, plus the runtime overhead; and one pod slot. It works on int64
// directly because it runs for every pod of the cluster on each decision.
func podRequests(p *corev1.Pod) res {
	var sum, sidecars, initMax res
	for i := range p.Spec.Containers {
		sum = sum.add(resourceList(p.Spec.Containers[i].Resources.Requests))
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		r := resourceList(c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum = sum.add(r)
			sidecars = sidecars.add(r)
			r = sidecars
		} else {
			r = r.add(sidecars)
		}
		initMax = initMax.max(r)
	}
	sum = sum.max(initMax)
	if p.Spec.Resources != nil {
		if q, ok := p.Spec.Resources.Requests[corev1.ResourceCPU]; ok {
			sum.cpu = q.MilliValue()
		}
		if q, ok := p.Spec.Resources.Requests[corev1.ResourceMemory]; ok {
			sum.mem = q.Value()
		}
	}
	if len(p.Spec.Overhead) > 0 {
		o := resourceList(p.Spec.Overhead)
		o.pods = 0
		sum = sum.add(o)
	}
	sum.pods = 1
	return sum
}

// formatCPU prints milli-CPU the way a manifest would ("4", "500m").
func formatCPU(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatInt(m, 10) + "m"
}

// formatMem prints bytes in the largest exact binary unit ("16Gi", "100").
func formatMem(b int64) string {
	return resource.NewQuantity(b, resource.BinarySI).String()
}

// formatDim prints one dimension of a res in its natural unit.
func formatDim(name string, v int64) string {
	switch name {
	case "cpu":
		return formatCPU(v)
	case "memory":
		return formatMem(v)
	default:
		return strconv.FormatInt(v, 10)
	}
}
