package schedulefire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzParseEvent: whatever the payload, ParseEvent does not panic, and a
// hand-made request it accepts encodes and parses back to itself.
//
// Run it longer with: go test -run '^$' -fuzz FuzzParseEvent ./pkg/schedule/
func FuzzParseEvent(f *testing.F) {
	for _, seed := range []string{
		`{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","account":"1","time":"2027-03-01T08:00:00Z","region":"eu-west-1","resources":[],"detail":{}}`,
		`{"action":"put","schedule":{"name":"day","cron":"0 8 * * *","nodeGroups":[{"name":"workers","min":1,"max":3}],"apps":[{"namespace":"d","kind":"Deployment","name":"a","replicas":2}]}}`,
		`{"action":"list"}`,
		`{"action":"get","name":"day"}`,
		`{"action":"run","name":"day"}`,
		`{"action":"delete","name":"day","name":"night"}`,
		`{"Action":"list"}`,
		`{"action":"list"} {"action":"delete","name":"day"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		if len(payload) > 4096 {
			return
		}
		req, err := ParseEvent(payload)
		if err != nil || req.Action == ActionTick { // a tick has no hand-made form
			return
		}
		enc, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", req, err)
		}
		again, err := ParseEvent(enc)
		if err != nil || !reflect.DeepEqual(again, req) {
			t.Fatalf("%s parsed as %+v; encoded %s, that parsed as %+v, %v", payload, req, enc, again, err)
		}
	})
}
