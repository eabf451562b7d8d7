package aws_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/pkg/providers"
	ngaws "github.com/nodetide/nodetide/pkg/providers/aws"
)

// newDouble starts the double and returns it with real SDK clients pointed at
// it, retrying fast so fault tests stay quick.
func newDouble(t *testing.T, opts ...fakeaws.Option) (*fakeaws.Server, ngaws.AutoScalingAPI, ngaws.EC2API) {
	t.Helper()
	d := fakeaws.New(opts...)
	t.Cleanup(d.Close)
	cfg := awssdk.Config{
		Region:       d.Region(),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", ""),
		BaseEndpoint: awssdk.String(d.URL()),
	}
	as, ec2c := ngaws.NewClients(cfg, func(o *retry.StandardOptions) { o.MaxBackoff = time.Millisecond })
	return d, as, ec2c
}

func newProvider(t *testing.T, as ngaws.AutoScalingAPI, ec2c ngaws.EC2API, opts ngaws.Options) *ngaws.Provider {
	t.Helper()
	p, err := ngaws.New(as, ec2c, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func groups(t *testing.T, p *ngaws.Provider) []providers.NodeGroup {
	t.Helper()
	gs, err := p.NodeGroups(context.Background())
	if err != nil {
		t.Fatalf("NodeGroups: %v", err)
	}
	return gs
}

// oneGroup is the single group of a by-name provider.
func oneGroup(t *testing.T, as ngaws.AutoScalingAPI, ec2c ngaws.EC2API, opts ngaws.Options) providers.NodeGroup {
	t.Helper()
	gs := groups(t, newProvider(t, as, ec2c, opts))
	if len(gs) != 1 {
		t.Fatalf("got %d groups, want 1", len(gs))
	}
	return gs[0]
}

func names(gs []providers.NodeGroup) []string {
	out := make([]string, 0, len(gs))
	for _, g := range gs {
		out = append(out, g.Name())
	}
	return out
}

func ptr(n int) *int { return &n }

func discoveryTags(cluster string) map[string]string {
	return map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/" + cluster: "owned"}
}

func TestNewRejectsBadOptions(t *testing.T) {
	_, as, ec2c := newDouble(t)
	tests := []struct {
		name string
		opts ngaws.Options
		want string
	}{
		{"nothing", ngaws.Options{}, "set an Auto Scaling Group name"},
		{"both", ngaws.Options{AutoScalingGroup: "a", AutoDiscovery: []string{"k"}}, "not both"},
		{"display name without ASG", ngaws.Options{AutoDiscovery: []string{"k"}, DisplayName: "x"}, "display name"},
		{"min above max", ngaws.Options{AutoScalingGroup: "a", MinSize: ptr(3), MaxSize: ptr(2)}, "minSize 3 is above maxSize 2"},
		{"empty tag key", ngaws.Options{AutoDiscovery: []string{"=v"}}, "has no key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ngaws.New(as, ec2c, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDiscovery(t *testing.T) {
	d, as, ec2c := newDouble(t)
	prodML := discoveryTags("prod")
	prodML["team"] = "ml"
	d.AddGroup(fakeaws.Group{Name: "prod-a", MaxSize: 5, Tags: discoveryTags("prod")})
	d.AddGroup(fakeaws.Group{Name: "prod-ml", MaxSize: 5, Tags: prodML})
	d.AddGroup(fakeaws.Group{Name: "staging", MaxSize: 5, Tags: discoveryTags("staging")})
	d.AddGroup(fakeaws.Group{Name: "prod-not-enabled", MaxSize: 5, Tags: map[string]string{"k8s.io/cluster-autoscaler/prod": "owned"}})
	d.AddGroup(fakeaws.Group{Name: "prod-deleting", MaxSize: 5, Tags: discoveryTags("prod"), Status: "Delete in progress"})
	// The value "ml" on another key must not match team=ml.
	d.AddGroup(fakeaws.Group{Name: "prod-other-team", MaxSize: 5, Tags: map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/prod": "owned", "team": "web", "purpose": "ml"}})

	tests := []struct {
		name string
		opts ngaws.Options
		want []string
	}{
		{"CA tags", ngaws.Options{AutoDiscovery: []string{"k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/prod"}}, []string{"prod-a", "prod-ml", "prod-other-team"}},
		{"cluster name default", ngaws.Options{ClusterName: "staging"}, []string{"staging"}},
		{"key=value", ngaws.Options{AutoDiscovery: []string{"k8s.io/cluster-autoscaler/prod", "team=ml"}}, []string{"prod-ml"}},
		{"CA flag form", ngaws.Options{AutoDiscovery: []string{"asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod=owned,team=ml"}}, []string{"prod-ml"}},
		{"no match", ngaws.Options{AutoDiscovery: []string{"k8s.io/cluster-autoscaler/dev"}}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(groups(t, newProvider(t, as, ec2c, tt.opts)))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("groups = %v, want %v", got, tt.want)
			}
		})
	}
	form := d.LastRequest("DescribeAutoScalingGroups")
	if form["Filters.member.1.Name"][0] != "tag-key" || form["Filters.member.1.Values.member.1"][0] != "k8s.io/cluster-autoscaler/dev" {
		t.Fatalf("discovery did not send tag filters: %v", form)
	}
}

func TestByName(t *testing.T) {
	d, as, ec2c := newDouble(t)
	d.AddGroup(fakeaws.Group{Name: "workers-asg", MinSize: 1, MaxSize: 5, DesiredCapacity: 2})
	d.AddGroup(fakeaws.Group{Name: "workers-asg-2", MaxSize: 5})

	g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "workers-asg", DisplayName: "workers"})
	if g.Name() != "workers" || g.Provider() != "aws" || g.Bounds().Min != 1 || g.Bounds().Max != 5 {
		t.Fatalf("group = %s/%s min %d max %d", g.Name(), g.Provider(), g.Bounds().Min, g.Bounds().Max)
	}
	if n, _ := g.TargetSize(context.Background()); n != 2 {
		t.Fatalf("target = %d, want 2", n)
	}
	if got := d.LastRequest("DescribeAutoScalingGroups")["AutoScalingGroupNames.member.1"]; !slices.Equal(got, []string{"workers-asg"}) {
		t.Fatalf("request names = %v", got)
	}

	_, err := newProvider(t, as, ec2c, ngaws.Options{AutoScalingGroup: "missing"}).NodeGroups(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Auto Scaling Group missing not found") {
		t.Fatalf("missing ASG: err = %v", err)
	}
}

func TestDiscoveryPaginates(t *testing.T) {
	d, as, ec2c := newDouble(t)
	const n = 230
	for i := range n {
		d.AddGroup(fakeaws.Group{Name: fmt.Sprintf("g-%03d", i), MaxSize: 3, Tags: discoveryTags("big")})
	}
	d.AddGroup(fakeaws.Group{Name: "other", MaxSize: 3, Tags: discoveryTags("small")})
	gs := groups(t, newProvider(t, as, ec2c, ngaws.Options{ClusterName: "big"}))
	if len(gs) != n {
		t.Fatalf("got %d groups, want %d", len(gs), n)
	}
	// Pages are told apart by their NextToken: the SDK may retry a page
	// whose response it could not read, and the double sees that twice.
	pages := map[string]bool{}
	for _, f := range d.Requests("DescribeAutoScalingGroups") {
		pages[strings.Join(f["NextToken"], ",")] = true
		if got := f["MaxRecords"]; !slices.Equal(got, []string{"100"}) {
			t.Fatalf("MaxRecords = %v, want 100", got)
		}
	}
	if len(pages) != 3 {
		t.Fatalf("DescribeAutoScalingGroups asked for %d distinct pages, want 3 pages of 100", len(pages))
	}
	if gs[0].Name() != "g-000" || gs[n-1].Name() != fmt.Sprintf("g-%03d", n-1) {
		t.Fatalf("not sorted: first %s last %s", gs[0].Name(), gs[n-1].Name())
	}
}

func TestBounds(t *testing.T) {
	d, as, ec2c := newDouble(t)
	d.AddGroup(fakeaws.Group{Name: "asg", MinSize: 1, MaxSize: 10, DesiredCapacity: 1})
	tests := []struct {
		name             string
		min, max         *int
		wantMin, wantMax int
		wantErr          []string
	}{
		{"ASG's own", nil, nil, 1, 10, nil},
		{"narrowed", ptr(2), ptr(6), 2, 6, nil},
		{"same", ptr(1), ptr(10), 1, 10, nil},
		{"widen min", ptr(0), nil, 0, 0, []string{"minSize 0", "MinSize 1", "only narrow"}},
		{"widen max", nil, ptr(20), 0, 0, []string{"maxSize 20", "MaxSize 10", "only narrow"}},
		{"empty after narrowing", ptr(11), nil, 0, 0, []string{"minSize 11 is above maxSize 10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg", MinSize: tt.min, MaxSize: tt.max})
			gs, err := p.NodeGroups(context.Background())
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("err %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if gs[0].Bounds().Min != tt.wantMin || gs[0].Bounds().Max != tt.wantMax {
				t.Fatalf("bounds = %d..%d, want %d..%d", gs[0].Bounds().Min, gs[0].Bounds().Max, tt.wantMin, tt.wantMax)
			}
		})
	}
}

func TestInstanceStates(t *testing.T) {
	d, as, ec2c := newDouble(t)
	d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 20, AvailabilityZones: []string{"us-east-1b"}})
	tests := []struct {
		lifecycle string
		want      providers.InstanceState
	}{
		{"Pending", providers.StateCreating},
		{"Pending:Wait", providers.StateCreating},
		{"Pending:Proceed", providers.StateCreating},
		{"Warmed:Pending", providers.StateCreating},
		{"Warmed:Running", providers.StateCreating},
		{"InService", providers.StateRunning},
		{"Standby", providers.StateRunning},
		{"EnteringStandby", providers.StateRunning},
		{"Quarantined", providers.StateRunning},
		{"ReplacingRootVolume", providers.StateRunning},
		{"Terminating", providers.StateDeleting},
		{"Terminating:Wait", providers.StateDeleting},
		{"Terminating:Proceed", providers.StateDeleting},
		{"Terminated", providers.StateDeleting},
		{"Detaching", providers.StateDeleting},
		{"Detached", providers.StateDeleting},
		{"Warmed:Terminating", providers.StateDeleting},
	}
	want := map[string]providers.InstanceState{}
	for i, tt := range tests {
		id := fmt.Sprintf("i-%017d", i)
		if _, err := d.AddInstance("asg", fakeaws.Instance{ID: id, LifecycleState: tt.lifecycle}); err != nil {
			t.Fatal(err)
		}
		// Warm-pool and standby machines have a state but are not
		// instances of the group (see TestOutOfServiceIsNotCapacity).
		if !strings.HasPrefix(tt.lifecycle, "Warmed:") && !strings.HasSuffix(tt.lifecycle, "Standby") {
			want["aws:///us-east-1b/"+id] = tt.want
		}
		if got := ngaws.State(tt.lifecycle); got != tt.want {
			t.Errorf("State(%s) = %s, want %s", tt.lifecycle, got, tt.want)
		}
	}
	g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"})
	insts, err := g.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]providers.InstanceState{}
	for _, in := range insts {
		got[in.ProviderID] = in.State
	}
	if len(got) != len(want) {
		t.Fatalf("got %d instances, want %d: %v", len(got), len(want), got)
	}
	for id, st := range want {
		if got[id] != st {
			t.Errorf("%s: state %s, want %s", id, got[id], st)
		}
	}
}

func TestIncreaseSize(t *testing.T) {
	d, as, ec2c := newDouble(t)
	d.AddGroup(fakeaws.Group{Name: "asg", MinSize: 0, MaxSize: 10, DesiredCapacity: 1})
	var launched []string
	var mu sync.Mutex
	d.OnLaunch(func(e fakeaws.Event) {
		mu.Lock()
		defer mu.Unlock()
		launched = append(launched, e.Instance.ProviderID())
	})
	g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg", MaxSize: ptr(6)})
	ctx := context.Background()

	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatalf("IncreaseSize: %v", err)
	}
	st, _ := d.Group("asg")
	if st.DesiredCapacity != 4 || st.HonorCooldownLastRequest != "false" {
		t.Fatalf("desired %d honorCooldown %q, want 4 false", st.DesiredCapacity, st.HonorCooldownLastRequest)
	}
	if n, _ := g.TargetSize(ctx); n != 4 {
		t.Fatalf("TargetSize after increase = %d, want 4", n)
	}
	mu.Lock()
	seen := len(launched)
	mu.Unlock()
	if seen != 3 {
		t.Fatalf("OnLaunch saw %d launches, want 3", seen)
	}

	// Narrowed max 6: 4 + 3 = 7 is refused before any call.
	calls := d.Calls("SetDesiredCapacity")
	err := g.IncreaseSize(ctx, 3)
	if !errors.Is(err, providers.ErrAboveMax) || !strings.Contains(err.Error(), "4 + 3 = 7") || !strings.Contains(err.Error(), "(6)") || !strings.Contains(err.Error(), "aws group asg") {
		t.Fatalf("above max: err = %v", err)
	}
	if d.Calls("SetDesiredCapacity") != calls {
		t.Fatalf("SetDesiredCapacity called above max")
	}
	if err := g.IncreaseSize(ctx, 0); err == nil {
		t.Fatalf("IncreaseSize(0) succeeded")
	}

	// The check reads the ASG afresh: someone lowering its max is seen
	// before this process describes the groups again.
	if err := d.SetBounds("asg", 0, 4); err != nil {
		t.Fatal(err)
	}
	calls = d.Calls("SetDesiredCapacity")
	if err := g.IncreaseSize(ctx, 1); !errors.Is(err, providers.ErrAboveMax) || !strings.Contains(err.Error(), "(4)") {
		t.Fatalf("after the ASG's max was lowered: err = %v", err)
	}
	if d.Calls("SetDesiredCapacity") != calls {
		t.Fatalf("SetDesiredCapacity called above the ASG's new max")
	}
}

func TestIncreaseSizeBootsThroughOnLaunch(t *testing.T) {
	d, as, ec2c := newDouble(t, fakeaws.WithRegion("eu-west-1"))
	d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 3, AvailabilityZones: []string{"eu-west-1a", "eu-west-1b"}})
	// A test bed would register a Node with this provider ID here.
	registered := make(chan string, 3)
	d.OnLaunch(func(e fakeaws.Event) { registered <- e.Instance.ProviderID() })
	ctx := context.Background()
	p := newProvider(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"})
	g := groups(t, p)[0]
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	ids := []string{<-registered, <-registered}
	g = groups(t, p)[0]
	insts, _ := g.Instances(ctx)
	for _, in := range insts {
		if in.State != providers.StateCreating || !slices.Contains(ids, in.ProviderID) {
			t.Fatalf("before boot: %+v (launched %v)", in, ids)
		}
	}
	if zones := []string{strings.Split(ids[0], "/")[3], strings.Split(ids[1], "/")[3]}; zones[0] == zones[1] {
		t.Fatalf("launches not spread over zones: %v", ids)
	}
	d.Boot("asg")
	insts, _ = groups(t, p)[0].Instances(ctx)
	for _, in := range insts {
		if in.State != providers.StateRunning {
			t.Fatalf("after boot: %+v", in)
		}
	}
}

func TestDeleteInstance(t *testing.T) {
	ctx := context.Background()
	type fixture struct {
		d   *fakeaws.Server
		g   providers.NodeGroup
		ids map[string]string // lifecycle → provider ID
	}
	setup := func(t *testing.T, minSize int) fixture {
		d, as, ec2c := newDouble(t)
		d.AddGroup(fakeaws.Group{Name: "asg", MinSize: minSize, MaxSize: 10, DesiredCapacity: 2})
		d.AddGroup(fakeaws.Group{Name: "other", MaxSize: 10, DesiredCapacity: 1})
		ids := map[string]string{}
		st, _ := d.Group("asg")
		ids["InService"] = st.Instances[0].ProviderID()
		term, _ := d.AddInstance("asg", fakeaws.Instance{LifecycleState: "Terminating:Wait"})
		ids["Terminating"] = term.ProviderID()
		other, _ := d.Group("other")
		ids["other"] = other.Instances[0].ProviderID()
		return fixture{d: d, g: oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"}), ids: ids}
	}
	tests := []struct {
		name        string
		minSize     int
		target      func(f fixture) string
		wantErr     error
		wantDesired int
		wantCalls   int
	}{
		{"terminates and decrements", 0, func(f fixture) string { return f.ids["InService"] }, nil, 1, 1},
		{"already terminating", 0, func(f fixture) string { return f.ids["Terminating"] }, nil, 2, 0},
		{"instance of another group", 0, func(f fixture) string { return f.ids["other"] }, providers.ErrUnknownInstance, 2, 0},
		{"no such instance", 0, func(fixture) string { return "aws:///us-east-1a/i-0000000000000dead" }, providers.ErrUnknownInstance, 2, 0},
		{"not an EC2 provider ID", 0, func(fixture) string { return "kwok://node-1" }, providers.ErrUnknownInstance, 2, 0},
		{"below min", 2, func(f fixture) string { return f.ids["InService"] }, providers.ErrBelowMin, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, tt.minSize)
			target := tt.target(f)
			err := f.g.DeleteInstance(ctx, target)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "aws group asg") {
				t.Fatalf("error does not name the group: %v", err)
			}
			st, _ := f.d.Group("asg")
			if st.DesiredCapacity != tt.wantDesired {
				t.Fatalf("desired = %d, want %d", st.DesiredCapacity, tt.wantDesired)
			}
			if c := f.d.Calls("TerminateInstanceInAutoScalingGroup"); c != tt.wantCalls {
				t.Fatalf("terminate calls = %d, want %d", c, tt.wantCalls)
			}
			if tt.wantCalls == 1 {
				if got := f.d.LastRequest("TerminateInstanceInAutoScalingGroup")["ShouldDecrementDesiredCapacity"]; !slices.Equal(got, []string{"true"}) {
					t.Fatalf("ShouldDecrementDesiredCapacity = %v", got)
				}
				insts, _ := f.g.Instances(ctx)
				for _, in := range insts {
					if in.ProviderID == target && in.State != providers.StateDeleting {
						t.Fatalf("deleted instance reported %s", in.State)
					}
				}
				if n, _ := f.g.TargetSize(ctx); n != tt.wantDesired {
					t.Fatalf("TargetSize = %d, want %d", n, tt.wantDesired)
				}
			}
		})
	}
}

func TestDecreaseTargetSize(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		minSize     int
		delta       int
		wantErr     error
		wantDesired int
	}{
		{"gives back unstarted capacity", 0, -2, nil, 3},
		{"more than unstarted", 0, -3, providers.ErrNothingToDecrease, 5},
		{"below min", 4, -2, providers.ErrBelowMin, 5},
		{"positive delta", 0, 1, nil, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, as, ec2c := newDouble(t)
			d.AddGroup(fakeaws.Group{Name: "asg", MinSize: tt.minSize, MaxSize: 10, DesiredCapacity: 2})
			// Desired 5 with 3 machines (one Pending): 2 never started.
			if err := d.FailLaunches("asg", "We currently do not have sufficient m5.large capacity."); err != nil {
				t.Fatal(err)
			}
			g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"})
			if err := g.IncreaseSize(ctx, 3); err != nil {
				t.Fatal(err)
			}
			if _, err := d.AddInstance("asg", fakeaws.Instance{LifecycleState: "Pending"}); err != nil {
				t.Fatal(err)
			}
			err := g.DecreaseTargetSize(ctx, tt.delta)
			switch {
			case tt.delta >= 0:
				if err == nil || !strings.Contains(err.Error(), "must be negative") {
					t.Fatalf("err = %v", err)
				}
			case tt.wantErr == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			st, _ := d.Group("asg")
			if st.DesiredCapacity != tt.wantDesired {
				t.Fatalf("desired = %d, want %d", st.DesiredCapacity, tt.wantDesired)
			}
		})
	}
}

func TestFailedLaunchesShowAsPlaceholders(t *testing.T) {
	d, as, ec2c := newDouble(t)
	d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 10, DesiredCapacity: 1, AvailabilityZones: []string{"us-east-1c"}})
	const msg = "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1c)."
	if err := d.FailLaunches("asg", msg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := newProvider(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"})
	if err := groups(t, p)[0].IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	g := groups(t, p)[0]
	insts, err := g.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var placeholders []providers.Instance
	for _, in := range insts {
		if in.Error != "" {
			placeholders = append(placeholders, in)
		}
	}
	if len(insts) != 3 || len(placeholders) != 2 || !strings.Contains(placeholders[0].Error, "sufficient m5.large capacity") ||
		placeholders[0].ProviderID != "aws:///us-east-1c/i-placeholder-asg-0" || placeholders[0].State != providers.StateCreating {
		t.Fatalf("instances = %+v", insts)
	}
	if err := g.DeleteInstance(ctx, placeholders[1].ProviderID); err != nil {
		t.Fatalf("delete placeholder: %v", err)
	}
	if st, _ := d.Group("asg"); st.DesiredCapacity != 2 {
		t.Fatalf("desired = %d, want 2", st.DesiredCapacity)
	}
	if err := g.DeleteInstance(ctx, "aws:///us-east-1c/i-placeholder-someone-else-0"); !errors.Is(err, providers.ErrUnknownInstance) {
		t.Fatalf("foreign placeholder: err = %v", err)
	}

	// Once launches work, the missing machine comes and no error remains.
	if err := d.FailLaunches("asg", ""); err != nil {
		t.Fatal(err)
	}
	insts, err = groups(t, p)[0].Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range insts {
		if in.Error != "" || strings.Contains(in.ProviderID, "placeholder") {
			t.Fatalf("after recovery: %+v", insts)
		}
	}
}

func TestRetriesThrottlingAnd5xx(t *testing.T) {
	tests := []struct {
		name   string
		action string
		fault  fakeaws.Fault
		n      int
		run    func(ctx context.Context, p *ngaws.Provider) error
	}{
		{"throttled describe", "DescribeAutoScalingGroups", fakeaws.Throttling(), 3, func(ctx context.Context, p *ngaws.Provider) error {
			_, err := p.NodeGroups(ctx)
			return err
		}},
		{"500 on set desired", "SetDesiredCapacity", fakeaws.InternalFailure(), 2, func(ctx context.Context, p *ngaws.Provider) error {
			gs, err := p.NodeGroups(ctx)
			if err != nil {
				return err
			}
			return gs[0].IncreaseSize(ctx, 1)
		}},
		{"503 on terminate", "TerminateInstanceInAutoScalingGroup", fakeaws.ServiceUnavailable(), 2, func(ctx context.Context, p *ngaws.Provider) error {
			gs, err := p.NodeGroups(ctx)
			if err != nil {
				return err
			}
			insts, _ := gs[0].Instances(ctx)
			return gs[0].DeleteInstance(ctx, insts[0].ProviderID)
		}},
		{"EC2 RequestLimitExceeded", "DescribeInstanceTypes", fakeaws.RequestLimitExceeded(), 2, func(ctx context.Context, p *ngaws.Provider) error {
			gs, err := p.NodeGroups(ctx)
			if err != nil {
				return err
			}
			_, err = gs[0].Template(ctx)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, as, ec2c := newDouble(t)
			d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 5, DesiredCapacity: 2, MixedInstanceTypes: []string{"m5.large"}})
			d.FailNext(tt.action, tt.n, tt.fault)
			p := newProvider(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"})
			if err := tt.run(context.Background(), p); err != nil {
				t.Fatalf("not retried to success: %v", err)
			}
			if got := d.Calls(tt.action); got < tt.n+1 {
				t.Fatalf("%s calls = %d, want %d faults + 1", tt.action, got, tt.n)
			}
		})
	}

	t.Run("gives up after 5 attempts", func(t *testing.T) {
		d, as, ec2c := newDouble(t)
		d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 5})
		d.FailNext("DescribeAutoScalingGroups", 10, fakeaws.Throttling())
		_, err := newProvider(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"}).NodeGroups(context.Background())
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "Throttling" || !strings.Contains(err.Error(), "asg") {
			t.Fatalf("err = %v", err)
		}
		if got := d.Calls("DescribeAutoScalingGroups"); got != 5 {
			t.Fatalf("attempts = %d, want 5", got)
		}
	})
}

func TestValidationErrorIsNotRetried(t *testing.T) {
	tests := []struct {
		name      string
		fault     fakeaws.Fault
		wantIs    error
		wantInMsg string
	}{
		{"AWS above max", fakeaws.ValidationError("New SetDesiredCapacity value 3 is above max value 2 for the AutoScalingGroup."), providers.ErrAboveMax, "above max value 2"},
		{"other validation error", fakeaws.ValidationError("Group asg is pending delete."), nil, "pending delete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, as, ec2c := newDouble(t)
			d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 5, DesiredCapacity: 2})
			g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"})
			d.FailNext("SetDesiredCapacity", 1, tt.fault)
			err := g.IncreaseSize(context.Background(), 1)
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != "ValidationError" {
				t.Fatalf("err = %v, want the ValidationError", err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Fatalf("err = %v, want %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantInMsg) || !strings.Contains(err.Error(), "aws group asg: set desired capacity 3") {
				t.Fatalf("err = %v", err)
			}
			if c := d.Calls("SetDesiredCapacity"); c != 1 {
				t.Fatalf("SetDesiredCapacity calls = %d, want 1 (not retried)", c)
			}
		})
	}

	t.Run("AWS's own below-min on terminate", func(t *testing.T) {
		d, as, ec2c := newDouble(t)
		d.AddGroup(fakeaws.Group{Name: "asg", MinSize: 2, MaxSize: 5, DesiredCapacity: 3})
		g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"})
		st, _ := d.Group("asg")
		// Someone raises the ASG's min between our read and AWS's check.
		d.FailNext("TerminateInstanceInAutoScalingGroup", 1, fakeaws.ValidationError("Currently, desiredSize equals minSize (3). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size."))
		err := g.DeleteInstance(context.Background(), st.Instances[0].ProviderID())
		if !errors.Is(err, providers.ErrBelowMin) || !strings.Contains(err.Error(), "min size constraint") {
			t.Fatalf("err = %v", err)
		}
	})
}

// Concurrent increases through this process never lose an increment and
// never pass the maximum: each reads the current desired capacity under the
// ASG's lock, and AWS would refuse anything above its MaxSize anyway.
func TestConcurrentIncreaseSize(t *testing.T) {
	d, as, ec2c := newDouble(t)
	d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 7, DesiredCapacity: 0})
	p := newProvider(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"})
	ctx := context.Background()
	const workers = 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		// Each worker has its own group object, as separate cycles would.
		g := groups(t, p)[0]
		wg.Go(func() { errs <- g.IncreaseSize(ctx, 1) })
	}
	wg.Wait()
	close(errs)
	ok, above := 0, 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, providers.ErrAboveMax):
			above++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	st, _ := d.Group("asg")
	if ok != 7 || above != 3 || st.DesiredCapacity != 7 || len(st.Instances) != 7 {
		t.Fatalf("ok %d above %d desired %d instances %d, want 7 3 7 7", ok, above, st.DesiredCapacity, len(st.Instances))
	}
}

// TestOutOfServiceIsNotCapacity: machines in an ASG's warm pool (Warmed:*)
// or in standby are not part of the group's capacity: they are not its
// instances, do not stand in for missing capacity, and removing one is
// refused rather than taking a unit of desired capacity from the machines in
// service.
func TestOutOfServiceIsNotCapacity(t *testing.T) {
	ctx := context.Background()
	d, as, ec2c := newDouble(t)
	d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 3, DesiredCapacity: 2, AvailabilityZones: []string{"us-east-1b"}})
	st, _ := d.Group("asg")
	var inService []string
	for _, in := range st.Instances {
		inService = append(inService, in.ProviderID())
	}
	out := map[string]string{} // provider ID → lifecycle state
	for _, state := range []string{"Warmed:Pending", "Warmed:Stopped", "Warmed:Running", "Warmed:Hibernated", "Warmed:Terminating", "Standby", "EnteringStandby"} {
		in, err := d.AddInstance("asg", fakeaws.Instance{LifecycleState: state})
		if err != nil {
			t.Fatal(err)
		}
		out[in.ProviderID()] = state
	}
	g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"})

	if n, err := g.TargetSize(ctx); err != nil || n != 2 {
		t.Errorf("TargetSize = %d, %v; want 2", n, err)
	}
	insts, err := g.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range insts {
		ids = append(ids, in.ProviderID)
		if state, ok := out[in.ProviderID]; ok {
			t.Errorf("out-of-service machine %s (%s) listed as an instance (%s)", in.ProviderID, state, in.State)
		}
	}
	slices.Sort(ids)
	slices.Sort(inService)
	if !slices.Equal(ids, inService) {
		t.Errorf("instances %v, want the machines in service %v", ids, inService)
	}

	for id, state := range out {
		err := g.DeleteInstance(ctx, id)
		if !errors.Is(err, providers.ErrUnknownInstance) {
			t.Errorf("DeleteInstance of a %s machine: %v, want ErrUnknownInstance", state, err)
		}
	}
	if c := d.Calls("TerminateInstanceInAutoScalingGroup"); c != 0 {
		t.Errorf("%d terminate calls for out-of-service machines", c)
	}
	if st, _ := d.Group("asg"); st.DesiredCapacity != 2 || len(st.Instances) != 2+len(out) {
		t.Errorf("desired %d, %d machines after refused removals; want 2 and %d", st.DesiredCapacity, len(st.Instances), 2+len(out))
	}
	if n, err := g.TargetSize(ctx); err != nil || n != 2 {
		t.Errorf("TargetSize after refused removals = %d, %v; want 2", n, err)
	}

	// Out-of-service machines leave the max's headroom alone: one more fits.
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Errorf("IncreaseSize(1) to the max: %v", err)
	}
}

// TestStandbyDoesNotFillCapacity: a standby machine does not stand in for
// a launch that failed: the shortfall shows as a failed placeholder, and its
// unit of desired capacity can be given back.
func TestStandbyDoesNotFillCapacity(t *testing.T) {
	ctx := context.Background()
	d, as, ec2c := newDouble(t)
	d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 3, DesiredCapacity: 1, AvailabilityZones: []string{"us-east-1b"}})
	if _, err := d.AddInstance("asg", fakeaws.Instance{LifecycleState: "Standby"}); err != nil {
		t.Fatal(err)
	}
	if err := d.FailLaunches("asg", "We currently do not have sufficient capacity."); err != nil {
		t.Fatal(err)
	}
	g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"})
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	insts, err := g.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, in := range insts {
		if in.Error != "" {
			failed++
		}
	}
	if len(insts) != 2 || failed != 1 {
		t.Errorf("instances %+v, want the machine in service and one failed placeholder", insts)
	}
	if err := g.DecreaseTargetSize(ctx, -1); err != nil {
		t.Errorf("DecreaseTargetSize(-1) over the failed launch: %v", err)
	}
}

// The snapshot's zones of an ASG are its Availability Zones; the template
// names the zone only when there is one, since the ASG picks among several.
func TestZones(t *testing.T) {
	d, as, ec2c := newDouble(t, fakeaws.WithRegion("eu-west-1"))
	tags := map[string]string{
		"k8s.io/cluster-autoscaler/node-template/resources/cpu":    "4",
		"k8s.io/cluster-autoscaler/node-template/resources/memory": "16Gi",
	}
	d.AddGroup(fakeaws.Group{Name: "multi", MaxSize: 3, Tags: tags, AvailabilityZones: []string{"eu-west-1c", "eu-west-1a", "eu-west-1b"}})
	d.AddGroup(fakeaws.Group{Name: "single", MaxSize: 3, Tags: tags, AvailabilityZones: []string{"eu-west-1b"}})
	ctx := context.Background()
	for _, tc := range []struct {
		asg, label string
		want       []string
	}{
		{"multi", "", []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
		{"single", "eu-west-1b", []string{"eu-west-1b"}},
	} {
		g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: tc.asg})
		tpl, err := g.Template(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := providers.Zones(g, tpl); !slices.Equal(got, tc.want) {
			t.Errorf("%s: zones = %v, want %v", tc.asg, got, tc.want)
		}
		if got := tpl.Labels["topology.kubernetes.io/zone"]; got != tc.label {
			t.Errorf("%s: template zone label = %q, want %q", tc.asg, got, tc.label)
		}
	}
}

// A group reports each machine's lifecycle state as described: a drain
// proves a termination hook holds the machine by Terminating:Wait.
func TestLifecycleState(t *testing.T) {
	d, as, ec2c := newDouble(t)
	d.AddGroup(fakeaws.Group{Name: "held", MaxSize: 3, DesiredCapacity: 2})
	if err := d.PutLifecycleHook(fakeaws.LifecycleHook{Group: "held", Name: "drain", Transition: fakeaws.TransitionTerminating}); err != nil {
		t.Fatal(err)
	}
	g0, _ := d.Group("held")
	if _, err := d.ScaleIn("held", g0.Instances[0].ID); err != nil {
		t.Fatal(err)
	}
	g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "held"}).(*ngaws.Group)
	if lc, ok := g.LifecycleState(g0.Instances[0].ID); !ok || lc != fakeaws.StateTerminatingWait {
		t.Errorf("held machine: %q %t, want Terminating:Wait", lc, ok)
	}
	if lc, ok := g.LifecycleState(g0.Instances[1].ID); !ok || lc != fakeaws.StateInService {
		t.Errorf("other machine: %q %t, want InService", lc, ok)
	}
	if _, ok := g.LifecycleState("i-0000000000000dead"); ok {
		t.Error("a machine the group does not list has a state")
	}
}
