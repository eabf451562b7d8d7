package fakeaws_test

import (
	"context"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// A termination hook holds a machine the group takes out until the action
// completes or its heartbeat timeout passes; completing twice, or with a
// made-up token, is AWS's ValidationError, and heartbeats move the timeout.
func TestLifecycleHookHoldsTermination(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	d := fakeaws.New(fakeaws.WithAutoBoot(), fakeaws.WithClock(clk.now))
	defer d.Close()
	d.AddGroup(fakeaws.Group{Name: "g", MaxSize: 5, DesiredCapacity: 3})
	as, _, _ := clients(t, d, d.Region())
	var gone []string
	d.OnTerminate(func(e fakeaws.Event) { gone = append(gone, e.Instance.ID) })

	if _, err := as.PutLifecycleHook(ctx, &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: awssdk.String("g"), LifecycleHookName: awssdk.String("drain"),
		LifecycleTransition: awssdk.String(fakeaws.TransitionTerminating), DefaultResult: awssdk.String("CONTINUE"),
		HeartbeatTimeout: awssdk.Int32(300),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := as.PutLifecycleHook(ctx, &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: awssdk.String("g"), LifecycleHookName: awssdk.String("bad"),
		LifecycleTransition: awssdk.String(fakeaws.TransitionTerminating), HeartbeatTimeout: awssdk.Int32(10),
	}); err == nil {
		t.Fatal("a heartbeat timeout of 10 s was accepted")
	}
	g, _ := d.Group("g")
	a, err := d.ScaleIn("g", g.Instances[0].ID)
	if err != nil || a.Token == "" {
		t.Fatalf("scale in: %+v, %v", a, err)
	}
	g, _ = d.Group("g")
	if g.DesiredCapacity != 2 || g.Instances[0].LifecycleState != fakeaws.StateTerminatingWait || len(gone) != 0 {
		t.Fatalf("after scale in: desired %d, state %s, gone %v; want 2, Terminating:Wait, none", g.DesiredCapacity, g.Instances[0].LifecycleState, gone)
	}

	complete := func(token string) error {
		_, err := as.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
			AutoScalingGroupName: awssdk.String("g"), LifecycleHookName: awssdk.String("drain"),
			LifecycleActionToken: awssdk.String(token), LifecycleActionResult: awssdk.String("CONTINUE"),
		})
		return err
	}
	if err := complete("00000000-0000-0000-0000-000000000000"); err == nil {
		t.Fatal("an unknown token completed an action")
	} else if code, msg := apiCode(t, err); code != "ValidationError" || msg != "No active Lifecycle Action found with token 00000000-0000-0000-0000-000000000000" {
		t.Fatalf("unknown token: %s %q", code, msg)
	}
	clk.add(4 * time.Minute)
	if _, err := as.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: awssdk.String("g"), LifecycleHookName: awssdk.String("drain"), LifecycleActionToken: awssdk.String(a.Token),
	}); err != nil {
		t.Fatal(err)
	}
	clk.add(4 * time.Minute) // 8 minutes in: past the first timeout, within the heartbeat's
	if got, _ := d.Action(a.Token); got.Result != "" || len(gone) != 0 {
		t.Fatalf("after a heartbeat: %+v, gone %v; want still waiting", got, gone)
	}
	if err := complete(a.Token); err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0] != a.InstanceID {
		t.Fatalf("gone %v, want %s", gone, a.InstanceID)
	}
	if err := complete(a.Token); err == nil {
		t.Fatal("a completed action completed again")
	} else if code, _ := apiCode(t, err); code != "ValidationError" {
		t.Fatalf("completed twice: %s", code)
	}

	// No heartbeat: the default result applies at the timeout.
	g, _ = d.Group("g")
	b, err := d.ScaleIn("g", g.Instances[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	clk.add(299 * time.Second)
	if got, _ := d.Action(b.Token); got.Result != "" {
		t.Fatalf("before the timeout: %+v", got)
	}
	clk.add(time.Second)
	if got, _ := d.Action(b.Token); got.Result != "timeout:CONTINUE" {
		t.Fatalf("at the timeout: %+v, want timeout:CONTINUE", got)
	}
}
