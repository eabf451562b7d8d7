package stack

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// With -c trigger=false the stack has no function URL, no public
// permission, no self-invocation grant and no TriggerUrl output; the rest
// of evaluate is as before.
func TestTriggerOff(t *testing.T) {
	f := synth(t, options(t, map[string]string{CtxTrigger: "false"}), false)
	check(t, "function URL", func() { f.tpl.ResourceCountIs(jsii.String("AWS::Lambda::Url"), jsii.Number(0)) })
	for id, r := range f.resources("AWS::Lambda::Permission") {
		if p := props(r); p["Action"] != "lambda:InvokeFunction" || p["Principal"] == "*" || p["FunctionUrlAuthType"] != nil {
			t.Errorf("permission %s with the trigger off: %s", id, str(p))
		}
	}
	if _, ok := f.json["Outputs"].(map[string]any)[TriggerOutput]; ok {
		t.Errorf("output %s with the trigger off", TriggerOutput)
	}
	evaluateRole := f.roleID(t, "evaluate")
	for _, s := range f.statements(t) {
		if s.role == evaluateRole && slices.Contains(s.actions, "lambda:InvokeFunction") {
			t.Errorf("a grant of %v on %v with the trigger off", s.actions, s.resources)
		}
	}
	f.function(t, "evaluate")

	// In a VPC, no Lambda endpoint: nothing calls Lambda then.
	v := synth(t, options(t, map[string]string{CtxTrigger: "false", CtxSubnetIDs: "subnet-0000000000000000a",
		CtxSecurityGroupIDs: "sg-00000000000000001", CtxVpcID: "vpc-00000000000000001"}), false)
	if _, ok := v.json["Resources"].(map[string]any)[endpointID("lambda")]; ok || strings.Contains(str(v.json), ".lambda\"") {
		t.Errorf("a Lambda VPC endpoint with the trigger off")
	}
}

// A region without function URLs is refused unless the trigger is off,
// whether it comes from -c region=, CDK_DEFAULT_REGION or the stack's env; a
// region-agnostic synth and a region with function URLs build as before.
func TestTriggerRegions(t *testing.T) {
	load := func(ctx map[string]string, env map[string]string) error {
		ctx[CtxConfig] = exampleConfig
		_, err := LoadOptions(func(k string) string { return ctx[k] }, func(k string) string { return env[k] })
		return err
	}
	for _, r := range NoFunctionURLRegions {
		err := load(map[string]string{CtxRegion: r}, nil)
		if err == nil || !strings.Contains(err.Error(), "region "+r+" has no Lambda function URLs") || !strings.Contains(err.Error(), "-c trigger=false") {
			t.Errorf("-c region=%s: err = %v, want the refusal naming -c trigger=false", r, err)
		}
		if err := load(map[string]string{CtxRegion: r, CtxTrigger: "false"}, nil); err != nil {
			t.Errorf("-c region=%s with the trigger off: %v", r, err)
		}
	}
	if err := load(map[string]string{}, map[string]string{EnvDefaultRegion: "il-central-1"}); err == nil || !strings.Contains(err.Error(), "il-central-1") {
		t.Errorf("%s=il-central-1: err = %v, want the refusal", EnvDefaultRegion, err)
	}
	for _, ok := range []map[string]string{{}, {CtxRegion: "eu-west-1"}} {
		if err := load(ok, nil); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	if err := load(map[string]string{CtxTrigger: "maybe"}, nil); err == nil || !strings.Contains(err.Error(), "context trigger: want true or false") {
		t.Errorf("-c trigger=maybe: err = %v", err)
	}

	// The stack's own env region is checked at New.
	o := options(t, map[string]string{})
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	_, err := New(app, "Test", &awscdk.StackProps{Env: &awscdk.Environment{Region: jsii.String("eu-central-2")}}, o)
	if err == nil || !strings.Contains(err.Error(), "region eu-central-2 has no Lambda function URLs") {
		t.Errorf("env region eu-central-2: err = %v, want the refusal", err)
	}
	o.NoTrigger = true
	if _, err := New(app, "Test2", &awscdk.StackProps{Env: &awscdk.Environment{Region: jsii.String("eu-central-2")}}, o); err != nil {
		t.Errorf("env region eu-central-2 with the trigger off: %v", err)
	}
}
