// Package stack is nodetide's CloudFormation stack for one cluster, built from
// its nodetide.yaml: the state table, the evaluate, drain and schedule
// functions with one least-privilege role each, the EventBridge rules, the
// drain state machine (functions/drain/statemachine.asl.json), the config in
// SSM, the alarms with their SNS topic, the failed-invocation queue, the
// dashboard (as the monitoring level has them) and outputs; optionally the VPC placement and endpoints and
// the EKS access entries.
package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseks"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsssm"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/providerkind"
	awsprovider "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/providers/kamatera"
	"github.com/nodetide/nodetide/pkg/providers/scaleway"
)

// Environment variables the functions read (pkg/setup).
const (
	EnvConfigParameter   = "NODETIDE_CONFIG_PARAMETER"
	EnvDrainStateMachine = "NODETIDE_DRAIN_STATE_MACHINE_ARN"
	// EnvConfigSHA256 is not read by the code: it changes with the config, so
	// a config change replaces the functions' warm environments (which read
	// the parameter once, at start) on deploy.
	EnvConfigSHA256 = "NODETIDE_CONFIG_SHA256"
	// EnvMetrics is the monitoring level: what the functions publish
	// (pkg/lambdarun.EnvMetrics).
	EnvMetrics = "NODETIDE_METRICS"
	// EnvPendingPodAlarmMinutes is pendingPodAlarmMinutes for evaluate, which
	// counts a pod unschedulable that long as a problem
	// (pkg/evaluate.EnvPendingAlarmMinutes).
	EnvPendingPodAlarmMinutes = "NODETIDE_PENDING_POD_ALARM_MINUTES"
)

// TTLAttribute is the state table's TTL attribute (drain records, leases).
const TTLAttribute = "expiresAt"

// KubernetesGroup is the Kubernetes group a function's role is mapped to;
// deploy/rbac.yaml binds one ClusterRole to each.
func KubernetesGroup(fn string) string { return "nodetide-" + fn }

// Function is what the stack gives one function.
type Function struct {
	Name        string
	Description string
	MemoryMB    int
	Timeout     time.Duration
	// Reserved concurrency (0: unreserved).
	Reserved int
	// StartsDrains: states:StartExecution and DescribeExecution on the drain
	// state machine, and NODETIDE_DRAIN_STATE_MACHINE_ARN.
	StartsDrains bool
	// StopsDrains: states:StopExecution on the drain state machine's
	// executions (enable --force of a stuck drain).
	StopsDrains bool
	// RemovesMachines: besides resizing the config's groups, it removes
	// their machines (the Remove actions of the providers' policies).
	RemovesMachines bool
	// ReadsPrices: the Prices actions of the providers' policies, for the
	// prices of the config's groups.
	ReadsPrices bool
}

// Functions are the three functions and their sizing, chosen from `make
// measure` (infra/measurements.md: 200 nodes, 4,200 pods; the reasons are in
// docs/stack.md, "Sizing"): memory about 3× the measured peak RSS or more,
// timeouts many times the slowest modelled run.
//
//   - evaluate: 256 MB — peak RSS 76 MiB, growing with the pods it lists
//     (raise it above about 20,000 pods). A warm tick's CPU is ~35 ms; it
//     waits most of its ~2 s for the API server's watch bookmarks, so more
//     memory would bill more without being faster. Its scheduled run plans,
//     acts and then watches for new pending pods until evaluate.watchFor
//     after its tick (at the latest 10 s before its deadline), so the timeout
//     is watchFor + 30 s, at least 60 s: room for a cycle still finishing
//     when the watch ends, modelled at under 5 s even cold. Reserved
//     concurrency 3: room for a cycle, a triggered cycle waiting for the
//     lease and the webhook calls (a few ms each), and a bound on what calls
//     to its public URL can run at once; the DynamoDB lease keeps cycles
//     apart.
//   - drain: 256 MB (peak RSS 47 MiB; the CPU-heavy steps, Surge and Evict,
//     model up to a second faster than at 128 MB, at a negligible cost), 120 s —
//     one state machine step, modelled at under 7.5 s with its own 5 s wait,
//     or a hand-made shutdown / enable; under the ASL's 300 s per task, so a
//     hung step ends as the function's timeout.
//   - schedule: 256 MB, 90 s — a tick with nothing due models at under
//     0.1 s and one firing five schedules at under 2.5 s (peak RSS 47 MiB),
//     but a schedule that shrinks a group runs an evaluate cycle (its
//     snapshot, so evaluate's memory) after waiting up to 30 s for the
//     evaluate lease, and starts drains as evaluate does.
func Functions(cfg *config.Config) []Function {
	evalTimeout := cfg.EvaluateSettings().WatchFor + 30*time.Second
	evalTimeout = max(evalTimeout, 60*time.Second)
	evalTimeout = min(evalTimeout, 15*time.Minute)
	return []Function{
		{Name: "evaluate", Description: "nodetide evaluate: measures pressure, scales node groups up, starts drains",
			MemoryMB: 256, Timeout: evalTimeout, Reserved: 3, StartsDrains: true, ReadsPrices: true},
		{Name: "drain", Description: "nodetide drain: the drain state machine's steps; shutdown and enable by hand",
			MemoryMB: 256, Timeout: 120 * time.Second, StartsDrains: true, StopsDrains: true, RemovesMachines: true},
		{Name: "schedule", Description: "nodetide schedule: fires due schedules (node group sizes, workload replicas)",
			MemoryMB: 256, Timeout: 90 * time.Second, StartsDrains: true},
	}
}

// StateTableActions are the item operations pkg/state performs.
var StateTableActions = []string{
	"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query",
}

// Built is the stack and the parts tests and the app look at.
type Built struct {
	Stack        awscdk.Stack
	Table        awsdynamodb.Table
	Parameter    awsssm.StringParameter
	Functions    map[string]awslambda.Function
	Roles        map[string]awsiam.Role
	StateMachine awsstepfunctions.StateMachine
	AlarmTopic   awssns.ITopic
	FailureQueue awssqs.Queue
	Alarms       []awscloudwatch.IAlarm
	// Dashboard is nil at monitoring off.
	Dashboard awscloudwatch.Dashboard
	// StateMachineName is fixed, so the functions get its ARN without a
	// reference (which would be a cycle: the machine invokes drain).
	StateMachineName string
}

// Name returns the names derived from the cluster: nodetide-<cluster>.
func Name(cluster string) string {
	s := regexp.MustCompile(`[^A-Za-z0-9-]+`).ReplaceAllString(cluster, "-")
	s = strings.Trim(s, "-")
	if len(s) > 40 {
		s = s[:40]
	}
	return "nodetide-" + s
}

// StackName is the default stack name for a cluster.
func StackName(cluster string) string {
	n := Name(cluster)
	return "Nodetide" + n[len("nodetide"):]
}

// New builds the stack. The options must pass Check; a region in the
// stack's env is the one checked.
func New(scope constructs.Construct, id string, props *awscdk.StackProps, o Options) (*Built, error) {
	if props != nil && props.Env != nil && props.Env.Region != nil && !*awscdk.Token_IsUnresolved(props.Env.Region) {
		o.Region = *props.Env.Region
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	asl, err := os.ReadFile(o.StateMachineFile)
	if err != nil {
		return nil, fmt.Errorf("drain state machine: %w", err)
	}
	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		if _, err := os.Stat(filepath.Join(o.BuildDir, fn, "bootstrap")); err != nil {
			return nil, fmt.Errorf("function %s: %w (run `make build` first)", fn, err)
		}
	}
	cfg := o.Config
	if props == nil {
		props = &awscdk.StackProps{}
	}
	if props.Description == nil {
		props.Description = jsii.String(fmt.Sprintf("nodetide serverless node scaler for cluster %s", cfg.Cluster.Name))
	}
	st := awscdk.NewStack(scope, jsii.String(id), props)
	bd := newBuilder(st, o)
	b := bd.b
	b.Table = stateTable(st, cfg)
	b.Parameter = configParameter(st, o, bd.prefix)
	topic, _ := alarmTopic(st, o, bd.prefix)
	b.AlarmTopic = topic
	bd.al = &alarms{st: st, cluster: cfg.Cluster.Name, level: o.Monitoring, action: action(topic)}
	b.FailureQueue = failureQueue(st, bd.prefix)
	suppressFailureQueue(b.FailureQueue)

	for _, spec := range Functions(cfg) {
		if spec.Name == "evaluate" || spec.Name == "schedule" {
			spec.MemoryMB = o.EvaluateMemoryMB
		}
		bd.function(spec)
	}
	rate, _ := o.evaluateRate()
	evaluateRule := bd.scheduleRules(rate)
	bd.drainStateMachine(string(asl))
	interruptions(st, cfg, b.Functions["drain"], b.FailureQueue)
	// Not the executions' Failed count: a Rejected drain (already
	// draining, at the minimum) fails its execution and is no alarm.
	bd.al.nodetide(o, b.StateMachine, b.FailureQueue, evaluateRule, time.Duration(rate)*time.Minute)
	b.Alarms = bd.al.all
	b.Dashboard = dashboard(st, o.Monitoring, bd.prefix, cfg.Cluster.Name, b.Functions, b.StateMachine, b.FailureQueue, bd.al.all)

	if o.VpcID != "" && !o.NoVpcEndpoints {
		vpcEndpoints(st, o)
	}
	warn(st, Warnings(o))
	stackOutputs(st, b)
	return b, nil
}

// builder holds what the parts of the stack share while New builds them.
type builder struct {
	st        awscdk.Stack
	o         Options
	cfg       *config.Config
	b         *Built
	prefix    string
	retention awslogs.RetentionDays
	// smArn and execArn are the drain state machine's ARN and its
	// executions', built from its fixed name (see Built.StateMachineName).
	smArn, execArn *string
	// policies are what the providers' entries need of IAM.
	policies   []providerkind.Policy
	secretArns []*string
	al         *alarms
}

func newBuilder(st awscdk.Stack, o Options) *builder {
	cfg := o.Config
	bd := &builder{
		st: st, o: o, cfg: cfg,
		b: &Built{
			Stack:            st,
			Functions:        map[string]awslambda.Function{},
			Roles:            map[string]awsiam.Role{},
			StateMachineName: Name(cfg.Cluster.Name) + "-drain",
		},
		prefix:     Name(cfg.Cluster.Name),
		retention:  awslogs.RetentionDays_ONE_MONTH,
		policies:   policies(cfg),
		secretArns: secretResources(cfg),
	}
	if o.LogRetentionDays != 0 {
		bd.retention = retentionDays[o.LogRetentionDays]
	}
	bd.smArn = st.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("states"), Resource: jsii.String("stateMachine"),
		ResourceName: jsii.String(bd.b.StateMachineName), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
	bd.execArn = st.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("states"), Resource: jsii.String("execution"),
		ResourceName: jsii.String(bd.b.StateMachineName + ":*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
	return bd
}

// stateTable is the state: one table, single-item conditional writes
// (DESIGN "DynamoDB"), kept when the stack is deleted.
func stateTable(st awscdk.Stack, cfg *config.Config) awsdynamodb.Table {
	return awsdynamodb.NewTable(st, jsii.String("StateTable"), &awsdynamodb.TableProps{
		TableName:    jsii.String(cfg.State.DynamoDB.Table),
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(TTLAttribute),
		RemovalPolicy:       awscdk.RemovalPolicy_RETAIN,
	})
}

// configParameter is the config, as written, in SSM; the functions read it
// at start.
func configParameter(st awscdk.Stack, o Options, prefix string) awsssm.StringParameter {
	tier := awsssm.ParameterTier_STANDARD
	if len(o.ConfigYAML) > standardParameterBytes {
		tier = awsssm.ParameterTier_ADVANCED
	}
	return awsssm.NewStringParameter(st, jsii.String("Config"), &awsssm.StringParameterProps{
		ParameterName: jsii.String("/nodetide/" + strings.TrimPrefix(prefix, "nodetide-") + "/config"),
		Description:   jsii.String("nodetide.yaml for cluster " + o.Config.Cluster.Name + " (no secrets)"),
		StringValue:   jsii.String(o.ConfigYAML),
		Tier:          tier,
	})
}

// function builds one function with its role, log group, alarms and
// outputs.
func (bd *builder) function(spec Function) {
	st, o, b := bd.st, bd.o, bd.b
	title := strings.ToUpper(spec.Name[:1]) + spec.Name[1:]
	logs := awslogs.NewLogGroup(st, jsii.String(title+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + bd.prefix + "-" + spec.Name),
		Retention:     bd.retention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	role := bd.functionRole(spec, title, logs)
	fp := &awslambda.FunctionProps{
		FunctionName: jsii.String(bd.prefix + "-" + spec.Name),
		Description:  jsii.String(spec.Description),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(o.BuildDir, spec.Name)), nil),
		MemorySize:   jsii.Number(float64(spec.MemoryMB)),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(spec.Timeout.Seconds())),
		Role:         role,
		LogGroup:     logs,
		Environment:  bd.environment(spec),
	}
	if spec.Name == "drain" {
		// Reserved so that a busy account cannot throttle a drain's
		// steps, above all its Rollback: an account-wide burst could
		// outlast the state machine's retries and leave a node
		// cordoned until recovery. Each running drain runs one step
		// at a time, so this is room for that many drains at once;
		// more are throttled and retried, never lost.
		spec.Reserved = o.DrainReservedConcurrency
	}
	if spec.Reserved > 0 {
		fp.ReservedConcurrentExecutions = jsii.Number(float64(spec.Reserved))
	}
	switch spec.Name {
	case "evaluate":
		// A lost tick is replaced by the next one a minute later.
		fp.RetryAttempts, fp.MaxEventAge = jsii.Number(0), awscdk.Duration_Seconds(jsii.Number(60))
	case "schedule":
		// A failed tick is retried, within the lateness schedules allow.
		fp.RetryAttempts, fp.MaxEventAge = jsii.Number(2), awscdk.Duration_Minutes(jsii.Number(15))
	case "drain":
		// Its asynchronous invocations are the drain-ended rule's.
		fp.RetryAttempts, fp.MaxEventAge = jsii.Number(2), awscdk.Duration_Minutes(jsii.Number(15))
	}

	fn := awslambda.NewFunction(st, jsii.String(title+"Function"), fp)
	b.Functions[spec.Name] = fn
	if spec.Name == "evaluate" && !o.NoTrigger {
		addTrigger(st, fn, role, bd.prefix+"-"+spec.Name)
	}
	onFailure(fn, role, b.FailureQueue)
	if len(o.SubnetIDs) > 0 {
		cfn := fn.Node().DefaultChild().(awslambda.CfnFunction)
		cfn.AddPropertyOverride(jsii.String("VpcConfig"), map[string]any{
			"SubnetIds": o.SubnetIDs, "SecurityGroupIds": o.SecurityGroupIDs,
		})
		role.AddManagedPolicy(awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String("service-role/AWSLambdaVPCAccessExecutionRole")))
	}
	bd.al.function(title, fn)
	bd.functionOutputs(spec, title, fn, role)
	suppress(role, spec, len(o.SubnetIDs) > 0)
}

// functionRole is a function's own role with exactly its grants (docs/stack.md,
// "Least privilege").
func (bd *builder) functionRole(spec Function, title string, logs awslogs.LogGroup) awsiam.Role {
	st, cfg, b := bd.st, bd.cfg, bd.b
	role := awsiam.NewRole(st, jsii.String(title+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("nodetide " + spec.Name + " function (" + cfg.Cluster.Name + ")"),
	})
	b.Roles[spec.Name] = role
	allow(role, []string{"logs:CreateLogStream", "logs:PutLogEvents"}, logs.LogGroupArn())
	allow(role, []string{"ssm:GetParameter"}, b.Parameter.ParameterArn())
	allow(role, StateTableActions, b.Table.TableArn())
	if eks := cfg.Cluster.Kubernetes.EKS; eks != nil {
		allow(role, []string{"eks:DescribeCluster"}, st.FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("eks"), Resource: jsii.String("cluster"), ResourceName: jsii.String(eks.Name),
			ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME, Region: optional(eks.Region),
		}))
		for _, p := range bd.policies {
			if len(p.EKSNodegroups) > 0 {
				allow(role, p.EKSNodegroups, st.FormatArn(&awscdk.ArnComponents{
					Service: jsii.String("eks"), Resource: jsii.String("nodegroup"), ResourceName: jsii.String(eks.Name + "/*/*"),
					ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME, Region: optional(eks.Region),
				}))
			}
		}
	}
	if len(bd.secretArns) > 0 {
		allow(role, []string{"secretsmanager:GetSecretValue"}, bd.secretArns...)
	}
	for _, p := range bd.policies {
		bd.grantGroups(role, spec, p)
	}
	if spec.StartsDrains {
		allow(role, []string{"states:StartExecution"}, bd.smArn)
		allow(role, []string{"states:DescribeExecution"}, bd.execArn)
	}
	if spec.StopsDrains {
		allow(role, []string{"states:StopExecution"}, bd.execArn)
	}
	return role
}

// environment is a function's environment: where its config is, the
// config's hash, the monitoring level and, as needed, the drain state
// machine and Scaleway's cluster. No secret.
func (bd *builder) environment(spec Function) *map[string]*string {
	sum := sha256.Sum256([]byte(bd.o.ConfigYAML))
	env := map[string]*string{
		EnvConfigParameter: bd.b.Parameter.ParameterName(),
		EnvConfigSHA256:    jsii.String(hex.EncodeToString(sum[:])),
		EnvMetrics:         jsii.String(string(bd.o.Monitoring)),
	}
	if hasProvider(bd.cfg, scaleway.ProviderName) {
		// Not secret: the key comes from scaleway.secretKeySecret.
		if bd.o.ScalewayClusterID != "" {
			env["CLUSTER_ID"] = jsii.String(bd.o.ScalewayClusterID)
		}
		if bd.o.ScalewayRegion != "" {
			env["SCW_REGION"] = jsii.String(bd.o.ScalewayRegion)
		}
	}
	if spec.StartsDrains {
		env[EnvDrainStateMachine] = bd.smArn
	}
	if spec.Name == "evaluate" {
		env[EnvPendingPodAlarmMinutes] = jsii.String(strconv.Itoa(bd.o.PendingPodAlarmMinutes))
	}
	return &env
}

// functionOutputs are a function's name and role outputs and, when asked,
// its EKS access entry.
func (bd *builder) functionOutputs(spec Function, title string, fn awslambda.Function, role awsiam.Role) {
	awscdk.NewCfnOutput(bd.st, jsii.String(title+"FunctionName"), &awscdk.CfnOutputProps{
		Value: fn.FunctionName(), Description: jsii.String("the " + spec.Name + " function"),
	})
	awscdk.NewCfnOutput(bd.st, jsii.String(title+"RoleArn"), &awscdk.CfnOutputProps{
		Value:       role.RoleArn(),
		Description: jsii.String("map to Kubernetes group " + KubernetesGroup(spec.Name) + " (EKS access entry or aws-auth)"),
	})
	if bd.o.EKSAccessEntries {
		awseks.NewCfnAccessEntry(bd.st, jsii.String(title+"AccessEntry"), &awseks.CfnAccessEntryProps{
			ClusterName:      jsii.String(bd.cfg.Cluster.Kubernetes.EKS.Name),
			PrincipalArn:     role.RoleArn(),
			KubernetesGroups: jsii.Strings(KubernetesGroup(spec.Name)),
			Type:             jsii.String("STANDARD"),
		})
	}
}

// scheduleRules run evaluate every evaluate.interval (rate minutes) and
// schedule every minute; it returns evaluate's.
func (bd *builder) scheduleRules(rate int) awsevents.Rule {
	st, cfg, b := bd.st, bd.cfg, bd.b
	evaluateRule := awsevents.NewRule(st, jsii.String("EvaluateRule"), &awsevents.RuleProps{
		Description: jsii.String("nodetide evaluate cycle (" + cfg.Cluster.Name + ")"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(float64(rate)))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(b.Functions["evaluate"], &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(2), MaxEventAge: awscdk.Duration_Seconds(jsii.Number(60)),
			DeadLetterQueue: b.FailureQueue,
		})},
	})
	awsevents.NewRule(st, jsii.String("ScheduleRule"), &awsevents.RuleProps{
		Description: jsii.String("nodetide schedule tick (" + cfg.Cluster.Name + ")"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(b.Functions["schedule"], &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(2), MaxEventAge: awscdk.Duration_Minutes(jsii.Number(15)),
			DeadLetterQueue: b.FailureQueue,
		})},
	})
	return evaluateRule
}

// drainStateMachine is the drain state machine, from the same ASL file the
// local runner uses, and the rule that recovers its executions that end
// badly.
func (bd *builder) drainStateMachine(asl string) {
	st, b := bd.st, bd.b
	smLogs := awslogs.NewLogGroup(st, jsii.String("DrainStateMachineLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/vendedlogs/states/" + b.StateMachineName),
		Retention:     bd.retention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	drainFn := b.Functions["drain"]
	b.StateMachine = awsstepfunctions.NewStateMachine(st, jsii.String("DrainStateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName:        jsii.String(b.StateMachineName),
		StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(jsii.String(asl)),
		DefinitionSubstitutions: &map[string]*string{"DrainFunctionArn": drainFn.FunctionArn()},
		Logs: &awsstepfunctions.LogOptions{
			Destination: smLogs, Level: awsstepfunctions.LogLevel_ALL, IncludeExecutionData: jsii.Bool(true),
		},
		TracingEnabled: jsii.Bool(false),
	})
	b.StateMachine.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("lambda:InvokeFunction"),
		Resources: &[]*string{drainFn.FunctionArn()},
	}))
	suppressStateMachine(b.StateMachine)
	// A drain whose execution ends badly (its rollback failed, it was
	// stopped, it timed out) is finished from its record at once, rather
	// than at the next evaluate cycle; the event is only a trigger, the
	// function asks Step Functions itself.
	awsevents.NewRule(st, jsii.String("DrainEndedRule"), &awsevents.RuleProps{
		Description: jsii.String("nodetide: recover drains whose execution ended badly (" + bd.cfg.Cluster.Name + ")"),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("aws.states"),
			DetailType: jsii.Strings("Step Functions Execution Status Change"),
			Detail: &map[string]any{
				"status":          []string{"FAILED", "ABORTED", "TIMED_OUT"},
				"stateMachineArn": []*string{b.StateMachine.StateMachineArn()},
			},
		},
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(drainFn, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(2), MaxEventAge: awscdk.Duration_Minutes(jsii.Number(15)),
			DeadLetterQueue: b.FailureQueue,
		})},
	})
}

// warn adds the warnings to the stack, in a stable order; synth prints them.
func warn(st awscdk.Stack, warnings map[string]string) {
	ids := make([]string, 0, len(warnings))
	for id := range warnings {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		awscdk.Annotations_Of(st).AddWarningV2(jsii.String("nodetide:"+id), jsii.String(warnings[id]), nil)
	}
}

// stackOutputs are the stack-wide outputs (each function's are made with it).
func stackOutputs(st awscdk.Stack, b *Built) {
	awscdk.NewCfnOutput(st, jsii.String("DrainStateMachineArn"), &awscdk.CfnOutputProps{Value: b.StateMachine.StateMachineArn()})
	awscdk.NewCfnOutput(st, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{Value: b.AlarmTopic.TopicArn(), Description: jsii.String("the topic every alarm notifies")})
	awscdk.NewCfnOutput(st, jsii.String("FailedInvocationsQueueUrl"), &awscdk.CfnOutputProps{Value: b.FailureQueue.QueueUrl(), Description: jsii.String("events of invocations that failed past their retries")})
	awscdk.NewCfnOutput(st, jsii.String("StateTableName"), &awscdk.CfnOutputProps{Value: b.Table.TableName()})
	awscdk.NewCfnOutput(st, jsii.String("ConfigParameterName"), &awscdk.CfnOutputProps{Value: b.Parameter.ParameterName()})
}

// Warnings are what may keep a deployment from working though the stack
// builds; the app prints them at synth.
func Warnings(o Options) map[string]string {
	w := map[string]string{}
	cfg := o.Config
	for i, g := range cfg.NodeGroups {
		path := fmt.Sprintf("nodeGroups[%d]", i)
		e := g.Entry()
		asg, kam, scw := awsprovider.BlockOf(e), kamatera.BlockOf(e), scaleway.BlockOf(e)
		switch {
		case asg != nil && len(asg.AutoDiscovery) > 0:
			scoped := false
			for _, tag := range asg.AutoDiscovery {
				key, _, _ := strings.Cut(tag, "=")
				if strings.HasPrefix(key, "k8s.io/cluster-autoscaler/") && key != "k8s.io/cluster-autoscaler/enabled" &&
					!strings.HasPrefix(key, "k8s.io/cluster-autoscaler/node-template/") {
					scoped = true
				}
			}
			if !scoped {
				w["discovery-"+fmt.Sprint(i)] = path + ".aws.autoDiscovery names no k8s.io/cluster-autoscaler/<cluster> tag: " +
					"the functions may resize every Auto Scaling Group carrying the other tags in this account and region"
			}
		case kam != nil && kam.CloudConfig != "":
			w["kamatera-"+fmt.Sprint(i)] = path + ".kamatera.cloudConfig " + kam.CloudConfig +
				" is a file: it is not shipped with the functions, which read only the YAML from SSM; " +
				"store the INI as a secret and use kamatera.cloudConfigSecret"
		case scw != nil && scw.CloudConfig != "":
			w["scaleway-"+fmt.Sprint(i)] = path + ".scaleway.cloudConfig " + scw.CloudConfig +
				" is a file: it is not shipped with the functions; use scaleway.secretKeySecret and -c " +
				CtxScalewayCluster + ", -c " + CtxScalewayRegion + " instead"
		case g.Provider == scaleway.ProviderName && (o.ScalewayClusterID == "" || o.ScalewayRegion == ""):
			w["scaleway-"+fmt.Sprint(i)] = path + ": the functions need the Scaleway cluster ID and region: set -c " +
				CtxScalewayCluster + " and -c " + CtxScalewayRegion + " (or cluster.kubernetes.kapsule)"
		}
	}
	if len(o.SubnetIDs) > 0 && (o.NoVpcEndpoints || len(o.RouteTableIDs) == 0) {
		w["vpc-dynamodb"] = "the functions run in a VPC without a DynamoDB gateway endpoint from this stack (" + CtxRouteTableIDs +
			"): their subnets need a NAT gateway or an existing DynamoDB endpoint"
	}
	if len(o.SubnetIDs) > 0 && o.VpcID == "" {
		w["vpc-endpoints"] = "the functions run in a VPC and no " + CtxVpcID + " was given, so no VPC endpoints are made: " +
			"their subnets need a NAT gateway (or existing endpoints) to reach SSM, Step Functions, Auto Scaling, EC2, EKS and Secrets Manager"
	}
	return w
}

func hasProvider(cfg *config.Config, provider string) bool {
	return slices.ContainsFunc(cfg.NodeGroups, func(g config.NodeGroup) bool { return g.Provider == provider })
}

// allow adds one statement to a role's policy.
func allow(role awsiam.Role, actions []string, resources ...*string) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// policies are, for each provider of the table with entries in the config,
// what its entries need of the functions' roles.
func policies(cfg *config.Config) []providerkind.Policy {
	var out []providerkind.Policy
	for _, k := range config.Providers() {
		var entries []providerkind.Entry
		for _, g := range cfg.NodeGroups {
			if g.Provider == k.Name {
				entries = append(entries, g.Entry())
			}
		}
		if k.Policy != nil && len(entries) > 0 {
			out = append(out, k.Policy(entries))
		}
	}
	return out
}

// grantGroups grants a provider's reads on "*" and its size changes on its
// entries' groups: every function resizes them, the one that removes
// machines also removes them.
func (bd *builder) grantGroups(role awsiam.Role, spec Function, p providerkind.Policy) {
	if len(p.Wildcard) > 0 {
		allow(role, p.Wildcard, jsii.String("*"))
	}
	if spec.ReadsPrices && len(p.Prices) > 0 {
		allow(role, p.Prices, jsii.String("*"))
	}
	actions := p.Resize
	if spec.RemovesMachines {
		actions = append(slices.Clone(p.Resize), p.Remove...)
	}
	if len(actions) == 0 {
		return
	}
	for _, g := range p.Groups {
		resources := make([]*string, len(g.Resources))
		for i, a := range g.Resources {
			resources[i] = formatArn(bd.st, a)
		}
		props := &awsiam.PolicyStatementProps{Actions: jsii.Strings(actions...), Resources: &resources}
		if len(g.Conditions) > 0 {
			c := map[string]any{}
			for op, kv := range g.Conditions {
				c[op] = kv
			}
			props.Conditions = &c
		}
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(props))
	}
}

// formatArn is a provider's resource ARN in the stack's partition and
// account.
func formatArn(st awscdk.Stack, a providerkind.ARN) *string {
	format := awscdk.ArnFormat_SLASH_RESOURCE_NAME
	if a.Colon {
		format = awscdk.ArnFormat_COLON_RESOURCE_NAME
	}
	return st.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String(a.Service), Resource: jsii.String(a.Resource),
		ResourceName: jsii.String(a.ResourceName), ArnFormat: format, Region: optional(a.Region),
	})
}

// SecretArns are the Secrets Manager secrets the config names: the
// kubeconfig (cluster.kubernetes.kubeconfigSecret) and those each entry's
// provider reads (its Secrets: Scaleway keys, Kamatera credentials and
// INIs). Every function builds the cluster client and the providers, so
// each reads them all.
func SecretArns(cfg *config.Config) []string {
	var out []string
	add := func(arn string) {
		if arn != "" && !slices.Contains(out, arn) {
			out = append(out, arn)
		}
	}
	add(cfg.Cluster.Kubernetes.KubeconfigSecret)
	for _, g := range cfg.NodeGroups {
		if k, ok := config.ProviderKind(g.Provider); ok && k.Secrets != nil {
			for _, arn := range k.Secrets(g.Entry()) {
				add(arn)
			}
		}
	}
	return out
}

// secretResources are the policy resources for SecretArns. A partial ARN
// (without Secrets Manager's 6-character suffix) also matches the suffixed
// one.
func secretResources(cfg *config.Config) []*string {
	var out []*string
	for _, arn := range SecretArns(cfg) {
		out = append(out, jsii.String(arn))
		if !completeSecretArn.MatchString(arn) {
			out = append(out, jsii.String(arn+"-??????"))
		}
	}
	return out
}

var completeSecretArn = regexp.MustCompile(`:secret:.+-[A-Za-z0-9]{6}$`)

// vpcEndpoints adds the endpoints the functions call AWS through when their
// subnets have no NAT: interface endpoints (private DNS) in the functions'
// subnets behind a security group that admits HTTPS from the functions'
// groups only, and a DynamoDB gateway endpoint on the route tables.
func vpcEndpoints(st awscdk.Stack, o Options) {
	cfg := o.Config
	services := []string{"ssm", "states"}
	if !o.NoTrigger {
		services = append(services, "lambda") // the trigger's self-invocation
	}
	for _, p := range policies(cfg) {
		for _, svc := range p.Endpoints {
			if !slices.Contains(services, svc) {
				services = append(services, svc)
			}
		}
	}
	if cfg.Cluster.Kubernetes.EKS != nil {
		services = append(services, "eks")
	}
	if len(secretResources(cfg)) > 0 {
		services = append(services, "secretsmanager")
	}
	var ingress []any
	for _, sg := range o.SecurityGroupIDs {
		ingress = append(ingress, &awsec2.CfnSecurityGroup_IngressProperty{
			IpProtocol: jsii.String("tcp"), FromPort: jsii.Number(443), ToPort: jsii.Number(443),
			SourceSecurityGroupId: jsii.String(sg), Description: jsii.String("HTTPS from the nodetide functions"),
		})
	}
	sg := awsec2.NewCfnSecurityGroup(st, jsii.String("EndpointSecurityGroup"), &awsec2.CfnSecurityGroupProps{
		GroupDescription:     jsii.String("nodetide VPC endpoints: HTTPS from the functions only"),
		VpcId:                jsii.String(o.VpcID),
		SecurityGroupIngress: &ingress,
		// Endpoints answer; they never open connections. (The same
		// placeholder rule CDK uses for allowAllOutbound: false.)
		SecurityGroupEgress: &[]any{&awsec2.CfnSecurityGroup_EgressProperty{
			IpProtocol: jsii.String("icmp"), FromPort: jsii.Number(252), ToPort: jsii.Number(86),
			CidrIp: jsii.String("255.255.255.255/32"), Description: jsii.String("Disallow all traffic"),
		}},
	})
	subnets := make([]any, len(o.SubnetIDs))
	for i, s := range o.SubnetIDs {
		subnets[i] = s
	}
	for _, svc := range services {
		awsec2.NewCfnVPCEndpoint(st, jsii.String(endpointID(svc)), &awsec2.CfnVPCEndpointProps{
			VpcId:             jsii.String(o.VpcID),
			ServiceName:       jsii.String("com.amazonaws." + *st.Region() + "." + svc),
			VpcEndpointType:   jsii.String("Interface"),
			PrivateDnsEnabled: jsii.Bool(true),
			SubnetIds:         &subnets,
			SecurityGroupIds:  &[]any{sg.AttrGroupId()},
		})
	}
	if len(o.RouteTableIDs) > 0 {
		rts := make([]any, len(o.RouteTableIDs))
		for i, r := range o.RouteTableIDs {
			rts[i] = r
		}
		awsec2.NewCfnVPCEndpoint(st, jsii.String(endpointID("dynamodb")), &awsec2.CfnVPCEndpointProps{
			VpcId:           jsii.String(o.VpcID),
			ServiceName:     jsii.String("com.amazonaws." + *st.Region() + ".dynamodb"),
			VpcEndpointType: jsii.String("Gateway"),
			RouteTableIds:   &rts,
		})
	}
}

func endpointID(svc string) string {
	names := map[string]string{"ssm": "Ssm", "states": "StepFunctions", "autoscaling": "AutoScaling", "ec2": "Ec2",
		"eks": "Eks", "secretsmanager": "SecretsManager", "dynamodb": "DynamoDb", "lambda": "Lambda"}
	return names[svc] + "Endpoint"
}

// SSM parameter sizes.
const (
	standardParameterBytes = 4096
	maxParameterBytes      = 8192
)

var retentionDays = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS,
	731: awslogs.RetentionDays_TWO_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 3653: awslogs.RetentionDays_TEN_YEARS,
}
