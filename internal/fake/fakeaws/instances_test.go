package fakeaws_test

import (
	"context"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
)

// DescribeInstances and DescribeSpotInstanceRequests through the real SDK:
// on-demand and Spot machines, EC2's errors for malformed and unknown IDs,
// the state a termination hook and a reap leave, and a Spot interruption
// on the request's status.
func TestDescribeInstancesAndSpotRequests(t *testing.T) {
	d := fakeaws.New()
	defer d.Close()
	d.AddGroup(fakeaws.Group{Name: "od", MaxSize: 3, DesiredCapacity: 1})
	d.AddGroup(fakeaws.Group{Name: "spot", MaxSize: 3, DesiredCapacity: 2, Spot: true})
	_, ec2c, _ := clients(t, d, d.Region())
	ctx := context.Background()
	od, _ := d.Group("od")
	spot, _ := d.Group("spot")
	describe := func(id string) (ec2types.Instance, error) {
		out, err := ec2c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			return ec2types.Instance{}, err
		}
		if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
			t.Fatalf("DescribeInstances %s: %+v, want one reservation of one instance", id, out)
		}
		return out.Reservations[0].Instances[0], nil
	}
	in, err := describe(od.Instances[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.State.Name != ec2types.InstanceStateNameRunning || *in.State.Code != 16 || in.InstanceLifecycle != "" || in.SpotInstanceRequestId != nil ||
		*in.Placement.AvailabilityZone != od.Instances[0].AvailabilityZone || in.InstanceType != "m5.large" {
		t.Errorf("on-demand instance: %+v", in)
	}
	sp := spot.Instances[0]
	in, err = describe(sp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot || in.SpotInstanceRequestId == nil || *in.SpotInstanceRequestId != sp.SpotRequestID {
		t.Fatalf("spot instance: lifecycle %q, request %v, want spot, %s", in.InstanceLifecycle, in.SpotInstanceRequestId, sp.SpotRequestID)
	}
	request := func() ec2types.SpotInstanceRequest {
		t.Helper()
		out, err := ec2c.DescribeSpotInstanceRequests(ctx, &ec2.DescribeSpotInstanceRequestsInput{SpotInstanceRequestIds: []string{sp.SpotRequestID}})
		if err != nil || len(out.SpotInstanceRequests) != 1 {
			t.Fatalf("DescribeSpotInstanceRequests: %+v, %v", out, err)
		}
		return out.SpotInstanceRequests[0]
	}
	if r := request(); *r.Status.Code != fakeaws.SpotFulfilled || r.State != ec2types.SpotInstanceStateActive || *r.InstanceId != sp.ID {
		t.Errorf("spot request before the warning: %s %s %s", *r.Status.Code, r.State, *r.InstanceId)
	}
	if _, err := d.InterruptSpot(sp.ID, "terminate"); err != nil {
		t.Fatal(err)
	}
	if r := request(); *r.Status.Code != fakeaws.SpotMarkedForTermination {
		t.Errorf("spot request after the warning: %s", *r.Status.Code)
	}
	if _, err := d.InterruptSpot(od.Instances[0].ID, "terminate"); err == nil {
		t.Error("an on-demand machine was marked for a Spot interruption")
	}

	for _, tt := range []struct{ id, code string }{
		{"i-123", "InvalidInstanceID.Malformed"},
		{"i-0000000000000dead", "InvalidInstanceID.NotFound"},
	} {
		if _, err := describe(tt.id); err == nil {
			t.Errorf("DescribeInstances %s: no error", tt.id)
		} else if code, msg := apiCode(t, err); code != tt.code || msg == "" {
			t.Errorf("DescribeInstances %s: %s %q, want %s", tt.id, code, msg, tt.code)
		}
	}
	for _, tt := range []struct{ id, code string }{
		{"sir-", "InvalidSpotInstanceRequestID.Malformed"},
		{"sir-0000dead", "InvalidSpotInstanceRequestID.NotFound"},
	} {
		_, err := ec2c.DescribeSpotInstanceRequests(ctx, &ec2.DescribeSpotInstanceRequestsInput{SpotInstanceRequestIds: []string{tt.id}})
		if err == nil {
			t.Errorf("DescribeSpotInstanceRequests %s: no error", tt.id)
		} else if code, _ := apiCode(t, err); code != tt.code {
			t.Errorf("DescribeSpotInstanceRequests %s: %s, want %s", tt.id, code, tt.code)
		}
	}

	// Scaled in: running while the hook holds it, shutting down after,
	// terminated (and still described) once reaped.
	if err := d.PutLifecycleHook(fakeaws.LifecycleHook{Group: "od", Name: "h", Transition: fakeaws.TransitionTerminating, DefaultResult: fakeaws.ResultContinue}); err != nil {
		t.Fatal(err)
	}
	id := od.Instances[0].ID
	act, err := d.ScaleIn("od", id)
	if err != nil {
		t.Fatal(err)
	}
	states := []ec2types.InstanceStateName{}
	state := func() {
		in, err := describe(id)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, in.State.Name)
	}
	state()
	if _, err := d.ScaleIn("od", id); err == nil {
		t.Fatal("scaled in twice")
	}
	as, _, _ := clients(t, d, d.Region())
	if _, err := as.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: awssdk.String("od"),
		LifecycleHookName: awssdk.String("h"), LifecycleActionToken: awssdk.String(act.Token), LifecycleActionResult: awssdk.String("CONTINUE")}); err != nil {
		t.Fatal(err)
	}
	state()
	d.Reap("od")
	state()
	want := []ec2types.InstanceStateName{"running", "shutting-down", "terminated"}
	if len(states) != 3 || states[0] != want[0] || states[1] != want[1] || states[2] != want[2] {
		t.Errorf("EC2 states through the scale-in: %v, want %v", states, want)
	}
}
