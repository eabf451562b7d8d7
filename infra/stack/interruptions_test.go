package stack

import (
	"encoding/json"
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

// A shadow deployment (evaluate.shadow) changes nothing beside the scaler
// it shadows: no lifecycle hook holds that scaler's removals, and no rule
// sends the cloud's events to the drain function.
func TestShadowStackHasNoHooksNorCloudRules(t *testing.T) {
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "  interval: 1m\n") {
		t.Fatal("the example config's evaluate.interval moved: update this test")
	}
	path := filepath.Join(t.TempDir(), "nodetide.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), "  interval: 1m\n", "  interval: 1m\n  shadow: true\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	f := synth(t, options(t, map[string]string{CtxConfig: path}), false)
	if hooks := f.resources("AWS::AutoScaling::LifecycleHook"); len(hooks) != 0 {
		t.Errorf("%d lifecycle hooks in a shadow stack, want none", len(hooks))
	}
	for id, r := range f.resources("AWS::Events::Rule") {
		raw, _ := json.Marshal(r)
		for _, src := range []string{"aws.autoscaling", "aws.ec2", "aws.health"} {
			if strings.Contains(string(raw), `"`+src+`"`) {
				t.Errorf("rule %s of a shadow stack routes %s events", id, src)
			}
		}
	}
	// The scheduled cycle still runs: shadow mode plans and reports.
	if rules := f.resources("AWS::Events::Rule"); len(rules) == 0 {
		t.Error("a shadow stack has no rules at all, want the scheduled cycle")
	}
}
