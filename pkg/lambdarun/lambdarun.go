// Package lambdarun is the cold start the three Lambda functions share: a
// JSON logger on stdout, the config read from the environment (inline, a
// file or an SSM parameter), the handler built once, and a start-up failure
// that ends the process loudly instead of failing every invocation obscurely.
package lambdarun

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/setup"
)

// Handler serves one invocation.
type Handler func(ctx context.Context, payload json.RawMessage) (any, error)

// Build wires a function's handler from the loaded config.
type Build func(ctx context.Context, cfg *config.Config, a *setup.AWS, log *slog.Logger) (Handler, error)

// Run starts the function named name: it builds the handler once and
// serves invocations until the runtime stops the process.
func Run(name string, build Build) {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", name)
	h, err := Start(context.Background(), os.Getenv, build, log)
	if err != nil {
		// Lambda reports the failed start on the invocation and retries it
		// with a new cold start; the log line says why.
		log.Error("start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}

// Start loads the config as getenv names it and builds the handler.
func Start(ctx context.Context, getenv func(string) string, build Build, log *slog.Logger) (Handler, error) {
	a := &setup.AWS{}
	cfg, err := setup.LoadConfig(ctx, getenv, a)
	if err != nil {
		return nil, err
	}
	return build(ctx, cfg, a, log)
}
