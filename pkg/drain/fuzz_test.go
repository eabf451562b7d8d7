package drain

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseEvent: whatever the payload, ParseEvent does not panic; an event
// it accepts encodes and parses back to the same event; an accepted step's
// state is valid JSON; and a named node is never empty (which enable would
// otherwise take for every node). An interruption the cloud sends names a
// well-formed machine (and token).
//
// Run it longer with: go test -run '^$' -fuzz FuzzParseEvent ./pkg/drain/
func FuzzParseEvent(f *testing.F) {
	for _, seed := range []string{
		`{"step":"Cordon","state":{"node":"n","drainId":"d","deadline":"2026-11-30T10:00:00Z","policy":"abort","surge":true}}`,
		`{"action":"shutdown","node":"n","policy":"force","timeout":"5m","belowMin":true}`,
		`{"action":"enable"}`,
		`{"action":"enable","node":"ip-10-0-12-34.eu-west-1.compute.internal"}`,
		`{"action":"enable","node":""}`,
		`{"action":"shutdown","node":"n","timeout":"2562047h"}`,
		`{"action":"enable","node":"n","node":""}`,
		`{"Action":"enable","Node":"n"}`,
		`{"action":"enable","node":"n"} {"action":"enable"}`,
	} {
		f.Add([]byte(seed))
	}
	// The events the cloud sends (an interruption of a machine).
	samples, _ := filepath.Glob("../../events/drain-*.json")
	for _, path := range samples {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		ev, err := ParseEvent(payload)
		if err != nil {
			return
		}
		if ins := ev.Interruptions(); len(ins) > 0 {
			// Read from an EventBridge envelope, not a request: what acts
			// is each machine's ID (and a lifecycle action's token).
			for _, in := range ins {
				if !instanceIDPattern.MatchString(in.InstanceID) || in.At.IsZero() {
					t.Fatalf("%s: accepted interruption %+v", payload, in)
				}
				if in.Kind == "lifecycle" && (!tokenPattern.MatchString(in.Token) || in.Hook == "" || in.AutoScalingGroup == "") {
					t.Fatalf("%s: accepted lifecycle action %+v", payload, in)
				}
			}
			return
		}
		enc, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", ev, err)
		}
		again, err := ParseEvent(enc)
		if err != nil {
			t.Fatalf("%s accepted, but its encoding %s: %v", payload, enc, err)
		}
		if enc2, _ := json.Marshal(again); !bytes.Equal(enc2, enc) {
			t.Fatalf("%s: encoded %s, parsed and encoded again %s", payload, enc, enc2)
		}
		if ev.Step != "" && !json.Valid(ev.State) {
			t.Fatalf("%s: accepted a step whose state is not JSON", payload)
		}
		if ev.Node != nil && *ev.Node == "" {
			t.Fatalf("%s: accepted an empty node name", payload)
		}
	})
}
