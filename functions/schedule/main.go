// Command schedule is the schedule Lambda function: every minute it fires
// the schedules that are due, once per fire time, and by hand it puts,
// lists, gets, deletes and runs schedules (see pkg/schedule).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nodetide/nodetide/pkg/schedule"
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

func newHandler(ctx context.Context, log *slog.Logger) (*schedule.Handler, error) {
	a := &setup.AWS{}
	cfg, err := setup.LoadConfig(ctx, os.Getenv, a)
	if err != nil {
		return nil, err
	}
	return setup.Schedules(ctx, cfg, "", a, log)
}
