package drain

import (
	"strings"
	"testing"
)

func TestParseEvent(t *testing.T) {
	cases := []struct{ payload, err string }{
		{`{"step":"Cordon","state":{"node":"n"}}`, ""},
		{`{"action":"shutdown","node":"n"}`, ""},
		{`{"action":"shutdown","node":"n","policy":"force","timeout":"5m","belowMin":true}`, ""},
		{`{"action":"enable"}`, ""},
		{`{"action":"enable","node":"n"}`, ""},
		{`{"action":"shutdown"}`, `needs "node"`},
		{`{"action":"shutdown","node":"n","policy":"later"}`, `"policy" must be abort or force`},
		{`{"action":"shutdown","node":"n","timeout":"5"}`, `"timeout" must be a duration`},
		{`{"action":"shutdown","node":"n","timeout":"1s"}`, `from 30s to 24h0m0s`},
		{`{"action":"shutdown","node":"n","timeout":"24h"}`, ""},
		{`{"action":"shutdown","node":"n","timeout":"24h0m1s"}`, `from 30s to 24h0m0s`},
		{`{"action":"shutdown","node":"n","timeout":"2562047h"}`, `from 30s to 24h0m0s`},
		{`{"action":"shutdown","node":"n","timeout":"9999999999h"}`, `must be a duration`},
		// An empty, blank or impossible node name is never "every node".
		{`{"action":"enable","node":""}`, `"node": empty node name (leave "node" out to enable every node)`},
		{`{"action":"enable","node":" "}`, `"node": " " is not a node name`},
		{`{"action":"enable","node":"Node_1"}`, `"node": "Node_1" is not a node name`},
		{`{"action":"enable","node":null}`, ""},
		{`{"action":"shutdown","node":""}`, `action "shutdown": "node": empty node name`},
		{`{"action":"shutdown","node":"a/b"}`, `"a/b" is not a node name`},
		{`{"action":"shutdown","node":"` + strings.Repeat("a", 254) + `"}`, `is not a node name`},
		// What encoding/json alone lets through.
		{`{"action":"enable","node":"n","node":""}`, "node: field given twice"},
		{`{"action":"shutdown","action":"enable"}`, "action: field given twice"},
		{`{"Action":"enable"}`, "Action: unknown field"},
		{`{"action":"shutdown","Node":"n"}`, "Node: unknown field"},
		{`{"action":"enable","node":"n"} {"action":"enable"}`, "unexpected data after the document"},
		{``, "event is empty"},
		{`{"action":"enable","node":"n"`, "not valid JSON: unexpected end of input"},
		{`{"step":"Cordon","state":{"node":"n","node":"m"}}`, "state.node: field given twice"},
		{`{"action":"enable","policy":"force"}`, `takes only "node"`},
		{`{"action":"reboot","node":"n"}`, `unknown action "reboot"`},
		{`{"step":"Cordon"}`, `"state" is required`},
		{`{"step":"Cordon","state":{},"action":"enable"}`, "not both"},
		{`{"step":"Cordon","state":{},"node":"n"}`, `only "step" and "state"`},
		{`{"nodes":"n"}`, `nodes: unknown field`},
		{`{}`, `missing "action"`},
		// Recovery: by hand, or Step Functions' status change (a trigger only).
		{`{"action":"recover"}`, ""},
		{`{"action":"recover","node":"n"}`, `"recover" takes nothing else`},
		{`{"action":"enable","node":"n","force":true}`, ""},
		{`{"action":"enable","force":true}`, `give "node"`},
		{`{"version":"0","id":"x","detail-type":"Step Functions Execution Status Change","source":"aws.states","account":"1","time":"2026-11-30T10:00:00Z","region":"eu-west-1","resources":[],"detail":{"status":"ABORTED"}}`, ""},
		{`{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events","account":"1","time":"2026-11-30T10:00:00Z","region":"eu-west-1","resources":[],"detail":{}}`, "unsupported EventBridge event"},
		{`{"version":"0","id":"x","detail-type":"Step Functions Execution Status Change","source":"aws.states","source":"x","account":"1","time":"2026-11-30T10:00:00Z","region":"eu-west-1","resources":[],"detail":{}}`, "field given twice"},
		{`[]`, "must be a JSON object"},
	}
	for _, tc := range cases {
		_, err := ParseEvent([]byte(tc.payload))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.payload, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.payload, err, tc.err)
		}
	}
}

func TestExecutionName(t *testing.T) {
	long := strings.Repeat("ip-10-0-0-1.eu-west-1.compute.internal", 3)
	for _, node := range []string{"worker-1", "ip-10-0-0-1.eu-west-1.compute.internal", long} {
		name := executionName("scaledown", node, "1764496800")
		if len(name) > 80 {
			t.Errorf("%q: name %q longer than 80", node, name)
		}
		for _, r := range name {
			if !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				t.Errorf("%q: name %q has %q", node, name, r)
			}
		}
		if name != executionName("scaledown", node, "1764496800") {
			t.Errorf("%q: name not deterministic", node)
		}
	}
	if executionName("s", "a.b", "1") == executionName("s", "a-b", "1") {
		t.Error("two node names share an execution name")
	}
}
