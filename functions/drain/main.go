// Command drain is the drain Lambda function: the steps of the drain state
// machine (statemachine.asl.json beside this file) and the hand-made actions
// shutdown and enable (see pkg/drain).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nodetide/nodetide/pkg/setup"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	ctx := context.Background()
	a := &setup.AWS{}
	cfg, err := setup.LoadConfig(ctx, os.Getenv, a)
	if err != nil {
		log.Error("start", "error", err.Error())
		os.Exit(1)
	}
	h, err := setup.Drain(ctx, cfg, "", a, log)
	if err != nil {
		log.Error("start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
