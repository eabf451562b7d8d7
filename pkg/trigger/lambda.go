package trigger

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// CyclePayload is the event a hint starts the cycle with.
const CyclePayload = `{"action":"trigger"}`

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
func (s LambdaStarter) StartCycle(ctx context.Context) error {
	out, err := s.Client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(s.Function),
		InvocationType: types.InvocationTypeEvent,
		Payload:        []byte(CyclePayload),
	})
	if err != nil {
		return fmt.Errorf("invoke %s asynchronously: %w", s.Function, err)
	}
	if out.StatusCode != 202 {
		return fmt.Errorf("invoke %s asynchronously: status %d, want 202", s.Function, out.StatusCode)
	}
	return nil
}
