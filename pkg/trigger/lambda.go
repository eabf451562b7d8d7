package trigger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// CycleRequest is the event a hint starts the cycle with: evaluate's
// {"action":"trigger"}, with notBefore for a trailing cycle.
type CycleRequest struct {
	Action    string     `json:"action"`
	NotBefore *time.Time `json:"notBefore,omitempty"`
}

// Invoker is the Lambda call StartCycle makes.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// LambdaStarter starts the cycle as an asynchronous invocation of the
// evaluate function (InvocationType Event): the webhook call returns at
// once, and the function's reserved concurrency and the evaluate lease
// keep the cycle apart from a running one.
type LambdaStarter struct {
	Client   Invoker
	Function string // the evaluate function's name or ARN
}

// StartCycle queues one {"action":"trigger"} invocation.
func (s LambdaStarter) StartCycle(ctx context.Context, notBefore time.Time) error {
	req := CycleRequest{Action: "trigger"}
	if !notBefore.IsZero() {
		nb := notBefore.UTC()
		req.NotBefore = &nb
	}
	payload, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("invoke %s: %w", s.Function, err)
	}
	out, err := s.Client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(s.Function),
		InvocationType: types.InvocationTypeEvent,
		Payload:        payload,
	})
	if err != nil {
		return fmt.Errorf("invoke %s asynchronously: %w", s.Function, err)
	}
	if out.StatusCode != 202 {
		return fmt.Errorf("invoke %s asynchronously: status %d, want 202", s.Function, out.StatusCode)
	}
	return nil
}
