package stack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/metrics"
)

// Context keys (cdk -c key=value) the app reads. Every one is optional.
const (
	CtxConfig           = "config"                   // path of nodetide.yaml
	CtxStackName        = "stackName"                // default Nodetide-<cluster>
	CtxBuildDir         = "buildDir"                 // default ../build
	CtxSubnetIDs        = "subnetIds"                // a,b: run the functions in these subnets
	CtxSecurityGroupIDs = "securityGroupIds"         // sg-1,sg-2: with subnetIds
	CtxVpcID            = "vpcId"                    // the subnets' VPC: adds the VPC endpoints
	CtxRouteTableIDs    = "routeTableIds"            // the subnets' route tables: DynamoDB gateway endpoint
	CtxVpcEndpoints     = "vpcEndpoints"             // false: no endpoints (the subnets have a NAT)
	CtxScalewayCluster  = "scalewayClusterId"        // CLUSTER_ID for scaleway groups (default: kapsule.clusterId)
	CtxScalewayRegion   = "scalewayRegion"           // SCW_REGION for scaleway groups (default: kapsule.region)
	CtxAlarmTopic       = "alarmTopicArn"            // SNS topic the alarms notify (default: one made by the stack)
	CtxAlarmEmail       = "alarmEmail"               // a@x,b@y: subscribe these addresses to the stack's topic
	CtxPendingPodAlarm  = "pendingPodAlarmMinutes"   // a pod unschedulable this long fires an alarm (default 10)
	CtxDrainReserved    = "drainReservedConcurrency" // the drain function's reserved concurrency (default 10; 0: none)
	CtxLogRetentionDays = "logRetentionDays"         // default 30
	CtxEKSAccessEntries = "eksAccessEntries"         // true: create the EKS access entries
	CtxMonitoring       = "monitoring"               // full, essential (default) or off: the alarms, dashboard and metrics
	CtxEvaluateMemory   = "evaluateMemoryMB"         // evaluate's and schedule's memory (default 256; 640 at 5,000 nodes)
	CtxTrigger          = "trigger"                  // false: no webhook trigger (no function URL)
	CtxRegion           = "region"                   // the stack's region (its env); default CDK_DEFAULT_REGION
)

// EnvDefaultRegion is the region the CDK CLI resolved from the profile; an
// environment-agnostic stack is deployed there.
const EnvDefaultRegion = "CDK_DEFAULT_REGION"

// DefaultEvaluateMemoryMB fits a cold read of about 20,000 pods with room
// to spare (docs/stack.md, "Sizing"): 76 MiB peak at 4,200 pods, 138 MiB at
// 30,000, 465 MiB at 150,000.
const DefaultEvaluateMemoryMB = 256

// DefaultMonitoring is the monitoring level when the context sets none: the
// alarms an on-call engineer cannot do without, at a few custom metrics
// (docs/operations.md, "Monitoring levels").
const DefaultMonitoring = metrics.LevelEssential

// EnvConfigFile names the config file when the context does not.
const EnvConfigFile = "NODETIDE_CONFIG_FILE"

// DefaultConfigFile is used when neither the context nor the environment
// names one; relative to infra/, where cdk runs the app.
const DefaultConfigFile = "../nodetide.example.yaml"

// Options are everything the stack is built from.
type Options struct {
	// ConfigFile is where Config was read from (for messages).
	ConfigFile string
	Config     *config.Config
	// ConfigYAML is the file as written; it becomes the SSM parameter the
	// functions load (NODETIDE_CONFIG_PARAMETER).
	ConfigYAML string

	// BuildDir holds <fn>/bootstrap for evaluate, drain and schedule.
	BuildDir string
	// StateMachineFile is the drain state machine's ASL definition.
	StateMachineFile string

	SubnetIDs        []string
	SecurityGroupIDs []string
	VpcID            string
	RouteTableIDs    []string
	NoVpcEndpoints   bool

	// ScalewayClusterID and ScalewayRegion become CLUSTER_ID and SCW_REGION,
	// which the scaleway provider reads when no cloudConfig file says them.
	ScalewayClusterID string
	ScalewayRegion    string
	AlarmTopicArn     string
	// AlarmEmails subscribe to the topic the stack makes (not to one
	// given by AlarmTopicArn).
	AlarmEmails []string
	// PendingPodAlarmMinutes: how long a pod may stay unschedulable
	// before the alarm fires.
	PendingPodAlarmMinutes int
	// DrainReservedConcurrency is the drain function's reserved
	// concurrency; 0 reserves none.
	DrainReservedConcurrency int
	LogRetentionDays         int
	EKSAccessEntries         bool
	// Monitoring sets which alarms, topic key and dashboard the stack makes
	// and what the functions publish (NODETIDE_METRICS).
	Monitoring metrics.Level
	// EvaluateMemoryMB is the evaluate and schedule functions' memory (a
	// shrinking schedule runs an evaluate cycle): what a cold read of the
	// cluster needs grows with its pods.
	EvaluateMemoryMB int
	// NoTrigger leaves out the webhook trigger: evaluate's function URL,
	// its public permission, the self-invocation grant and the TriggerUrl
	// output. Regions without Lambda function URLs need it.
	NoTrigger bool
	// Region is the region the stack is for ("" when unknown: a
	// region-agnostic synth), checked against what the region offers.
	Region string

	StackName string
}

// LoadOptions reads the options from the CDK context (ctx returns "" for an
// unset key) and the environment, and loads the config file.
func LoadOptions(ctx, getenv func(string) string) (Options, error) {
	o := Options{
		ConfigFile:       ctx(CtxConfig),
		BuildDir:         ctx(CtxBuildDir),
		StateMachineFile: "../functions/drain/statemachine.asl.json",
		SubnetIDs:        list(ctx(CtxSubnetIDs)),
		SecurityGroupIDs: list(ctx(CtxSecurityGroupIDs)),
		VpcID:            strings.TrimSpace(ctx(CtxVpcID)),
		RouteTableIDs:    list(ctx(CtxRouteTableIDs)),
		AlarmTopicArn:    strings.TrimSpace(ctx(CtxAlarmTopic)),
		AlarmEmails:      list(ctx(CtxAlarmEmail)),

		PendingPodAlarmMinutes:   DefaultPendingPodAlarmMinutes,
		DrainReservedConcurrency: DefaultDrainReservedConcurrency,
		ScalewayClusterID:        strings.TrimSpace(ctx(CtxScalewayCluster)),
		ScalewayRegion:           strings.TrimSpace(ctx(CtxScalewayRegion)),
		StackName:                strings.TrimSpace(ctx(CtxStackName)),
		Monitoring:               DefaultMonitoring,
		EvaluateMemoryMB:         DefaultEvaluateMemoryMB,
		Region:                   strings.TrimSpace(ctx(CtxRegion)),
	}
	if o.Region == "" {
		o.Region = strings.TrimSpace(getenv(EnvDefaultRegion))
	}
	if o.ConfigFile == "" {
		o.ConfigFile = getenv(EnvConfigFile)
	}
	if o.ConfigFile == "" {
		o.ConfigFile = DefaultConfigFile
	}
	if o.BuildDir == "" {
		o.BuildDir = "../build"
	}
	errs := o.parseContext(ctx)
	if err := o.readConfig(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	return o, o.Check()
}

// parseContext sets the options given as booleans, numbers and the
// monitoring level, returning every value that does not parse (not just
// the first, so one deploy attempt shows them all).
func (o *Options) parseContext(ctx func(string) string) []error {
	var errs []error
	if v := ctx(CtxVpcEndpoints); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("context %s: want true or false, got %q", CtxVpcEndpoints, v))
		}
		o.NoVpcEndpoints = !b
	}
	if v := ctx(CtxTrigger); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("context %s: want true or false, got %q", CtxTrigger, v))
		}
		o.NoTrigger = !b
	}
	if v := ctx(CtxEKSAccessEntries); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("context %s: want true or false, got %q", CtxEKSAccessEntries, v))
		}
		o.EKSAccessEntries = b
	}
	for key, dst := range map[string]*int{CtxPendingPodAlarm: &o.PendingPodAlarmMinutes, CtxDrainReserved: &o.DrainReservedConcurrency,
		CtxEvaluateMemory: &o.EvaluateMemoryMB} {
		if v := strings.TrimSpace(ctx(key)); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("context %s: want a whole number, got %q", key, v))
			}
			*dst = n
		}
	}
	if v := strings.TrimSpace(ctx(CtxMonitoring)); v != "" {
		l, err := metrics.ParseLevel(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("context %s: %w", CtxMonitoring, err))
		}
		o.Monitoring = l
	}
	if v := ctx(CtxLogRetentionDays); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("context %s: want a number of days, got %q", CtxLogRetentionDays, v))
		}
		o.LogRetentionDays = n
	}
	return errs
}

// readConfig reads and parses the config file; the Kapsule cluster and
// region it names are used unless the context set them.
func (o *Options) readConfig() error {
	data, err := os.ReadFile(o.ConfigFile)
	if err != nil {
		return fmt.Errorf("config: %w (set -c %s=PATH or %s)", err, CtxConfig, EnvConfigFile)
	}
	o.ConfigYAML = string(data)
	cfg, err := config.Parse(data, o.ConfigFile)
	if cfg != nil {
		cfg.Dir = filepath.Dir(o.ConfigFile)
	}
	o.Config = cfg
	if cfg != nil && cfg.Cluster.Kubernetes.Kapsule != nil {
		k := cfg.Cluster.Kubernetes.Kapsule
		if o.ScalewayClusterID == "" {
			o.ScalewayClusterID = k.ClusterID
		}
		if o.ScalewayRegion == "" {
			o.ScalewayRegion = k.Region
		}
	}
	return err
}

// list splits a comma-separated context value, dropping blanks.
func list(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Check reports what keeps these options from making a working deployment.
func (o Options) Check() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	cfg := o.Config
	if cfg == nil {
		return errors.New("no config")
	}
	src := o.ConfigFile
	if cfg.State.DynamoDB == nil {
		add("%s: state.dynamodb: the stack keeps state in DynamoDB; set state: {dynamodb: {table: NAME}}", src)
	} else if cfg.State.DynamoDB.Endpoint != "" {
		add("%s: state.dynamodb.endpoint: %q is a local endpoint; drop it from the deployed config", src, cfg.State.DynamoDB.Endpoint)
	}
	if cfg.Cluster.Kubernetes.Kubeconfig != "" {
		add("%s: cluster.kubernetes.kubeconfig: a local file does not reach the functions; use eks or kubeconfigSecret", src)
	}
	for i, g := range cfg.NodeGroups {
		if k, ok := config.ProviderKind(g.Provider); ok && k.LocalOnly {
			add("%s: nodeGroups[%d]: provider %s is for local runs only", src, i, k.Name)
		}
	}
	if _, err := o.evaluateRate(); err != nil {
		add("%s: %v", src, err)
	}
	if (len(o.SubnetIDs) == 0) != (len(o.SecurityGroupIDs) == 0) {
		add("context: set both %s and %s to run the functions in a VPC", CtxSubnetIDs, CtxSecurityGroupIDs)
	}
	if o.VpcID != "" && len(o.SubnetIDs) == 0 {
		add("context: %s needs %s and %s", CtxVpcID, CtxSubnetIDs, CtxSecurityGroupIDs)
	}
	if len(o.RouteTableIDs) > 0 && o.VpcID == "" {
		add("context: %s needs %s", CtxRouteTableIDs, CtxVpcID)
	}
	if o.AlarmTopicArn != "" && !strings.HasPrefix(o.AlarmTopicArn, "arn:") {
		add("context %s: want an SNS topic ARN, got %q", CtxAlarmTopic, o.AlarmTopicArn)
	}
	for _, e := range o.AlarmEmails {
		if at := strings.Index(e, "@"); at < 1 || at == len(e)-1 || strings.ContainsAny(e, " ,;<>") {
			add("context %s: %q is not an email address", CtxAlarmEmail, e)
		}
	}
	if len(o.AlarmEmails) > 0 && o.AlarmTopicArn != "" {
		add("context %s: subscribe the addresses to %s yourself; the stack subscribes them only to the topic it makes", CtxAlarmEmail, CtxAlarmTopic)
	}
	if o.PendingPodAlarmMinutes < 1 || o.PendingPodAlarmMinutes > 1440 {
		add("context %s: want 1 to 1440 minutes, got %d", CtxPendingPodAlarm, o.PendingPodAlarmMinutes)
	}
	if o.DrainReservedConcurrency < 0 || o.DrainReservedConcurrency > 1000 {
		add("context %s: want 0 (none) to 1000, got %d", CtxDrainReserved, o.DrainReservedConcurrency)
	}
	if o.EvaluateMemoryMB < 128 || o.EvaluateMemoryMB > 10240 {
		add("context %s: want 128 to 10240 (Lambda's memory range, in MB), got %d", CtxEvaluateMemory, o.EvaluateMemoryMB)
	}
	if o.LogRetentionDays != 0 {
		if _, ok := retentionDays[o.LogRetentionDays]; !ok {
			add("context %s: %d is not a CloudWatch Logs retention (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, ...)", CtxLogRetentionDays, o.LogRetentionDays)
		}
	}
	if !slices.Contains(metrics.Levels(), o.Monitoring) {
		add("context %s: want %s, %s or %s, got %q", CtxMonitoring, metrics.LevelFull, metrics.LevelEssential, metrics.LevelOff, o.Monitoring)
	}
	if o.EKSAccessEntries && cfg.Cluster.Kubernetes.EKS == nil {
		add("context %s: the config's cluster is not an EKS cluster (cluster.kubernetes.eks)", CtxEKSAccessEntries)
	}
	if !o.NoTrigger && slices.Contains(NoFunctionURLRegions, o.Region) {
		add("region %s has no Lambda function URLs (AWS::Lambda::Url), which the webhook trigger needs: set -c %s=false "+
			"(scale-up then follows the evaluate schedule alone)", o.Region, CtxTrigger)
	}
	if len(o.ConfigYAML) > maxParameterBytes {
		add("%s: %d bytes; an SSM parameter holds at most %d", src, len(o.ConfigYAML), maxParameterBytes)
	}
	return errors.Join(errs...)
}

// evaluateRate is evaluate.interval in whole minutes (EventBridge's rate
// expressions have minute resolution).
func (o Options) evaluateRate() (int, error) {
	iv := o.Config.EvaluateSettings().Interval
	if iv.Minutes() < 1 || iv%time.Minute != 0 {
		return 0, fmt.Errorf("evaluate.interval: EventBridge schedules whole minutes (at least 1m), got %s", iv)
	}
	return int(iv.Minutes()), nil
}
