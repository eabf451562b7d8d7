package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// TriggerOutput names the stack output holding the webhook trigger's URL,
// which `nodetide webhook install --url` takes.
const TriggerOutput = "TriggerUrl"

// addTrigger gives the evaluate function the webhook trigger (pkg/trigger):
// a function URL the API server calls on the scheduler's FailedScheduling
// Events, and the right to invoke itself asynchronously to start a cycle.
//
// The URL's auth type is NONE because the API server cannot sign requests
// with SigV4; what a call can do is bounded in the function instead (it is
// only a hint: a valid AdmissionReview of a FailedScheduling Event written
// by the scheduler, at most one cycle per few seconds through a DynamoDB
// conditional write), and by evaluate's reserved concurrency. The self
// invocation's ARN is built from the fixed function name: a reference to the
// function from its own role's policy would be a dependency cycle.
func addTrigger(st awscdk.Stack, fn awslambda.Function, role awsiam.Role, functionName string) {
	url := fn.AddFunctionUrl(&awslambda.FunctionUrlOptions{
		AuthType:   awslambda.FunctionUrlAuthType_NONE,
		InvokeMode: awslambda.InvokeMode_BUFFERED,
	})
	allow(role, []string{"lambda:InvokeFunction"}, st.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("lambda"), Resource: jsii.String("function"),
		ResourceName: jsii.String(functionName), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	}))
	awscdk.NewCfnOutput(st, jsii.String(TriggerOutput), &awscdk.CfnOutputProps{
		Value: url.Url(),
		Description: jsii.String("the evaluate function's URL for the webhook trigger: " +
			"nodetide webhook install --url <this>"),
	})
}
