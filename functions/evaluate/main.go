// Command evaluate is the evaluate Lambda function: every minute it measures
// pressure, decides, scales up and starts drains (see pkg/evaluate).
package main

import (
	"context"
	"log/slog"

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
	h := &evaluate.Handler{Evaluator: ev, WatchFor: cfg.EvaluateSettings().WatchFor}
	return h.Handle, nil
}
