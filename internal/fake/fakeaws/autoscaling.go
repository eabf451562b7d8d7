package fakeaws

import (
	"encoding/xml"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Auto Scaling response documents, in the element names and nesting of
// the API reference (lists are <member> items).

type responseMetadata struct {
	RequestID string `xml:"RequestId"`
}

type xmlLaunchTemplateSpec struct {
	LaunchTemplateID   string `xml:"LaunchTemplateId,omitempty"`
	LaunchTemplateName string `xml:"LaunchTemplateName,omitempty"`
	Version            string `xml:"Version,omitempty"`
}

type xmlOverride struct {
	InstanceType         string                   `xml:"InstanceType,omitempty"`
	InstanceRequirements *xmlInstanceRequirements `xml:"InstanceRequirements,omitempty"`
}

type xmlRange struct {
	Min int  `xml:"Min"`
	Max *int `xml:"Max,omitempty"`
}

type xmlInstanceRequirements struct {
	VCpuCount xmlRange `xml:"VCpuCount"`
	MemoryMiB xmlRange `xml:"MemoryMiB"`
}

func rangeXML(lo, hi int) xmlRange {
	r := xmlRange{Min: lo}
	if hi > 0 {
		r.Max = &hi
	}
	return r
}

type xmlMixedInstancesPolicy struct {
	LaunchTemplateSpecification xmlLaunchTemplateSpec `xml:"LaunchTemplate>LaunchTemplateSpecification"`
	Overrides                   []xmlOverride         `xml:"LaunchTemplate>Overrides>member"`
	Distribution                xmlDistribution       `xml:"InstancesDistribution"`
}

type xmlDistribution struct {
	OnDemandAllocationStrategy          string `xml:"OnDemandAllocationStrategy"`
	OnDemandBaseCapacity                int    `xml:"OnDemandBaseCapacity"`
	OnDemandPercentageAboveBaseCapacity int    `xml:"OnDemandPercentageAboveBaseCapacity"`
	SpotAllocationStrategy              string `xml:"SpotAllocationStrategy"`
	SpotInstancePools                   int    `xml:"SpotInstancePools,omitempty"`
}

// distributionXML fills in AWS's defaults; SpotInstancePools only goes
// with lowest-price, as AWS describes it.
func distributionXML(d *InstancesDistribution, abis bool) xmlDistribution {
	x := xmlDistribution{OnDemandAllocationStrategy: "prioritized", OnDemandPercentageAboveBaseCapacity: 100, SpotAllocationStrategy: "lowest-price"}
	if abis {
		x.OnDemandAllocationStrategy = "lowest-price"
	}
	if d == nil {
		d = &InstancesDistribution{}
	}
	if d.OnDemandAllocationStrategy != "" {
		x.OnDemandAllocationStrategy = d.OnDemandAllocationStrategy
	}
	x.OnDemandBaseCapacity = d.OnDemandBaseCapacity
	if d.OnDemandPercentageAboveBaseCapacity != nil {
		x.OnDemandPercentageAboveBaseCapacity = *d.OnDemandPercentageAboveBaseCapacity
	}
	if d.SpotAllocationStrategy != "" {
		x.SpotAllocationStrategy = d.SpotAllocationStrategy
	}
	if x.SpotAllocationStrategy == "lowest-price" {
		x.SpotInstancePools = 2
		if d.SpotInstancePools > 0 {
			x.SpotInstancePools = d.SpotInstancePools
		}
	}
	return x
}

type xmlInstance struct {
	InstanceID           string                 `xml:"InstanceId"`
	InstanceType         string                 `xml:"InstanceType"`
	AvailabilityZone     string                 `xml:"AvailabilityZone"`
	LifecycleState       string                 `xml:"LifecycleState"`
	HealthStatus         string                 `xml:"HealthStatus"`
	LaunchTemplate       *xmlLaunchTemplateSpec `xml:"LaunchTemplate,omitempty"`
	LaunchConfiguration  string                 `xml:"LaunchConfigurationName,omitempty"`
	ProtectedFromScaleIn bool                   `xml:"ProtectedFromScaleIn"`
}

type xmlTag struct {
	ResourceID        string `xml:"ResourceId"`
	ResourceType      string `xml:"ResourceType"`
	Key               string `xml:"Key"`
	Value             string `xml:"Value"`
	PropagateAtLaunch bool   `xml:"PropagateAtLaunch"`
}

type xmlGroup struct {
	AutoScalingGroupName             string                   `xml:"AutoScalingGroupName"`
	AutoScalingGroupARN              string                   `xml:"AutoScalingGroupARN"`
	LaunchConfigurationName          string                   `xml:"LaunchConfigurationName,omitempty"`
	LaunchTemplate                   *xmlLaunchTemplateSpec   `xml:"LaunchTemplate,omitempty"`
	MixedInstancesPolicy             *xmlMixedInstancesPolicy `xml:"MixedInstancesPolicy,omitempty"`
	MinSize                          int                      `xml:"MinSize"`
	MaxSize                          int                      `xml:"MaxSize"`
	DesiredCapacity                  int                      `xml:"DesiredCapacity"`
	DefaultCooldown                  int                      `xml:"DefaultCooldown"`
	AvailabilityZones                []string                 `xml:"AvailabilityZones>member"`
	HealthCheckType                  string                   `xml:"HealthCheckType"`
	HealthCheckGracePeriod           int                      `xml:"HealthCheckGracePeriod"`
	Instances                        []xmlInstance            `xml:"Instances>member"`
	CreatedTime                      string                   `xml:"CreatedTime"`
	Tags                             []xmlTag                 `xml:"Tags>member"`
	TerminationPolicies              []string                 `xml:"TerminationPolicies>member"`
	NewInstancesProtectedFromScaleIn bool                     `xml:"NewInstancesProtectedFromScaleIn"`
	ServiceLinkedRoleARN             string                   `xml:"ServiceLinkedRoleARN"`
	Status                           string                   `xml:"Status,omitempty"`
}

type describeGroupsResponse struct {
	XMLName   xml.Name         `xml:"DescribeAutoScalingGroupsResponse"`
	NS        string           `xml:"xmlns,attr"`
	Groups    []xmlGroup       `xml:"DescribeAutoScalingGroupsResult>AutoScalingGroups>member"`
	NextToken string           `xml:"DescribeAutoScalingGroupsResult>NextToken,omitempty"`
	Metadata  responseMetadata `xml:"ResponseMetadata"`
}

type setDesiredResponse struct {
	XMLName  xml.Name         `xml:"SetDesiredCapacityResponse"`
	NS       string           `xml:"xmlns,attr"`
	Metadata responseMetadata `xml:"ResponseMetadata"`
}

type xmlActivity struct {
	ActivityID           string `xml:"ActivityId"`
	AutoScalingGroupName string `xml:"AutoScalingGroupName"`
	AutoScalingGroupARN  string `xml:"AutoScalingGroupARN"`
	Description          string `xml:"Description"`
	Cause                string `xml:"Cause"`
	StartTime            string `xml:"StartTime"`
	EndTime              string `xml:"EndTime,omitempty"`
	StatusCode           string `xml:"StatusCode"`
	StatusMessage        string `xml:"StatusMessage,omitempty"`
	Progress             int    `xml:"Progress"`
	Details              string `xml:"Details,omitempty"`
}

type terminateResponse struct {
	XMLName  xml.Name         `xml:"TerminateInstanceInAutoScalingGroupResponse"`
	NS       string           `xml:"xmlns,attr"`
	Activity xmlActivity      `xml:"TerminateInstanceInAutoScalingGroupResult>Activity"`
	Metadata responseMetadata `xml:"ResponseMetadata"`
}

type describeActivitiesResponse struct {
	XMLName    xml.Name         `xml:"DescribeScalingActivitiesResponse"`
	NS         string           `xml:"xmlns,attr"`
	Activities []xmlActivity    `xml:"DescribeScalingActivitiesResult>Activities>member"`
	Metadata   responseMetadata `xml:"ResponseMetadata"`
}

type xmlLaunchConfiguration struct {
	Name         string `xml:"LaunchConfigurationName"`
	ARN          string `xml:"LaunchConfigurationARN"`
	ImageID      string `xml:"ImageId"`
	InstanceType string `xml:"InstanceType"`
	CreatedTime  string `xml:"CreatedTime"`
}

type describeLaunchConfigurationsResponse struct {
	XMLName  xml.Name                 `xml:"DescribeLaunchConfigurationsResponse"`
	NS       string                   `xml:"xmlns,attr"`
	Configs  []xmlLaunchConfiguration `xml:"DescribeLaunchConfigurationsResult>LaunchConfigurations>member"`
	Metadata responseMetadata         `xml:"ResponseMetadata"`
}

const timeFormat = "2006-01-02T15:04:05.000Z"

func (s *Server) groupARN(name string) string {
	return fmt.Sprintf("arn:aws:autoscaling:%s:%s:autoScalingGroup:%s:autoScalingGroupName/%s", s.region, s.account, "5a1c0de5-0000-4000-8000-000000000000", name)
}

func (s *Server) groupXMLLocked(g *group, withInstances bool) xmlGroup {
	spec := g.spec
	x := xmlGroup{
		AutoScalingGroupName:    spec.Name,
		AutoScalingGroupARN:     s.groupARN(spec.Name),
		LaunchConfigurationName: spec.LaunchConfigurationName,
		MinSize:                 spec.MinSize,
		MaxSize:                 spec.MaxSize,
		DesiredCapacity:         g.desired,
		DefaultCooldown:         300,
		AvailabilityZones:       spec.AvailabilityZones,
		HealthCheckType:         "EC2",
		HealthCheckGracePeriod:  300,
		CreatedTime:             g.created.Format(timeFormat),
		TerminationPolicies:     []string{"Default"},
		ServiceLinkedRoleARN:    fmt.Sprintf("arn:aws:iam::%s:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling", s.account),
		Status:                  spec.Status,
	}
	var lt *xmlLaunchTemplateSpec
	if spec.LaunchTemplate != nil {
		lt = &xmlLaunchTemplateSpec{LaunchTemplateID: spec.LaunchTemplate.ID, LaunchTemplateName: spec.LaunchTemplate.Name, Version: spec.LaunchTemplate.Version}
		if stored := s.templateLocked(spec.LaunchTemplate.ID, spec.LaunchTemplate.Name); stored != nil {
			// AWS reports both the ID and the name, whichever the group was created with.
			lt.LaunchTemplateID, lt.LaunchTemplateName = stored.ID, stored.Name
		}
	}
	if len(spec.MixedInstanceTypes) > 0 || spec.InstanceRequirements != nil {
		mip := &xmlMixedInstancesPolicy{Distribution: distributionXML(spec.Distribution, spec.InstanceRequirements != nil)}
		if lt != nil {
			mip.LaunchTemplateSpecification = *lt
		}
		if r := spec.InstanceRequirements; r != nil {
			mip.Overrides = append(mip.Overrides, xmlOverride{InstanceRequirements: &xmlInstanceRequirements{
				VCpuCount: rangeXML(r.VCPUMin, r.VCPUMax), MemoryMiB: rangeXML(r.MemoryMiBMin, r.MemoryMiBMax),
			}})
		} else {
			for _, t := range spec.MixedInstanceTypes {
				mip.Overrides = append(mip.Overrides, xmlOverride{InstanceType: t})
			}
		}
		x.MixedInstancesPolicy = mip
	} else {
		x.LaunchTemplate = lt
	}
	if withInstances {
		for _, in := range g.instances {
			xi := xmlInstance{
				InstanceID: in.ID, InstanceType: in.InstanceType, AvailabilityZone: in.AvailabilityZone,
				LifecycleState: in.LifecycleState, HealthStatus: in.HealthStatus,
				LaunchTemplate: lt, LaunchConfiguration: spec.LaunchConfigurationName,
			}
			x.Instances = append(x.Instances, xi)
		}
	}
	keys := make([]string, 0, len(spec.Tags))
	for k := range spec.Tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		x.Tags = append(x.Tags, xmlTag{ResourceID: spec.Name, ResourceType: "auto-scaling-group", Key: k, Value: spec.Tags[k], PropagateAtLaunch: true})
	}
	return x
}

type tagFilter struct {
	name   string
	values []string
}

func (f tagFilter) match(tags map[string]string) bool {
	for _, v := range f.values {
		switch {
		case f.name == "tag-key":
			if _, ok := tags[v]; ok {
				return true
			}
		case f.name == "tag-value":
			for _, tv := range tags {
				if tv == v {
					return true
				}
			}
		default: // tag:<key>
			if tv, ok := tags[strings.TrimPrefix(f.name, "tag:")]; ok && tv == v {
				return true
			}
		}
	}
	return false
}

func (s *Server) describeAutoScalingGroups(form map[string][]string, reqID string) (any, *apiError) {
	names := list(form, "AutoScalingGroupNames", "member")
	var filters []tagFilter
	for i := 1; ; i++ {
		prefix := "Filters.member." + strconv.Itoa(i)
		name, ok := form[prefix+".Name"]
		if !ok {
			break
		}
		f := tagFilter{name: name[0], values: list(form, prefix+".Values", "member")}
		switch {
		case f.name == "tag-key", f.name == "tag-value", strings.HasPrefix(f.name, "tag:") && len(f.name) > 4:
		case f.name == "auto-scaling-group":
			// Supported by AWS, unused by the provider.
		default:
			return nil, validation("Filter type %s is not correct. Allowed Filter types are: auto-scaling-group key value propagate-at-launch tag-key tag-value tag:<key>", f.name)
		}
		filters = append(filters, f)
	}
	size, err := intParam(form, "MaxRecords", 50, 1, 100)
	if err != nil {
		return nil, err
	}
	withInstances := first(form, "IncludeInstances") != "false"

	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]string, 0, len(s.groups))
	for name := range s.groups {
		all = append(all, name)
	}
	slices.Sort(all)
	var matched []*group
	for _, name := range all {
		g := s.groups[name]
		if len(names) > 0 && !slices.Contains(names, name) {
			continue
		}
		ok := true
		for _, f := range filters {
			if f.name == "auto-scaling-group" {
				ok = ok && slices.Contains(f.values, name)
				continue
			}
			ok = ok && f.match(g.spec.Tags)
		}
		if ok {
			matched = append(matched, g)
		}
	}
	start, end, next, err := page(len(matched), first(form, "NextToken"), size)
	if err != nil {
		return nil, err
	}
	resp := describeGroupsResponse{NS: autoScalingNS, NextToken: next, Metadata: responseMetadata{reqID}}
	for _, g := range matched[start:end] {
		resp.Groups = append(resp.Groups, s.groupXMLLocked(g, withInstances))
	}
	return resp, nil
}

func first(form map[string][]string, key string) string {
	if v := form[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (s *Server) setDesiredCapacity(form map[string][]string, reqID string) (any, *apiError) {
	name := first(form, "AutoScalingGroupName")
	desired, err := intParam(form, "DesiredCapacity", -1, 0, 1<<31-1)
	if err != nil {
		return nil, err
	}
	if desired < 0 {
		return nil, validation("1 validation error detected: Value null at 'desiredCapacity' failed to satisfy constraint: Member must not be null")
	}
	s.mu.Lock()
	g, ok := s.groups[name]
	if !ok {
		s.mu.Unlock()
		return nil, validation("AutoScalingGroup name not found - AutoScalingGroup %s not found", name)
	}
	g.honorCooldown = first(form, "HonorCooldown")
	if desired > g.spec.MaxSize {
		s.mu.Unlock()
		return nil, validation("New SetDesiredCapacity value %d is above max value %d for the AutoScalingGroup.", desired, g.spec.MaxSize)
	}
	if desired < g.spec.MinSize {
		s.mu.Unlock()
		return nil, validation("New SetDesiredCapacity value %d is below min value %d for the AutoScalingGroup.", desired, g.spec.MinSize)
	}
	prev := g.desired
	g.desired = desired
	var launched, terminated []Event
	if desired > prev {
		launched = s.reconcileLocked(g, fmt.Sprintf("a user request explicitly set group desired capacity changing the desired capacity from %d to %d", prev, desired))
	} else {
		terminated = s.shrinkLocked(g)
	}
	onLaunch, onTerminate := slices.Clone(s.onLaunch), slices.Clone(s.onTerminate)
	s.mu.Unlock()
	notify(onLaunch, launched)
	notify(onTerminate, terminated)
	return setDesiredResponse{NS: autoScalingNS, Metadata: responseMetadata{reqID}}, nil
}

func (s *Server) activityXML(a activity) xmlActivity {
	x := xmlActivity{
		ActivityID: a.id, AutoScalingGroupName: a.group, AutoScalingGroupARN: s.groupARN(a.group),
		Description: a.description, Cause: a.cause, StartTime: a.start.Format(timeFormat),
		StatusCode: a.status, StatusMessage: a.statusMessage, Progress: a.progress, Details: a.details,
	}
	if !a.end.IsZero() {
		x.EndTime = a.end.Format(timeFormat)
	}
	return x
}

func (s *Server) terminateInstance(form map[string][]string, reqID string) (any, *apiError) {
	id := first(form, "InstanceId")
	decrement := first(form, "ShouldDecrementDesiredCapacity")
	if decrement != "true" && decrement != "false" {
		return nil, validation("1 validation error detected: Value null at 'shouldDecrementDesiredCapacity' failed to satisfy constraint: Member must not be null")
	}
	s.mu.Lock()
	g, in := s.findInstanceLocked(id)
	if in == nil {
		s.mu.Unlock()
		return nil, validation("Instance Id not found - No managed instance found for instance ID: %s", id)
	}
	if isTerminating(in.LifecycleState) {
		s.mu.Unlock()
		return nil, validation("The instance %s is already terminating.", id)
	}
	prev := g.desired
	if decrement == "true" {
		if g.desired-1 < g.spec.MinSize {
			s.mu.Unlock()
			return nil, validation("Currently, desiredSize equals minSize (%d). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size.", g.spec.MinSize)
		}
		g.desired--
	}
	ev := Event{Group: g.spec.Name, Instance: *in}
	ev.Instance.LifecycleState = StateTerminating
	s.terminateLocked(g, in)
	now := s.now().UTC()
	cause := fmt.Sprintf("At %s instance %s was taken out of service in response to a user request.", now.Format(time.RFC3339), id)
	if decrement == "true" {
		cause = fmt.Sprintf("At %s instance %s was taken out of service in response to a user request, shrinking the capacity from %d to %d.", now.Format(time.RFC3339), id, prev, g.desired)
	}
	a := s.addActivityLocked(activity{
		group: g.spec.Name, description: "Terminating EC2 instance: " + id, cause: cause,
		status: "InProgress", start: now, progress: 0,
		details: fmt.Sprintf(`{"Availability Zone":%q}`, in.AvailabilityZone),
	})
	var launched []Event
	if decrement == "false" {
		launched = s.reconcileLocked(g, "an instance was started in response to a difference between desired and actual capacity")
	}
	onLaunch, onTerminate := slices.Clone(s.onLaunch), slices.Clone(s.onTerminate)
	s.mu.Unlock()
	notify(onTerminate, []Event{ev})
	notify(onLaunch, launched)
	return terminateResponse{NS: autoScalingNS, Activity: s.activityXML(a), Metadata: responseMetadata{reqID}}, nil
}

func (s *Server) describeScalingActivities(form map[string][]string, reqID string) (any, *apiError) {
	name := first(form, "AutoScalingGroupName")
	ids := list(form, "ActivityIds", "member")
	size, err := intParam(form, "MaxRecords", 100, 1, 100)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := describeActivitiesResponse{NS: autoScalingNS, Metadata: responseMetadata{reqID}}
	// Newest first, as AWS lists them.
	for i := len(s.activities) - 1; i >= 0 && len(resp.Activities) < size; i-- {
		a := s.activities[i]
		if name != "" && a.group != name {
			continue
		}
		if len(ids) > 0 && !slices.Contains(ids, a.id) {
			continue
		}
		resp.Activities = append(resp.Activities, s.activityXML(a))
	}
	return resp, nil
}

func (s *Server) describeLaunchConfigurations(form map[string][]string, reqID string) (any, *apiError) {
	names := list(form, "LaunchConfigurationNames", "member")
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]string, 0, len(s.configs))
	for n := range s.configs {
		all = append(all, n)
	}
	slices.Sort(all)
	resp := describeLaunchConfigurationsResponse{NS: autoScalingNS, Metadata: responseMetadata{reqID}}
	for _, n := range all {
		if len(names) > 0 && !slices.Contains(names, n) {
			continue
		}
		resp.Configs = append(resp.Configs, xmlLaunchConfiguration{
			Name:         n,
			ARN:          fmt.Sprintf("arn:aws:autoscaling:%s:%s:launchConfiguration:0:launchConfigurationName/%s", s.region, s.account, n),
			ImageID:      "ami-0123456789abcdef0",
			InstanceType: s.configs[n],
			CreatedTime:  time.Unix(0, 0).UTC().Format(timeFormat),
		})
	}
	return resp, nil
}
