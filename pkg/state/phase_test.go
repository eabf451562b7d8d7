package state_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/state"
)

// The names are what drain records in DynamoDB hold: they must not change.
func TestPhaseNames(t *testing.T) {
	for _, c := range []struct {
		phase state.Phase
		name  string
		json  string
	}{
		{state.PhaseNone, "", `{"node":"n","id":"d"}`},
		{state.PhasePrepared, "prepared", `{"node":"n","id":"d","phase":"prepared"}`},
		{state.PhaseEvicted, "evicted", `{"node":"n","id":"d","phase":"evicted"}`},
		{state.PhaseTerminating, "terminating", `{"node":"n","id":"d","phase":"terminating"}`},
		{state.PhaseTerminated, "terminated", `{"node":"n","id":"d","phase":"terminated"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.phase.String(); got != c.name {
				t.Errorf("String() = %q, want %q", got, c.name)
			}
			if got, err := state.ParsePhase(c.name); err != nil || got != c.phase {
				t.Errorf("ParsePhase(%q) = %v, %v; want %v", c.name, got, err, c.phase)
			}
			body, err := json.Marshal(state.DrainRecord{Node: "n", ID: "d", Phase: c.phase})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(body), `"phase"`) != (c.phase == state.PhaseNone) {
				t.Errorf("record %s: phase field present %v for %v", body, strings.Contains(string(body), `"phase"`), c.phase)
			}
			var rec state.DrainRecord
			if err := json.Unmarshal([]byte(c.json), &rec); err != nil || rec.Phase != c.phase {
				t.Errorf("decode %s: phase %v, %v; want %v", c.json, rec.Phase, err, c.phase)
			}
			if c.phase != state.PhaseNone && !strings.Contains(string(body), `"phase":"`+c.name+`"`) {
				t.Errorf("record %s does not store the phase as %q", body, c.name)
			}
		})
	}
}

func TestPhaseOrder(t *testing.T) {
	order := []state.Phase{state.PhaseNone, state.PhasePrepared, state.PhaseEvicted, state.PhaseTerminating, state.PhaseTerminated}
	for i, p := range order {
		for j, want := range order {
			if got := p.AtLeast(want); got != (i >= j) {
				t.Errorf("%q.AtLeast(%q) = %v, want %v", p, want, got, i >= j)
			}
		}
	}
}

// A record whose phase no version of nodetide writes is not read as some
// other phase.
func TestPhaseUnknownIsRefused(t *testing.T) {
	if _, err := state.ParsePhase("evicting"); err == nil || !strings.Contains(err.Error(), `"evicting"`) {
		t.Errorf("ParsePhase(evicting): %v, want an error naming it", err)
	}
	var rec state.DrainRecord
	if err := json.Unmarshal([]byte(`{"node":"n","id":"d","phase":"Evicted"}`), &rec); err == nil {
		t.Errorf("a record with phase Evicted decoded as %v", rec.Phase)
	}
	if _, err := state.Phase(9).MarshalText(); err == nil {
		t.Error("Phase(9) marshalled")
	}
}
