package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/schedulefire"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/trigger"
)

// The sample events (make invoke, sam local invoke -e): one per function and
// action, each checked with its function's own event parser.
func TestEvents(t *testing.T) {
	cfg, err := config.LoadFile("../nodetide.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, g := range cfg.NodeGroups {
		if g.Name != "" {
			groups = append(groups, g.Name)
		}
	}
	var asl struct {
		States map[string]struct{ Type string }
	}
	aslData, err := os.ReadFile("../functions/drain/statemachine.asl.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(aslData, &asl); err != nil {
		t.Fatal(err)
	}

	checks := map[string]func(t *testing.T, data []byte, m map[string]any){
		"evaluate-scheduled.json": func(t *testing.T, data []byte, m map[string]any) {
			scheduled(t, m)
			evaluateAction(t, data, "run")
		},
		"evaluate-run.json":  func(t *testing.T, data []byte, _ map[string]any) { evaluateAction(t, data, "run") },
		"evaluate-plan.json": func(t *testing.T, data []byte, _ map[string]any) { evaluateAction(t, data, "plan") },
		"evaluate-trigger.json": func(t *testing.T, data []byte, _ map[string]any) {
			evaluateAction(t, data, "trigger")
		},
		"evaluate-webhook.json": func(t *testing.T, data []byte, _ map[string]any) {
			// A function URL request carrying the scheduler's AdmissionReview:
			// a hint that starts one cycle, answered allowed.
			if !trigger.IsURLEvent(data) {
				t.Fatal("not read as a function URL request")
			}
			started := &countStarts{}
			tr := &trigger.Trigger{Lease: state.NewMemory("events"), Start: started}
			resp, out := tr.Serve(context.Background(), data)
			if resp.StatusCode != 200 || out != trigger.Started || started.n != 1 || !strings.Contains(resp.Body, `"allowed":true`) {
				t.Errorf("status %d, outcome %s, %d cycles, body %s; want 200, started, 1, allowed", resp.StatusCode, out, started.n, resp.Body)
			}
		},
		"evaluate-add.json": func(t *testing.T, data []byte, _ map[string]any) {
			req := evaluateAction(t, data, "add")
			if !slices.Contains(groups, req.NodeGroup) {
				t.Errorf("nodeGroup %q is not a named group of the example config (%v)", req.NodeGroup, groups)
			}
		},
		"drain-shutdown.json": func(t *testing.T, data []byte, _ map[string]any) {
			ev := drainEvent(t, data)
			if ev.Action != "shutdown" || ev.Node == nil || *ev.Node == "" {
				t.Errorf("want a shutdown of a node, got %+v", ev)
			}
		},
		"drain-enable-node.json": func(t *testing.T, data []byte, _ map[string]any) {
			ev := drainEvent(t, data)
			if ev.Action != "enable" || ev.Node == nil || *ev.Node == "" {
				t.Errorf("want an enable of one node, got %+v", ev)
			}
		},
		"drain-enable-all.json": func(t *testing.T, data []byte, _ map[string]any) {
			ev := drainEvent(t, data)
			if ev.Action != "enable" || ev.Node != nil {
				t.Errorf("want an enable of every node, got %+v", ev)
			}
		},
		"drain-recover.json": func(t *testing.T, data []byte, _ map[string]any) {
			if ev := drainEvent(t, data); ev.Action != drain.ActionRecover {
				t.Errorf("want a recover, got %+v", ev)
			}
		},
		"drain-execution-ended.json": func(t *testing.T, data []byte, m map[string]any) {
			if m["source"] != "aws.states" || m["detail-type"] != "Step Functions Execution Status Change" {
				t.Errorf("want a Step Functions status change, got source %v detail-type %v", m["source"], m["detail-type"])
			}
			if ev := drainEvent(t, data); ev.Action != drain.ActionRecover {
				t.Errorf("the drain function reads it as %+v, want a recover", ev)
			}
		},
		"drain-lifecycle-terminate.json": func(t *testing.T, data []byte, _ map[string]any) {
			interruption(t, data, state.InterruptLifecycle)
		},
		"drain-spot-interruption.json": func(t *testing.T, data []byte, _ map[string]any) {
			interruption(t, data, state.InterruptSpot)
		},
		"drain-rebalance.json": func(t *testing.T, data []byte, _ map[string]any) {
			interruption(t, data, state.InterruptRebalance)
		},
		"drain-scheduled-maintenance.json": func(t *testing.T, data []byte, _ map[string]any) {
			interruption(t, data, state.InterruptMaintenance)
		},
		"drain-scheduled-retirement.json": func(t *testing.T, data []byte, _ map[string]any) {
			interruption(t, data, state.InterruptMaintenance)
		},
		"drain-scheduled-reboot.json": func(t *testing.T, data []byte, _ map[string]any) {
			interruption(t, data, state.InterruptMaintenance)
		},
		"drain-step.json": func(t *testing.T, data []byte, _ map[string]any) {
			ev := drainEvent(t, data)
			if st, ok := asl.States[ev.Step]; !ok || st.Type != "Task" {
				t.Errorf("step %q is not a Task state of the drain state machine", ev.Step)
			}
			dec := json.NewDecoder(bytes.NewReader(ev.State))
			dec.DisallowUnknownFields()
			var s drain.State
			if err := dec.Decode(&s); err != nil {
				t.Fatalf("state: %v", err)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("state: %v", err)
			}
		},
		"schedule-scheduled.json": func(t *testing.T, data []byte, m map[string]any) {
			scheduled(t, m)
			scheduleAction(t, data, schedulefire.ActionTick)
		},
		"schedule-put.json": func(t *testing.T, data []byte, _ map[string]any) {
			req := scheduleAction(t, data, schedulefire.ActionPut)
			if err := schedule.Validate(*req.Schedule, groups); err != nil {
				t.Errorf("against the example config's groups: %v", err)
			}
			if _, err := req.Schedule.ParseCron(); err != nil {
				t.Errorf("cron: %v", err)
			}
		},
		"schedule-list.json":   func(t *testing.T, data []byte, _ map[string]any) { scheduleAction(t, data, schedulefire.ActionList) },
		"schedule-get.json":    func(t *testing.T, data []byte, _ map[string]any) { scheduleAction(t, data, schedulefire.ActionGet) },
		"schedule-delete.json": func(t *testing.T, data []byte, _ map[string]any) { scheduleAction(t, data, schedulefire.ActionDelete) },
		"schedule-run.json":    func(t *testing.T, data []byte, _ map[string]any) { scheduleAction(t, data, schedulefire.ActionRun) },
	}

	files, err := filepath.Glob("../events/*.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, path := range files {
		name := filepath.Base(path)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("not a JSON object: %v", err)
			}
			check, ok := checks[name]
			if !ok {
				t.Fatalf("no check for %s: add one to events_test.go", name)
			}
			if a, ok := m["action"].(string); ok {
				want := strings.TrimSuffix(name[strings.Index(name, "-")+1:], ".json")
				if i := strings.Index(want, "-"); i > 0 {
					want = want[:i] // enable-node, enable-all
				}
				if a != want {
					t.Errorf("action %q in %s", a, name)
				}
			}
			check(t, data, m)
		})
	}
	for name := range checks {
		if !seen[name] {
			t.Errorf("events/%s is missing", name)
		}
	}
}

func scheduled(t *testing.T, m map[string]any) {
	t.Helper()
	if m["source"] != "aws.events" || m["detail-type"] != "Scheduled Event" {
		t.Errorf("want an EventBridge scheduled event, got source %v detail-type %v", m["source"], m["detail-type"])
	}
	if _, err := time.Parse(time.RFC3339, m["time"].(string)); err != nil {
		t.Errorf("time: %v", err)
	}
}

func evaluateAction(t *testing.T, data []byte, want string) evaluate.Request {
	t.Helper()
	req, err := evaluate.ParseEvent(data)
	if err != nil {
		t.Fatalf("evaluate rejects it: %v", err)
	}
	if req.Action != want {
		t.Errorf("evaluate reads action %q, want %q", req.Action, want)
	}
	return req
}

func drainEvent(t *testing.T, data []byte) drain.Event {
	t.Helper()
	ev, err := drain.ParseEvent(data)
	if err != nil {
		t.Fatalf("drain rejects it: %v", err)
	}
	return ev
}

// interruption checks an event the cloud sends about a machine it takes.
func interruption(t *testing.T, data []byte, kind string) {
	t.Helper()
	ins := drainEvent(t, data).Interruptions()
	if len(ins) != 1 || ins[0].Kind != kind || ins[0].InstanceID == "" {
		t.Fatalf("the drain function reads %+v, want one %s interruption", ins, kind)
	}
	if kind == state.InterruptLifecycle && (ins[0].Token == "" || ins[0].Hook == "" || ins[0].AutoScalingGroup == "") {
		t.Errorf("lifecycle action without token, hook or group: %+v", ins[0])
	}
}

func scheduleAction(t *testing.T, data []byte, want string) schedulefire.Request {
	t.Helper()
	req, err := schedulefire.ParseEvent(data)
	if err != nil {
		t.Fatalf("schedule rejects it: %v", err)
	}
	if req.Action != want {
		t.Errorf("schedule reads action %q, want %q", req.Action, want)
	}
	return req
}

type countStarts struct{ n int }

func (c *countStarts) StartCycle(context.Context, time.Time) error { c.n++; return nil }
