package evaluate

import (
	"strings"
	"testing"
)

func TestParseEvent(t *testing.T) {
	cases := []struct {
		payload, action, err string
	}{
		{`{"version":"0","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`, "run", ""},
		{`{"action":"run"}`, "run", ""},
		{`{"action":"plan"}`, "plan", ""},
		{` {"action":"add","nodeGroup":"g","count":2} `, "add", ""},
		{`{"action":"add","count":2}`, "", `needs "nodeGroup"`},
		{`{"action":"add","nodeGroup":"g","count":1000}`, "add", ""},
		{`{"action":"add","nodeGroup":"g","count":0}`, "", `"count" must be from 1 to 1000, got 0`},
		{`{"action":"add","nodeGroup":"g","count":1001}`, "", `"count" must be from 1 to 1000, got 1001`},
		{`{"action":"add","nodeGroup":"g","count":9223372036854775807}`, "", `"count" must be from 1 to 1000`},
		{`{"action":"add","nodeGroup":"g","count":9223372036854775808}`, "", "count: got a number 9223372036854775808, want int"},
		{`{"action":"add","nodeGroup":"g","count":"2"}`, "", "count: got a string, want int"},
		// What encoding/json alone lets through, each of which added a node.
		{`{"action":"plan","action":"add","nodeGroup":"g","count":1}`, "", "action: field given twice"},
		{`{"action":"add","nodeGroup":"g","count":1,"count":9}`, "", "count: field given twice"},
		{`{"Action":"add","NodeGroup":"g","COUNT":1}`, "", "Action: unknown field"},
		{`{"action":"add","NodeGroup":"g","count":1}`, "", "NodeGroup: unknown field"},
		{`{"action":"plan"} {"action":"add","nodeGroup":"g","count":1}`, "", "not valid JSON: unexpected data after the document"},
		{`{"action":"add","nodeGroup":"g","count":1} x`, "", "not valid JSON"},
		{`{"detail-type":"Scheduled Event","source":"aws.events","detail-type":"Scheduled Event"}`, "", "detail-type: field given twice"},
		{`{"detail-type":"Scheduled Event","source":"aws.events","Source":"x"}`, "", "Source: unknown field"},
		{`{"action":"plan","count":1}`, "", "takes no nodeGroup or count"},
		{`{"action":"launch"}`, "", `unknown action "launch"`},
		{`{"action":"trigger"}`, "trigger", ""},
		{`{"action":"trigger","count":1}`, "", "takes no nodeGroup or count"},
		{`{"action":"trigger","notBefore":"2026-12-01T10:00:05Z"}`, "trigger", ""},
		{`{"action":"trigger","notBefore":"2999-01-01T00:00:00Z"}`, "", `is more than 30s ahead`},
		{`{"action":"trigger","notBefore":"soon"}`, "", "notBefore"},
		{`{"action":"run","notBefore":"2026-12-01T10:00:05Z"}`, "", `action "run" takes no notBefore`},
		{`{"action":"add","nodeGroup":"g","count":1,"notBefore":"2026-12-01T10:00:05Z"}`, "", `action "add" takes no notBefore`},
		// Only a function URL's envelope makes a webhook call, never a name.
		{`{"action":"function URL request"}`, "", `unknown action "function URL request"`},
		{`{"version":"2.0","rawPath":"/","requestContext":{"http":{"method":"POST"}},"body":"{}"}`, actionWebhook, ""},
		{`{}`, "", `missing "action"`},
		{`{"nodeGroup":"g"}`, "", `missing "action"`},
		{`{"actoin":"plan"}`, "", `actoin: unknown field`},
		{`{"detail-type":"Scheduled Event","source":"custom.app"}`, "", `source "custom.app"`},
		{`{"action":`, "", "not valid JSON"},
		{``, "", "event is empty"},
		{" \n\t", "", "event is empty"},
		{`{"action":"add","nodeGroup":"g","count":1`, "", "not valid JSON: unexpected end of input"},
		{`"plan"`, "", "must be a JSON object"},
	}
	for _, tc := range cases {
		req, err := ParseEvent([]byte(tc.payload))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.payload, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one mentioning %q", tc.payload, err, tc.err)
		case tc.err == "" && req.Action != tc.action:
			t.Errorf("%s: action %q, want %q", tc.payload, req.Action, tc.action)
		}
	}
}
