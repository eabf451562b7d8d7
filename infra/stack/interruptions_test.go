package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// The named group gets the cluster's own termination hook; the lifecycle
// (of that hook only: the example config also discovers groups), Spot and
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
			"AutoScalingGroupName": "prod-gpu", "LifecycleHookName": "nodetide-drain-prod",
			"LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING", "DefaultResult": "CONTINUE",
			"HeartbeatTimeout": 720, // the example's drain.timeout (10m) and two minutes
		})
	})
	drainID, _ := f.function(t, "drain")
	target := []any{assertions.Match_ObjectLike(&map[string]any{"Arn": map[string]any{"Fn::GetAtt": []any{drainID, "Arn"}}})}
	patterns := map[string]map[string]any{
		"lifecycle rule": {
			"source": []any{"aws.autoscaling"}, "detail-type": []any{"EC2 Instance-terminate Lifecycle Action"},
			"detail": map[string]any{"LifecycleHookName": []any{"nodetide-drain-prod"}},
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

// A config that names every group it manages: the lifecycle rule takes the
// actions of the cluster's hook on those groups alone, so another
// deployment's scale-in never reaches this one's drain function.
func TestLifecycleRuleOfNamedGroups(t *testing.T) {
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	discovery := "  - provider: aws\n    aws:\n      autoDiscovery:\n        - k8s.io/cluster-autoscaler/enabled\n        - k8s.io/cluster-autoscaler/prod\n"
	if !strings.Contains(string(data), discovery) {
		t.Fatal("the example config's discovery entry moved: update this test")
	}
	named := strings.Replace(string(data), discovery, "  - {name: workers, provider: aws, aws: {autoScalingGroup: prod-workers}}\n", 1)
	path := filepath.Join(t.TempDir(), "nodetide.yaml")
	if err := os.WriteFile(path, []byte(named), 0o644); err != nil {
		t.Fatal(err)
	}
	f := synth(t, options(t, map[string]string{CtxConfig: path}), false)
	if hooks := f.resources("AWS::AutoScaling::LifecycleHook"); len(hooks) != 2 {
		t.Fatalf("%d lifecycle hooks, want 2 (one per named group)", len(hooks))
	}
	for _, asg := range []string{"prod-workers", "prod-gpu"} {
		check(t, "hook of "+asg, func() {
			f.tpl.HasResourceProperties(jsii.String("AWS::AutoScaling::LifecycleHook"), map[string]any{
				"AutoScalingGroupName": asg, "LifecycleHookName": "nodetide-drain-prod"})
		})
	}
	check(t, "lifecycle rule", func() {
		f.tpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{"EventPattern": map[string]any{
			"source": []any{"aws.autoscaling"}, "detail-type": []any{"EC2 Instance-terminate Lifecycle Action"},
			"detail": map[string]any{"LifecycleHookName": []any{"nodetide-drain-prod"}, "AutoScalingGroupName": []any{"prod-workers", "prod-gpu"}},
		}})
	})
}
