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
		{`{"action":"add","nodeGroup":"g","count":0}`, "", `"count" must be at least 1`},
		{`{"action":"add","nodeGroup":"g","count":"2"}`, "", "cannot unmarshal string"},
		{`{"action":"plan","count":1}`, "", "takes no nodeGroup or count"},
		{`{"action":"launch"}`, "", `unknown action "launch"`},
		{`{}`, "", `missing "action"`},
		{`{"nodeGroup":"g"}`, "", `missing "action"`},
		{`{"actoin":"plan"}`, "", `unknown field "actoin"`},
		{`{"detail-type":"Scheduled Event","source":"custom.app"}`, "", `source "custom.app"`},
		{`{"action":`, "", "not valid JSON"},
		{``, "", "must be a JSON object"},
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
