package schedulefire

import (
	"strings"
	"testing"
)

func TestParseEvent(t *testing.T) {
	tick := `{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","account":"1","time":"2027-03-01T08:00:00Z","region":"eu-west-1","resources":["arn:aws:events:eu-west-1:1:rule/schedule"],"detail":{}}`
	good := `{"name":"day","cron":"0 8 * * *","apps":[{"namespace":"d","kind":"Deployment","name":"a","replicas":2}]}`
	tests := []struct {
		name, payload string
		action        string // wanted action, or "" for an error
		errHas        string
	}{
		{"tick", tick, ActionTick, ""},
		{"other EventBridge event", strings.Replace(tick, "Scheduled Event", "EC2 Instance State-change Notification", 1), "", "unsupported EventBridge event"},
		{"put", `{"action":"put","schedule":` + good + `}`, ActionPut, ""},
		{"put scalerd file", `{"action":"put","schedule":{"name":"daytime","cron":"0 0 8 * * *","description":"x","desiredCapacity":5,"appScaleTemplates":[{"app":"todo","replicas":5}]}}`, ActionPut, ""},
		{"list", `{"action":"list"}`, ActionList, ""},
		{"get", `{"action":"get","name":"day"}`, ActionGet, ""},
		{"delete", `{"action":"delete","name":"day"}`, ActionDelete, ""},
		{"run", `{"action":"run","name":"day"}`, ActionRun, ""},
		{"not an object", `[1]`, "", "must be a JSON object"},
		{"empty", ``, "", "event is empty"},
		{"blank", "\n ", "", "event is empty"},
		{"cut short", `{"action":"put","schedule":` + good, "", "not valid JSON: unexpected end of input"},
		{"trailing data", `{"action":"put","schedule":` + good + `} {"action":"list"}`, "", "unexpected data after the document"},
		{"broken JSON", `{"action":`, "", "not valid JSON"},
		{"missing action", `{}`, "", `missing "action"`},
		{"unknown action", `{"action":"fire"}`, "", `unknown action "fire"`},
		{"unknown field", `{"action":"list","verbose":true}`, "", "verbose: unknown field"},
		{"field in another case", `{"Action":"list"}`, "", "Action: unknown field"},
		{"field twice", `{"action":"list","action":"get"}`, "", "action: field given twice"},
		{"unknown field in the schedule", `{"action":"put","schedule":{"name":"a","cron":"0 8 * * *","replica":3}}`, "", "schedule.replica: unknown field"},
		{"unknown field in an app", `{"action":"put","schedule":{"name":"a","cron":"0 8 * * *","apps":[{"namespace":"d","kind":"Deployment","name":"a","replica":3}]}}`, "", "schedule.apps[0].replica: unknown field"},
		{"wrong type", `{"action":"get","name":3}`, "", "name"},
		{"put without schedule", `{"action":"put"}`, "", `needs "schedule"`},
		{"put with name", `{"action":"put","name":"a","schedule":` + good + `}`, "", `takes no "name"`},
		{"put invalid schedule", `{"action":"put","schedule":{"name":"a","cron":"0 25 * * *"}}`, "", "cron"},
		{"schedule not an object", `{"action":"put","schedule":"x"}`, "", "schedule: want a JSON object"},
		{"get without name", `{"action":"get"}`, "", `needs "name"`},
		{"run with schedule", `{"action":"run","name":"a","schedule":` + good + `}`, "", `takes no "schedule"`},
		{"list with name", `{"action":"list","name":"a"}`, "", `takes no "name"`},
		{"trailing data", `{"action":"list"} {}`, "", "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseEvent([]byte(tc.payload))
			if tc.action != "" {
				if err != nil {
					t.Fatalf("error: %v", err)
				}
				if req.Action != tc.action {
					t.Fatalf("action %q, want %q", req.Action, tc.action)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, parsed %+v", req)
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("error %q does not mention %q", err, tc.errHas)
			}
		})
	}
}
