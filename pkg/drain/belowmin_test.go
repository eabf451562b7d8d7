package drain_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/providers"
)

// TestBelowMinDecidedAtPrepare: belowMin may go below nodetide's minimum
// (here a schedule's), never below the provider's own; that is refused at
// Prepare, with nothing changed, not at Terminate after the pods moved.
func TestBelowMinDecidedAtPrepare(t *testing.T) {
	ctx := context.Background()
	t.Run("provider's own min refuses at Prepare", func(t *testing.T) {
		b := newBed(t, 1, 1)
		victim := b.nodes(t)[0].Name
		s := b.start(victim, time.Minute, drain.PolicyAbort)
		s.BelowMin = true
		_, err := b.steps.Run(ctx, "Prepare", s)
		if drain.ErrorName(err) != drain.ErrNameBelowMinSize || !strings.Contains(err.Error(), "provider (kwok) enforces, 1") {
			t.Fatalf("Prepare with belowMin at the provider's min: %v, want %s naming the provider's min 1", err, drain.ErrNameBelowMinSize)
		}
		b.untouched(t, victim)
	})
	t.Run("below a schedule's min completes", func(t *testing.T) {
		b := newBed(t, 0, 2)
		two := 2
		narrowed, err := (&providers.Narrowing{Min: &two, From: "schedule day"}).Narrow(b.group)
		if err != nil {
			t.Fatal(err)
		}
		b.steps.Groups = func(context.Context) ([]providers.NodeGroup, error) { return []providers.NodeGroup{narrowed}, nil }
		b.deploy(t, "web", 2, "")
		victim := b.podNode(t, "web")
		if _, err := b.steps.Run(ctx, "Prepare", b.start(victim, time.Minute, drain.PolicyAbort)); drain.ErrorName(err) != drain.ErrNameBelowMinSize ||
			!strings.Contains(err.Error(), "set by schedule day") {
			t.Fatalf("Prepare without belowMin: %v, want %s naming the schedule", err, drain.ErrNameBelowMinSize)
		}
		s := b.start(victim, time.Minute, drain.PolicyAbort)
		s.BelowMin = true
		if s, err = b.runSteps(t, s); err != nil {
			t.Fatalf("belowMin drain: %v (state %+v)", err, s)
		}
		if got := len(b.nodes(t)); got != 1 {
			t.Errorf("group has %d nodes, want 1", got)
		}
		b.cp.WaitPodsRunning(t, b.ns, "app=web", 2, time.Minute)
	})
}
