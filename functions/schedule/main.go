// Command schedule is the schedule Lambda function. It is wired in, but its actions
// are not implemented yet: every invocation returns an error saying so.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(_ context.Context, _ json.RawMessage) (any, error) {
		return nil, fmt.Errorf("the schedule function is not implemented yet")
	})
}
