package drain

import (
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/state"
)

// A step holds its copy of the drain record while it acts; the drain
// function may join a lifecycle action to the drain meanwhile. The step's
// next write keeps the action (its Terminate completes the hook), and once
// the step has recorded Terminating no further action joins.
func TestStepWritesKeepAJoinedLifecycleAction(t *testing.T) {
	ctx := t.Context()
	store := state.NewMemory("c")
	steps := &Steps{Store: store}
	h := &Handler{Steps: steps}
	begun, err := store.BeginDrain(ctx, state.DrainRecord{Node: "node-a", ID: "drain-1", NodeGroup: "workers",
		StartedAt: time.Unix(0, 0).UTC(), Phase: state.PhasePrepared})
	if err != nil {
		t.Fatal(err)
	}
	stepCopy := begun // what the runner read for the step

	action := Interruption{Interruption: state.Interruption{Kind: state.InterruptLifecycle, InstanceID: "i-1",
		AutoScalingGroup: "workers", Hook: "nodetide-drain", Token: "tok"}}
	joined, err := h.joinRunning(ctx, "node-a", action)
	if err != nil || joined != "drain-1" {
		t.Fatalf("joinRunning = %q, %v; want drain-1", joined, err)
	}

	if err := steps.advance(ctx, &stepCopy, state.PhaseEvicted); err != nil {
		t.Fatalf("the step's write from its older copy: %v", err)
	}
	stored, err := store.GetDrain(ctx, "node-a", "drain-1")
	if err != nil {
		t.Fatal(err)
	}
	if stored.Interruption == nil || stored.Interruption.Token != "tok" || stored.Phase != state.PhaseEvicted {
		t.Fatalf("stored record after the step's write: phase %v, interruption %+v; want evicted with the joined action",
			stored.Phase, stored.Interruption)
	}

	// Terminate records Terminating; a second action does not join then.
	if err := steps.advance(ctx, &stepCopy, state.PhaseTerminating); err != nil {
		t.Fatal(err)
	}
	other := action
	other.Token = "tok-2"
	if id, err := h.joinRunning(ctx, "node-a", other); err != nil || id != "" {
		t.Fatalf("joining a terminating drain = %q, %v; want none", id, err)
	}
}
