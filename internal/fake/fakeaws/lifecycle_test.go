package fakeaws_test

import (
	"context"
	"fmt"
	"strings"
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

// What a drain proves an action by: a heartbeat with a token no open action
// holds (made up, completed or timed out) is AWS's ValidationError naming
// the token, and DescribeAutoScalingGroups shows the machine
// Terminating:Wait while the hook holds it, Terminating:Proceed after.
func TestLifecycleProofAnswers(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	d := fakeaws.New(fakeaws.WithAutoBoot(), fakeaws.WithClock(clk.now))
	defer d.Close()
	d.AddGroup(fakeaws.Group{Name: "g", MaxSize: 5, DesiredCapacity: 3})
	if err := d.PutLifecycleHook(fakeaws.LifecycleHook{Group: "g", Name: "drain", Transition: fakeaws.TransitionTerminating,
		DefaultResult: fakeaws.ResultContinue, HeartbeatTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	as, _, _ := clients(t, d, d.Region())
	state := func(id string) string {
		out, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"g"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range out.AutoScalingGroups[0].Instances {
			if awssdk.ToString(in.InstanceId) == id {
				return string(in.LifecycleState)
			}
		}
		return "absent"
	}
	heartbeat := func(token string) error {
		_, err := as.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
			AutoScalingGroupName: awssdk.String("g"), LifecycleHookName: awssdk.String("drain"), LifecycleActionToken: awssdk.String(token),
		})
		return err
	}
	refused := func(what, token string) {
		t.Helper()
		err := heartbeat(token)
		if err == nil {
			t.Fatalf("%s: heartbeat accepted", what)
		}
		if code, msg := apiCode(t, err); code != "ValidationError" || msg != "No active Lifecycle Action found with token "+token {
			t.Errorf("%s: %s %q", what, code, msg)
		}
	}
	g, _ := d.Group("g")
	if s := state(g.Instances[0].ID); s != fakeaws.StateInService {
		t.Fatalf("before scale in: %s", s)
	}
	refused("made-up token", "00000000-1111-2222-3333-444444444444")
	a, _ := d.ScaleIn("g", g.Instances[0].ID)
	if s := state(a.InstanceID); s != fakeaws.StateTerminatingWait {
		t.Errorf("held by the hook: %s, want Terminating:Wait", s)
	}
	if err := heartbeat(a.Token); err != nil {
		t.Fatalf("open action: %v", err)
	}
	if _, err := as.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: awssdk.String("g"), LifecycleHookName: awssdk.String("drain"),
		LifecycleActionToken: awssdk.String(a.Token), LifecycleActionResult: awssdk.String("CONTINUE"),
	}); err != nil {
		t.Fatal(err)
	}
	if s := state(a.InstanceID); s != fakeaws.StateTerminatingProceed {
		t.Errorf("after completion: %s, want Terminating:Proceed", s)
	}
	refused("completed action", a.Token)
	b, _ := d.ScaleIn("g", g.Instances[1].ID)
	clk.add(time.Minute)
	refused("timed-out action", b.Token)
	if s := state(b.InstanceID); s != fakeaws.StateTerminatingProceed {
		t.Errorf("after the timeout: %s, want Terminating:Proceed", s)
	}
}

// DescribeLifecycleHooks lists a group's hooks (by name when asked; an
// unknown name is left out); DeleteLifecycleHook first continues the action
// waiting on the hook, so the machine goes at once, and deleting it again
// is AWS's ValidationError.
func TestDeleteLifecycleHookContinuesWaitingActions(t *testing.T) {
	ctx := context.Background()
	d := fakeaws.New(fakeaws.WithAutoBoot())
	defer d.Close()
	d.AddGroup(fakeaws.Group{Name: "g", MaxSize: 5, DesiredCapacity: 2})
	as, _, _ := clients(t, d, d.Region())
	var gone []string
	d.OnTerminate(func(e fakeaws.Event) { gone = append(gone, e.Instance.ID) })
	if err := d.PutLifecycleHook(fakeaws.LifecycleHook{Group: "g", Name: "drain", Transition: fakeaws.TransitionTerminating,
		DefaultResult: fakeaws.ResultContinue, HeartbeatTimeout: 720 * time.Second}); err != nil {
		t.Fatal(err)
	}
	describe := func(names ...string) []string {
		t.Helper()
		out, err := as.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: awssdk.String("g"), LifecycleHookNames: names})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range out.LifecycleHooks {
			got = append(got, fmt.Sprintf("%s %s %s %d %d %s", awssdk.ToString(h.LifecycleHookName), awssdk.ToString(h.AutoScalingGroupName),
				awssdk.ToString(h.LifecycleTransition), awssdk.ToInt32(h.HeartbeatTimeout), awssdk.ToInt32(h.GlobalTimeout), awssdk.ToString(h.DefaultResult)))
		}
		return got
	}
	want := "drain g " + fakeaws.TransitionTerminating + " 720 72000 CONTINUE"
	if got := describe(); len(got) != 1 || got[0] != want {
		t.Fatalf("hooks %q, want [%s]", got, want)
	}
	if got := describe("other"); len(got) != 0 {
		t.Fatalf("hooks named other: %q, want none", got)
	}
	if _, err := as.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: awssdk.String("nope")}); err == nil ||
		!strings.Contains(err.Error(), "ValidationError") {
		t.Fatalf("describe hooks of no group: %v, want a ValidationError", err)
	}

	g, _ := d.Group("g")
	a, err := d.ScaleIn("g", g.Instances[0].ID)
	if err != nil || a.Token == "" {
		t.Fatalf("scale in: %+v, %v", a, err)
	}
	del := func() error {
		_, err := as.DeleteLifecycleHook(ctx, &autoscaling.DeleteLifecycleHookInput{AutoScalingGroupName: awssdk.String("g"), LifecycleHookName: awssdk.String("drain")})
		return err
	}
	if err := del(); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Action(a.Token); got.Result != fakeaws.ResultContinue || len(gone) != 1 || gone[0] != a.InstanceID {
		t.Fatalf("after delete: action result %q, gone %v; want CONTINUE and %s gone", got.Result, gone, a.InstanceID)
	}
	if hooks := d.Hooks("g"); len(hooks) != 0 {
		t.Fatalf("hooks left: %+v", hooks)
	}
	if err := del(); err == nil || !strings.Contains(err.Error(), "ValidationError") || !strings.Contains(err.Error(), "No Lifecycle Hook found with name drain") {
		t.Fatalf("second delete: %v, want a ValidationError", err)
	}
}
