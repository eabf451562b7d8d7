package kamatera

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/fake/fakekamatera"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func pendingTerminate(d *fakekamatera.Double) (string, bool) {
	for _, c := range d.Commands() {
		if c.Info == fakekamatera.InfoTerminate && c.Status == fakekamatera.StatusPending {
			return c.ID, true
		}
	}
	return "", false
}

// terminateBed has two running workers and a provider that follows commands
// for at most wait.
func terminateBed(t *testing.T, wait time.Duration, opts ...fakekamatera.Option) *bed {
	t.Helper()
	d := fakekamatera.New(opts...)
	t.Cleanup(d.Close)
	d.AddServer(fakekamatera.Server{Name: "w-one", Power: true, Tags: tagged("workers")})
	d.AddServer(fakekamatera.Server{Name: "w-two", Power: true, Tags: tagged("workers")})
	return newBedOn(t, d, baseINI(d.URL())+"[nodegroup \"workers\"]\n", nil, WithCommandWait(wait, 5*time.Millisecond))
}

func TestTerminateFollowsItsCommand(t *testing.T) {
	ctx := context.Background()

	t.Run("queued, then complete", func(t *testing.T) {
		b := terminateBed(t, 20*time.Second, fakekamatera.WithQueuedTerminates())
		done := make(chan error, 1)
		go func() { done <- b.group("workers").DeleteInstance(ctx, "kamatera://w-one") }()
		var id string
		waitFor(t, "a pending terminate", func() (ok bool) { id, ok = pendingTerminate(b.d); return ok })
		select {
		case err := <-done:
			t.Fatalf("DeleteInstance returned before its command completed: %v", err)
		default:
		}
		if err := b.d.Complete(id); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("DeleteInstance: %v", err)
		}
		equal(t, "instances", b.state("workers"), []string{"kamatera://w-two=running"})
	})

	t.Run("fails once, retried", func(t *testing.T) {
		b := terminateBed(t, 20*time.Second)
		b.d.FailTerminates(1, "Server is locked by another operation")
		if err := b.group("workers").DeleteInstance(ctx, "kamatera://w-one"); err != nil {
			t.Fatalf("DeleteInstance: %v", err)
		}
		if _, ok := b.d.Server("w-one"); ok {
			t.Error("w-one still there")
		}
		if n := b.d.RequestCount(http.MethodPost, "/service/server/terminate"); n != 2 {
			t.Errorf("%d terminate requests, want 2", n)
		}
	})

	t.Run("always fails: reported, still counted", func(t *testing.T) {
		b := terminateBed(t, 20*time.Second)
		b.d.FailTerminates(10, "Server is locked by another operation")
		err := b.group("workers").DeleteInstance(ctx, "kamatera://w-one")
		if err == nil || !strings.Contains(err.Error(), "Server is locked") || !strings.Contains(err.Error(), "still there") {
			t.Fatalf("DeleteInstance: %v", err)
		}
		if n := b.d.RequestCount(http.MethodPost, "/service/server/terminate"); n != terminateAttempts {
			t.Errorf("%d terminate requests, want %d", n, terminateAttempts)
		}
		// Not forgotten: still running capacity, and removable again.
		equal(t, "instances", b.state("workers"), []string{"kamatera://w-one=running", "kamatera://w-two=running"})
		if n := b.target("workers"); n != 2 {
			t.Errorf("target %d, want 2", n)
		}
	})

	t.Run("still queued, then fails later", func(t *testing.T) {
		b := terminateBed(t, 30*time.Millisecond, fakekamatera.WithQueuedTerminates())
		if err := b.group("workers").DeleteInstance(ctx, "kamatera://w-one"); err != nil {
			t.Fatalf("DeleteInstance: %v", err)
		}
		equal(t, "while queued", b.state("workers"), []string{"kamatera://w-one=deleting", "kamatera://w-two=running"})
		if n := b.target("workers"); n != 1 {
			t.Errorf("target while queued %d, want 1", n)
		}
		id, ok := pendingTerminate(b.d)
		if !ok {
			t.Fatal("no pending terminate")
		}
		if err := b.d.Fail(id, "Terminate failed"); err != nil {
			t.Fatal(err)
		}
		equal(t, "after the failure", b.state("workers"), []string{"kamatera://w-one=running", "kamatera://w-two=running"})
		if n := b.target("workers"); n != 2 {
			t.Errorf("target after the failure %d, want 2", n)
		}
	})

	t.Run("still queued, then complete", func(t *testing.T) {
		b := terminateBed(t, 30*time.Millisecond, fakekamatera.WithQueuedTerminates())
		if err := b.group("workers").DeleteInstance(ctx, "kamatera://w-one"); err != nil {
			t.Fatalf("DeleteInstance: %v", err)
		}
		id, _ := pendingTerminate(b.d)
		if err := b.d.Complete(id); err != nil {
			t.Fatal(err)
		}
		equal(t, "after completion", b.state("workers"), []string{"kamatera://w-two=running"})
		if err := b.group("workers").DeleteInstance(ctx, "kamatera://w-one"); err != nil {
			t.Errorf("deleting again: %v", err)
		}
	})
}

func TestPowerOffMode(t *testing.T) {
	ctx := context.Background()
	d := fakekamatera.New()
	t.Cleanup(d.Close)
	for _, n := range []string{"w-1", "w-2", "w-3"} {
		d.AddServer(fakekamatera.Server{Name: n, Power: true, Tags: tagged("workers")})
	}
	d.AddServer(fakekamatera.Server{Name: "o-off", Power: false, Tags: tagged("other")})
	ini := baseINI(d.URL()) + "poweroff-on-scale-down = true\npoweron-on-scale-up = true\npoweroff-on-scale-down-max-servers = 1\n" + twoGroups
	b := newBedOn(t, d, ini, nil, WithCommandWait(10*time.Second, 5*time.Millisecond))
	g := b.group("workers")

	// A stopped server is kept capacity, not an instance.
	equal(t, "other", b.state("other"), nil)
	if n := b.target("other"); n != 0 {
		t.Errorf("other target %d, want 0", n)
	}

	if err := g.DeleteInstance(ctx, "kamatera://w-1"); err != nil {
		t.Fatalf("DeleteInstance w-1: %v", err)
	}
	if s, ok := d.Server("w-1"); !ok || s.Power {
		t.Fatalf("w-1 should be kept powered off: %+v %v", s, ok)
	}
	equal(t, "after a power-off", b.state("workers"), []string{"kamatera://w-2=running", "kamatera://w-3=running"})
	if n := b.target("workers"); n != 2 {
		t.Errorf("target %d, want 2", n)
	}
	// One kept server is the max: the next removal terminates.
	if err := g.DeleteInstance(ctx, "kamatera://w-2"); err != nil {
		t.Fatalf("DeleteInstance w-2: %v", err)
	}
	if _, ok := d.Server("w-2"); ok {
		t.Error("w-2 kept past poweroff-on-scale-down-max-servers")
	}

	// Scale-up powers the kept server on first, then creates.
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatalf("IncreaseSize: %v", err)
	}
	if n := d.RequestCount(http.MethodPost, "/service/server/poweron"); n != 1 {
		t.Errorf("%d power-ons, want 1", n)
	}
	if n := len(d.CreateRequests()); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	if s, _ := d.Server("w-1"); !s.Power {
		t.Error("w-1 not powered on")
	}
	if n := b.target("workers"); n != 3 {
		t.Errorf("target %d, want 3", n)
	}
	st := b.state("workers")
	// The new server's name is random, so its place in the list is too.
	if len(st) != 3 || !slices.Contains(st, "kamatera://w-1=running") {
		t.Errorf("instances %v", st)
	}
}

func TestPowerOffModeOffTerminates(t *testing.T) {
	b := terminateBed(t, 10*time.Second)
	if err := b.group("workers").DeleteInstance(context.Background(), "kamatera://w-one"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.d.Server("w-one"); ok {
		t.Error("w-one kept without poweroff-on-scale-down")
	}
	if n := b.d.RequestCount(http.MethodPost, "/service/server/poweroff"); n != 0 {
		t.Errorf("%d power-offs", n)
	}
}

// TestWaitingTerminateDoesNotBlockScaleUp: while DeleteInstance follows its
// terminate command, other size changes go on.
func TestWaitingTerminateDoesNotBlockScaleUp(t *testing.T) {
	ctx := context.Background()
	b := terminateBed(t, 20*time.Second, fakekamatera.WithQueuedTerminates())
	done := make(chan error, 1)
	go func() { done <- b.group("workers").DeleteInstance(ctx, "kamatera://w-one") }()
	var id string
	waitFor(t, "a pending terminate", func() (ok bool) { id, ok = pendingTerminate(b.d); return ok })
	if err := b.group("workers").IncreaseSize(ctx, 1); err != nil {
		t.Fatalf("IncreaseSize while a terminate is followed: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("DeleteInstance returned before its command completed: %v", err)
	default:
	}
	if err := b.d.Complete(id); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
}

// TestPowerOffModeTerminatesFailedCreates: a server whose create failed is
// not kept powered off.
func TestPowerOffModeTerminatesFailedCreates(t *testing.T) {
	ctx := context.Background()
	d := fakekamatera.New()
	t.Cleanup(d.Close)
	ini := baseINI(d.URL()) + "poweroff-on-scale-down = true\n" + twoGroups
	b := newBedOn(t, d, ini, nil, WithCommandWait(10*time.Second, 5*time.Millisecond), WithCreateTimeout(time.Minute))
	g := b.group("workers")
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute) // the create never completes: failed
	st := b.state("workers")
	if len(st) != 1 || !strings.Contains(st[0], "!") {
		t.Fatalf("instances %v, want one failed create", st)
	}
	id := strings.SplitN(st[0], "=", 2)[0]
	if err := g.DeleteInstance(ctx, id); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	if n := d.RequestCount(http.MethodPost, "/service/server/poweroff"); n != 0 {
		t.Errorf("a failed create's server was powered off and kept (%d power-offs)", n)
	}
	if len(d.Servers()) != 0 {
		t.Errorf("servers left: %v", d.Servers())
	}
}
