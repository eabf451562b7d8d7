package setup

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/planner"
)

// TestEvaluatorTakesConfiguredSettings: the scale-up and scale-down settings
// written in the config are the ones the evaluate cycle plans with, not the
// defaults.
func TestEvaluatorTakesConfiguredSettings(t *testing.T) {
	t.Setenv(EnvDrainStateMachine, "")
	dir := t.TempDir()
	// Building a client reaches no server, so the address need not answer.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
cluster: {name: c}
state: {memory: {}}
nodeGroups: [{name: g, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}]
scaleUp: {maxNodesPerStep: 7}
scaleDown: {maxConcurrentDrains: 3, utilizationThreshold: 0.25}
events: {maxPodEventsPerCycle: 7, notTriggerScaleUpInterval: 2m}
`), "nodetide.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := Evaluator(context.Background(), cfg, kubeconfig, &AWS{}, slog.New(slog.DiscardHandler), "test")
	if err != nil {
		t.Fatal(err)
	}
	def := planner.DefaultSettings()
	if def.ScaleDown.MaxConcurrentDrains == 3 {
		t.Fatal("the default is 3 already: pick another value")
	}
	s := ev.Settings
	if s.ScaleDown.MaxConcurrentDrains != 3 || s.ScaleUp.MaxNodesPerStep != 7 || s.ScaleDown.UtilizationThreshold != 0.25 {
		t.Errorf("settings = %+v", s)
	}
	if ev.Events == nil || ev.EventSettings.MaxPodEventsPerCycle != 7 || ev.EventSettings.NotTriggerScaleUpInterval != 2*time.Minute {
		t.Errorf("events: recorder %v, settings %+v; want a recorder, 7 per cycle, 2m", ev.Events != nil, ev.EventSettings)
	}

	off := *cfg
	disabled := false
	off.Events.Enabled = &disabled
	if ev, err = Evaluator(context.Background(), &off, kubeconfig, &AWS{}, slog.New(slog.DiscardHandler), "test"); err != nil {
		t.Fatal(err)
	}
	if ev.Events != nil {
		t.Error("events.enabled: false still records events")
	}
}
