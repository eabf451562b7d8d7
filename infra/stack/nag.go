package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The cdk-nag AwsSolutions findings this stack keeps on purpose, each with
// its reason. stack_test.go runs the pack and fails on anything else.
var (
	reasonDescribeWildcard = "Resource * holds only read-only actions AWS offers no resource-level permission for: " +
		"autoscaling:DescribeAutoScalingGroups, DescribeScalingActivities, DescribeLaunchConfigurations, " +
		"ec2:DescribeInstanceTypes, DescribeLaunchTemplateVersions, GetInstanceTypesFromInstanceRequirements, " +
		"DescribeInstances, DescribeSpotInstanceRequests, and for evaluate the prices: pricing:GetProducts, " +
		"ec2:DescribeSpotPriceHistory " +
		"(Service Authorization Reference). " +
		"stack_test.go asserts no other action is granted on *."
	reasonDiscoveredGroups = "Auto Scaling Groups found by cluster-autoscaler's discovery tags are not known at deploy time: " +
		"SetDesiredCapacity/TerminateInstanceInAutoScalingGroup are limited to groups carrying the configured " +
		"discovery tags by aws:ResourceTag conditions."
	reasonNamedGroup = "The wildcard is the group's UUID, which AWS assigns when the group is created; the group name pins " +
		"the one Auto Scaling Group the config names."
	reasonManagedNodegroups = "The wildcards are the names and UUIDs of the cluster's EKS managed node groups, not known at " +
		"deploy time; the cluster name pins them to this cluster, for the read-only eks:DescribeNodegroup."
	reasonExecutions = "Execution names are made per drain (node + time); the wildcard covers only executions of this " +
		"stack's drain state machine, for states:DescribeExecution."
	reasonVpcAccess = "A function in a VPC needs ec2:CreateNetworkInterface, DescribeNetworkInterfaces, " +
		"DeleteNetworkInterface, AssignPrivateIpAddresses and UnassignPrivateIpAddresses, which Lambda checks on " +
		"Resource *; AWSLambdaVPCAccessExecutionRole is AWS's maintained minimum for exactly that."
	reasonLogDelivery = "Step Functions logging to CloudWatch Logs needs logs:CreateLogDelivery, GetLogDelivery, " +
		"UpdateLogDelivery, DeleteLogDelivery, ListLogDeliveries, PutResourcePolicy, DescribeResourcePolicies and " +
		"DescribeLogGroups, which support no resource-level permission (CDK adds them for the log group)."
	reasonQueueIsDLQ = "This queue is itself the dead-letter queue: of the EventBridge rules' targets and the functions' " +
		"asynchronous on-failure destination (cdk-nag recognises only an SQS redrive policy as DLQ use). Nothing " +
		"consumes it automatically, so no message can fail to be processed into a further queue."
	reasonNoXRay = "X-Ray is off on purpose: every step is the drain function, whose logs and the execution history " +
		"(logged at level ALL with execution data) already trace each drain; tracing would add cost per transition " +
		"and show nothing the history doesn't."
)

// suppressFailureQueue records the failure queue's kept finding.
func suppressFailureQueue(q awssqs.Queue) {
	cdknag.NagSuppressions_AddResourceSuppressions(q, &[]*cdknag.NagPackSuppression{
		nag("AwsSolutions-SQS3", reasonQueueIsDLQ),
	}, jsii.Bool(false))
}

func suppressionsFor(spec Function, vpc bool) []*cdknag.NagPackSuppression {
	s := []*cdknag.NagPackSuppression{
		nag("AwsSolutions-IAM5", reasonDescribeWildcard, "Resource::*"),
		nag("AwsSolutions-IAM5", reasonDiscoveredGroups,
			regex(`/^Resource::arn:<AWS::Partition>:autoscaling:(<AWS::Region>|[a-z0-9-]+):<AWS::AccountId>:autoScalingGroup:\*:autoScalingGroupName\/\*$/`)),
		nag("AwsSolutions-IAM5", reasonNamedGroup,
			regex(`/^Resource::arn:<AWS::Partition>:autoscaling:(<AWS::Region>|[a-z0-9-]+):<AWS::AccountId>:autoScalingGroup:\*:autoScalingGroupName\/[^*]+$/`)),
	}
	s = append(s, nag("AwsSolutions-IAM5", reasonManagedNodegroups,
		regex(`/^Resource::arn:<AWS::Partition>:eks:(<AWS::Region>|[a-z0-9-]+):<AWS::AccountId>:nodegroup\/[^*\/]+\/\*\/\*$/`)))
	if spec.StartsDrains {
		s = append(s, nag("AwsSolutions-IAM5", reasonExecutions,
			regex(`/^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:[A-Za-z0-9_-]+:\*$/`)))
	}
	if vpc {
		s = append(s, nag("AwsSolutions-IAM4", reasonVpcAccess,
			"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"))
	}
	return s
}

// suppress records, on a function's role (and its policy), the findings it
// keeps.
func suppress(role awsiam.Role, spec Function, vpc bool) {
	s := suppressionsFor(spec, vpc)
	cdknag.NagSuppressions_AddResourceSuppressions(role, &s, jsii.Bool(true))
}

// suppressStateMachine records the state machine's kept findings.
func suppressStateMachine(sm awsstepfunctions.StateMachine) {
	cdknag.NagSuppressions_AddResourceSuppressions(sm, &[]*cdknag.NagPackSuppression{
		nag("AwsSolutions-SF2", reasonNoXRay),
		nag("AwsSolutions-IAM5", reasonLogDelivery, "Resource::*"),
	}, jsii.Bool(true))
}

func nag(id, reason string, appliesTo ...any) *cdknag.NagPackSuppression {
	s := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		s.AppliesTo = &appliesTo
	}
	return s
}

func regex(r string) any { return &cdknag.RegexAppliesTo{Regex: jsii.String(r)} }
