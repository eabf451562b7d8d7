package drain

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// The state machine's Task states and the step table name the same steps:
// a step the ASL invokes that the table lacks would fail every drain
// there, and a table step no Task state invokes is a step no drain runs.
func TestTableNamesTheASLSteps(t *testing.T) {
	body, err := os.ReadFile("../../functions/drain/statemachine.asl.json")
	if err != nil {
		t.Fatal(err)
	}
	var asl struct {
		States map[string]struct {
			Type       string          `json:"Type"`
			Parameters json.RawMessage `json:"Parameters"`
		} `json:"States"`
	}
	if err := json.Unmarshal(body, &asl); err != nil {
		t.Fatalf("statemachine.asl.json: %v", err)
	}
	var invoked []string
	for name, st := range asl.States {
		if st.Type != "Task" {
			continue
		}
		var params struct {
			Step string `json:"step"`
		}
		if err := json.Unmarshal(st.Parameters, &params); err != nil || params.Step == "" {
			t.Errorf("Task state %s passes no step name to the drain function (Parameters %s: %v)", name, st.Parameters, err)
			continue
		}
		invoked = append(invoked, params.Step)
	}
	var table []string
	for _, n := range stepNames() {
		table = append(table, string(n))
	}
	slices.Sort(invoked)
	slices.Sort(table)
	invoked = slices.Compact(invoked)
	if !slices.Equal(invoked, table) {
		t.Errorf("the ASL's Task states invoke steps %v, the step table has %v", invoked, table)
	}
	if len(slices.Compact(slices.Clone(table))) != len(table) {
		t.Errorf("the step table names a step twice: %v", table)
	}
}

// Every entry of the table can run, and each name finds its own entry.
func TestTableEntries(t *testing.T) {
	for _, st := range stepTable() {
		got, ok := lookup(string(st.name))
		if !ok || got.name != st.name || st.run == nil {
			t.Errorf("step %s: lookup found %q (%v), run set %v", st.name, got.name, ok, st.run != nil)
		}
		if !st.checked && (st.endsAgain || st.heartbeat || st.need != 0) {
			t.Errorf("step %s: only a checked step has a record to end again, heartbeat for or need a phase of", st.name)
		}
	}
	if _, ok := lookup("prepare"); ok {
		t.Error("step names are case-sensitive, as the ASL's")
	}
}
