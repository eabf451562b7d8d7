package evaluate

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzParseEvent: whatever the payload, ParseEvent does not panic, and a
// request it accepts encodes and parses back to itself (so what was acted
// on is what the payload said, with nothing left over).
//
// Run it longer with: go test -run '^$' -fuzz FuzzParseEvent ./pkg/evaluate/
func FuzzParseEvent(f *testing.F) {
	for _, seed := range []string{
		`{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","account":"1","time":"2026-11-30T10:00:00Z","region":"eu-west-1","resources":[],"detail":{}}`,
		`{"action":"run"}`,
		`{"action":"plan"}`,
		`{"action":"add","nodeGroup":"workers","count":2}`,
		`{"action":"plan","action":"add","nodeGroup":"g","count":1}`,
		`{"Action":"add","NodeGroup":"g","COUNT":1}`,
		`{"action":"plan"} {"action":"add","nodeGroup":"g","count":1}`,
		`{"action":"add","nodeGroup":"g","count":9223372036854775807}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		req, err := ParseEvent(payload)
		if err != nil {
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
		if req.Action == "add" && (*req.Count < 1 || *req.Count > MaxAdd) {
			t.Fatalf("%s: accepted count %d", payload, *req.Count)
		}
	})
}
