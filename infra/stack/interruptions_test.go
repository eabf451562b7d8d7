package stack

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// The named group gets the termination hook; the lifecycle, Spot and
// scheduled-maintenance events reach the drain function.
func TestInterruptions(t *testing.T) {
	f := synth(t, options(t, map[string]string{}), false)
	tpl := f.tpl
	hooks := f.resources("AWS::AutoScaling::LifecycleHook")
	if len(hooks) != 1 {
		t.Fatalf("%d lifecycle hooks, want 1 (for the one named group of the example config)", len(hooks))
	}
	check(t, "hook", func() {
		tpl.HasResourceProperties(jsii.String("AWS::AutoScaling::LifecycleHook"), map[string]any{
			"AutoScalingGroupName": "prod-gpu", "LifecycleHookName": LifecycleHookName,
			"LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING", "DefaultResult": "CONTINUE",
			"HeartbeatTimeout": 720, // the example's drain.timeout (10m) and two minutes
		})
	})
	drainID, _ := f.function(t, "drain")
	target := []any{assertions.Match_ObjectLike(&map[string]any{"Arn": map[string]any{"Fn::GetAtt": []any{drainID, "Arn"}}})}
	patterns := map[string]map[string]any{
		"lifecycle rule": {
			"source": []any{"aws.autoscaling"}, "detail-type": []any{"EC2 Instance-terminate Lifecycle Action"},
			"detail": map[string]any{"LifecycleHookName": []any{LifecycleHookName}},
		},
		"spot rule": {
			"source": []any{"aws.ec2"}, "detail-type": []any{"EC2 Spot Instance Interruption Warning"},
		},
		"health rule": {
			"source": []any{"aws.health"}, "detail-type": []any{"AWS Health Event"},
			"detail": map[string]any{"service": []any{"EC2"}, "eventTypeCategory": []any{"scheduledChange"},
				"eventTypeCode": healthCodes()},
		},
	}
	for name, p := range patterns {
		check(t, name, func() {
			tpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{"EventPattern": p, "Targets": target})
		})
	}
}
