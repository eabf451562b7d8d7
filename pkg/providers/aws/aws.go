// Package aws is the node-group provider for EC2 Auto Scaling Groups, close
// to cluster-autoscaler's aws cloud provider: a group is one ASG, found by
// name or by CA's auto-discovery tags; its size is the ASG's desired
// capacity; nodes belong to it through provider IDs aws:///<az>/<instance-id>.
//
// Reads: NodeGroups describes the ASGs once; TargetSize and Instances answer
// from that description (updated by the group's own changes), so a decision
// works from one consistent view. Changes (IncreaseSize, DeleteInstance,
// DecreaseTargetSize) describe the ASG again under a per-ASG lock first, so
// they check limits against the current desired capacity.
//
// IAM actions it needs:
//
//	autoscaling:DescribeAutoScalingGroups
//	autoscaling:DescribeScalingActivities
//	autoscaling:DescribeLaunchConfigurations   (ASGs using launch configurations)
//	autoscaling:SetDesiredCapacity
//	autoscaling:TerminateInstanceInAutoScalingGroup
//	ec2:DescribeInstanceTypes
//	ec2:DescribeLaunchTemplateVersions          (ASGs using launch templates)
//	pricing:GetProducts                         (prices: Group.Price)
//	ec2:DescribeSpotPriceHistory                (Spot prices of mixed instances policies)
//
// As for CA, the two mutating actions can be limited to the cluster's groups
// with a condition on the ASG's resource tags
// (aws:ResourceTag/k8s.io/cluster-autoscaler/<cluster>); the Describe*
// actions and pricing:GetProducts do not support resource-level
// conditions.
package aws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// ProviderName is what Group.Provider reports.
const ProviderName = "aws"

// cluster-autoscaler's tag conventions.
const (
	TagEnabled        = "k8s.io/cluster-autoscaler/enabled"
	TagClusterPrefix  = "k8s.io/cluster-autoscaler/"
	TagTemplatePrefix = "k8s.io/cluster-autoscaler/node-template/"
)

// AutoScalingAPI is the part of the Auto Scaling client the provider calls;
// *autoscaling.Client satisfies it.
type AutoScalingAPI interface {
	DescribeAutoScalingGroups(ctx context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
	DescribeScalingActivities(ctx context.Context, in *autoscaling.DescribeScalingActivitiesInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeScalingActivitiesOutput, error)
	DescribeLaunchConfigurations(ctx context.Context, in *autoscaling.DescribeLaunchConfigurationsInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeLaunchConfigurationsOutput, error)
	SetDesiredCapacity(ctx context.Context, in *autoscaling.SetDesiredCapacityInput, optFns ...func(*autoscaling.Options)) (*autoscaling.SetDesiredCapacityOutput, error)
	TerminateInstanceInAutoScalingGroup(ctx context.Context, in *autoscaling.TerminateInstanceInAutoScalingGroupInput, optFns ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error)
}

// EC2API is the part of the EC2 client the provider calls; *ec2.Client
// satisfies it.
type EC2API interface {
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeLaunchTemplateVersions(ctx context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error)
	GetInstanceTypesFromInstanceRequirements(ctx context.Context, in *ec2.GetInstanceTypesFromInstanceRequirementsInput, optFns ...func(*ec2.Options)) (*ec2.GetInstanceTypesFromInstanceRequirementsOutput, error)
}

// Options say which ASGs one config entry manages and how.
type Options struct {
	// ClusterName is the Kubernetes cluster's name; with neither
	// AutoScalingGroup nor AutoDiscovery set, the groups are discovered by
	// CA's default tags for it.
	ClusterName string
	// AutoScalingGroup is one ASG by its exact name.
	AutoScalingGroup string
	// DisplayName names that group in nodetide (default: the ASG name).
	DisplayName string
	// AutoDiscovery are tags every discovered ASG must carry: "key" (any
	// value) or "key=value", e.g. k8s.io/cluster-autoscaler/enabled and
	// k8s.io/cluster-autoscaler/<cluster>. CA's own flag form
	// "asg:tag=k1,k2=v" is accepted too.
	AutoDiscovery []string
	// MinSize and MaxSize narrow the ASG's own bounds; asking to widen them
	// is an error (change the ASG instead).
	MinSize, MaxSize *int
	// SystemReserved is taken off an instance type's capacity in templates;
	// nil means the EKS AMI's formula (see EKSReserved).
	SystemReserved corev1.ResourceList
	// NodeTemplate, when set, is the last resort for a template: it returns
	// one built from a registered Node of the group, or nil when there is none.
	NodeTemplate func(ctx context.Context, group string) (*snapshot.Template, error)
	// Logger gets the warnings (a node-template tag skipped); nil is
	// slog.Default().
	Logger *slog.Logger
	// EKS, when set, is asked (eks:DescribeNodegroup) for the labels and
	// taints of the managed node group behind an ASG tagged
	// eks:nodegroup-name; nil leaves managed node groups to their ASG tags.
	EKS EKSAPI
	// Pricing (NewPricingClient) and SpotPrices (the EC2 client) are what
	// Group.Price reads on-demand and Spot prices with; without them a
	// group has no price, and an error says so.
	Pricing    PricingAPI
	SpotPrices SpotPriceAPI
}

// EKSAPI is the EKS call the provider makes (the *eks.Client has it).
type EKSAPI interface {
	DescribeNodegroup(ctx context.Context, in *eks.DescribeNodegroupInput, optFns ...func(*eks.Options)) (*eks.DescribeNodegroupOutput, error)
}

func (p *Provider) log() *slog.Logger {
	if p.opts.Logger != nil {
		return p.opts.Logger
	}
	return slog.Default()
}

// Provider lists the ASGs of one config entry.
type Provider struct {
	as   AutoScalingAPI
	ec2  EC2API
	opts Options
	tags []tagSpec

	// locks serialise read-modify-write changes to one ASG made through this
	// process; the evaluate lease keeps processes apart.
	locks sync.Map // ASG name → *sync.Mutex

	typesMu sync.Mutex
	types   map[string]ec2types.InstanceTypeInfo // instance types never change
}

var _ providers.Provider = (*Provider)(nil)

type tagSpec struct {
	key, value string
	hasValue   bool
}

// New checks opts and returns a provider; it makes no API call.
func New(as AutoScalingAPI, ec2c EC2API, opts Options) (*Provider, error) {
	if as == nil || ec2c == nil {
		return nil, errors.New("aws provider: the Auto Scaling and EC2 clients are required")
	}
	p := &Provider{as: as, ec2: ec2c, opts: opts, types: map[string]ec2types.InstanceTypeInfo{}}
	switch {
	case opts.AutoScalingGroup != "" && len(opts.AutoDiscovery) > 0:
		return nil, errors.New("aws provider: set either an Auto Scaling Group name or auto-discovery tags, not both")
	case opts.AutoScalingGroup == "" && opts.DisplayName != "":
		return nil, errors.New("aws provider: a display name needs an Auto Scaling Group name (discovered groups are named after their ASG)")
	case opts.AutoScalingGroup == "" && len(opts.AutoDiscovery) == 0:
		if opts.ClusterName == "" {
			return nil, errors.New("aws provider: set an Auto Scaling Group name, auto-discovery tags or the cluster name")
		}
		p.tags = []tagSpec{{key: TagEnabled}, {key: TagClusterPrefix + opts.ClusterName}}
	case len(opts.AutoDiscovery) > 0:
		tags, err := parseDiscovery(opts.AutoDiscovery)
		if err != nil {
			return nil, err
		}
		p.tags = tags
	}
	if opts.MinSize != nil && *opts.MinSize < 0 {
		return nil, fmt.Errorf("aws provider: minSize %d is negative", *opts.MinSize)
	}
	if opts.MinSize != nil && opts.MaxSize != nil && *opts.MinSize > *opts.MaxSize {
		return nil, fmt.Errorf("aws provider: minSize %d is above maxSize %d", *opts.MinSize, *opts.MaxSize)
	}
	return p, nil
}

func parseDiscovery(entries []string) ([]tagSpec, error) {
	var raw []string
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e, "asg:tag="); ok {
			raw = append(raw, strings.Split(rest, ",")...)
			continue
		}
		raw = append(raw, e)
	}
	var out []tagSpec
	for _, r := range raw {
		r = strings.TrimSpace(r)
		k, v, hasValue := strings.Cut(r, "=")
		if k == "" {
			return nil, fmt.Errorf("aws provider: auto-discovery tag %q has no key", r)
		}
		out = append(out, tagSpec{key: k, value: v, hasValue: hasValue})
	}
	return out, nil
}

// NewClients returns Auto Scaling and EC2 clients for cfg whose standard
// retryer retries throttling (Throttling, RequestLimitExceeded, …) and 5xx
// responses with exponential backoff and jitter: up to 5 attempts, at most 10
// s apart, so a throttled call still fits in one evaluate run. retryOpts
// adjust it further (tests shorten the backoff).
func NewClients(cfg awssdk.Config, retryOpts ...func(*retry.StandardOptions)) (*autoscaling.Client, *ec2.Client) {
	cfg = retrying(cfg, retryOpts)
	return autoscaling.NewFromConfig(cfg), ec2.NewFromConfig(cfg)
}

// NewEKSClient returns an EKS client (for Options.EKS) retrying as
// NewClients' do.
func NewEKSClient(cfg awssdk.Config, retryOpts ...func(*retry.StandardOptions)) *eks.Client {
	return eks.NewFromConfig(retrying(cfg, retryOpts))
}

func retrying(cfg awssdk.Config, retryOpts []func(*retry.StandardOptions)) awssdk.Config {
	cfg = cfg.Copy()
	cfg.Retryer = func() awssdk.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 5
			o.MaxBackoff = 10 * time.Second
			for _, fn := range retryOpts {
				fn(o)
			}
		})
	}
	return cfg
}

func (p *Provider) lock(asg string) *sync.Mutex {
	m, _ := p.locks.LoadOrStore(asg, &sync.Mutex{})
	return m.(*sync.Mutex)
}

// NodeGroups implements providers.Provider: one group per ASG found.
func (p *Provider) NodeGroups(ctx context.Context) ([]providers.NodeGroup, error) {
	asgs, err := p.describe(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]providers.NodeGroup, 0, len(asgs))
	for _, asg := range asgs {
		g, err := p.newGroup(asg)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// describe returns the ASGs this entry manages, sorted by name.
func (p *Provider) describe(ctx context.Context) ([]astypes.AutoScalingGroup, error) {
	if p.opts.AutoScalingGroup != "" {
		asg, err := p.describeOne(ctx, p.opts.AutoScalingGroup)
		if err != nil {
			return nil, err
		}
		return []astypes.AutoScalingGroup{asg}, nil
	}
	in := &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: awssdk.Int32(100)}
	for _, t := range p.tags {
		// tag:<key>=<value> ties the value to its key; tag-key + tag-value
		// (CA's filters) would also match a group carrying the value on
		// another tag.
		if t.hasValue {
			in.Filters = append(in.Filters, astypes.Filter{Name: awssdk.String("tag:" + t.key), Values: []string{t.value}})
		} else {
			in.Filters = append(in.Filters, astypes.Filter{Name: awssdk.String("tag-key"), Values: []string{t.key}})
		}
	}
	var out []astypes.AutoScalingGroup
	pages := autoscaling.NewDescribeAutoScalingGroupsPaginator(p.as, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("aws provider: discover Auto Scaling Groups by tags %s: %w", p.tagList(), err)
		}
		for _, asg := range page.AutoScalingGroups {
			// The filters already did this; checking again keeps a lax
			// endpoint from handing us someone else's group.
			if !p.matches(asg) || deleting(asg) {
				continue
			}
			out = append(out, asg)
		}
	}
	slices.SortFunc(out, func(a, b astypes.AutoScalingGroup) int {
		return strings.Compare(awssdk.ToString(a.AutoScalingGroupName), awssdk.ToString(b.AutoScalingGroupName))
	})
	return out, nil
}

func (p *Provider) tagList() string {
	parts := make([]string, 0, len(p.tags))
	for _, t := range p.tags {
		if t.hasValue {
			parts = append(parts, t.key+"="+t.value)
		} else {
			parts = append(parts, t.key)
		}
	}
	return strings.Join(parts, ", ")
}

func (p *Provider) matches(asg astypes.AutoScalingGroup) bool {
	for _, want := range p.tags {
		found := false
		for _, t := range asg.Tags {
			if awssdk.ToString(t.Key) == want.key && (!want.hasValue || awssdk.ToString(t.Value) == want.value) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// deleting is an ASG AWS is deleting: CA skips those too.
func deleting(asg astypes.AutoScalingGroup) bool {
	return asg.Status != nil && strings.Contains(strings.ToLower(*asg.Status), "delete")
}

// describeOne reads one ASG by name.
func (p *Provider) describeOne(ctx context.Context, name string) (astypes.AutoScalingGroup, error) {
	out, err := p.as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		return astypes.AutoScalingGroup{}, fmt.Errorf("aws provider: describe Auto Scaling Group %s: %w", name, err)
	}
	for _, asg := range out.AutoScalingGroups {
		if awssdk.ToString(asg.AutoScalingGroupName) == name {
			return asg, nil
		}
	}
	return astypes.AutoScalingGroup{}, fmt.Errorf("aws provider: Auto Scaling Group %s not found", name)
}

// bounds narrows the ASG's min/max by the config, refusing to widen them.
func (p *Provider) bounds(asg astypes.AutoScalingGroup) (int, int, error) {
	name := awssdk.ToString(asg.AutoScalingGroupName)
	lo, hi := int(awssdk.ToInt32(asg.MinSize)), int(awssdk.ToInt32(asg.MaxSize))
	if m := p.opts.MinSize; m != nil {
		if *m < lo {
			return 0, 0, fmt.Errorf("aws group %s: config minSize %d is below the Auto Scaling Group's MinSize %d; nodetide can only narrow an ASG's bounds, so raise minSize to at least %d or lower the ASG's MinSize", name, *m, lo, lo)
		}
		lo = *m
	}
	if m := p.opts.MaxSize; m != nil {
		if *m > hi {
			return 0, 0, fmt.Errorf("aws group %s: config maxSize %d is above the Auto Scaling Group's MaxSize %d; nodetide can only narrow an ASG's bounds, so lower maxSize to at most %d or raise the ASG's MaxSize", name, *m, hi, hi)
		}
		hi = *m
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("aws group %s: narrowed bounds are empty: minSize %d is above maxSize %d", name, lo, hi)
	}
	return lo, hi, nil
}

// String names what the provider manages, without the clients it holds
// (their credentials).
func (p *Provider) String() string {
	if p.opts.AutoScalingGroup != "" {
		return "aws provider (Auto Scaling Group " + p.opts.AutoScalingGroup + ")"
	}
	return "aws provider (cluster " + p.opts.ClusterName + ")"
}

// Format prints String for every verb.
func (p *Provider) Format(f fmt.State, _ rune) { fmt.Fprint(f, p.String()) }
