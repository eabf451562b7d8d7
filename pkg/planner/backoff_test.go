package planner

import (
	"maps"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

func TestAfterScaleUpFailure(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	set := DefaultSettings()
	set.ScaleUp.Backoff = 5 * time.Minute
	earlier := now.Add(-time.Hour)
	tests := []struct {
		name        string
		prevUp      map[string]time.Time // the snapshot's last scale-ups
		nextUp      map[string]time.Time // the plan's, with the failed one recorded
		nextBackoff map[string]time.Time
		wantUp      map[string]time.Time
		wantBackoff map[string]time.Time
	}{
		{
			name:        "a scale-up on record is kept, the failed one forgotten",
			prevUp:      map[string]time.Time{"a": earlier},
			nextUp:      map[string]time.Time{"a": now},
			wantUp:      map[string]time.Time{"a": earlier},
			wantBackoff: map[string]time.Time{"a": now.Add(5 * time.Minute)},
		},
		{
			name:        "no scale-up on record stays none",
			nextUp:      map[string]time.Time{"a": now, "b": earlier},
			wantUp:      map[string]time.Time{"b": earlier},
			wantBackoff: map[string]time.Time{"a": now.Add(5 * time.Minute)},
		},
		{
			name:        "other groups' backoffs stay",
			nextUp:      map[string]time.Time{"a": now},
			nextBackoff: map[string]time.Time{"b": now.Add(time.Minute)},
			wantUp:      map[string]time.Time{},
			wantBackoff: map[string]time.Time{"a": now.Add(5 * time.Minute), "b": now.Add(time.Minute)},
		},
		{
			name:        "a longer backoff is not shortened",
			nextBackoff: map[string]time.Time{"a": now.Add(time.Hour)},
			wantUp:      map[string]time.Time{},
			wantBackoff: map[string]time.Time{"a": now.Add(time.Hour)},
		},
		{
			name:        "a shorter backoff is extended",
			nextBackoff: map[string]time.Time{"a": now.Add(time.Minute)},
			wantUp:      map[string]time.Time{},
			wantBackoff: map[string]time.Time{"a": now.Add(5 * time.Minute)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := snapshot.State{UnneededSince: map[string]time.Time{"n": earlier}, LastScaleUp: tt.nextUp, BackoffUntil: tt.nextBackoff}
			before := snapshot.State{LastScaleUp: maps.Clone(next.LastScaleUp), BackoffUntil: maps.Clone(next.BackoffUntil)}
			got := AfterScaleUpFailure(next, snapshot.State{LastScaleUp: tt.prevUp}, "a", now, set)
			if !maps.EqualFunc(got.LastScaleUp, tt.wantUp, time.Time.Equal) {
				t.Errorf("lastScaleUp %v, want %v", got.LastScaleUp, tt.wantUp)
			}
			if !maps.EqualFunc(got.BackoffUntil, tt.wantBackoff, time.Time.Equal) {
				t.Errorf("backoffUntil %v, want %v", got.BackoffUntil, tt.wantBackoff)
			}
			if len(got.UnneededSince) != 1 {
				t.Errorf("unneededSince %v, want the plan's", got.UnneededSince)
			}
			if !maps.EqualFunc(next.LastScaleUp, before.LastScaleUp, time.Time.Equal) || !maps.EqualFunc(next.BackoffUntil, before.BackoffUntil, time.Time.Equal) {
				t.Errorf("the plan's state was modified: %+v", next)
			}
		})
	}
}

// TestAfterScaleUpFailureIsWhatDecideHonours: the state it returns keeps the
// group out of the next decision until the backoff ends.
func TestAfterScaleUpFailureIsWhatDecideHonours(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	set := DefaultSettings()
	snap := clusterOf([]snapshot.NodeGroup{group("a", 0, 5, 0, "4", "16Gi")}, nil,
		[]corev1.Pod{pod("default/p", "1", "1Gi", pending(), created(now.Add(-time.Minute)))})
	snap.CapturedAt = now
	plan := Decide(snap, set, now)
	if len(plan.ScaleUp) != 1 {
		t.Fatalf("scale-ups %+v, want one", plan.ScaleUp)
	}
	snap.State = AfterScaleUpFailure(plan.State, snap.State, "a", now, set)
	for _, tt := range []struct {
		at     time.Time
		wantUp int
	}{
		{now.Add(time.Minute), 0},
		{now.Add(set.ScaleUp.Backoff + time.Second), 1},
	} {
		snap.CapturedAt = tt.at
		if p := Decide(snap, set, tt.at); len(p.ScaleUp) != tt.wantUp {
			t.Errorf("at %s: scale-ups %+v, want %d", tt.at, p.ScaleUp, tt.wantUp)
		}
	}
}

// TestAfterScaleUpFailureDropsOnlyItsReplacement: a replacement started by
// the failed scale-up goes (its new nodes are not coming); one under way
// before, or of another group, stays.
func TestAfterScaleUpFailureDropsOnlyItsReplacement(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	old := snapshot.Replacement{NodeGroup: "a", Delta: 1, Nodes: []string{"a-1"}, Since: now.Add(-time.Minute)}
	started := snapshot.Replacement{NodeGroup: "a", Delta: 1, Nodes: []string{"a-2"}, Since: now}
	other := snapshot.Replacement{NodeGroup: "b", Delta: 1, Nodes: []string{"b-1"}, Since: now}
	prev := snapshot.State{Replacing: map[string]snapshot.Replacement{"old": old}}
	next := snapshot.State{Replacing: map[string]snapshot.Replacement{"old": old, "started": started, "other": other}}
	got := AfterScaleUpFailure(next, prev, "a", now, DefaultSettings())
	if len(got.Replacing) != 2 || got.Replacing["old"].Nodes[0] != "a-1" || got.Replacing["other"].NodeGroup != "b" {
		t.Errorf("replacing = %+v, want old and other only", got.Replacing)
	}
	if len(next.Replacing) != 3 {
		t.Errorf("the plan's state was modified: %+v", next.Replacing)
	}
}
