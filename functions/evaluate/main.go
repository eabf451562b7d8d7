// Command evaluate is the evaluate Lambda function: every minute, and when
// the webhook trigger hints at a pod the scheduler could not place, it
// measures pressure, decides, scales up and starts drains (see pkg/evaluate
// and pkg/trigger).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/lambdarun"
	"github.com/nodetide/nodetide/pkg/setup"
)

func main() { lambdarun.Run("evaluate", build) }

func build(ctx context.Context, cfg *config.Config, a *setup.AWS, log *slog.Logger) (lambdarun.Handler, error) {
	ev, err := setup.Evaluator(ctx, cfg, "", a, log, setup.InstanceID("evaluate"))
	if err != nil {
		return nil, err
	}
	if ev.PendingAlarm, err = evaluate.PendingAlarmFromEnv(os.Getenv); err != nil {
		return nil, err
	}
	tr, err := setup.Trigger(ctx, os.Getenv, ev.Store, a, log)
	if err != nil {
		return nil, err
	}
	h := &evaluate.Handler{Evaluator: ev, Trigger: tr, WatchFor: cfg.EvaluateSettings().WatchFor}
	return h.Handle, nil
}
