package aws

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"github.com/nodetide/nodetide/pkg/providerkind"
	"github.com/nodetide/nodetide/pkg/providers"
)

// Block is the aws block of a nodeGroups entry: Auto Scaling Groups by name
// or by cluster-autoscaler's discovery tags.
type Block struct {
	AutoScalingGroup string   `yaml:"autoScalingGroup"`
	AutoDiscovery    []string `yaml:"autoDiscovery"`
	Region           string   `yaml:"region"`
}

// Kind is the AWS provider's entry in the table of providers. It applies
// the entry's minSize/maxSize itself: an ASG's own bounds are re-read on
// every size change.
func Kind() providerkind.Kind {
	return providerkind.Kind{
		Name:  ProviderName,
		Block: func() any { return &Block{} },
		Check: check,
		Build: func(ctx context.Context, d providerkind.Deps, path string, e providerkind.Entry) (providers.Provider, error) {
			p, _, err := NewEntry(ctx, d, path, e)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		Describe: describe,
		Policy:   policy,
	}
}

// BlockOf is the entry's aws block, nil when it has none.
func BlockOf(e providerkind.Entry) *Block {
	b, _ := e.Block.(*Block)
	return b
}

func check(e providerkind.Entry, path string, c providerkind.Checks) {
	a := BlockOf(e)
	switch {
	case a == nil:
		c.Add(path+".aws", "is required for provider aws")
	case (a.AutoScalingGroup == "") == (len(a.AutoDiscovery) == 0):
		c.Add(path+".aws", "set exactly one of autoScalingGroup, autoDiscovery")
	case len(a.AutoDiscovery) > 0 && e.Name != "":
		c.Add(path+".name", "discovered groups take their Auto Scaling Group names; drop name")
	}
	if a != nil {
		c.AWSRegion(path+".aws.region", a.Region)
	}
}

// NewEntry builds the provider of one aws entry, with the Auto Scaling
// client of its region: the one build evaluate, drain and the CLI share.
func NewEntry(ctx context.Context, d providerkind.Deps, path string, e providerkind.Entry) (*Provider, *autoscaling.Client, error) {
	ac, err := d.AWS(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	b := BlockOf(e)
	if b.Region != "" {
		ac.Region = b.Region
	}
	as, ec := NewClients(ac)
	opts := Options{ClusterName: d.ClusterName, AutoScalingGroup: b.AutoScalingGroup,
		AutoDiscovery: b.AutoDiscovery, MinSize: e.MinSize, MaxSize: e.MaxSize}
	if b.AutoScalingGroup != "" {
		opts.DisplayName = e.Name
	}
	// Prices: on-demand from the Price List (its nearest endpoint), Spot
	// from EC2's history; read only when the expander ranks by price.
	opts.Pricing, opts.SpotPrices = NewPricingClient(ac), ec
	if d.EKS {
		// managed node groups' labels and taints (the stack grants
		// eks:DescribeNodegroup on this cluster's node groups)
		opts.EKS = NewEKSClient(ac)
	}
	p, err := New(as, ec, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, as, nil
}

func describe(e providerkind.Entry, _, _ string) ([]providerkind.Summary, error) {
	name := e.Name
	switch b := BlockOf(e); {
	case name != "":
	case b != nil && b.AutoScalingGroup != "":
		name = b.AutoScalingGroup
	case b != nil:
		name = fmt.Sprintf("(discovered by tags %v)", b.AutoDiscovery)
	default:
		name = "(discovered)"
	}
	return []providerkind.Summary{{Name: name, MinSize: e.MinSize, MaxSize: e.MaxSize}}, nil
}

// policy: the Describe calls on "*" (they take no resource), and the size
// changes on the entries' groups only: named groups by their ARN (one
// statement per region), discovered groups by their discovery tags
// (aws:ResourceTag conditions).
func policy(entries []providerkind.Entry) providerkind.Policy {
	var p providerkind.Policy
	named := map[string][]providerkind.ARN{} // region -> ARNs
	var regions []string
	for _, e := range entries {
		a := BlockOf(e)
		if a == nil {
			continue
		}
		if a.AutoScalingGroup != "" {
			if _, seen := named[a.Region]; !seen {
				regions = append(regions, a.Region)
			}
			named[a.Region] = append(named[a.Region], groupARN(a.Region, a.AutoScalingGroup))
			continue
		}
		conds := map[string]map[string]string{}
		for _, tag := range a.AutoDiscovery {
			key, value, hasValue := strings.Cut(tag, "=")
			if hasValue {
				addCondition(conds, "StringEquals", "aws:ResourceTag/"+key, value)
			} else {
				addCondition(conds, "Null", "aws:ResourceTag/"+key, "false")
			}
		}
		p.Groups = append(p.Groups, providerkind.Statement{Resources: []providerkind.ARN{groupARN(a.Region, "*")}, Conditions: conds})
	}
	sort.Strings(regions)
	for _, r := range regions {
		p.Groups = append(p.Groups, providerkind.Statement{Resources: named[r]})
	}
	if len(p.Groups) == 0 {
		return providerkind.Policy{}
	}
	p.Wildcard = []string{
		"autoscaling:DescribeAutoScalingGroups",
		"autoscaling:DescribeScalingActivities",
		"autoscaling:DescribeLaunchConfigurations",
		"ec2:DescribeInstanceTypes",
		"ec2:DescribeLaunchTemplateVersions",
		"ec2:GetInstanceTypesFromInstanceRequirements",
		// What the cloud's events and recovery ask EC2 of a machine.
		"ec2:DescribeInstances",
		"ec2:DescribeSpotInstanceRequests",
	}
	// On-demand prices from the Price List, Spot prices from EC2's history.
	p.Prices = []string{"pricing:GetProducts", "ec2:DescribeSpotPriceHistory"}
	p.Resize = []string{"autoscaling:SetDesiredCapacity"}
	// The drain also completes the lifecycle actions of the machines the
	// groups' termination hook holds (and keeps them alive meanwhile).
	p.Remove = []string{"autoscaling:TerminateInstanceInAutoScalingGroup",
		"autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat"}
	// managed node groups' labels and taints, for templates
	p.EKSNodegroups = []string{"eks:DescribeNodegroup"}
	p.Endpoints = []string{"autoscaling", "ec2"}
	return p
}

func groupARN(region, name string) providerkind.ARN {
	return providerkind.ARN{Service: "autoscaling", Resource: "autoScalingGroup",
		ResourceName: "*:autoScalingGroupName/" + name, Colon: true, Region: region}
}

func addCondition(m map[string]map[string]string, op, key, value string) {
	if m[op] == nil {
		m[op] = map[string]string{}
	}
	m[op][key] = value
}
