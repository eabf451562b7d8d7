package evaluate

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestBuildStatusHeadroom: a group's summary carries its headroom as the
// plan left it, backoff and health as before; a failed scale-up added
// nothing; a headroom for a group not found is a problem; a cycle that
// read nothing keeps the last groups and problems.
func TestBuildStatusHeadroom(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	snap := snapshot.Snapshot{CapturedAt: now, NodeGroups: []snapshot.NodeGroup{
		{Name: "spot", Provider: "aws", MaxSize: 5, TargetSize: 1},
		{Name: "general", Provider: "aws", MaxSize: 5, TargetSize: 2},
	}}
	plan := planner.Plan{
		ScaleUp: []planner.ScaleUp{{NodeGroup: "spot", Delta: 2, NewTargetSize: 3}, {NodeGroup: "general", Delta: 1, NewTargetSize: 3}},
		NodeGroups: []planner.GroupStatus{
			{Name: "spot", Headroom: &planner.HeadroomStatus{Rule: "2 spare nodes", Free: "0 free", Need: 2, Adding: 2}},
			{Name: "general", Headroom: &planner.HeadroomStatus{Rule: "utilisation below 80%", Free: "at 90%", Need: 1, Adding: 1}},
		},
		State: snapshot.State{BackoffUntil: map[string]time.Time{"spot": now.Add(time.Minute)}},
	}
	actions := []Action{{Kind: "scaleUp", NodeGroup: "spot", Delta: 2}, {Kind: "scaleUp", NodeGroup: "general", Delta: 1, Error: "refused"}}
	e := &Evaluator{Now: func() time.Time { return now }, Headroom: map[string]snapshot.Headroom{
		"spot": {Nodes: 2}, "general": {Utilization: 0.8}, "old-gpu": {Nodes: 1}}}

	st := e.buildStatus(Status{}, now, snap, Result{Plan: &plan, Actions: actions}, nil)
	want := []GroupSummary{
		{Name: "spot", Provider: "aws", MaxSize: 5, TargetSize: 3, Health: []string{HealthBackedOff, HealthProvisioning},
			BackoffUntil: ptr(now.Add(time.Minute)), Headroom: &GroupHeadroom{Rule: "2 spare nodes", Free: "0 free", Need: 2, Adding: 2}},
		{Name: "general", Provider: "aws", MaxSize: 5, TargetSize: 2, Health: []string{HealthScaleUpFailed, HealthProvisioning},
			Headroom: &GroupHeadroom{Rule: "utilisation below 80%", Free: "at 90%", Need: 1, Blocked: "the scale-up failed"}},
	}
	if !reflect.DeepEqual(st.NodeGroups, want) {
		t.Errorf("groups\n%+v\nwant\n%+v", st.NodeGroups, want)
	}
	if got := e.problems(snap, Result{Plan: &plan, Actions: actions}, nil, nil); !hasProblem(got, ProblemHeadroomGroupNotFound, 1, "old-gpu") {
		t.Errorf("problems %+v, want the headroom's missing group old-gpu", got)
	}

	failed := e.buildStatus(st, now.Add(time.Minute), snapshot.Snapshot{}, Result{}, errors.New("cloud unreachable"))
	if !reflect.DeepEqual(failed.NodeGroups, st.NodeGroups) {
		t.Errorf("failed cycle: groups %+v; want the last ones", failed.NodeGroups)
	}
}

// TestBuildStatusReplaceNotTaken: the cycle's reasons for starting no
// replacement, the first of them with their reasons clipped and the rest
// counted; a cycle that read nothing keeps the last ones.
func TestBuildStatusReplaceNotTaken(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var plan planner.Plan
	for i := range maxStatusNotTaken + 2 {
		plan.ReplaceNotTaken = append(plan.ReplaceNotTaken, planner.ReplaceNotTaken{NodeGroup: "big", Nodes: []string{"big-0"},
			With: "small", Code: planner.ReasonTaint, Reason: strings.Repeat("x", i*100)})
	}
	plan.ReplaceNotTakenOmitted = 5
	e := &Evaluator{Now: func() time.Time { return now }}
	st := e.buildStatus(Status{}, now, snapshot.Snapshot{CapturedAt: now}, Result{Plan: &plan}, nil)
	if len(st.ReplaceNotTaken) != maxStatusNotTaken || st.ReplaceNotTakenOmitted != 2+5 {
		t.Fatalf("replaceNotTaken %d, omitted %d; want %d and 7", len(st.ReplaceNotTaken), st.ReplaceNotTakenOmitted, maxStatusNotTaken)
	}
	last := st.ReplaceNotTaken[maxStatusNotTaken-1]
	if len(last.Reason) > maxStatusMessage || last.Code != planner.ReasonTaint || last.With != "small" || plan.ReplaceNotTaken[maxStatusNotTaken-1].Reason == last.Reason {
		t.Errorf("last row %+v: want its reason clipped to %d bytes, the plan's untouched", last, maxStatusMessage)
	}
	failed := e.buildStatus(st, now.Add(time.Minute), snapshot.Snapshot{}, Result{}, errors.New("cloud unreachable"))
	if !reflect.DeepEqual(failed.ReplaceNotTaken, st.ReplaceNotTaken) || failed.ReplaceNotTakenOmitted != st.ReplaceNotTakenOmitted {
		t.Errorf("failed cycle: replaceNotTaken %+v (+%d); want the last ones", failed.ReplaceNotTaken, failed.ReplaceNotTakenOmitted)
	}
}

// hasProblem reports whether ps holds kind with count whose detail names name.
func hasProblem(ps []Problem, kind string, count int, name string) bool {
	for _, p := range ps {
		if p.Kind == kind && p.Count == count && strings.Contains(p.Detail, name) {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// TestClipKeepsTheCloudsAnswer: a long error keeps its start (what failed)
// and its end (the cloud's code and message), within the bound, and never
// splits a UTF-8 sequence.
func TestClipKeepsTheCloudsAnswer(t *testing.T) {
	group := strings.Repeat("g", 63)
	aws := "aws group " + group + ": set desired capacity 1: above the node group's maximum size: operation error Auto Scaling: SetDesiredCapacity, https response error StatusCode: 400, RequestID: 5d1c2a9e-0000-4b7e-9f3c-2c1e0a9b8d7f, api error ValidationError: New SetDesiredCapacity value 1 is above max value 0 for the AutoScalingGroup."
	for _, tc := range []struct{ name, in, head, tail string }{
		{"short", "scaleUp g: api error Throttling: Rate exceeded", "scaleUp g: api error Throttling: Rate exceeded", ""},
		{"aws", "scaleUp " + group + ": " + aws, "scaleUp " + group + ": aws group ", "api error ValidationError: New SetDesiredCapacity value 1 is above max value 0 for the AutoScalingGroup."},
		{"multi-byte", strings.Repeat("é", 400), "éé", "éé"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clip(tc.in)
			if len(got) > maxStatusMessage || !utf8.ValidString(got) || !strings.HasPrefix(got, tc.head) || !strings.HasSuffix(got, tc.tail) {
				t.Errorf("clip = %q (%d bytes), want at most %d valid bytes from %q to %q", got, len(got), maxStatusMessage, tc.head, tc.tail)
			}
			if len(tc.in) > maxStatusMessage && !strings.Contains(got, " ... ") {
				t.Errorf("clip = %q: no mark of what was cut", got)
			}
		})
	}
}
