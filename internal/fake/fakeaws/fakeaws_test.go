package fakeaws_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
)

// recorder keeps the raw bodies the double sent, to check the wire shapes.
type recorder struct {
	mu     sync.Mutex
	bodies []string
	status []int
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.status = append(r.status, resp.StatusCode)
	r.mu.Unlock()
	return resp, nil
}

func (r *recorder) last() (int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status[len(r.status)-1], r.bodies[len(r.bodies)-1]
}

// clients are the real SDK clients, with retries off so every fault shows.
func clients(t *testing.T, d *fakeaws.Server, region string) (*autoscaling.Client, *ec2.Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg := awssdk.Config{
		Region:           region,
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", ""),
		BaseEndpoint:     awssdk.String(d.URL()),
		HTTPClient:       &http.Client{Transport: rec},
		RetryMaxAttempts: 1,
	}
	return autoscaling.NewFromConfig(cfg), ec2.NewFromConfig(cfg), rec
}

func apiCode(t *testing.T, err error) (string, string) {
	t.Helper()
	var api smithy.APIError
	if !errors.As(err, &api) {
		t.Fatalf("err = %v, want an API error", err)
	}
	return api.ErrorCode(), api.ErrorMessage()
}

func TestUnsignedAndMisscopedRequestsAreRefused(t *testing.T) {
	d := fakeaws.New()
	defer d.Close()
	form := url.Values{"Action": {"DescribeAutoScalingGroups"}, "Version": {"2011-01-01"}}
	resp, err := http.Post(d.URL(), "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "<Code>MissingAuthenticationToken</Code>") || d.UnsignedCalls() != 1 {
		t.Fatalf("unsigned: %d %s", resp.StatusCode, body)
	}

	as, _, _ := clients(t, d, "eu-central-1")
	_, err = as.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{})
	if code, msg := apiCode(t, err); code != "SignatureDoesNotMatch" || !strings.Contains(msg, "eu-central-1") {
		t.Fatalf("wrong region: %s %s", code, msg)
	}
}

func TestDescribeAutoScalingGroupsShapes(t *testing.T) {
	d := fakeaws.New()
	defer d.Close()
	d.AddLaunchTemplate(fakeaws.LaunchTemplate{ID: "lt-01", Name: "web", InstanceTypes: []string{"c5.large"}})
	d.AddGroup(fakeaws.Group{
		Name: "web", MinSize: 1, MaxSize: 4, DesiredCapacity: 2,
		AvailabilityZones: []string{"us-east-1a", "us-east-1b"},
		Tags:              map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "team": "web"},
		LaunchTemplate:    &fakeaws.LaunchTemplateRef{Name: "web", Version: "$Latest"},
	})
	d.AddGroup(fakeaws.Group{Name: "mixed", MaxSize: 2, MixedInstanceTypes: []string{"m5.large", "m5.xlarge"}, LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: "lt-01"}})
	as, _, rec := clients(t, d, d.Region())
	ctx := context.Background()

	out, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"web"}})
	if err != nil {
		t.Fatal(err)
	}
	_, raw := rec.last()
	if !strings.Contains(raw, `<DescribeAutoScalingGroupsResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><DescribeAutoScalingGroupsResult><AutoScalingGroups><member>`) {
		t.Fatalf("raw shape: %s", raw)
	}
	if len(out.AutoScalingGroups) != 1 {
		t.Fatalf("groups = %d", len(out.AutoScalingGroups))
	}
	g := out.AutoScalingGroups[0]
	if awssdk.ToString(g.AutoScalingGroupName) != "web" || awssdk.ToInt32(g.MinSize) != 1 || awssdk.ToInt32(g.MaxSize) != 4 || awssdk.ToInt32(g.DesiredCapacity) != 2 ||
		!slices.Equal(g.AvailabilityZones, []string{"us-east-1a", "us-east-1b"}) ||
		!strings.HasPrefix(awssdk.ToString(g.AutoScalingGroupARN), "arn:aws:autoscaling:us-east-1:") ||
		g.LaunchTemplate == nil || awssdk.ToString(g.LaunchTemplate.LaunchTemplateId) != "lt-01" || awssdk.ToString(g.LaunchTemplate.Version) != "$Latest" ||
		len(g.Tags) != 2 || len(g.Instances) != 2 {
		t.Fatalf("group = %+v", g)
	}
	in := g.Instances[0]
	if !strings.HasPrefix(awssdk.ToString(in.InstanceId), "i-") || in.LifecycleState != astypes.LifecycleStateInService || awssdk.ToString(in.InstanceType) != "c5.large" {
		t.Fatalf("instance = %+v", in)
	}
	if g.Instances[0].AvailabilityZone == g.Instances[1].AvailabilityZone {
		t.Fatalf("instances not spread over zones")
	}

	out, err = as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"mixed"}, IncludeInstances: awssdk.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	mip := out.AutoScalingGroups[0].MixedInstancesPolicy
	if mip == nil || len(mip.LaunchTemplate.Overrides) != 2 || awssdk.ToString(mip.LaunchTemplate.Overrides[0].InstanceType) != "m5.large" ||
		awssdk.ToString(mip.LaunchTemplate.LaunchTemplateSpecification.LaunchTemplateId) != "lt-01" || out.AutoScalingGroups[0].LaunchTemplate != nil {
		t.Fatalf("mixed instances policy = %+v", mip)
	}

	tests := []struct {
		name    string
		filters []astypes.Filter
		want    []string
	}{
		{"tag-key", []astypes.Filter{{Name: awssdk.String("tag-key"), Values: []string{"team"}}}, []string{"web"}},
		{"tag-value", []astypes.Filter{{Name: awssdk.String("tag-value"), Values: []string{"web", "nope"}}}, []string{"web"}},
		{"tag:key", []astypes.Filter{{Name: awssdk.String("tag:team"), Values: []string{"web"}}}, []string{"web"}},
		{"ANDed", []astypes.Filter{{Name: awssdk.String("tag-key"), Values: []string{"team"}}, {Name: awssdk.String("tag:team"), Values: []string{"db"}}}, nil},
	}
	for _, tt := range tests {
		out, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{Filters: tt.filters})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var got []string
		for _, g := range out.AutoScalingGroups {
			got = append(got, awssdk.ToString(g.AutoScalingGroupName))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}

	_, err = as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{Filters: []astypes.Filter{{Name: awssdk.String("colour"), Values: []string{"x"}}}})
	if code, _ := apiCode(t, err); code != "ValidationError" {
		t.Fatalf("unknown filter: %s", code)
	}
	_, err = as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{NextToken: awssdk.String("garbage")})
	if code, _ := apiCode(t, err); code != "InvalidNextToken" {
		t.Fatalf("bad token: %s", code)
	}

	// Pagination through the SDK's paginator.
	pages := autoscaling.NewDescribeAutoScalingGroupsPaginator(as, &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: awssdk.Int32(1)})
	var all []string
	for pages.HasMorePages() {
		p, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range p.AutoScalingGroups {
			all = append(all, awssdk.ToString(g.AutoScalingGroupName))
		}
	}
	if !slices.Equal(all, []string{"mixed", "web"}) {
		t.Fatalf("paged = %v", all)
	}
}

func TestSetDesiredCapacity(t *testing.T) {
	d := fakeaws.New()
	defer d.Close()
	d.AddGroup(fakeaws.Group{Name: "asg", MinSize: 1, MaxSize: 10, DesiredCapacity: 1})
	var mu sync.Mutex
	var terminated []string
	d.OnTerminate(func(e fakeaws.Event) {
		mu.Lock()
		defer mu.Unlock()
		terminated = append(terminated, e.Instance.ID)
	})
	as, _, rec := clients(t, d, d.Region())
	ctx := context.Background()
	set := func(n int32) error {
		_, err := as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: awssdk.String("asg"), DesiredCapacity: awssdk.Int32(n), HonorCooldown: awssdk.Bool(false)})
		return err
	}

	err := set(11)
	code, msg := apiCode(t, err)
	if code != "ValidationError" || msg != "New SetDesiredCapacity value 11 is above max value 10 for the AutoScalingGroup." {
		t.Fatalf("above max: %s %q", code, msg)
	}
	status, raw := rec.last()
	if status != 400 || !strings.Contains(raw, `<ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type><Code>ValidationError</Code><Message>`) || !strings.Contains(raw, "<RequestId>") {
		t.Fatalf("error shape: %d %s", status, raw)
	}
	if _, msg := apiCode(t, set(0)); msg != "New SetDesiredCapacity value 0 is below min value 1 for the AutoScalingGroup." {
		t.Fatalf("below min: %q", msg)
	}
	_, err = as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: awssdk.String("nope"), DesiredCapacity: awssdk.Int32(1)})
	if _, msg := apiCode(t, err); !strings.Contains(msg, "AutoScalingGroup name not found") {
		t.Fatalf("unknown group: %q", msg)
	}

	if err := set(3); err != nil {
		t.Fatal(err)
	}
	st, _ := d.Group("asg")
	pending := 0
	for _, in := range st.Instances {
		if in.LifecycleState == fakeaws.StatePending {
			pending++
		}
	}
	if st.DesiredCapacity != 3 || pending != 2 {
		t.Fatalf("after raise: %+v", st)
	}
	// Lowering takes Pending machines first.
	if err := set(2); err != nil {
		t.Fatal(err)
	}
	st, _ = d.Group("asg")
	mu.Lock()
	defer mu.Unlock()
	if len(terminated) != 1 || st.Instances[2].LifecycleState != fakeaws.StateTerminating || st.Instances[0].LifecycleState != fakeaws.StateInService {
		t.Fatalf("after lower: %+v terminated %v", st.Instances, terminated)
	}
	if gone := d.Reap("asg"); len(gone) != 1 || gone[0].ID != terminated[0] {
		t.Fatalf("reaped %v", gone)
	}

	acts, err := as.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: awssdk.String("asg")})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts.Activities) != 3 || !strings.HasPrefix(awssdk.ToString(acts.Activities[0].Description), "Terminating EC2 instance: ") ||
		acts.Activities[2].StatusCode != astypes.ScalingActivityStatusCodeSuccessful || acts.Activities[2].StartTime == nil {
		t.Fatalf("activities = %+v", acts.Activities)
	}
}

func TestTerminateInstance(t *testing.T) {
	d := fakeaws.New(fakeaws.WithAutoBoot())
	defer d.Close()
	d.AddGroup(fakeaws.Group{Name: "asg", MinSize: 1, MaxSize: 5, DesiredCapacity: 2})
	as, _, _ := clients(t, d, d.Region())
	ctx := context.Background()
	st, _ := d.Group("asg")
	term := func(id string, decrement bool) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error) {
		return as.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{InstanceId: awssdk.String(id), ShouldDecrementDesiredCapacity: awssdk.Bool(decrement)})
	}

	out, err := term(st.Instances[0].ID, true)
	if err != nil {
		t.Fatal(err)
	}
	a := out.Activity
	if a == nil || awssdk.ToString(a.ActivityId) == "" || awssdk.ToString(a.Description) != "Terminating EC2 instance: "+st.Instances[0].ID ||
		a.StatusCode != astypes.ScalingActivityStatusCodeInProgress || !strings.Contains(awssdk.ToString(a.Cause), "shrinking the capacity from 2 to 1") {
		t.Fatalf("activity = %+v", a)
	}
	if _, err := term(st.Instances[0].ID, true); err == nil {
		t.Fatalf("terminating twice succeeded")
	}
	_, err = term(st.Instances[1].ID, true)
	if _, msg := apiCode(t, err); !strings.HasPrefix(msg, "Currently, desiredSize equals minSize (1). Terminating instance without replacement will violate group's min size constraint.") {
		t.Fatalf("below min: %q", msg)
	}
	_, err = term("i-00000000000000bad", true)
	if _, msg := apiCode(t, err); !strings.Contains(msg, "No managed instance found for instance ID: i-00000000000000bad") {
		t.Fatalf("unknown: %q", msg)
	}
	// Without decrement AWS replaces the machine (InService at once with auto-boot).
	if _, err := term(st.Instances[1].ID, false); err != nil {
		t.Fatal(err)
	}
	st, _ = d.Group("asg")
	if st.DesiredCapacity != 1 || len(st.Instances) != 3 || st.Instances[2].LifecycleState != fakeaws.StateInService {
		t.Fatalf("after replace: %+v", st)
	}
}

func TestFaultsAndLaunchFailures(t *testing.T) {
	d := fakeaws.New()
	defer d.Close()
	d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 5})
	as, ec2c, rec := clients(t, d, d.Region())
	ctx := context.Background()

	tests := []struct {
		fault      fakeaws.Fault
		wantStatus int
	}{
		{fakeaws.Throttling(), 400},
		{fakeaws.InternalFailure(), 500},
		{fakeaws.ServiceUnavailable(), 503},
	}
	for _, tt := range tests {
		d.FailNext("DescribeAutoScalingGroups", 1, tt.fault)
		_, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
		if code, _ := apiCode(t, err); code != tt.fault.Code {
			t.Fatalf("code = %s, want %s", code, tt.fault.Code)
		}
		if status, _ := rec.last(); status != tt.wantStatus {
			t.Fatalf("status = %d, want %d", status, tt.wantStatus)
		}
	}
	if _, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{}); err != nil {
		t.Fatalf("faults did not run out: %v", err)
	}

	d.FailNext("DescribeInstanceTypes", 1, fakeaws.RequestLimitExceeded())
	_, err := ec2c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{})
	if code, _ := apiCode(t, err); code != "RequestLimitExceeded" {
		t.Fatalf("ec2 code = %s", code)
	}
	if status, raw := rec.last(); status != 503 || !strings.Contains(raw, "<Response><Errors><Error><Code>RequestLimitExceeded</Code>") {
		t.Fatalf("ec2 error shape: %d %s", status, raw)
	}

	if err := d.FailLaunches("asg", "We currently do not have sufficient m5.large capacity."); err != nil {
		t.Fatal(err)
	}
	if _, err := as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: awssdk.String("asg"), DesiredCapacity: awssdk.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	acts, err := as.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: awssdk.String("asg"), MaxRecords: awssdk.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts.Activities) != 1 || acts.Activities[0].StatusCode != astypes.ScalingActivityStatusCodeFailed || !strings.Contains(awssdk.ToString(acts.Activities[0].StatusMessage), "sufficient m5.large capacity") {
		t.Fatalf("activities = %+v", acts.Activities)
	}
	launched := 0
	d.OnLaunch(func(fakeaws.Event) { launched++ })
	if err := d.FailLaunches("asg", ""); err != nil {
		t.Fatal(err)
	}
	if st, _ := d.Group("asg"); len(st.Instances) != 2 || launched != 2 {
		t.Fatalf("after clearing the failure: %+v, launched %d", st, launched)
	}
}

func TestEC2Shapes(t *testing.T) {
	d := fakeaws.New()
	defer d.Close()
	d.AddLaunchTemplate(fakeaws.LaunchTemplate{ID: "lt-9", Name: "gpu", InstanceTypes: []string{"m5.large", "g4dn.xlarge"}})
	d.AddLaunchConfiguration("old", "t3.medium")
	as, ec2c, rec := clients(t, d, d.Region())
	ctx := context.Background()

	out, err := ec2c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"g4dn.xlarge", "m6g.large"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, raw := rec.last(); !strings.Contains(raw, `<DescribeInstanceTypesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">`) || !strings.Contains(raw, "<instanceTypeSet><item>") {
		t.Fatalf("raw: %s", raw)
	}
	if len(out.InstanceTypes) != 2 {
		t.Fatalf("types = %d", len(out.InstanceTypes))
	}
	g4, m6 := out.InstanceTypes[0], out.InstanceTypes[1]
	if g4.InstanceType != "g4dn.xlarge" || awssdk.ToInt32(g4.VCpuInfo.DefaultVCpus) != 4 || awssdk.ToInt64(g4.MemoryInfo.SizeInMiB) != 16384 ||
		g4.GpuInfo == nil || awssdk.ToInt32(g4.GpuInfo.Gpus[0].Count) != 1 || awssdk.ToString(g4.GpuInfo.Gpus[0].Manufacturer) != "NVIDIA" ||
		awssdk.ToInt32(g4.NetworkInfo.MaximumNetworkInterfaces) != 3 || awssdk.ToInt32(g4.NetworkInfo.Ipv4AddressesPerInterface) != 10 {
		t.Fatalf("g4dn = %+v", g4)
	}
	if !slices.Equal(m6.ProcessorInfo.SupportedArchitectures, []ec2types.ArchitectureType{ec2types.ArchitectureTypeArm64}) {
		t.Fatalf("m6g arch = %v", m6.ProcessorInfo.SupportedArchitectures)
	}
	_, err = ec2c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m99.huge"}})
	if code, msg := apiCode(t, err); code != "InvalidInstanceType" || !strings.Contains(msg, "m99.huge") {
		t.Fatalf("unknown type: %s %s", code, msg)
	}
	pages := ec2.NewDescribeInstanceTypesPaginator(ec2c, &ec2.DescribeInstanceTypesInput{MaxResults: awssdk.Int32(5)})
	n := 0
	for pages.HasMorePages() {
		p, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.InstanceTypes)
	}
	if n != 7 {
		t.Fatalf("paged types = %d, want the 7 of the catalogue", n)
	}

	v, err := ec2c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: awssdk.String("gpu"), Versions: []string{"$Latest"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.LaunchTemplateVersions) != 1 || awssdk.ToInt64(v.LaunchTemplateVersions[0].VersionNumber) != 2 || v.LaunchTemplateVersions[0].LaunchTemplateData.InstanceType != "g4dn.xlarge" {
		t.Fatalf("versions = %+v", v.LaunchTemplateVersions)
	}
	_, err = ec2c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: awssdk.String("lt-9"), Versions: []string{"7"}})
	if code, _ := apiCode(t, err); code != "InvalidLaunchTemplateId.VersionNotFound" {
		t.Fatalf("missing version: %s", code)
	}

	lc, err := as.DescribeLaunchConfigurations(ctx, &autoscaling.DescribeLaunchConfigurationsInput{LaunchConfigurationNames: []string{"old"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lc.LaunchConfigurations) != 1 || awssdk.ToString(lc.LaunchConfigurations[0].InstanceType) != "t3.medium" {
		t.Fatalf("launch configurations = %+v", lc.LaunchConfigurations)
	}
}

// A delayed call is carried out even though the caller gave up waiting for
// its answer; the next call is answered at once.
func TestDelayNextLandsTheChangeAndLosesTheAnswer(t *testing.T) {
	d := fakeaws.New()
	defer d.Close()
	d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 5})
	as, _, _ := clients(t, d, d.Region())
	set := func(ctx context.Context, n int32) error {
		_, err := as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: awssdk.String("asg"), DesiredCapacity: awssdk.Int32(n)})
		return err
	}
	d.DelayNext("SetDesiredCapacity", 1, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := set(ctx, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delayed call: %v, want the caller's deadline", err)
	}
	// The request may reach the double after the caller gave up.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		g, _ := d.Group("asg")
		if g.DesiredCapacity == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("desired = %d, want the delayed change landed (2)", g.DesiredCapacity)
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := set(ctx, 3); err != nil {
		t.Fatalf("the delay did not run out: %v", err)
	}
	if g, _ := d.Group("asg"); g.DesiredCapacity != 3 {
		t.Fatalf("desired = %d, want 3", g.DesiredCapacity)
	}
}

func TestInstanceRequirements(t *testing.T) {
	d := fakeaws.New()
	defer d.Close()
	as, ec2c, _ := clients(t, d, d.Region())
	ctx := context.Background()
	d.AddGroup(fakeaws.Group{Name: "abs", MaxSize: 2, DesiredCapacity: 1, LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: "lt-01"},
		InstanceRequirements: &fakeaws.InstanceRequirements{VCPUMin: 4, VCPUMax: 4, MemoryMiBMin: 16384}})
	out, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"abs"}})
	if err != nil {
		t.Fatal(err)
	}
	mip := out.AutoScalingGroups[0].MixedInstancesPolicy
	if mip == nil || len(mip.LaunchTemplate.Overrides) != 1 || mip.LaunchTemplate.Overrides[0].InstanceRequirements == nil {
		t.Fatalf("mixed instances policy = %+v", mip)
	}
	r := mip.LaunchTemplate.Overrides[0].InstanceRequirements
	if awssdk.ToInt32(r.VCpuCount.Min) != 4 || awssdk.ToInt32(r.VCpuCount.Max) != 4 || awssdk.ToInt32(r.MemoryMiB.Min) != 16384 || r.MemoryMiB.Max != nil {
		t.Errorf("requirements = %+v %+v", *r.VCpuCount, *r.MemoryMiB)
	}
	if got := out.AutoScalingGroups[0].Instances[0].InstanceType; awssdk.ToString(got) != "g4dn.xlarge" && awssdk.ToString(got) != "m5.xlarge" {
		t.Errorf("launched %s", awssdk.ToString(got))
	}
	types, err := ec2c.GetInstanceTypesFromInstanceRequirements(ctx, &ec2.GetInstanceTypesFromInstanceRequirementsInput{
		ArchitectureTypes:   []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664},
		VirtualizationTypes: []ec2types.VirtualizationType{ec2types.VirtualizationTypeHvm},
		InstanceRequirements: &ec2types.InstanceRequirementsRequest{
			VCpuCount: &ec2types.VCpuCountRangeRequest{Min: awssdk.Int32(4), Max: awssdk.Int32(4)},
			MemoryMiB: &ec2types.MemoryMiBRequest{Min: awssdk.Int32(16384)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range types.InstanceTypes {
		names = append(names, awssdk.ToString(it.InstanceType))
	}
	if !slices.Equal(names, []string{"g4dn.xlarge", "m5.xlarge"}) {
		t.Errorf("matching types %v", names)
	}
}
