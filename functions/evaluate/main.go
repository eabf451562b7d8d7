// Command evaluate is the evaluate Lambda function: every minute it measures
// pressure, decides, scales up and starts drains (see pkg/evaluate).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/setup"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	h, err := newHandler(context.Background(), log)
	if err != nil {
		// Fail the cold start loudly; every invocation reports the same error.
		log.Error("start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

func newHandler(ctx context.Context, log *slog.Logger) (*evaluate.Handler, error) {
	a := &setup.AWS{}
	cfg, err := setup.LoadConfig(ctx, os.Getenv, a)
	if err != nil {
		return nil, err
	}
	ev, err := setup.Evaluator(ctx, cfg, "", a, log, setup.InstanceID("evaluate"))
	if err != nil {
		return nil, err
	}
	return &evaluate.Handler{Evaluator: ev, WatchFor: cfg.EvaluateSettings().WatchFor}, nil
}
