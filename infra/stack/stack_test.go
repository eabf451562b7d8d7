package stack

import (
	"encoding/json"
	"fmt"
	"github.com/nodetide/nodetide/internal/testbed"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/nodetide/nodetide/pkg/config"
	awsprovider "github.com/nodetide/nodetide/pkg/providers/aws"
)

const (
	exampleConfig = "../../nodetide.example.yaml"
	aslFile       = "../../functions/drain/statemachine.asl.json"
)

// fixture is one synthesized stack.
type fixture struct {
	built *Built
	tpl   assertions.Template
	json  map[string]any
}

// options loads the options as the app does, from a context map, with the
// functions' code replaced by placeholders (the tests don't need make build).
func options(t *testing.T, ctx map[string]string) Options {
	t.Helper()
	if ctx[CtxConfig] == "" {
		ctx[CtxConfig] = exampleConfig
	}
	o, err := LoadOptions(func(k string) string { return ctx[k] }, func(string) string { return "" })
	if err != nil {
		t.Fatalf("LoadOptions: %v", err)
	}
	o.StateMachineFile = aslFile
	o.BuildDir = t.TempDir()
	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		dir := filepath.Join(o.BuildDir, fn)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("placeholder "+fn), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// synth builds the stack; nag applies the AwsSolutions pack first.
func synth(t *testing.T, o Options, nag bool) fixture {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	b, err := New(app, "Test", nil, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if nag {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	}
	tpl := assertions.Template_FromStack(b.Stack, nil)
	raw, err := json.Marshal(tpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return fixture{built: b, tpl: tpl, json: m}
}

// check runs an assertions call, turning its panic (a failed match) into a
// test error so every failed check is reported.
func check(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	fn()
}

func (f fixture) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range f.json["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

func str(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// functionByName finds a function's resource by its FunctionName.
func (f fixture) function(t *testing.T, name string) (string, map[string]any) {
	t.Helper()
	for id, r := range f.resources("AWS::Lambda::Function") {
		if props(r)["FunctionName"] == "nodetide-prod-"+name {
			return id, props(r)
		}
	}
	t.Fatalf("no function nodetide-prod-%s", name)
	return "", nil
}

func TestStackResources(t *testing.T) {
	f := synth(t, options(t, map[string]string{CtxMonitoring: "full"}), false)
	tpl := f.tpl
	counts := map[string]float64{
		"AWS::Lambda::Function":            3,
		"AWS::Lambda::EventInvokeConfig":   3,
		"AWS::DynamoDB::Table":             1,
		"AWS::Events::Rule":                6, // evaluate, schedule, drain ended; lifecycle, Spot, maintenance
		"AWS::StepFunctions::StateMachine": 1,
		"AWS::CloudWatch::Alarm":           17,
		"AWS::CloudWatch::Dashboard":       1,
		"AWS::SNS::Topic":                  1,
		"AWS::KMS::Key":                    1,
		"AWS::SQS::Queue":                  1,
		"AWS::SSM::Parameter":              1,
		"AWS::Logs::LogGroup":              4,
		"AWS::IAM::Role":                   4,
		"AWS::EC2::VPCEndpoint":            0,
		"AWS::EKS::AccessEntry":            0,
		"AWS::Lambda::Url":                 1,
	}
	for typ, n := range counts {
		check(t, typ+" count", func() { tpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
	}

	type want struct {
		memory, timeout float64
		reserved        any
		drains          bool
	}
	for name, w := range map[string]want{
		"evaluate": {256, 60, 3, true},
		"drain":    {256, 120, 10, true},
		"schedule": {256, 90, nil, true},
	} {
		var smArn any = assertions.Match_Absent()
		if w.drains {
			smArn = assertions.Match_AnyValue()
		}
		var reserved any = assertions.Match_Absent()
		if w.reserved != nil {
			reserved = w.reserved
		}
		check(t, name+" function", func() {
			tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
				"FunctionName":                 "nodetide-prod-" + name,
				"Runtime":                      "provided.al2023",
				"Architectures":                []string{"arm64"},
				"Handler":                      "bootstrap",
				"MemorySize":                   w.memory,
				"Timeout":                      w.timeout,
				"ReservedConcurrentExecutions": reserved,
				"LoggingConfig":                map[string]any{"LogGroup": assertions.Match_AnyValue()},
				"Environment": map[string]any{"Variables": map[string]any{
					EnvConfigParameter:   assertions.Match_AnyValue(),
					EnvConfigSHA256:      assertions.Match_StringLikeRegexp(jsii.String("^[0-9a-f]{64}$")),
					EnvDrainStateMachine: smArn,
					"NODETIDE_CONFIG":    assertions.Match_Absent(),
					"CLUSTER_ID":         assertions.Match_Absent(),
				}},
				"VpcConfig": assertions.Match_Absent(),
			})
		})
	}
	// The machine's ARN the functions get is the machine's: same fixed name.
	_, eval := f.function(t, "evaluate")
	envArn := str(eval["Environment"].(map[string]any)["Variables"].(map[string]any)[EnvDrainStateMachine])
	if !strings.Contains(envArn, ":stateMachine:nodetide-prod-drain") {
		t.Errorf("evaluate's %s = %s, want the ARN of stateMachine:nodetide-prod-drain", EnvDrainStateMachine, envArn)
	}

	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		check(t, fn+" log group", func() {
			tpl.HasResource(jsii.String("AWS::Logs::LogGroup"), map[string]any{
				"DeletionPolicy": "Delete",
				"Properties":     map[string]any{"LogGroupName": "/aws/lambda/nodetide-prod-" + fn, "RetentionInDays": 30},
			})
		})
	}
	check(t, "async invoke config", func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), map[string]any{
			"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60,
		})
	})

	check(t, "table", func() {
		tpl.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"DeletionPolicy":      "Retain",
			"UpdateReplacePolicy": "Retain",
			"Properties": map[string]any{
				"TableName": "nodetide-prod",
				"KeySchema": []any{
					map[string]any{"AttributeName": "pk", "KeyType": "HASH"},
					map[string]any{"AttributeName": "sk", "KeyType": "RANGE"},
				},
				"AttributeDefinitions": []any{
					map[string]any{"AttributeName": "pk", "AttributeType": "S"},
					map[string]any{"AttributeName": "sk", "AttributeType": "S"},
				},
				"BillingMode":                      "PAY_PER_REQUEST",
				"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
				"TimeToLiveSpecification":          map[string]any{"AttributeName": "expiresAt", "Enabled": true},
			},
		})
	})

	check(t, "rules", func() {
		tpl.ResourcePropertiesCountIs(jsii.String("AWS::Events::Rule"), map[string]any{
			"ScheduleExpression": "rate(1 minute)", "State": "ENABLED",
		}, jsii.Number(2))
	})
	for _, fn := range []string{"evaluate", "schedule"} {
		id, _ := f.function(t, fn)
		check(t, fn+" rule target", func() {
			tpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
				"Targets": []any{assertions.Match_ObjectLike(&map[string]any{
					"Arn": map[string]any{"Fn::GetAtt": []any{id, "Arn"}},
				})},
			})
		})
	}

	check(t, "drain-ended rule", func() {
		id, _ := f.function(t, "drain")
		tpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
			"EventPattern": map[string]any{
				"source":      []any{"aws.states"},
				"detail-type": []any{"Step Functions Execution Status Change"},
				"detail": assertions.Match_ObjectLike(&map[string]any{
					"status": []any{"FAILED", "ABORTED", "TIMED_OUT"},
				}),
			},
			"Targets": []any{assertions.Match_ObjectLike(&map[string]any{
				"Arn": map[string]any{"Fn::GetAtt": []any{id, "Arn"}},
			})},
		})
	})

	check(t, "parameter", func() {
		data, _ := os.ReadFile(exampleConfig)
		tpl.HasResourceProperties(jsii.String("AWS::SSM::Parameter"), map[string]any{
			"Name": "/nodetide/prod/config", "Type": "String", "Value": string(data), "Tier": "Standard",
		})
	})

	drainID, _ := f.function(t, "drain")
	check(t, "state machine", func() {
		tpl.HasResourceProperties(jsii.String("AWS::StepFunctions::StateMachine"), map[string]any{
			"StateMachineName":        "nodetide-prod-drain",
			"StateMachineType":        "STANDARD",
			"DefinitionSubstitutions": map[string]any{"DrainFunctionArn": map[string]any{"Fn::GetAtt": []any{drainID, "Arn"}}},
			"LoggingConfiguration": assertions.Match_ObjectLike(&map[string]any{
				"Level": "ALL", "IncludeExecutionData": true,
			}),
			"TracingConfiguration": map[string]any{"Enabled": false},
		})
	})
	var asl struct{ States map[string]any }
	data, err := os.ReadFile(aslFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &asl); err != nil {
		t.Fatal(err)
	}
	for _, sm := range f.resources("AWS::StepFunctions::StateMachine") {
		def := str(props(sm)["DefinitionString"])
		if len(asl.States) < 10 {
			t.Fatalf("ASL has %d states", len(asl.States))
		}
		for name := range asl.States {
			if !strings.Contains(def, `\"`+name+`\":`) {
				t.Errorf("DefinitionString lacks state %s", name)
			}
		}
		if !strings.Contains(def, "${DrainFunctionArn}") {
			t.Errorf("DefinitionString lacks the ${DrainFunctionArn} placeholder")
		}
	}

	// The alarms: TestAlarms.
	for _, out := range []string{"EvaluateFunctionName", "DrainFunctionName", "ScheduleFunctionName",
		"EvaluateRoleArn", "DrainRoleArn", "ScheduleRoleArn", "DrainStateMachineArn", "StateTableName", "ConfigParameterName",
		TriggerOutput, "AlarmTopicArn", "FailedInvocationsQueueUrl"} {
		check(t, "output "+out, func() { tpl.HasOutput(jsii.String(out), map[string]any{}) })
	}

	// The trigger: evaluate's URL, auth NONE (the API server cannot sign),
	// open to the public through a permission on that URL only.
	evalID, _ := f.function(t, "evaluate")
	check(t, "trigger URL", func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::Url"), map[string]any{
			"AuthType": "NONE", "InvokeMode": "BUFFERED",
			"TargetFunctionArn": map[string]any{"Fn::GetAtt": []any{evalID, "Arn"}},
		})
	})
	check(t, "trigger URL permission", func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), map[string]any{
			"Action": "lambda:InvokeFunctionUrl", "Principal": "*", "FunctionUrlAuthType": "NONE",
			"FunctionName": map[string]any{"Fn::GetAtt": []any{evalID, "Arn"}},
		})
	})
	check(t, "trigger output", func() {
		tpl.HasOutput(jsii.String(TriggerOutput), map[string]any{
			"Value": map[string]any{"Fn::GetAtt": []any{assertions.Match_AnyValue(), "FunctionUrl"}},
		})
	})
}

// statement is one IAM policy statement, normalized.
type statement struct {
	role      string
	actions   []string
	resources []string // JSON of each resource
	condition map[string]any
}

// statements collects every statement of every policy, by role logical ID.
func (f fixture) statements(t *testing.T) []statement {
	t.Helper()
	var out []statement
	add := func(roles []string, doc any) {
		for _, s := range doc.(map[string]any)["Statement"].([]any) {
			sm := s.(map[string]any)
			if sm["Effect"] != "Allow" {
				continue
			}
			st := statement{actions: strs(sm["Action"]), condition: map[string]any{}}
			if c, ok := sm["Condition"].(map[string]any); ok {
				st.condition = c
			}
			if _, ok := sm["NotAction"]; ok {
				t.Errorf("NotAction in a policy: %v", sm)
			}
			if _, ok := sm["NotResource"]; ok {
				t.Errorf("NotResource in a policy: %v", sm)
			}
			switch r := sm["Resource"].(type) {
			case []any:
				for _, x := range r {
					st.resources = append(st.resources, str(x))
				}
			default:
				st.resources = append(st.resources, str(r))
			}
			for _, role := range roles {
				st.role = role
				out = append(out, st)
			}
		}
	}
	for _, p := range f.resources("AWS::IAM::Policy") {
		var roles []string
		for _, r := range props(p)["Roles"].([]any) {
			roles = append(roles, r.(map[string]any)["Ref"].(string))
		}
		add(roles, props(p)["PolicyDocument"])
	}
	for id, r := range f.resources("AWS::IAM::Role") {
		if pols, ok := props(r)["Policies"].([]any); ok {
			for _, p := range pols {
				add([]string{id}, p.(map[string]any)["PolicyDocument"])
			}
		}
	}
	return out
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = s.(string)
		}
		return out
	}
	return nil
}

// readOnlyWildcardActions are the read-only actions that may be granted on
// Resource "*": AWS offers no resource-level permission for them.
var readOnlyWildcardActions = []string{
	"autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScalingActivities", "autoscaling:DescribeLaunchConfigurations",
	"ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions", "ec2:GetInstanceTypesFromInstanceRequirements",
	"ec2:DescribeInstances", "ec2:DescribeSpotInstanceRequests",
}

// priceActions are what evaluate prices Auto Scaling Groups with (on-demand
// from the Price List, Spot from EC2's history): both only read, and AWS
// offers no resource-level permission for either.
var priceActions = []string{"pricing:GetProducts", "ec2:DescribeSpotPriceHistory"}

// stateMachineLogActions are what CloudWatch Logs delivery for Step
// Functions needs; AWS supports no resource-level permission for them.
var stateMachineLogActions = []string{
	"logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
	"logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
}

// checkLeastPrivilege walks every statement: no wildcard action, and
// Resource "*" only for the allow-listed read-only actions.
func checkLeastPrivilege(t *testing.T, f fixture) []statement {
	t.Helper()
	allowed := append(slices.Concat(readOnlyWildcardActions, priceActions), stateMachineLogActions...)
	sts := f.statements(t)
	if len(sts) == 0 {
		t.Fatal("no policy statements found")
	}
	for _, s := range sts {
		for _, a := range s.actions {
			if strings.Contains(a, "*") {
				t.Errorf("role %s: wildcard action %q", s.role, a)
			}
		}
		for _, r := range s.resources {
			if r != `"*"` {
				continue
			}
			for _, a := range s.actions {
				if !slices.Contains(allowed, a) {
					t.Errorf("role %s: %s on Resource \"*\" (only %v may be)", s.role, a, allowed)
				}
			}
		}
	}
	return sts
}

func (f fixture) roleID(t *testing.T, fn string) string {
	t.Helper()
	id, p := f.function(t, fn)
	_ = id
	return p["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
}

// grants lists, per action, the statements of a role that allow it.
func grants(sts []statement, role string) map[string][]statement {
	out := map[string][]statement{}
	for _, s := range sts {
		if s.role != role {
			continue
		}
		for _, a := range s.actions {
			out[a] = append(out[a], s)
		}
	}
	return out
}

func TestLeastPrivilege(t *testing.T) {
	f := synth(t, options(t, map[string]string{}), false)
	sts := checkLeastPrivilege(t, f)
	tableID := ""
	for id := range f.resources("AWS::DynamoDB::Table") {
		tableID = id
	}
	paramID := ""
	for id := range f.resources("AWS::SSM::Parameter") {
		paramID = id
	}
	asgWrites := map[string][]string{
		"evaluate": {"autoscaling:SetDesiredCapacity"},
		"drain": {"autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup",
			"autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat"},
		"schedule": {"autoscaling:SetDesiredCapacity"},
	}
	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		g := grants(sts, f.roleID(t, fn))
		var actions []string
		for a := range g {
			actions = append(actions, a)
		}
		sort.Strings(actions)
		want := []string{
			"autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeLaunchConfigurations",
			"autoscaling:DescribeScalingActivities",
			"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem",
			"ec2:DescribeInstanceTypes", "ec2:DescribeInstances", "ec2:DescribeLaunchTemplateVersions", "ec2:DescribeSpotInstanceRequests",
			"ec2:GetInstanceTypesFromInstanceRequirements",
			"eks:DescribeCluster", "eks:DescribeNodegroup", "logs:CreateLogStream", "logs:PutLogEvents", "ssm:GetParameter",
			"sqs:SendMessage", // the failed-invocation queue (TestFailureDestinations)
		}
		want = append(want, asgWrites[fn]...)
		want = append(want, "states:DescribeExecution", "states:StartExecution")
		if fn == "evaluate" {
			want = append(want, "lambda:InvokeFunction") // the trigger starts a cycle
			want = append(want, priceActions...)         // the groups' prices
		}
		if fn == "drain" {
			want = append(want, "states:StopExecution")
		}
		sort.Strings(want)
		if !slices.Equal(actions, want) {
			t.Errorf("%s role actions:\n got %v\nwant %v", fn, actions, want)
		}
		for _, a := range asgWrites[fn] {
			if len(g[a]) != 2 {
				t.Errorf("%s: %s: want one statement for the discovered groups and one for the named group, got %d", fn, a, len(g[a]))
			}
			for _, s := range g[a] {
				res := strings.Join(s.resources, " ")
				if !strings.Contains(res, ":autoScalingGroup:") {
					t.Errorf("%s: %s on %s, want Auto Scaling Group ARNs", fn, a, res)
				}
				switch {
				case strings.Contains(res, "autoScalingGroupName/prod-gpu"):
					if len(s.condition) != 0 {
						t.Errorf("%s: %s on the named group has a condition %v", fn, a, s.condition)
					}
				case strings.Contains(res, "autoScalingGroupName/*"):
					want := map[string]any{"Null": map[string]any{
						"aws:ResourceTag/k8s.io/cluster-autoscaler/enabled": "false",
						"aws:ResourceTag/k8s.io/cluster-autoscaler/prod":    "false",
					}}
					if str(s.condition) != str(want) {
						t.Errorf("%s: %s on discovered groups: condition %s, want %s", fn, a, str(s.condition), str(want))
					}
				default:
					t.Errorf("%s: %s on unexpected resource %s", fn, a, res)
				}
			}
		}
		if _, ok := g["autoscaling:UpdateAutoScalingGroup"]; ok {
			t.Errorf("%s may UpdateAutoScalingGroup", fn)
		}
		only := func(action string, wantRes ...string) {
			t.Helper()
			for _, s := range g[action] {
				if !slices.Equal(s.resources, wantRes) {
					t.Errorf("%s: %s on %v, want %v", fn, action, s.resources, wantRes)
				}
			}
		}
		for _, a := range StateTableActions {
			only(a, str(map[string]any{"Fn::GetAtt": []any{tableID, "Arn"}}))
		}
		only("ssm:GetParameter", str(map[string]any{"Fn::Join": []any{"", []any{
			"arn:", map[string]any{"Ref": "AWS::Partition"}, ":ssm:", map[string]any{"Ref": "AWS::Region"}, ":",
			map[string]any{"Ref": "AWS::AccountId"}, ":parameter", map[string]any{"Ref": paramID}}}}))
		contains := func(action, part string) {
			t.Helper()
			if len(g[action]) == 0 {
				return
			}
			for _, s := range g[action] {
				if len(s.resources) != 1 || !strings.Contains(s.resources[0], part) {
					t.Errorf("%s: %s on %v, want only %q", fn, action, s.resources, part)
				}
			}
		}
		contains("eks:DescribeCluster", ":cluster/prod\"")
		contains("sqs:SendMessage", "FailedInvocations")
		contains("states:StartExecution", ":stateMachine:nodetide-prod-drain\"")
		contains("states:DescribeExecution", ":execution:nodetide-prod-drain:*\"")
		contains("states:StopExecution", ":execution:nodetide-prod-drain:*\"")
		contains("lambda:InvokeFunction", ":function:nodetide-prod-evaluate\"")
		for _, a := range []string{"logs:CreateLogStream", "logs:PutLogEvents"} {
			contains(a, `"Fn::GetAtt"`)
		}
	}

	// The state machine may invoke drain and nothing else.
	drainID, _ := f.function(t, "drain")
	for _, sm := range f.resources("AWS::StepFunctions::StateMachine") {
		smRole := props(sm)["RoleArn"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
		g := grants(sts, smRole)
		for a, ss := range g {
			switch {
			case a == "lambda:InvokeFunction":
				for _, s := range ss {
					if want := str(map[string]any{"Fn::GetAtt": []any{drainID, "Arn"}}); !slices.Equal(s.resources, []string{want}) {
						t.Errorf("state machine: %s on %v, want %s", a, s.resources, want)
					}
				}
			case slices.Contains(stateMachineLogActions, a):
			default:
				t.Errorf("state machine role may %s", a)
			}
		}
		if len(g["lambda:InvokeFunction"]) == 0 {
			t.Errorf("state machine role may not invoke drain")
		}
	}
}

// secretsConfig is the example config reached by kubeconfig, with a
// Scaleway and a Kamatera group whose credentials are in Secrets Manager.
func secretsConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(string(data), "eks: {name: prod}", "kubeconfigSecret: "+kubeconfigSecret, 1)
	yaml = strings.Replace(yaml, "\nscaleUp:", `
  - name: scw
    provider: scaleway
    scaleway: {pool: gpu-pool, secretKeySecret: `+scalewaySecret+`}
  - provider: kamatera
    kamatera: {cloudConfigSecret: `+kamateraINISecret+`, credentialsSecret: `+kamateraSecret+`}

scaleUp:`, 1)
	path := filepath.Join(t.TempDir(), "nodetide.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	kubeconfigSecret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:nodetide/prod/kubeconfig-AbC123"
	scalewaySecret   = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:nodetide/scaleway"
	kamateraSecret   = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:nodetide/kamatera-Xy9Zw8"
	// The INI carries join tokens, so in Lambda it is a secret too.
	kamateraINISecret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:nodetide/kamatera-ini-Pq7Rs6"
)

func TestSecrets(t *testing.T) {
	f := synth(t, options(t, map[string]string{
		CtxConfig: secretsConfig(t), CtxScalewayCluster: "11111111-2222-3333-4444-555555555555", CtxScalewayRegion: "fr-par",
	}), false)
	sts := checkLeastPrivilege(t, f)
	want := []string{`"` + kubeconfigSecret + `"`, `"` + scalewaySecret + `"`, `"` + scalewaySecret + `-??????"`, `"` + kamateraSecret + `"`, `"` + kamateraINISecret + `"`}
	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		g := grants(sts, f.roleID(t, fn))
		if len(g["secretsmanager:GetSecretValue"]) != 1 || !slices.Equal(g["secretsmanager:GetSecretValue"][0].resources, want) {
			t.Errorf("%s: GetSecretValue %v, want one statement on %v", fn, g["secretsmanager:GetSecretValue"], want)
		}
		for a := range g {
			if strings.HasPrefix(a, "secretsmanager:") && a != "secretsmanager:GetSecretValue" {
				t.Errorf("%s may %s", fn, a)
			}
		}
		if _, ok := g["eks:DescribeCluster"]; ok {
			t.Errorf("%s may eks:DescribeCluster though the cluster is reached by kubeconfig", fn)
		}
		_, p := f.function(t, fn)
		vars := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		if vars["CLUSTER_ID"] != "11111111-2222-3333-4444-555555555555" || vars["SCW_REGION"] != "fr-par" {
			t.Errorf("%s: Scaleway cluster and region in the environment: %v", fn, vars)
		}
		if _, ok := vars["SCW_SECRET_KEY"]; ok {
			t.Errorf("%s: the Scaleway key is in the environment", fn)
		}
	}
	// Only the function roles read secrets.
	roles := map[string]bool{}
	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		roles[f.roleID(t, fn)] = true
	}
	for _, s := range sts {
		if strings.Contains(strings.Join(s.actions, " "), "secretsmanager") && !roles[s.role] {
			t.Errorf("role %s reads secrets", s.role)
		}
	}
	// No secret value anywhere in the template: only ARNs.
	if strings.Contains(str(f.json), "resolve:secretsmanager") {
		t.Errorf("the template resolves a secret value")
	}
	// Without secrets in the config, no secret is readable.
	f = synth(t, options(t, map[string]string{}), false)
	for _, s := range f.statements(t) {
		if strings.Contains(strings.Join(s.actions, " "), "secretsmanager") {
			t.Errorf("role %s reads secrets the config does not name: %v", s.role, s.resources)
		}
	}
}

func TestVPC(t *testing.T) {
	f := synth(t, options(t, map[string]string{
		CtxSubnetIDs: "subnet-0000000000000000a, subnet-0000000000000000b", CtxSecurityGroupIDs: "sg-00000000000000001",
		CtxVpcID: "vpc-00000000000000001", CtxRouteTableIDs: "rtb-0000000000000000a,rtb-0000000000000000b",
	}), false)
	checkLeastPrivilege(t, f)
	tpl := f.tpl
	check(t, "functions in the VPC", func() {
		tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), map[string]any{
			"VpcConfig": map[string]any{"SubnetIds": []string{"subnet-0000000000000000a", "subnet-0000000000000000b"}, "SecurityGroupIds": []string{"sg-00000000000000001"}},
		}, jsii.Number(3))
	})
	check(t, "ENI permissions", func() {
		tpl.ResourcePropertiesCountIs(jsii.String("AWS::IAM::Role"), map[string]any{
			"ManagedPolicyArns": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, ":iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"}},
			})}),
		}, jsii.Number(3))
	})
	var services []string
	for _, e := range f.resources("AWS::EC2::VPCEndpoint") {
		p := props(e)
		name := str(p["ServiceName"])
		svc := name[strings.LastIndex(name, ".")+1 : len(name)-len(`"]]}`)]
		services = append(services, svc+"/"+p["VpcEndpointType"].(string))
		if p["VpcId"] != "vpc-00000000000000001" {
			t.Errorf("endpoint %s in %v", svc, p["VpcId"])
		}
		switch p["VpcEndpointType"] {
		case "Interface":
			if p["PrivateDnsEnabled"] != true || str(p["SubnetIds"]) != `["subnet-0000000000000000a","subnet-0000000000000000b"]` {
				t.Errorf("endpoint %s: %v", svc, p)
			}
		case "Gateway":
			if str(p["RouteTableIds"]) != `["rtb-0000000000000000a","rtb-0000000000000000b"]` {
				t.Errorf("endpoint %s: %v", svc, p)
			}
		}
	}
	sort.Strings(services)
	want := []string{"autoscaling/Interface", "dynamodb/Gateway", "ec2/Interface", "eks/Interface", "lambda/Interface", "ssm/Interface", "states/Interface"}
	if !slices.Equal(services, want) {
		t.Errorf("endpoints %v, want %v", services, want)
	}
	check(t, "endpoint security group", func() {
		tpl.HasResourceProperties(jsii.String("AWS::EC2::SecurityGroup"), map[string]any{
			"VpcId": "vpc-00000000000000001",
			"SecurityGroupIngress": []any{map[string]any{
				"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "SourceSecurityGroupId": "sg-00000000000000001",
				"Description": assertions.Match_AnyValue(),
			}},
		})
	})

	// vpcEndpoints=false: the subnets reach AWS through a NAT.
	f = synth(t, options(t, map[string]string{
		CtxSubnetIDs: "subnet-0000000000000000a", CtxSecurityGroupIDs: "sg-00000000000000001", CtxVpcID: "vpc-00000000000000001", CtxVpcEndpoints: "false",
	}), false)
	check(t, "no endpoints", func() { f.tpl.ResourceCountIs(jsii.String("AWS::EC2::VPCEndpoint"), jsii.Number(0)) })
}

func TestEKSAccessEntries(t *testing.T) {
	f := synth(t, options(t, map[string]string{CtxEKSAccessEntries: "true", CtxAlarmTopic: "arn:aws:sns:eu-west-1:123456789012:ops", CtxMonitoring: "full"}), false)
	for _, fn := range []string{"evaluate", "drain", "schedule"} {
		check(t, fn+" access entry", func() {
			f.tpl.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), map[string]any{
				"ClusterName":      "prod",
				"PrincipalArn":     map[string]any{"Fn::GetAtt": []any{f.roleID(t, fn), "Arn"}},
				"KubernetesGroups": []string{KubernetesGroup(fn)},
				"Type":             "STANDARD",
			})
		})
	}
	check(t, "alarm actions", func() {
		f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"AlarmActions": []string{"arn:aws:sns:eu-west-1:123456789012:ops"},
		}, jsii.Number(17))
	})
}

// TestNag runs cdk-nag's AwsSolutions pack: every finding must be fixed or
// suppressed in the stack with a reason.
func TestNag(t *testing.T) {
	for name, ctx := range map[string]map[string]string{
		"default":         {},
		"monitoring full": {CtxMonitoring: "full"},
		"monitoring off":  {CtxMonitoring: "off"},
		"trigger off":     {CtxTrigger: "false"},
		"vpc and secrets": {
			CtxSubnetIDs: "subnet-0000000000000000a,subnet-0000000000000000b", CtxSecurityGroupIDs: "sg-00000000000000001", CtxVpcID: "vpc-00000000000000001", CtxRouteTableIDs: "rtb-0000000000000000a",
			CtxConfig: "secrets",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if ctx[CtxConfig] == "secrets" {
				ctx[CtxConfig] = secretsConfig(t)
			}
			f := synth(t, options(t, ctx), true)
			ann := assertions.Annotations_FromStack(f.built.Stack)
			for level, found := range map[string]*[]*cxMessage{
				"error":   cx(ann.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))),
				"warning": cx(ann.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))),
			} {
				for _, m := range *found {
					t.Errorf("cdk-nag %s at %s: %s", level, m.path, m.text)
				}
			}
		})
	}
}

func TestOptionsErrors(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, from, to string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Replace(string(data), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, c := range map[string]struct {
		ctx  map[string]string
		want string
	}{
		"interval not whole minutes": {map[string]string{CtxConfig: write("a.yaml", "interval: 1m", "interval: 90s")}, "evaluate.interval"},
		"memory state":               {map[string]string{CtxConfig: write("b.yaml", "dynamodb: {table: nodetide-prod}", "memory: {}")}, "state.dynamodb"},
		"local endpoint":             {map[string]string{CtxConfig: write("c.yaml", "{table: nodetide-prod}", "{table: t, endpoint: 'http://127.0.0.1:8000'}")}, "local endpoint"},
		"subnets without groups":     {map[string]string{CtxSubnetIDs: "subnet-0000000000000000a"}, "securityGroupIds"},
		"vpc without subnets":        {map[string]string{CtxVpcID: "vpc-00000000000000001"}, "subnetIds"},
		"bad retention":              {map[string]string{CtxLogRetentionDays: "31"}, "logRetentionDays"},
		"missing config":             {map[string]string{CtxConfig: filepath.Join(dir, "none.yaml")}, "-c config=PATH"},
		"bad config":                 {map[string]string{CtxConfig: write("d.yaml", "onTimeout: abort", "onTimeout: later")}, "drain.onTimeout"},
		"pending alarm not a number": {map[string]string{CtxPendingPodAlarm: "ten"}, "pendingPodAlarmMinutes: want a whole number"},
		"pending alarm zero":         {map[string]string{CtxPendingPodAlarm: "0"}, "pendingPodAlarmMinutes: want 1 to 1440"},
		"negative drain reserved":    {map[string]string{CtxDrainReserved: "-1"}, "drainReservedConcurrency: want 0"},
		"evaluate memory too small":  {map[string]string{CtxEvaluateMemory: "64"}, "evaluateMemoryMB: want 128 to 10240"},
		"evaluate memory not a size": {map[string]string{CtxEvaluateMemory: "1G"}, "evaluateMemoryMB: want a whole number"},
		"bad alarm email":            {map[string]string{CtxAlarmEmail: "oncall"}, `alarmEmail: "oncall" is not an email address`},
		"email with a given topic":   {map[string]string{CtxAlarmEmail: "a@example.com", CtxAlarmTopic: "arn:aws:sns:eu-west-1:123456789012:ops"}, "subscribe the addresses"},
		"unknown monitoring level":   {map[string]string{CtxMonitoring: "minimal"}, `monitoring: want full, essential or off, got "minimal"`},
	} {
		t.Run(name, func(t *testing.T) {
			if c.ctx[CtxConfig] == "" {
				c.ctx[CtxConfig] = exampleConfig
			}
			_, err := LoadOptions(func(k string) string { return c.ctx[k] }, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}

	// The environment names the config when the context does not.
	o, err := LoadOptions(func(string) string { return "" }, func(k string) string {
		if k == EnvConfigFile {
			return exampleConfig
		}
		return ""
	})
	if err != nil || o.ConfigFile != exampleConfig || o.Config.Cluster.Name != "prod" {
		t.Errorf("config from %s: %v %+v", EnvConfigFile, err, o)
	}
}

func TestFunctionsSizing(t *testing.T) {
	o := options(t, map[string]string{})
	// The sizes infra/measurements.md supports (docs/stack.md "Sizing").
	want := map[string]struct {
		memory  int
		timeout time.Duration
	}{
		"evaluate": {256, 60 * time.Second}, // watchFor 0s: the 60 s floor
		"drain":    {256, 120 * time.Second},
		"schedule": {256, 90 * time.Second}, // a shrinking schedule runs an evaluate cycle
	}
	fns := Functions(o.Config)
	if len(fns) != len(want) {
		t.Fatalf("%d functions, want %d", len(fns), len(want))
	}
	for _, f := range fns {
		w, ok := want[f.Name]
		if !ok || f.MemoryMB != w.memory || f.Timeout != w.timeout {
			t.Errorf("%s: %d MB, %s; want %d MB, %s", f.Name, f.MemoryMB, f.Timeout, w.memory, w.timeout)
		}
	}
	// evaluate's timeout follows watchFor: 30 s beyond it, at least 60 s.
	cfg := *o.Config
	for _, tc := range []struct{ interval, watch, want string }{
		{"5m", "4m", "4m30s"},
		{"1m", "0s", "1m0s"},
		{"1m", "20s", "1m0s"},
		{"1m", "50s", "1m20s"},
	} {
		iv, watch := mustDuration(t, tc.interval), mustDuration(t, tc.watch)
		cfg.Evaluate.Interval, cfg.Evaluate.WatchFor = &iv, &watch
		for _, f := range Functions(&cfg) {
			if f.Name == "evaluate" && f.Timeout.String() != tc.want {
				t.Errorf("evaluate timeout %s with watchFor %s, want %s", f.Timeout, tc.watch, tc.want)
			}
		}
	}
	five, four := mustDuration(t, "5m"), mustDuration(t, "4m")
	cfg.Evaluate.Interval, cfg.Evaluate.WatchFor = &five, &four
	o.Config = &cfg
	if n, err := o.evaluateRate(); err != nil || n != 5 {
		t.Errorf("rate %d %v, want 5 minutes", n, err)
	}
	if got := fmt.Sprint(Name("prod/eu west"), " ", StackName("prod")); got != "nodetide-prod-eu-west Nodetide-prod" {
		t.Errorf("names: %s", got)
	}
}

// cxMessage is an annotation, for reporting.
type cxMessage struct{ path, text string }

func cx(msgs *[]*cxapi.SynthesisMessage) *[]*cxMessage {
	out := []*cxMessage{}
	if msgs == nil {
		return &out
	}
	for _, m := range *msgs {
		out = append(out, &cxMessage{path: *m.Id, text: fmt.Sprint(m.Entry.Data)})
	}
	return &out
}

func mustDuration(t *testing.T, s string) config.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return config.Duration{Duration: d}
}

func TestMain(m *testing.M) {
	code := testbed.Run(m) // stops the control plane and dynalite the deployed-definition test starts
	jsii.Close()           // stops the jsii runtime's node process
	os.Exit(code)
}

func TestWarnings(t *testing.T) {
	if w := Warnings(options(t, map[string]string{})); len(w) != 0 {
		t.Errorf("example config warnings: %v", w)
	}
	o := options(t, map[string]string{CtxSubnetIDs: "subnet-0000000000000000a", CtxSecurityGroupIDs: "sg-00000000000000001"})
	awsprovider.BlockOf(o.Config.NodeGroups[0].Entry()).AutoDiscovery = []string{"k8s.io/cluster-autoscaler/enabled"}
	w := Warnings(o)
	for _, id := range []string{"discovery-0", "vpc-dynamodb", "vpc-endpoints"} {
		if w[id] == "" {
			t.Errorf("no warning %s in %v", id, w)
		}
	}
}
