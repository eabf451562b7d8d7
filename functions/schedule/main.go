// Command schedule is the schedule Lambda function: every minute it fires
// the schedules that are due, once per fire time, and by hand it puts,
// lists, gets, deletes and runs schedules (see pkg/schedule).
package main

import (
	"context"
	"log/slog"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/lambdarun"
	"github.com/nodetide/nodetide/pkg/setup"
)

func main() { lambdarun.Run("schedule", build) }

func build(ctx context.Context, cfg *config.Config, a *setup.AWS, log *slog.Logger) (lambdarun.Handler, error) {
	h, err := setup.Schedules(ctx, cfg, "", a, log)
	if err != nil {
		return nil, err
	}
	lambdarun.RecordBuild(ctx, h.Store, "schedule", log)
	return h.Handle, nil
}
