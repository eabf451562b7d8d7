package setup

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/trigger"
)

// EnvFunctionName is the variable Lambda sets to the function's own name.
const EnvFunctionName = "AWS_LAMBDA_FUNCTION_NAME"

// Trigger wires the webhook trigger of the evaluate function: a hint starts
// a cycle by invoking the function itself (named by getenv's
// AWS_LAMBDA_FUNCTION_NAME) asynchronously. Nil outside Lambda.
// AWS_ENDPOINT_URL_LAMBDA points it at a local Lambda service.
func Trigger(ctx context.Context, getenv func(string) string, store state.Store, a *AWS, log *slog.Logger) (*trigger.Trigger, error) {
	fn := getenv(EnvFunctionName)
	if fn == "" {
		return nil, nil
	}
	ac, err := a.Config(ctx)
	if err != nil {
		return nil, err
	}
	return &trigger.Trigger{
		Lease: store,
		Start: trigger.LambdaStarter{Client: lambda.NewFromConfig(ac), Function: fn},
		Log:   log,
	}, nil
}
