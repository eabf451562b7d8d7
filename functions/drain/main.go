// Command drain is the drain Lambda function: the steps of the drain state
// machine (statemachine.asl.json beside this file) and the hand-made actions
// shutdown and enable (see pkg/drain).
package main

import (
	"context"
	"log/slog"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/lambdarun"
	"github.com/nodetide/nodetide/pkg/setup"
)

func main() { lambdarun.Run("drain", build) }

func build(ctx context.Context, cfg *config.Config, a *setup.AWS, log *slog.Logger) (lambdarun.Handler, error) {
	h, err := setup.Drain(ctx, cfg, "", a, log)
	if err != nil {
		return nil, err
	}
	lambdarun.RecordBuild(ctx, h.Steps.Store, "drain", log)
	return h.Handle, nil
}
