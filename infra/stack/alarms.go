package stack

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodetide/nodetide/pkg/metrics"
)

// Defaults of the alarm options.
const (
	DefaultPendingPodAlarmMinutes   = 10
	DefaultDrainReservedConcurrency = 10
)

// alarmTopic is the topic every alarm notifies: the one the options name,
// or one made here, refusing non-TLS publishers. At monitoring full it is
// encrypted with a key of its own (CloudWatch cannot publish to a topic
// under the AWS-managed SNS key); below, that key's $1 a month would be
// more than the rest of the stack costs, and a notification carries nothing
// secret (the alarm's name, description, metric, threshold and state), so
// the topic is left unencrypted at rest. cdk-nag's AwsSolutions pack checks
// SNS topics for TLS only (SNS3, met); its NIST and HIPAA packs' rule on
// topic encryption would flag it.
func alarmTopic(st awscdk.Stack, o Options, prefix string) (awssns.ITopic, bool) {
	if o.AlarmTopicArn != "" {
		return awssns.Topic_FromTopicArn(st, jsii.String("AlarmTopic"), jsii.String(o.AlarmTopicArn)), false
	}
	props := &awssns.TopicProps{
		TopicName:   jsii.String(prefix + "-alarms"),
		DisplayName: jsii.String("nodetide " + o.Config.Cluster.Name + " alarms"),
		EnforceSSL:  jsii.Bool(true),
	}
	if o.Monitoring == metrics.LevelFull {
		key := awskms.NewKey(st, jsii.String("AlarmTopicKey"), &awskms.KeyProps{
			Description:       jsii.String("nodetide " + o.Config.Cluster.Name + ": alarm topic encryption"),
			EnableKeyRotation: jsii.Bool(true),
			RemovalPolicy:     awscdk.RemovalPolicy_DESTROY,
		})
		key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("CloudWatchAlarmsPublish"),
			Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
			Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
			Resources:  jsii.Strings("*"), // in a key policy, * is this key
		}), jsii.Bool(false))
		props.MasterKey = key
	}
	topic := awssns.NewTopic(st, jsii.String("AlarmTopic"), props)
	for _, email := range o.AlarmEmails {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(email), nil))
	}
	return topic, true
}

// failureQueue keeps the events of scheduled and event-driven invocations
// that failed for good (EventBridge could not deliver them, or the function
// failed them past its retries), for 14 days, for a person to read.
func failureQueue(st awscdk.Stack, prefix string) awssqs.Queue {
	return awssqs.NewQueue(st, jsii.String("FailedInvocations"), &awssqs.QueueProps{
		QueueName:       jsii.String(prefix + "-failed-invocations"),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
}

// onFailure sends the events of fn's asynchronous invocations that failed
// past their retries to queue. Set on the invoke config directly, with
// sqs:SendMessage alone: CDK's SqsDestination also grants
// GetQueueAttributes and GetQueueUrl, which Lambda does not use.
func onFailure(fn awslambda.Function, role awsiam.Role, queue awssqs.Queue) {
	cfg := fn.Node().FindChild(jsii.String("EventInvokeConfig")).Node().DefaultChild().(awslambda.CfnEventInvokeConfig)
	cfg.AddPropertyOverride(jsii.String("DestinationConfig.OnFailure.Destination"), queue.QueueArn())
	allow(role, []string{"sqs:SendMessage"}, queue.QueueArn())
}

// alarms builds the stack's alarms, all notifying one action, those of the
// monitoring level only.
type alarms struct {
	st      awscdk.Stack
	cluster string
	level   metrics.Level
	action  awscloudwatch.IAlarmAction
	all     []awscloudwatch.IAlarm
}

// The monitoring levels an alarm is made at. Essential is not a part of
// full: its one alarm on Problems replaces several of full's (see nodetide).
var (
	fullOnly      = []metrics.Level{metrics.LevelFull}
	essentialOnly = []metrics.Level{metrics.LevelEssential}
	fullEssential = []metrics.Level{metrics.LevelFull, metrics.LevelEssential}
	fullOff       = []metrics.Level{metrics.LevelFull, metrics.LevelOff}
)

// alarm is one alarm: fire when the statistic over the period compares to
// the threshold, once.
type alarm struct {
	// levels are the monitoring levels that have the alarm.
	levels          []metrics.Level
	id, description string
	metric          awscloudwatch.IMetric
	threshold       float64
	below           bool // fire below the threshold (default: at or above)
	missing         awscloudwatch.TreatMissingData
}

func (a *alarms) add(al alarm) {
	if !slices.Contains(al.levels, a.level) {
		return
	}
	cmp := awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	if al.below {
		cmp = awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD
	}
	missing := al.missing
	if missing == "" {
		missing = awscloudwatch.TreatMissingData_NOT_BREACHING
	}
	x := awscloudwatch.NewAlarm(a.st, jsii.String(al.id), &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String(fmt.Sprintf("nodetide %s: %s", a.cluster, al.description)),
		Metric:             al.metric,
		Threshold:          jsii.Number(al.threshold),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: cmp,
		TreatMissingData:   missing,
	})
	x.AddAlarmAction(a.action)
	a.all = append(a.all, x)
}

// custom is one of the functions' own metrics (pkg/metrics) for the cluster.
func (a *alarms) custom(name, stat string, period time.Duration) awscloudwatch.Metric {
	return customMetric(a.cluster, name, stat, period)
}

func customMetric(cluster, name, stat string, period time.Duration) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(metrics.Namespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &map[string]*string{metrics.DimCluster: jsii.String(cluster)},
		Statistic:     jsii.String(stat),
		Period:        awscdk.Duration_Seconds(jsii.Number(period.Seconds())),
	})
}

var fiveMinutes = 5 * time.Minute

// function adds a function's errors and throttles alarms. Errors are at
// full and off: on AWS's own metric they cost $0.10 each and nothing to
// publish, and with no custom metric (off) they are what tells a function
// fails. Essential leaves them out: a failed scheduled or event-driven
// invocation lands in the failure queue (its alarm), a failed drain step is
// rolled back (Problems), and an evaluate that keeps failing stops
// publishing Problems (which alarms). Throttles are full only: a throttled
// invocation is retried, and throttling that lasts shows as a stalled cycle
// or a drain that ends unfinished.
func (a *alarms) function(title string, fn awslambda.Function) {
	opts := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	a.add(alarm{levels: fullOff, id: title + "ErrorsAlarm", metric: fn.MetricErrors(opts), threshold: 1,
		description: strings.ToLower(title) + " returned errors; see its log group"})
	a.add(alarm{levels: fullOnly, id: title + "ThrottlesAlarm", metric: fn.MetricThrottles(opts), threshold: 1,
		description: strings.ToLower(title) + " was throttled (account concurrency, or its reserved concurrency is too small)"})
}

// nodetide adds the alarms on what the functions report and on the drain
// state machine's executions, the evaluate rule and the failure queue. At
// full, one alarm per metric; the state machine's TimedOut and Aborted
// also, though DrainEndedUnfinished fires for both (and for RollbackFailed,
// which only the Failed count shows, together with every rejected drain).
// At essential, three: Problems (published only when there is one), the
// evaluate rule invoking nothing (AWS's own metric: no data is no tick),
// and the failure queue, where a failed tick lands.
func (a *alarms) nodetide(o Options, sm awsstepfunctions.StateMachine, queue awssqs.Queue, evaluateRule awsevents.Rule, evaluateEvery time.Duration) {
	sum := func(name string) awscloudwatch.Metric { return a.custom(name, "Sum", fiveMinutes) }
	a.add(alarm{levels: fullOnly, id: "ScaleUpFailedAlarm", metric: sum(metrics.ScaleUpFailures), threshold: 1,
		description: "a scale-up failed (metric ScaleUpFailures; its Reason dimension says why); the group is backed off, see the evaluate log"})
	// Over at least 5 minutes, and never shorter than the interval: a
	// period without a cycle's data point would flip the alarm to OK and
	// back, notifying each time.
	minutes := o.PendingPodAlarmMinutes
	a.add(alarm{levels: fullOnly, id: "PodsPendingAlarm", metric: a.custom(metrics.OldestPendingPodAge, "Maximum", max(fiveMinutes, evaluateEvery)),
		threshold:   float64(minutes * 60),
		description: fmt.Sprintf("a pod has been unschedulable for more than %d minutes (OldestPendingPodAge); see the plan's unschedulable reasons in the evaluate log", minutes)})
	a.add(alarm{levels: fullOnly, id: "DrainStartFailedAlarm", metric: sum(metrics.DrainStartFailures), threshold: 1,
		description: "evaluate could not start a drain execution; see the evaluate log"})
	a.add(alarm{levels: fullOnly, id: "DrainRolledBackAlarm", metric: sum(metrics.DrainsRolledBack), threshold: 1,
		description: "a drain was rolled back (a PDB past the timeout, a failed step); its node is back in service, see the execution history"})
	a.add(alarm{levels: fullOnly, id: "DrainEndedUnfinishedAlarm", metric: sum(metrics.DrainsRecovered), threshold: 1,
		description: "a drain's execution ended without finishing it (RollbackFailed, stopped, timed out) and recovery finished it; see the execution history"})
	opts := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	a.add(alarm{levels: fullOnly, id: "DrainTimedOutAlarm", metric: sm.MetricTimedOut(opts), threshold: 1,
		description: "a drain execution timed out; recovery finishes its drain, see the execution history"})
	a.add(alarm{levels: fullOnly, id: "DrainAbortedAlarm", metric: sm.MetricAborted(opts), threshold: 1,
		description: "a drain execution was stopped; recovery finishes its drain"})
	a.add(alarm{levels: fullOnly, id: "StrayCordonAlarm", metric: sum(metrics.StrayCordonsRecovered), threshold: 1,
		description: "a node carried the draining taint with no drain holding it; recovery made it schedulable again"})
	a.add(alarm{levels: fullOnly, id: "ScheduleFailedAlarm", metric: sum(metrics.ScheduleFailures), threshold: 1,
		description: "a schedule fired with a failed effect; see lastResult (nodetide schedules get NAME -o json)"})
	// No completed cycle in the window, or no data at all (the function
	// not running, or failing before it reports), is an outage.
	window := max(5*time.Minute, 2*evaluateEvery)
	a.add(alarm{levels: fullOnly, id: "EvaluateStalledAlarm", metric: a.custom(metrics.CycleCompleted, "Sum", window), threshold: 1, below: true,
		missing:     awscloudwatch.TreatMissingData_BREACHING,
		description: fmt.Sprintf("no evaluate cycle completed in %s: nothing scales up or down; see the evaluate log and Errors", window)})
	// Over at least the interval, as PodsPending: a lasting problem has a
	// data point in every period.
	a.add(alarm{levels: essentialOnly, id: "ProblemsAlarm", metric: a.custom(metrics.Problems, "Sum", max(fiveMinutes, evaluateEvery)), threshold: 1,
		description: fmt.Sprintf("nodetide found a problem: an evaluate cycle failed, a scale-up was refused, a group is backed off, "+
			"a pod has been unschedulable for more than %d minutes, a drain was rolled back, ended unfinished or is past its deadline, "+
			"or a node was left cordoned; `nodetide status` names it (a rolled-back drain: the DrainRolledBack event on its node), "+
			"see the evaluate log", minutes)})
	a.add(alarm{levels: essentialOnly, id: "EvaluateNotInvokedAlarm", threshold: 1, below: true,
		metric: awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/Events"), MetricName: jsii.String("Invocations"),
			DimensionsMap: &map[string]*string{"RuleName": evaluateRule.RuleName()},
			Statistic:     jsii.String("Sum"), Period: awscdk.Duration_Seconds(jsii.Number(window.Seconds())),
		}),
		missing:     awscloudwatch.TreatMissingData_BREACHING,
		description: fmt.Sprintf("the evaluate rule invoked nothing in %s (disabled, deleted, or EventBridge failing): nothing scales on schedule", window)})
	a.add(alarm{levels: fullEssential, id: "FailedInvocationsAlarm",
		metric:    queue.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum")}),
		threshold: 1,
		description: "a scheduled or event-driven invocation failed past its retries; its event is in the queue " +
			*queue.QueueName() + ", read it and delete it once handled"})
}

// dashboard shows the functions' metrics, the state machine, the queue and
// the alarms' states on one page; at monitoring essential, Problems (the one
// metric published at that level) and AWS's own. Monitoring off has none
// (nil).
func dashboard(st awscdk.Stack, level metrics.Level, name, cluster string, fns map[string]awslambda.Function, sm awsstepfunctions.StateMachine, queue awssqs.Queue, all []awscloudwatch.IAlarm) awscloudwatch.Dashboard {
	m := func(metric, stat string) awscloudwatch.IMetric {
		return customMetric(cluster, metric, stat, time.Minute)
	}
	// Group and reason metrics, for whichever groups and reasons exist.
	search := func(metric, dim, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,%s,%s} %s="%s" MetricName="%s"', '%s', 60)`,
				metrics.Namespace, metrics.DimCluster, dim, metrics.DimCluster, cluster, metric, stat)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{},
			Label:        jsii.String(metric),
			Period:       awscdk.Duration_Minutes(jsii.Number(1)),
		})
	}
	graph := func(title string, left []awscloudwatch.IMetric, right ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		p := &awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &left, Width: jsii.Number(8), Height: jsii.Number(6)}
		if len(right) > 0 {
			p.Right = &right
		}
		return awscloudwatch.NewGraphWidget(p)
	}
	ms := func(v ...awscloudwatch.IMetric) []awscloudwatch.IMetric { return v }
	fnMetrics := func(f func(awslambda.Function) awscloudwatch.Metric) []awscloudwatch.IMetric {
		var out []awscloudwatch.IMetric
		for _, n := range []string{"evaluate", "drain", "schedule"} {
			out = append(out, f(fns[n]))
		}
		return out
	}
	refs := make([]interfacesawscloudwatch.IAlarmRef, len(all))
	for i, a := range all {
		refs[i] = a
	}
	sumOpts := &awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: awscdk.Duration_Minutes(jsii.Number(5))}
	if level == metrics.LevelOff {
		return nil
	}
	alarmRow := []awscloudwatch.IWidget{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
		Title: jsii.String("Alarms"), Alarms: &refs, Width: jsii.Number(24), Height: jsii.Number(4),
	})}
	awsRow := []awscloudwatch.IWidget{
		graph("Function errors", fnMetrics(func(f awslambda.Function) awscloudwatch.Metric { return f.MetricErrors(sumOpts) })),
		graph("Function throttles", fnMetrics(func(f awslambda.Function) awscloudwatch.Metric { return f.MetricThrottles(sumOpts) })),
		graph("Drain executions, failed invocations", ms(sm.MetricSucceeded(sumOpts), sm.MetricFailed(sumOpts), sm.MetricTimedOut(sumOpts), sm.MetricAborted(sumOpts)),
			queue.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: awscdk.Duration_Minutes(jsii.Number(5))})),
	}
	grid := [][]awscloudwatch.IWidget{
		alarmRow,
		{
			graph("Problems (nodetide status names them)", ms(m(metrics.Problems, "Sum"))),
		},
		awsRow,
	}
	if level == metrics.LevelFull {
		grid = [][]awscloudwatch.IWidget{
			alarmRow,
			{
				graph("Pending pods", ms(m(metrics.PendingPods, "Maximum"), m(metrics.UnschedulablePods, "Maximum")), m(metrics.OldestPendingPodAge, "Maximum")),
				graph("Ready nodes per group", ms(search(metrics.ReadyNodes, metrics.DimNodeGroup, "Maximum"))),
				graph("Target size per group", ms(search(metrics.TargetSize, metrics.DimNodeGroup, "Maximum"))),
			},
			{
				graph("Registered nodes per group", ms(search(metrics.RegisteredNodes, metrics.DimNodeGroup, "Maximum"))),
				graph("Unneeded nodes per group", ms(search(metrics.UnneededNodes, metrics.DimNodeGroup, "Maximum"))),
				graph("Scale-ups: nodes asked, failures by reason", ms(search(metrics.ScaleUpNodes, metrics.DimNodeGroup, "Sum")),
					search(metrics.ScaleUpFailures, metrics.DimReason, "Sum")),
			},
			{
				graph("Drains", ms(m(metrics.DrainsStarted, "Sum"), m(metrics.DrainsSucceeded, "Sum"), m(metrics.DrainsRolledBack, "Sum"),
					m(metrics.DrainsRejected, "Sum"), m(metrics.DrainsRecovered, "Sum"), m(metrics.DrainStartFailures, "Sum"))),
				graph("Drain duration", ms(m(metrics.DrainDuration, "Average"), m(metrics.DrainDuration, "Maximum"))),
				graph("Nodes removed, stray cordons", ms(m(metrics.NodesRemoved, "Sum"), m(metrics.StrayCordonsRecovered, "Sum"))),
			},
			{
				graph("Evaluate cycle", ms(m(metrics.CycleCompleted, "Sum"), m(metrics.LeaseSkips, "Sum")), m(metrics.CycleDuration, "Maximum")),
				graph("Snapshot size", ms(m(metrics.SnapshotPods, "Maximum")), m(metrics.SnapshotNodes, "Maximum")),
				graph("Schedules", ms(m(metrics.ScheduleFires, "Sum"), m(metrics.ScheduleFailures, "Sum"))),
			},
			awsRow,
		}
	}
	rows := make([]*[]awscloudwatch.IWidget, len(grid))
	for i := range grid {
		rows[i] = &grid[i]
	}
	return awscloudwatch.NewDashboard(st, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(name),
		Widgets:       &rows,
	})
}

// action wraps the alarm topic for the alarms.
func action(topic awssns.ITopic) awscloudwatch.IAlarmAction {
	return awscloudwatchactions.NewSnsAction(topic)
}
