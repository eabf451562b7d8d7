package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/ec2health"
	awsprovider "github.com/nodetide/nodetide/pkg/providers/aws"
)

// LifecycleHookName is the termination lifecycle hook nodetide puts on the
// Auto Scaling Groups the config names, and the one the lifecycle rule
// listens to: nodetide-drain-<cluster> (config.LifecycleHookName), so that
// deployments sharing an account and region never take each other's
// actions. A group found by discovery needs a hook of this name made by
// hand (docs/deploying.md, "Discovered groups: the drain hook").
func LifecycleHookName(cfg *config.Config) string { return cfg.LifecycleHookName() }

// namedGroups are the Auto Scaling Groups the config names, and whether
// those are all its AWS groups (no entry discovers groups by tags).
func namedGroups(cfg *config.Config) (names []string, only bool) {
	only = true
	for _, g := range cfg.NodeGroups {
		if g.Provider != awsprovider.ProviderName {
			continue
		}
		a := awsprovider.BlockOf(g.Entry())
		if a == nil || a.AutoScalingGroup == "" {
			only = false
			continue
		}
		names = append(names, a.AutoScalingGroup)
	}
	return names, only
}

// HookHeartbeatTimeout is how long a hook holds a machine with no word
// from the drain: its drain.timeout and two minutes more (at least five
// minutes, at most the two hours AWS allows). The drain's steps send a
// heartbeat every minute, so this only bounds a drain that stopped.
func HookHeartbeatTimeout(cfg *config.Config) time.Duration {
	return min(max(cfg.DrainSettings().Timeout+2*time.Minute, 5*time.Minute), 2*time.Hour)
}

// interruptions routes the events of machines the cloud takes to the drain
// function, and puts the termination hook on the named groups. Only for
// configs with AWS groups.
func interruptions(st awscdk.Stack, cfg *config.Config, drainFn awslambda.Function, failures awssqs.IQueue) {
	if !hasProvider(cfg, awsprovider.ProviderName) {
		return
	}
	if cfg.EvaluateSettings().Shadow {
		// A shadow deployment runs beside another scaler and changes
		// nothing: no hook holds the other scaler's removals, and no cloud
		// event starts a drain.
		return
	}
	heartbeat := HookHeartbeatTimeout(cfg)
	hook := LifecycleHookName(cfg)
	names, onlyNamed := namedGroups(cfg)
	for _, asg := range names {
		awsautoscaling.NewCfnLifecycleHook(st, jsii.String("DrainHook-"+constructName(asg)), &awsautoscaling.CfnLifecycleHookProps{
			AutoScalingGroupName: jsii.String(asg),
			LifecycleHookName:    jsii.String(hook),
			LifecycleTransition:  jsii.String("autoscaling:EC2_INSTANCE_TERMINATING"),
			// The machine goes either way; CONTINUE also lets a launch
			// hook of another tool run its own course.
			DefaultResult:    jsii.String("CONTINUE"),
			HeartbeatTimeout: jsii.Number(heartbeat.Seconds()),
		})
	}
	target := func() *[]awsevents.IRuleTarget {
		return &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(drainFn, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(2), MaxEventAge: awscdk.Duration_Minutes(jsii.Number(5)),
			// An event that could not be delivered is kept, as the other
			// rules' are: a lost termination warning is a node gone undrained.
			DeadLetterQueue: failures,
		})}
	}
	name := cfg.Cluster.Name
	// This deployment's hook; and where the config names every group, those
	// groups only (discovered groups are checked by their tags at run time).
	lifecycle := map[string]any{"LifecycleHookName": []string{hook}}
	if onlyNamed && len(names) > 0 {
		lifecycle["AutoScalingGroupName"] = names
	}
	awsevents.NewRule(st, jsii.String("LifecycleHookRule"), &awsevents.RuleProps{
		Description: jsii.String("nodetide: drain the nodes Auto Scaling Groups terminate (" + name + ")"),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("aws.autoscaling"),
			DetailType: jsii.Strings("EC2 Instance-terminate Lifecycle Action"),
			Detail:     &lifecycle,
		},
		Targets: target(),
	})
	ec2Types := []string{"EC2 Spot Instance Interruption Warning"}
	if cfg.DrainSettings().Rebalance {
		ec2Types = append(ec2Types, "EC2 Instance Rebalance Recommendation")
	}
	awsevents.NewRule(st, jsii.String("SpotInterruptionRule"), &awsevents.RuleProps{
		Description:  jsii.String("nodetide: drain Spot nodes EC2 reclaims (" + name + ")"),
		EventPattern: &awsevents.EventPattern{Source: jsii.Strings("aws.ec2"), DetailType: jsii.Strings(ec2Types...)},
		Targets:      target(),
	})
	awsevents.NewRule(st, jsii.String("ScheduledMaintenanceRule"), &awsevents.RuleProps{
		Description: jsii.String("nodetide: drain nodes AWS scheduled for a stop, reboot or retirement (" + name + ")"),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("aws.health"),
			DetailType: jsii.Strings("AWS Health Event"),
			Detail: &map[string]any{
				"service":           []string{"EC2"},
				"eventTypeCategory": []string{"scheduledChange"},
				// The codes one by one: a prefix would miss the EBS-backed
				// retirement (AWS_EC2_PERSISTENT_...) and take in codes that
				// only share a prefix.
				"eventTypeCode": ec2health.Codes(),
			},
		},
		Targets: target(),
	})
}

// constructName keeps what a construct ID may hold of an Auto Scaling
// Group's name (no "/").
func constructName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r < 0x20 {
			return '-'
		}
		return r
	}, s)
}
