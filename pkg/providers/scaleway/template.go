package scaleway

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/scaleway/scaleway-sdk-go/api/instance/v1"
	k8s "github.com/scaleway/scaleway-sdk-go/api/k8s/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Labels Kapsule and the Scaleway cloud controller put on nodes.
const (
	LabelPoolName = "k8s.scaleway.com/pool-name"
	// tagPrefix is the prefix the cloud controller gives labels and taints
	// made from Instance tags (a pool's tags are copied to its Instances).
	tagPrefix = "k8s.scaleway.com/"
	// excludeLBTag becomes this label with excludeLBValue.
	excludeLBTag   = "node.kubernetes.io/exclude-from-external-load-balancers"
	excludeLBValue = "managed-by-scaleway-ccm"
)

// defaultMaxPods is the kubelet's default, which Kapsule keeps unless the
// pool's kubelet_args set maxPods.
const defaultMaxPods = 110

// typeTemplate describes a node of the pool from its node type's specs in the
// Instance catalogue of the pool's zone, minus systemReserve.
func (p *Provider) typeTemplate(ctx context.Context, pool *k8s.Pool) (snapshot.Template, error) {
	zone := pool.Zone
	if zone == "" {
		zone = scw.Zone(p.region.String() + "-1")
	}
	catalog, err := p.serverTypes(ctx, zone)
	if err != nil {
		return snapshot.Template{}, fmt.Errorf("scaleway pool %s: template: %w", pool.Name, err)
	}
	nt, ok := catalog[normaliseType(pool.NodeType)]
	if !ok {
		return snapshot.Template{}, fmt.Errorf("scaleway pool %s: template: node type %q is not in zone %s's Instance catalogue", pool.Name, pool.NodeType, zone)
	}
	cpu, mem := systemReserve(int64(nt.spec.Ncpus)*1000, int64(nt.spec.RAM))
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(maxPods(pool.KubeletArgs), resource.DecimalSI),
	}
	if nt.spec.Gpu != nil && *nt.spec.Gpu > 0 {
		alloc[podfacts.ResourceGPU] = *resource.NewQuantity(int64(*nt.spec.Gpu), resource.DecimalSI)
	}
	labels, taints := tagLabelsAndTaints(pool.Tags)
	for k, v := range pool.Labels {
		labels[k] = v
	}
	// Startup taints are left out: they are lifted once the node is up, and
	// the template describes a node pods can land on.
	for _, t := range pool.Taints {
		if t != nil {
			taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
		}
	}
	// What Kapsule and Kubernetes set themselves wins over tags.
	labels[LabelPoolName] = pool.Name
	labels[corev1.LabelInstanceTypeStable] = nt.name
	labels[corev1.LabelTopologyZone] = zone.String()
	labels[corev1.LabelTopologyRegion] = p.region.String()
	labels[corev1.LabelOSStable] = "linux"
	if arch := kubeArch(nt.spec.Arch); arch != "" {
		labels[corev1.LabelArchStable] = arch
	}
	return snapshot.Template{Allocatable: alloc, Labels: labels, Taints: taints}, nil
}

// normaliseType lets a pool's node type ("gp1_xs", "GP1-XS") match the
// catalogue's name ("GP1-XS"): Kapsule reports types in lower case with
// underscores.
func normaliseType(s string) string {
	return strings.ReplaceAll(strings.ToUpper(strings.TrimSpace(s)), "_", "-")
}

func kubeArch(a instance.Arch) string {
	switch a {
	case instance.ArchX86_64:
		return "amd64"
	case instance.ArchArm64, instance.ArchArm:
		return "arm64"
	}
	return ""
}

func maxPods(kubeletArgs map[string]string) int64 {
	if n, err := strconv.ParseInt(strings.TrimSpace(kubeletArgs["maxPods"]), 10, 64); err == nil && n > 0 {
		return n
	}
	return defaultMaxPods
}

// systemReserve returns what is left for pods of a node with cpuMilli and
// memBytes. Kapsule does not publish its kubelet reservations, so this uses
// the widely used tiered formula (as GKE documents it), which errs on the
// side of less room:
//
//	cpu:    6% of the first core, 1% of the second, 0.5% of cores 3-4,
//	        0.25% of every core above 4
//	memory: 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8,
//	        6% of the next 112, 2% above 128 GiB, plus 100 MiB for the
//	        kubelet's eviction threshold
//
// A registered node of the pool (Options.NodeTemplate) gives exact numbers.
func systemReserve(cpuMilli, memBytes int64) (int64, int64) {
	const (
		gib    = int64(1) << 30
		maxInt = int64(^uint64(0) >> 1)
	)
	cpuRes := tiered(cpuMilli, []tier{{1000, 600}, {2000, 100}, {4000, 50}, {maxInt, 25}})
	memRes := tiered(memBytes, []tier{{4 * gib, 2500}, {8 * gib, 2000}, {16 * gib, 1000}, {128 * gib, 600}, {maxInt, 200}}) + 100<<20
	return max(cpuMilli-cpuRes, 0), max(memBytes-memRes, 0)
}

// tier reserves basisPoints (1/10000) of the amount between the previous
// tier's upTo and this one's.
type tier struct{ upTo, basisPoints int64 }

func tiered(total int64, tiers []tier) int64 {
	var reserved, from int64
	for _, t := range tiers {
		if total <= from {
			break
		}
		// Divide first where the amount is large, so bytes can't overflow.
		span := min(total, t.upTo) - from
		reserved += span/10000*t.basisPoints + span%10000*t.basisPoints/10000
		from = t.upTo
	}
	return reserved
}

// tagLabelsAndTaints reads a pool's tags the way the Scaleway cloud
// controller turns an Instance's tags into node labels and taints (Kapsule
// copies a pool's tags to its Instances):
//
//	key=value                      -> label k8s.scaleway.com/key=value
//	key                            -> label k8s.scaleway.com/key=""
//	noprefix=key=value             -> label key=value (key may carry its own prefix/)
//	taint=key=value:Effect         -> taint k8s.scaleway.com/key=value:Effect
//	taint=noprefix=key=value:Effect -> taint key=value:Effect
//	node.kubernetes.io/exclude-from-external-load-balancers
//	                               -> that label, value managed-by-scaleway-ccm
//
// Keys and values are split at the first of '=', ':' or ' '. Tags that would
// not be valid labels are skipped, as the controller skips them.
func tagLabelsAndTaints(tags []string) (map[string]string, []corev1.Taint) {
	labels := map[string]string{}
	var taints []corev1.Taint
	for _, tag := range tags {
		if tag == excludeLBTag {
			labels[excludeLBTag] = excludeLBValue
			continue
		}
		if rest, ok := strings.CutPrefix(tag, "taint="); ok {
			i := strings.LastIndex(rest, ":")
			if i < 0 {
				continue
			}
			effect := corev1.TaintEffect(rest[i+1:])
			switch effect {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			default:
				continue
			}
			if key, value, ok := tagKeyValue(rest[:i]); ok {
				taints = append(taints, corev1.Taint{Key: key, Value: value, Effect: effect})
			}
			continue
		}
		if key, value, ok := tagKeyValue(tag); ok {
			labels[key] = value
		}
	}
	return labels, taints
}

// tagKeyValue splits "key=value" (or "noprefix=key=value") into a valid label
// key, with the k8s.scaleway.com/ prefix unless noprefix, and value.
func tagKeyValue(s string) (key, value string, ok bool) {
	prefix := tagPrefix
	if rest, noprefix := strings.CutPrefix(s, "noprefix="); noprefix {
		prefix, s = "", rest
	}
	key, value = s, ""
	if i := strings.IndexAny(s, "=: "); i >= 0 {
		key, value = s[:i], strings.TrimLeft(s[i+1:], "=: ")
		if j := strings.IndexAny(value, "=: "); j >= 0 {
			value = value[:j]
		}
	}
	key = prefix + key
	if len(validation.IsQualifiedName(key)) > 0 || len(validation.IsValidLabelValue(value)) > 0 {
		return "", "", false
	}
	return key, value, true
}
