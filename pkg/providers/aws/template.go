package aws

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// defaultMaxPods is the kubelet's default, used when an instance type's ENI
// limits are unknown.
const defaultMaxPods = 110

// Template implements providers.NodeGroup. The first source that can say
// what a new machine offers wins:
//
//  1. CA's node-template tags on the ASG, when they give both cpu and memory
//     (…/node-template/resources/<name>: cpu, memory, ephemeral-storage,
//     nvidia.com/gpu, pods, any extended resource). No other call is made;
//     kubernetes.io/arch is then amd64 unless a label tag says otherwise.
//  2. The instance type, from the mixed instances policy's first override
//     that names a type, else the smallest type meeting its instance
//     requirements (ec2:GetInstanceTypesFromInstanceRequirements), else the
//     launch template version the ASG uses
//     (ec2:DescribeLaunchTemplateVersions), else its launch configuration
//     (autoscaling:DescribeLaunchConfigurations); its vCPUs, memory and GPUs
//     (ec2:DescribeInstanceTypes) less the system reserve (Options.
//     SystemReserved, else EKSReserved), and max pods from its ENI limits
//     (MaxPods) or 110. Resource tags present override single resources.
//  3. Options.NodeTemplate, a template read off a registered Node.
//
// Label tags (…/node-template/label/<key>) and taint tags
// (…/node-template/taint/<key> = value:Effect) apply on top of 1 and 2,
// after the generic labels kubernetes.io/arch, kubernetes.io/os (linux),
// node.kubernetes.io/instance-type, topology.kubernetes.io/region and — only
// for an ASG in a single zone, since AWS picks the zone of a new machine —
// topology.kubernetes.io/zone. A malformed tag is skipped with a warning, as
// cluster-autoscaler does. For an ASG behind an EKS managed node group
// (tagged eks:nodegroup-name) the node group's labels and taints come first
// (Options.EKS), under the tags.
func (g *Group) Template(ctx context.Context) (snapshot.Template, error) {
	g.mu.Lock()
	cached := g.tpl
	g.mu.Unlock()
	if cached != nil {
		return copyTemplate(*cached), nil
	}
	t, err := g.buildTemplate(ctx)
	if err != nil {
		return snapshot.Template{}, err
	}
	g.mu.Lock()
	g.tpl = &t
	g.mu.Unlock()
	return copyTemplate(t), nil
}

func copyTemplate(t snapshot.Template) snapshot.Template {
	return snapshot.Template{
		Allocatable: t.Allocatable.DeepCopy(),
		Labels:      maps.Clone(t.Labels),
		Taints:      slices.Clone(t.Taints),
	}
}

// templateTags are the node-template tags of an ASG.
type templateTags struct {
	labels    map[string]string
	taints    []corev1.Taint
	resources corev1.ResourceList
}

// parseTemplateTags reads the node-template tags. A malformed one (a taint
// with no valid effect, a resource that is not a quantity, a label that is
// not a valid label) is skipped and reported in skipped, as
// cluster-autoscaler skips it with a warning: one bad tag should not leave
// the group with no template at all.
func parseTemplateTags(tags []astypes.TagDescription) (out templateTags, skipped []error) {
	out = templateTags{labels: map[string]string{}, resources: corev1.ResourceList{}}
	// Sorted, so taints come out in a stable order.
	sorted := slices.Clone(tags)
	slices.SortFunc(sorted, func(a, b astypes.TagDescription) int {
		return strings.Compare(awssdk.ToString(a.Key), awssdk.ToString(b.Key))
	})
	for _, t := range sorted {
		key, value := awssdk.ToString(t.Key), awssdk.ToString(t.Value)
		rest, ok := strings.CutPrefix(key, TagTemplatePrefix)
		if !ok {
			continue
		}
		kind, name, _ := strings.Cut(rest, "/")
		if name == "" {
			continue
		}
		switch kind {
		case "label":
			if errs := validation.IsQualifiedName(name); len(errs) > 0 {
				skipped = append(skipped, fmt.Errorf("tag %s: %q is not a label key: %s", key, name, strings.Join(errs, "; ")))
				continue
			}
			if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
				skipped = append(skipped, fmt.Errorf("tag %s: %q is not a label value: %s", key, value, strings.Join(errs, "; ")))
				continue
			}
			out.labels[name] = value
		case "taint":
			taint, err := parseTaint(name, value)
			if err != nil {
				skipped = append(skipped, fmt.Errorf("tag %s: %w", key, err))
				continue
			}
			out.taints = append(out.taints, taint)
		case "resources":
			q, err := resource.ParseQuantity(value)
			if err != nil {
				skipped = append(skipped, fmt.Errorf("tag %s: %q is not a quantity: %w", key, value, err))
				continue
			}
			out.resources[corev1.ResourceName(name)] = q
		}
	}
	return out, skipped
}

// parseTaint reads CA's "value:Effect" (or a bare effect, for a taint with
// no value).
func parseTaint(key, v string) (corev1.Taint, error) {
	value, effect := "", v
	if i := strings.LastIndex(v, ":"); i >= 0 {
		value, effect = v[:i], v[i+1:]
	}
	switch e := corev1.TaintEffect(effect); e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return corev1.Taint{Key: key, Value: value, Effect: e}, nil
	}
	return corev1.Taint{}, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute (want value:Effect)", v, effect)
}

func (g *Group) buildTemplate(ctx context.Context) (snapshot.Template, error) {
	asg := g.snapshot()
	tags, skipped := parseTemplateTags(asg.Tags)
	for _, err := range skipped {
		g.p.log().WarnContext(ctx, "aws: node-template tag skipped", "group", g.name, "autoScalingGroup", g.asgName, "error", err.Error())
	}
	g.addManagedNodegroup(ctx, asg, &tags)
	labels := map[string]string{corev1.LabelOSStable: "linux"}
	if r := region(asg); r != "" {
		labels[corev1.LabelTopologyRegion] = r
	}
	if len(asg.AvailabilityZones) == 1 {
		labels[corev1.LabelTopologyZone] = asg.AvailabilityZones[0]
	}

	_, hasCPU := tags.resources[corev1.ResourceCPU]
	_, hasMem := tags.resources[corev1.ResourceMemory]
	if hasCPU && hasMem {
		alloc := tags.resources.DeepCopy()
		if _, ok := alloc[corev1.ResourcePods]; !ok {
			alloc[corev1.ResourcePods] = *resource.NewQuantity(defaultMaxPods, resource.DecimalSI)
		}
		labels[corev1.LabelArchStable] = "amd64"
		if t := overrideType(asg); t != "" {
			labels[corev1.LabelInstanceTypeStable] = t
		}
		return finish(alloc, labels, tags), nil
	}

	typ, typeErr := g.instanceType(ctx, asg)
	if typeErr == nil && typ != "" {
		var info ec2types.InstanceTypeInfo
		info, typeErr = g.p.instanceTypeInfo(ctx, typ)
		if typeErr == nil {
			alloc := g.p.allocatable(info)
			for name, q := range tags.resources {
				alloc[name] = q
			}
			labels[corev1.LabelArchStable] = arch(info)
			labels[corev1.LabelInstanceTypeStable] = typ
			return finish(alloc, labels, tags), nil
		}
	}
	if typeErr != nil {
		typeErr = fmt.Errorf("%s: template: %w", g.label(), typeErr)
	}

	if hook := g.p.opts.NodeTemplate; hook != nil {
		t, err := hook(ctx, g.name)
		if err != nil {
			return snapshot.Template{}, errors.Join(typeErr, fmt.Errorf("%s: template from a registered node: %w", g.label(), err))
		}
		if t != nil {
			return copyTemplate(*t), nil
		}
	}
	if typeErr != nil {
		return snapshot.Template{}, typeErr
	}
	return snapshot.Template{}, fmt.Errorf("%s: no template: no node-template resource tags for cpu and memory, no instance type in its launch template, launch configuration or mixed instances policy, and no registered node", g.label())
}

func finish(alloc corev1.ResourceList, labels map[string]string, tags templateTags) snapshot.Template {
	for k, v := range tags.labels {
		labels[k] = v
	}
	return snapshot.Template{Allocatable: alloc, Labels: labels, Taints: slices.Clone(tags.taints)}
}

// region comes from the ASG's ARN; the zone less its letter is a fallback
// that is wrong only for Local Zones.
func region(asg astypes.AutoScalingGroup) string {
	if parts := strings.Split(awssdk.ToString(asg.AutoScalingGroupARN), ":"); len(parts) > 3 && parts[3] != "" {
		return parts[3]
	}
	if len(asg.AvailabilityZones) > 0 && len(asg.AvailabilityZones[0]) > 1 {
		az := asg.AvailabilityZones[0]
		return az[:len(az)-1]
	}
	return ""
}

// overrideType is the first instance type a mixed instances policy names.
func overrideType(asg astypes.AutoScalingGroup) string {
	if mip := asg.MixedInstancesPolicy; mip != nil && mip.LaunchTemplate != nil {
		for _, o := range mip.LaunchTemplate.Overrides {
			if t := awssdk.ToString(o.InstanceType); t != "" {
				return t
			}
		}
	}
	return ""
}

// instanceType finds the type a new machine of the ASG would have: an
// override's type, else the smallest type meeting an override's instance
// requirements (attribute-based selection), else the launch template's or
// launch configuration's; "" when the ASG names none.
func (g *Group) instanceType(ctx context.Context, asg astypes.AutoScalingGroup) (string, error) {
	if t := overrideType(asg); t != "" {
		return t, nil
	}
	if r := requirements(asg); r != nil {
		return g.requirementsType(ctx, asg, r)
	}
	lt := asg.LaunchTemplate
	if lt == nil && asg.MixedInstancesPolicy != nil && asg.MixedInstancesPolicy.LaunchTemplate != nil {
		lt = asg.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification
	}
	if lt != nil {
		return g.launchTemplateType(ctx, lt)
	}
	if lc := awssdk.ToString(asg.LaunchConfigurationName); lc != "" {
		out, err := g.p.as.DescribeLaunchConfigurations(ctx, &autoscaling.DescribeLaunchConfigurationsInput{LaunchConfigurationNames: []string{lc}})
		if err != nil {
			return "", fmt.Errorf("describe launch configuration %s: %w", lc, err)
		}
		for _, c := range out.LaunchConfigurations {
			if awssdk.ToString(c.LaunchConfigurationName) == lc {
				return awssdk.ToString(c.InstanceType), nil
			}
		}
		return "", fmt.Errorf("launch configuration %s not found", lc)
	}
	return "", nil
}

func (g *Group) launchTemplateType(ctx context.Context, lt *astypes.LaunchTemplateSpecification) (string, error) {
	version := awssdk.ToString(lt.Version)
	if version == "" {
		version = "$Default" // what AWS launches when the ASG names no version
	}
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{version}}
	name := awssdk.ToString(lt.LaunchTemplateId)
	if name != "" {
		in.LaunchTemplateId = lt.LaunchTemplateId // the API refuses ID and name together
	} else {
		name = awssdk.ToString(lt.LaunchTemplateName)
		in.LaunchTemplateName = lt.LaunchTemplateName
	}
	out, err := g.p.ec2.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil {
		return "", fmt.Errorf("describe launch template %s version %s: %w", name, version, err)
	}
	for _, v := range out.LaunchTemplateVersions {
		if v.LaunchTemplateData != nil {
			return string(v.LaunchTemplateData.InstanceType), nil
		}
	}
	return "", nil
}

// instanceTypeInfo describes an instance type, once per provider.
func (p *Provider) instanceTypeInfo(ctx context.Context, typ string) (ec2types.InstanceTypeInfo, error) {
	p.typesMu.Lock()
	info, ok := p.types[typ]
	p.typesMu.Unlock()
	if ok {
		return info, nil
	}
	out, err := p.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(typ)}})
	if err != nil {
		return info, fmt.Errorf("describe instance type %s: %w", typ, err)
	}
	for _, it := range out.InstanceTypes {
		if string(it.InstanceType) == typ {
			p.typesMu.Lock()
			p.types[typ] = it
			p.typesMu.Unlock()
			return it, nil
		}
	}
	return info, fmt.Errorf("instance type %s not found", typ)
}

func arch(info ec2types.InstanceTypeInfo) string {
	if info.ProcessorInfo == nil {
		return "amd64"
	}
	archs := info.ProcessorInfo.SupportedArchitectures
	switch {
	case slices.Contains(archs, ec2types.ArchitectureTypeX8664):
		return "amd64"
	case slices.Contains(archs, ec2types.ArchitectureTypeArm64):
		return "arm64"
	case len(archs) > 0:
		return string(archs[0])
	}
	return "amd64"
}

// MaxPods is the EKS VPC CNI's pod limit for an instance type without prefix
// delegation: each ENI but its primary address hosts one pod, plus two
// host-network pods. 0 for unknown limits.
func MaxPods(enis, ipv4PerENI int) int {
	if enis <= 0 || ipv4PerENI <= 1 {
		return 0
	}
	return enis*(ipv4PerENI-1) + 2
}

// EKSReserved is what the EKS-optimized AMI keeps from pods, kube-reserved
// plus the hard eviction threshold:
//
//   - cpu: 6% of the first core, 1% of the second, 0.5% each of the third
//     and fourth, 0.25% of every further core (in millicores, rounded up);
//   - memory: 255Mi + 11Mi per pod slot, plus 100Mi (evictionHard
//     memory.available).
func EKSReserved(vcpus, maxPods int) corev1.ResourceList {
	// In tenths of a millicore, so 0.25% of a core stays exact.
	tenths := 0
	for core := 1; core <= vcpus; core++ {
		switch {
		case core == 1:
			tenths += 600
		case core == 2:
			tenths += 100
		case core <= 4:
			tenths += 50
		default:
			tenths += 25
		}
	}
	cpu := int64((tenths + 9) / 10)
	mem := int64(255+11*maxPods+100) * 1024 * 1024
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
	}
}

// allocatable is an instance type's capacity less the system reserve.
func (p *Provider) allocatable(info ec2types.InstanceTypeInfo) corev1.ResourceList {
	vcpus, memMiB := 0, int64(0)
	if info.VCpuInfo != nil {
		vcpus = int(awssdk.ToInt32(info.VCpuInfo.DefaultVCpus))
	}
	if info.MemoryInfo != nil {
		memMiB = awssdk.ToInt64(info.MemoryInfo.SizeInMiB)
	}
	pods := 0
	if n := info.NetworkInfo; n != nil {
		pods = MaxPods(int(awssdk.ToInt32(n.MaximumNetworkInterfaces)), int(awssdk.ToInt32(n.Ipv4AddressesPerInterface)))
	}
	if pods == 0 {
		pods = defaultMaxPods
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(vcpus)*1000, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memMiB*1024*1024, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	if gpus := nvidiaGPUs(info); gpus > 0 {
		capacity[podfacts.ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	reserve := p.opts.SystemReserved
	if reserve == nil {
		reserve = EKSReserved(vcpus, pods)
	}
	for name, r := range reserve {
		c, ok := capacity[name]
		if !ok {
			continue
		}
		c.Sub(r)
		if c.Sign() < 0 {
			c = *resource.NewQuantity(0, c.Format)
		}
		capacity[name] = c
	}
	return capacity
}

func nvidiaGPUs(info ec2types.InstanceTypeInfo) int64 {
	if info.GpuInfo == nil {
		return 0
	}
	var n int64
	for _, gpu := range info.GpuInfo.Gpus {
		if strings.EqualFold(awssdk.ToString(gpu.Manufacturer), "NVIDIA") {
			n += int64(awssdk.ToInt32(gpu.Count))
		}
	}
	return n
}

// requirements is the first instance requirements (attribute-based instance
// selection) a mixed instances policy holds.
func requirements(asg astypes.AutoScalingGroup) *astypes.InstanceRequirements {
	if mip := asg.MixedInstancesPolicy; mip != nil && mip.LaunchTemplate != nil {
		for _, o := range mip.LaunchTemplate.Overrides {
			if o.InstanceRequirements != nil {
				return o.InstanceRequirements
			}
		}
	}
	return nil
}

// maxRequirementPages bounds the pages of matching types read.
const maxRequirementPages = 10

// requirementsType is the smallest instance type (GPUs, vCPUs, memory) that
// meets an attribute-based selection: a template from it never promises
// more than the machine AWS picks. The architecture is x86_64 unless a
// kubernetes.io/arch label tag says arm64 (the AMI's is not looked up).
func (g *Group) requirementsType(ctx context.Context, asg astypes.AutoScalingGroup, r *astypes.InstanceRequirements) (string, error) {
	// Auto Scaling's and EC2's instance requirements are the same shape
	// under the same names; the JSON round trip carries every field both
	// know.
	var req ec2types.InstanceRequirementsRequest
	raw, err := json.Marshal(r)
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err != nil {
		return "", fmt.Errorf("instance requirements: %w", err)
	}
	arch := ec2types.ArchitectureTypeX8664
	if tags, _ := parseTemplateTags(asg.Tags); tags.labels[corev1.LabelArchStable] == "arm64" {
		arch = ec2types.ArchitectureTypeArm64
	}
	in := &ec2.GetInstanceTypesFromInstanceRequirementsInput{
		ArchitectureTypes:    []ec2types.ArchitectureType{arch},
		VirtualizationTypes:  []ec2types.VirtualizationType{ec2types.VirtualizationTypeHvm},
		InstanceRequirements: &req,
	}
	var names []string
	for range maxRequirementPages {
		out, err := g.p.ec2.GetInstanceTypesFromInstanceRequirements(ctx, in)
		if err != nil {
			return "", fmt.Errorf("instance types meeting the instance requirements: %w", err)
		}
		for _, t := range out.InstanceTypes {
			if n := awssdk.ToString(t.InstanceType); n != "" {
				names = append(names, n)
			}
		}
		if awssdk.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no %s instance type meets the instance requirements of the mixed instances policy", arch)
	}
	infos, err := g.p.instanceTypeInfos(ctx, names)
	if err != nil {
		return "", err
	}
	best := slices.MinFunc(infos, func(a, b ec2types.InstanceTypeInfo) int {
		if c := cmp.Compare(nvidiaGPUs(a), nvidiaGPUs(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(vcpus(a), vcpus(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(memMiB(a), memMiB(b)); c != 0 {
			return c
		}
		return strings.Compare(string(a.InstanceType), string(b.InstanceType))
	})
	return string(best.InstanceType), nil
}

func vcpus(info ec2types.InstanceTypeInfo) int64 {
	if info.VCpuInfo == nil {
		return 0
	}
	return int64(awssdk.ToInt32(info.VCpuInfo.DefaultVCpus))
}

func memMiB(info ec2types.InstanceTypeInfo) int64 {
	if info.MemoryInfo == nil {
		return 0
	}
	return awssdk.ToInt64(info.MemoryInfo.SizeInMiB)
}

// instanceTypeInfos describes several instance types (100 a call, the
// API's limit), reusing and filling the provider's cache.
func (p *Provider) instanceTypeInfos(ctx context.Context, names []string) ([]ec2types.InstanceTypeInfo, error) {
	var out []ec2types.InstanceTypeInfo
	var need []ec2types.InstanceType
	p.typesMu.Lock()
	for _, n := range names {
		if info, ok := p.types[n]; ok {
			out = append(out, info)
		} else {
			need = append(need, ec2types.InstanceType(n))
		}
	}
	p.typesMu.Unlock()
	for chunk := range slices.Chunk(need, 100) {
		in := &ec2.DescribeInstanceTypesInput{InstanceTypes: chunk}
		for {
			res, err := p.ec2.DescribeInstanceTypes(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("describe instance types: %w", err)
			}
			p.typesMu.Lock()
			for _, it := range res.InstanceTypes {
				p.types[string(it.InstanceType)] = it
				out = append(out, it)
			}
			p.typesMu.Unlock()
			if awssdk.ToString(res.NextToken) == "" {
				break
			}
			in.NextToken = res.NextToken
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("instance types %v not found", names)
	}
	return out, nil
}

// ASG tags EKS sets on the group behind a managed node group.
const (
	TagEKSNodegroup = "eks:nodegroup-name"
	TagEKSCluster   = "eks:cluster-name"
)

// addManagedNodegroup adds the labels and taints of the EKS managed node
// group behind the ASG (eks:DescribeNodegroup), and the labels EKS puts on
// its nodes (eks.amazonaws.com/nodegroup, eks.amazonaws.com/capacityType),
// under the ASG's own node-template tags, which win on the same key. A
// failed call is a warning: the template is still built from the rest, as
// cluster-autoscaler builds it.
func (g *Group) addManagedNodegroup(ctx context.Context, asg astypes.AutoScalingGroup, tags *templateTags) {
	name, cluster := tagValue(asg, TagEKSNodegroup), tagValue(asg, TagEKSCluster)
	if name == "" || g.p.opts.EKS == nil {
		return
	}
	if cluster == "" {
		cluster = g.p.opts.ClusterName
	}
	out, err := g.p.opts.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: awssdk.String(cluster), NodegroupName: awssdk.String(name)})
	if err != nil || out.Nodegroup == nil {
		if err == nil {
			err = errors.New("no node group in the answer")
		}
		g.p.log().WarnContext(ctx, "aws: managed node group labels and taints not read; the template has the ASG's tags only",
			"group", g.name, "cluster", cluster, "nodegroup", name, "error", err.Error())
		return
	}
	ng := out.Nodegroup
	add := func(k, v string) {
		if _, set := tags.labels[k]; !set {
			tags.labels[k] = v
		}
	}
	for k, v := range ng.Labels {
		add(k, v)
	}
	add("eks.amazonaws.com/nodegroup", name)
	if ng.CapacityType != "" {
		add("eks.amazonaws.com/capacityType", string(ng.CapacityType))
	}
	have := map[string]bool{}
	for _, t := range tags.taints {
		have[t.Key] = true
	}
	var extra []corev1.Taint
	for _, t := range ng.Taints {
		key := awssdk.ToString(t.Key)
		effect, ok := eksTaintEffects[t.Effect]
		if !ok || key == "" {
			g.p.log().WarnContext(ctx, "aws: managed node group taint skipped", "group", g.name, "nodegroup", name, "key", key, "effect", string(t.Effect))
			continue
		}
		if have[key] {
			continue
		}
		extra = append(extra, corev1.Taint{Key: key, Value: awssdk.ToString(t.Value), Effect: effect})
	}
	slices.SortFunc(extra, func(a, b corev1.Taint) int { return strings.Compare(a.Key, b.Key) })
	tags.taints = append(tags.taints, extra...)
}

var eksTaintEffects = map[ekstypes.TaintEffect]corev1.TaintEffect{
	ekstypes.TaintEffectNoSchedule:       corev1.TaintEffectNoSchedule,
	ekstypes.TaintEffectPreferNoSchedule: corev1.TaintEffectPreferNoSchedule,
	ekstypes.TaintEffectNoExecute:        corev1.TaintEffectNoExecute,
}

func tagValue(asg astypes.AutoScalingGroup, key string) string {
	for _, t := range asg.Tags {
		if awssdk.ToString(t.Key) == key {
			return awssdk.ToString(t.Value)
		}
	}
	return ""
}
