package stack

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodetide/nodetide/pkg/metrics"
)

// resourceID finds the one resource of typ whose logical ID starts with
// prefix (CDK appends a hash).
func (f fixture) resourceID(t *testing.T, typ, prefix string) (string, map[string]any) {
	t.Helper()
	var id string
	var found map[string]any
	for k, r := range f.resources(typ) {
		if strings.HasPrefix(k, prefix) {
			if id != "" {
				t.Fatalf("two %s resources named %s*: %s, %s", typ, prefix, id, k)
			}
			id, found = k, r
		}
	}
	if id == "" {
		t.Fatalf("no %s named %s*", typ, prefix)
	}
	return id, props(found)
}

// Every alarm watches what its name says, fires at the threshold that
// matters, and notifies the topic; the stack makes an encrypted, TLS-only
// topic when none is given.
func TestAlarms(t *testing.T) {
	f := synth(t, options(t, map[string]string{CtxPendingPodAlarm: "15", CtxAlarmEmail: "oncall@example.com", CtxMonitoring: "full"}), false)
	topicID, topic := f.resourceID(t, "AWS::SNS::Topic", "AlarmTopic")
	keyID, _ := f.resourceID(t, "AWS::KMS::Key", "AlarmTopicKey")
	if str(topic["KmsMasterKeyId"]) != str(map[string]any{"Fn::GetAtt": []any{keyID, "Arn"}}) {
		t.Errorf("topic key %s, want the stack's key %s", str(topic["KmsMasterKeyId"]), keyID)
	}
	check(t, "key lets CloudWatch publish", func() {
		f.tpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{
			"EnableKeyRotation": true,
			"KeyPolicy": assertions.Match_ObjectLike(&map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{
					"Principal": map[string]any{"Service": "cloudwatch.amazonaws.com"},
					"Action":    []any{"kms:Decrypt", "kms:GenerateDataKey*"},
				}),
			})}),
		})
	})
	check(t, "topic refuses plain HTTP", func() {
		f.tpl.HasResourceProperties(jsii.String("AWS::SNS::TopicPolicy"), map[string]any{
			"PolicyDocument": assertions.Match_ObjectLike(&map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{
					"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				}),
			})}),
		})
	})
	check(t, "email subscription", func() {
		f.tpl.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]any{
			"Protocol": "email", "Endpoint": "oncall@example.com", "TopicArn": map[string]any{"Ref": topicID},
		})
	})

	queueID, _ := f.resourceID(t, "AWS::SQS::Queue", "FailedInvocations")
	cluster := []any{map[string]any{"Name": "Cluster", "Value": "prod"}}
	smID, _ := f.resourceID(t, "AWS::StepFunctions::StateMachine", "DrainStateMachine")
	sm := []any{map[string]any{"Name": "StateMachineArn", "Value": map[string]any{"Ref": smID}}}
	queue := []any{map[string]any{"Name": "QueueName", "Value": map[string]any{"Fn::GetAtt": []any{queueID, "QueueName"}}}}
	ge, lt := "GreaterThanOrEqualToThreshold", "LessThanThreshold"
	tests := []struct {
		id, namespace, metric, statistic string
		period, threshold                float64
		comparison, missing              string
		dims                             []any
	}{
		{"ScaleUpFailedAlarm", "nodetide", "ScaleUpFailures", "Sum", 300, 1, ge, "notBreaching", cluster},
		{"PodsPendingAlarm", "nodetide", "OldestPendingPodAge", "Maximum", 300, 15 * 60, ge, "notBreaching", cluster},
		{"DrainStartFailedAlarm", "nodetide", "DrainStartFailures", "Sum", 300, 1, ge, "notBreaching", cluster},
		{"DrainRolledBackAlarm", "nodetide", "DrainsRolledBack", "Sum", 300, 1, ge, "notBreaching", cluster},
		{"DrainEndedUnfinishedAlarm", "nodetide", "DrainsRecovered", "Sum", 300, 1, ge, "notBreaching", cluster},
		{"StrayCordonAlarm", "nodetide", "StrayCordonsRecovered", "Sum", 300, 1, ge, "notBreaching", cluster},
		{"ScheduleFailedAlarm", "nodetide", "ScheduleFailures", "Sum", 300, 1, ge, "notBreaching", cluster},
		{"EvaluateStalledAlarm", "nodetide", "CycleCompleted", "Sum", 300, 1, lt, "breaching", cluster},
		{"DrainTimedOutAlarm", "AWS/States", "ExecutionsTimedOut", "Sum", 300, 1, ge, "notBreaching", sm},
		{"DrainAbortedAlarm", "AWS/States", "ExecutionsAborted", "Sum", 300, 1, ge, "notBreaching", sm},
		{"FailedInvocationsAlarm", "AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", 300, 1, ge, "notBreaching", queue},
	}
	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		id, _ := f.function(t, fn)
		dims := []any{map[string]any{"Name": "FunctionName", "Value": map[string]any{"Ref": id}}}
		title := strings.ToUpper(fn[:1]) + fn[1:]
		tests = append(tests,
			struct {
				id, namespace, metric, statistic string
				period, threshold                float64
				comparison, missing              string
				dims                             []any
			}{title + "ErrorsAlarm", "AWS/Lambda", "Errors", "Sum", 300, 1, ge, "notBreaching", dims},
			struct {
				id, namespace, metric, statistic string
				period, threshold                float64
				comparison, missing              string
				dims                             []any
			}{title + "ThrottlesAlarm", "AWS/Lambda", "Throttles", "Sum", 300, 1, ge, "notBreaching", dims})
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			_, p := f.resourceID(t, "AWS::CloudWatch::Alarm", tc.id)
			want := map[string]any{
				"Namespace": tc.namespace, "MetricName": tc.metric, "Statistic": tc.statistic, "Period": tc.period,
				"Threshold": tc.threshold, "ComparisonOperator": tc.comparison, "TreatMissingData": tc.missing,
				"EvaluationPeriods": 1.0, "Dimensions": tc.dims, "AlarmActions": []any{map[string]any{"Ref": topicID}},
			}
			for k, v := range want {
				if str(p[k]) != str(v) {
					t.Errorf("%s = %s, want %s", k, str(p[k]), str(v))
				}
			}
		})
	}
	// Nothing alarms on the executions' Failed count, which a Rejected
	// drain (already draining, at the minimum) also raises.
	if n := len(f.resources("AWS::CloudWatch::Alarm")); n != len(tests) {
		t.Errorf("%d alarms, want the %d above", n, len(tests))
	}
	for id, r := range f.resources("AWS::CloudWatch::Alarm") {
		if props(r)["MetricName"] == "ExecutionsFailed" {
			t.Errorf("alarm %s on ExecutionsFailed", id)
		}
	}
}

// At essential one alarm reads what the functions publish: Problems, firing
// at one (no data is no problem); beside it the evaluate rule's invocations
// (no data is no tick) and the failure queue's. evaluate gets the pending
// pods' minutes, which it counts problems by.
func TestEssentialAlarms(t *testing.T) {
	f := synth(t, options(t, map[string]string{CtxPendingPodAlarm: "15"}), false)
	topicID, _ := f.resourceID(t, "AWS::SNS::Topic", "AlarmTopic")
	queueID, _ := f.resourceID(t, "AWS::SQS::Queue", "FailedInvocations")
	ruleID, _ := f.resourceID(t, "AWS::Events::Rule", "EvaluateRule")
	for _, tc := range []struct {
		id   string
		want map[string]any
	}{
		{"ProblemsAlarm", map[string]any{
			"Namespace": "nodetide", "MetricName": "Problems", "Statistic": "Sum", "Period": 300.0,
			"Threshold": 1.0, "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
			"Dimensions": []any{map[string]any{"Name": "Cluster", "Value": "prod"}},
		}},
		{"EvaluateNotInvokedAlarm", map[string]any{
			"Namespace": "AWS/Events", "MetricName": "Invocations", "Statistic": "Sum", "Period": 300.0,
			"Threshold": 1.0, "ComparisonOperator": "LessThanThreshold", "TreatMissingData": "breaching",
			"Dimensions": []any{map[string]any{"Name": "RuleName", "Value": map[string]any{"Ref": ruleID}}},
		}},
		{"FailedInvocationsAlarm", map[string]any{
			"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible", "Statistic": "Maximum", "Period": 300.0,
			"Threshold": 1.0, "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
			"Dimensions": []any{map[string]any{"Name": "QueueName", "Value": map[string]any{"Fn::GetAtt": []any{queueID, "QueueName"}}}},
		}},
	} {
		_, p := f.resourceID(t, "AWS::CloudWatch::Alarm", tc.id)
		tc.want["EvaluationPeriods"] = 1.0
		tc.want["AlarmActions"] = []any{map[string]any{"Ref": topicID}}
		for k, v := range tc.want {
			if str(p[k]) != str(v) {
				t.Errorf("%s: %s = %s, want %s", tc.id, k, str(p[k]), str(v))
			}
		}
	}
	_, p := f.resourceID(t, "AWS::CloudWatch::Alarm", "ProblemsAlarm")
	if d := str(p["AlarmDescription"]); !strings.Contains(d, "more than 15 minutes") || !strings.Contains(d, "nodetide status") {
		t.Errorf("ProblemsAlarm description %s: want the pending minutes and where to look", d)
	}
	for fn, want := range map[string]any{"evaluate": "15", "drain": nil, "schedule": nil} {
		_, p := f.function(t, fn)
		if got := p["Environment"].(map[string]any)["Variables"].(map[string]any)[EnvPendingPodAlarmMinutes]; got != want {
			t.Errorf("%s: %s = %v, want %v", fn, EnvPendingPodAlarmMinutes, got, want)
		}
	}
}

// A slower evaluate interval widens the stalled-cycle window and the
// pending pods' period.
func TestEvaluateStalledWindow(t *testing.T) {
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "nodetide.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), "interval: 1m", "interval: 10m", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	f := synth(t, options(t, map[string]string{CtxConfig: path, CtxMonitoring: "full"}), false)
	_, p := f.resourceID(t, "AWS::CloudWatch::Alarm", "EvaluateStalledAlarm")
	if p["Period"] != 1200.0 {
		t.Errorf("stalled: period %v, want 1200 (two 10-minute intervals)", p["Period"])
	}
	_, p = f.resourceID(t, "AWS::CloudWatch::Alarm", "PodsPendingAlarm")
	if p["Period"] != 600.0 {
		t.Errorf("pending: period %v, want 600 (one data point per period)", p["Period"])
	}
	f = synth(t, options(t, map[string]string{CtxConfig: path}), false)
	_, p = f.resourceID(t, "AWS::CloudWatch::Alarm", "EvaluateNotInvokedAlarm")
	if p["Period"] != 1200.0 {
		t.Errorf("not invoked: period %v, want 1200 (two 10-minute intervals)", p["Period"])
	}
	_, p = f.resourceID(t, "AWS::CloudWatch::Alarm", "ProblemsAlarm")
	if p["Period"] != 600.0 {
		t.Errorf("problems: period %v, want 600 (one data point per period)", p["Period"])
	}
}

// Failed scheduled and event-driven invocations land in one encrypted,
// TLS-only queue: EventBridge's dead-letter queue and the functions'
// on-failure destination.
func TestFailureDestinations(t *testing.T) {
	f := synth(t, options(t, map[string]string{}), false)
	queueID, q := f.resourceID(t, "AWS::SQS::Queue", "FailedInvocations")
	if q["SqsManagedSseEnabled"] != true || q["MessageRetentionPeriod"] != 1209600.0 {
		t.Errorf("queue %v: want SQS-managed encryption and 14 days' retention", q)
	}
	arn := map[string]any{"Fn::GetAtt": []any{queueID, "Arn"}}
	check(t, "queue refuses plain HTTP", func() {
		f.tpl.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), map[string]any{
			"PolicyDocument": assertions.Match_ObjectLike(&map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{
					"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				}),
				assertions.Match_ObjectLike(&map[string]any{
					"Effect": "Allow", "Action": "sqs:SendMessage", "Principal": map[string]any{"Service": "events.amazonaws.com"},
				}),
			})}),
		})
	})
	rules := 0
	for id, r := range f.resources("AWS::Events::Rule") {
		for _, target := range props(r)["Targets"].([]any) {
			tg := target.(map[string]any)
			if str(tg["DeadLetterConfig"]) != str(map[string]any{"Arn": arn}) || tg["RetryPolicy"] == nil {
				t.Errorf("rule %s: target %s has no dead-letter queue and retry policy", id, str(tg))
			}
			rules++
		}
	}
	// evaluate, schedule, drain ended; with AWS groups also the lifecycle
	// hook, Spot interruption and scheduled maintenance rules.
	if rules != 3 && rules != 6 {
		t.Errorf("%d rule targets, want 3 (evaluate, schedule, drain ended) or 6 (and the three interruption rules)", rules)
	}
	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		id, _ := f.function(t, fn)
		check(t, fn+" on-failure destination", func() {
			f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), map[string]any{
				"FunctionName":      map[string]any{"Ref": id},
				"DestinationConfig": map[string]any{"OnFailure": map[string]any{"Destination": arn}},
			})
		})
	}
}

// The drain function keeps room of its own: configurable, off with 0.
func TestDrainReservedConcurrency(t *testing.T) {
	for _, tc := range []struct {
		ctx  string
		want any
	}{{"", 10.0}, {"25", 25.0}, {"0", nil}} {
		ctx := map[string]string{}
		if tc.ctx != "" {
			ctx[CtxDrainReserved] = tc.ctx
		}
		f := synth(t, options(t, ctx), false)
		_, p := f.function(t, "drain")
		if p["ReservedConcurrentExecutions"] != tc.want {
			t.Errorf("%s=%q: reserved %v, want %v", CtxDrainReserved, tc.ctx, p["ReservedConcurrentExecutions"], tc.want)
		}
	}
}

// evaluate's memory (and schedule's, whose shrink runs an evaluate cycle)
// follows the context, for clusters whose cold read needs more.
func TestEvaluateMemory(t *testing.T) {
	for _, tc := range []struct {
		ctx  string
		want float64
	}{{"", 256}, {"640", 640}} {
		ctx := map[string]string{}
		if tc.ctx != "" {
			ctx[CtxEvaluateMemory] = tc.ctx
		}
		f := synth(t, options(t, ctx), false)
		for fn, want := range map[string]float64{"evaluate": tc.want, "schedule": tc.want, "drain": 256} {
			if _, p := f.function(t, fn); p["MemorySize"] != want {
				t.Errorf("%s=%q: %s memory %v, want %v", CtxEvaluateMemory, tc.ctx, fn, p["MemorySize"], want)
			}
		}
	}
}

// The dashboard draws the functions' metrics and the alarms' states.
func TestDashboard(t *testing.T) {
	f := synth(t, options(t, map[string]string{CtxMonitoring: "full"}), false)
	_, p := f.resourceID(t, "AWS::CloudWatch::Dashboard", "Dashboard")
	body := str(p["DashboardBody"])
	for _, want := range []string{"PendingPods", "OldestPendingPodAge", "ReadyNodes", "TargetSize", "RegisteredNodes",
		"UnneededNodes", "ScaleUpNodes", "ScaleUpFailures", "DrainsStarted", "DrainsSucceeded", "DrainsRolledBack",
		"DrainsRejected", "DrainsRecovered", "DrainDuration", "NodesRemoved", "StrayCordonsRecovered", "CycleCompleted",
		"CycleDuration", "LeaseSkips", "SnapshotPods", "SnapshotNodes", "ScheduleFires", "ScheduleFailures",
		"DrainStartFailures", "ApproximateNumberOfMessagesVisible", "Throttles", `alarm`} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %s", want)
		}
	}
}

// Each monitoring level deploys its alarms, topic key and dashboard, and
// tells the functions what to publish; every custom metric an alarm or the
// dashboard reads is one the level publishes.
func TestMonitoringLevels(t *testing.T) {
	essential := []string{"ProblemsAlarm", "EvaluateNotInvokedAlarm", "FailedInvocationsAlarm"}
	full := []string{"EvaluateErrorsAlarm", "DrainErrorsAlarm", "ScheduleErrorsAlarm", "EvaluateStalledAlarm", "PodsPendingAlarm",
		"ScaleUpFailedAlarm", "DrainRolledBackAlarm", "DrainEndedUnfinishedAlarm", "StrayCordonAlarm", "FailedInvocationsAlarm",
		"EvaluateThrottlesAlarm", "DrainThrottlesAlarm", "ScheduleThrottlesAlarm",
		"DrainStartFailedAlarm", "DrainTimedOutAlarm", "DrainAbortedAlarm", "ScheduleFailedAlarm"}
	tests := []struct {
		ctx              string // "" for the default
		level            metrics.Level
		alarms           []string
		dashboards, keys float64
	}{
		{"", metrics.LevelEssential, essential, 1, 0},
		{"essential", metrics.LevelEssential, essential, 1, 0},
		{"full", metrics.LevelFull, full, 1, 1},
		{"off", metrics.LevelOff, []string{"EvaluateErrorsAlarm", "DrainErrorsAlarm", "ScheduleErrorsAlarm"}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(cmp.Or(tc.ctx, "default"), func(t *testing.T) {
			ctx := map[string]string{}
			if tc.ctx != "" {
				ctx[CtxMonitoring] = tc.ctx
			}
			f := synth(t, options(t, ctx), false)
			for typ, n := range map[string]float64{"AWS::CloudWatch::Alarm": float64(len(tc.alarms)),
				"AWS::CloudWatch::Dashboard": tc.dashboards, "AWS::KMS::Key": tc.keys, "AWS::SNS::Topic": 1} {
				check(t, typ+" count", func() { f.tpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
			}
			_, topic := f.resourceID(t, "AWS::SNS::Topic", "AlarmTopic")
			if (topic["KmsMasterKeyId"] != nil) != (tc.level == metrics.LevelFull) {
				t.Errorf("topic key %v: want one at full only", topic["KmsMasterKeyId"])
			}
			for _, fn := range []string{"evaluate", "drain", "schedule"} {
				_, p := f.function(t, fn)
				if got := p["Environment"].(map[string]any)["Variables"].(map[string]any)[EnvMetrics]; got != string(tc.level) {
					t.Errorf("%s: %s=%v, want %s", fn, EnvMetrics, got, tc.level)
				}
			}
			var ids []string
			for id, r := range f.resources("AWS::CloudWatch::Alarm") {
				ids = append(ids, id[:len(id)-8]) // CDK's hash suffix
				p := props(r)
				if p["Namespace"] == metrics.Namespace {
					name := p["MetricName"].(string)
					if !metrics.Published(tc.level, name) {
						t.Errorf("alarm %s on %s, which %s does not publish", id, name, tc.level)
					}
					if n := len(p["Dimensions"].([]any)); n != 1 {
						t.Errorf("alarm %s: %d dimensions, want Cluster alone", id, n)
					}
				}
			}
			slices.Sort(ids)
			want := slices.Sorted(slices.Values(tc.alarms))
			if !slices.Equal(ids, want) {
				t.Errorf("alarms %v\nwant   %v", ids, want)
			}
			if tc.level != metrics.LevelEssential {
				return
			}
			_, p := f.resourceID(t, "AWS::CloudWatch::Dashboard", "Dashboard")
			body := str(p["DashboardBody"])
			for _, name := range []string{metrics.CycleCompleted, metrics.CycleDuration, metrics.SnapshotNodes, metrics.SnapshotPods,
				metrics.LeaseSkips, metrics.PendingPods, metrics.UnschedulablePods, metrics.OldestPendingPodAge, metrics.ScaleUpFailures,
				metrics.DrainStartFailures, metrics.TargetSize, metrics.RegisteredNodes, metrics.ReadyNodes, metrics.UnneededNodes,
				metrics.ScaleUpNodes, metrics.DrainsStarted, metrics.DrainsSucceeded, metrics.DrainsRolledBack, metrics.DrainsRejected,
				metrics.DrainDuration, metrics.NodesRemoved, metrics.DrainsRecovered, metrics.StrayCordonsRecovered,
				metrics.ScheduleFires, metrics.ScheduleFailures, metrics.Problems} {
				if on, want := strings.Contains(body, `\"`+name+`\"`), metrics.Published(tc.level, name); on != want {
					t.Errorf("dashboard shows %s: %v, want %v", name, on, want)
				}
			}
		})
	}
}
