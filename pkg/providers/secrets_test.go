package providers_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/fake/fakescaleway"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kamatera"
	"github.com/nodetide/nodetide/pkg/providers/scaleway"
	"github.com/nodetide/nodetide/pkg/state"
)

// Credentials never appear in logs or errors. The full cycle of the
// end-to-end tests already runs under a leakCheck; these tests add the
// failure paths, where a message is most tempted to say too much: a rejected
// key, a key refused in the middle of a cycle (scale-up, a drain's
// Terminate), transient failures that are retried and logged, and the
// provider and its config printed (with every verb: TestSecretsNotPrinted).

// authCase is one cloud, set up for the failure paths.
type authCase struct {
	e *e2e
	// wrong is the same cloud reached with a near-miss of the key; nil
	// where the double can't tell keys apart (AWS: a refusal is injected).
	wrong providers.Provider
	// denyRead, denyScaleUp and denyTerminate make the next such call be
	// refused for its credentials; flaky makes the next read fail in a way
	// that is retried.
	denyRead, denyScaleUp, denyTerminate, flaky func()
	// dumps are more of the provider's own values to print (its config).
	dumps []any
}

// nearMiss is key with its last character changed: a typo'd key is still
// most of the secret.
func nearMiss(key string) string {
	last := key[len(key)-1]
	repl := byte('0')
	if last == '0' {
		repl = '1'
	}
	return key[:len(key)-1] + string(repl)
}

func (c authCase) run(t *testing.T) {
	e := c.e
	ctx := t.Context()
	tpl := e.learnTemplate()

	// Printed the usual ways, the provider, its groups and its config say
	// nothing secret (other verbs: TestSecretsNotPrinted).
	groups, err := e.provider.NodeGroups(ctx)
	if err != nil {
		t.Fatalf("NodeGroups: %v", e.leaks.err(err))
	}
	for _, v := range append([]any{e.provider, groups, groups[0]}, c.dumps...) {
		e.leaks.say(fmt.Sprintf("%v | %+v | %#v", v, v, v))
		if out, err := json.Marshal(v); err == nil {
			e.leaks.say(string(out))
		}
		e.leaks.Log.Info("dump", "value", v)
	}

	// A transient failure is retried (and may be logged on the way).
	c.flaky()
	if _, err := e.provider.NodeGroups(ctx); err != nil {
		t.Errorf("NodeGroups after a transient failure: %v", e.leaks.err(err))
	}

	// A rejected key: the cycle fails, and says so.
	runWith := func(what string, p providers.Provider) {
		t.Helper()
		ev := e.evaluator()
		ev.Groups = p.NodeGroups
		res, err := ev.Run(ctx)
		if out, jerr := json.Marshal(res); jerr == nil {
			e.leaks.say(string(out))
		}
		if err == nil {
			t.Errorf("%s: the evaluate cycle succeeded, want an error", what)
			return
		}
		e.leaks.err(err)
	}
	if c.wrong != nil {
		if _, err := c.wrong.NodeGroups(ctx); err == nil {
			t.Errorf("NodeGroups with a wrong key succeeded")
		} else {
			e.leaks.err(err)
		}
		runWith("a wrong key", c.wrong)
	}
	c.denyRead()
	runWith("a refused read", e.provider)

	// Pods wait; the scale-up is refused: the cycle records and logs it.
	e.deploy("web", 1, tpl)
	e.waitUnschedulable("app=web", 1)
	c.denyScaleUp()
	res, err := e.evaluator().Run(ctx)
	if out, jerr := json.Marshal(res); jerr == nil {
		e.leaks.say(string(out))
	}
	if err != nil {
		t.Fatalf("evaluate with a refused scale-up: %v", e.leaks.err(err))
	}
	if len(res.Actions) != 1 || res.Actions[0].Kind != "scaleUp" || res.Actions[0].Error == "" {
		t.Fatalf("actions %+v, want one failed scale-up", res.Actions)
	}
	if lines := e.leaks.lines(`"level":"ERROR"`, `"msg":"scale up"`); len(lines) != 1 {
		t.Errorf("scale-up error log lines: %q, want one", lines)
	}

	// The refusal backed the group off; with that forgotten, the next cycle
	// scales up and the pod runs.
	e.store = state.NewMemory(e.ns + "-retry")
	e.run()
	e.cp.WaitPodsRunning(t, e.ns, "app=web", 1, e2eWait)
	nodes := e.nodeOf()
	if len(nodes) != 1 {
		t.Fatalf("%d machines booted, want 1", len(nodes))
	}
	var node, providerID string
	for name, id := range nodes {
		node, providerID = name, id
	}

	// A drain whose steps can't list the groups (a wrong key) fails at Prepare.
	s := drain.State{Node: node, DrainID: "secrets-" + node, Deadline: time.Now().Add(time.Minute), Policy: drain.PolicyAbort}
	if c.wrong != nil {
		wrongSteps := &drain.Steps{Client: e.cp.Client, Groups: c.wrong.NodeGroups, Store: e.store, Log: e.leaks.Log}
		if _, err := wrongSteps.Run(ctx, "Prepare", s); err == nil {
			t.Errorf("Prepare with a wrong key succeeded")
		} else {
			e.leaks.err(err)
		}
	}
	// A drain whose Terminate is refused fails there and rolls back.
	steps := &drain.Steps{Client: e.cp.Client, Groups: e.provider.NodeGroups, Store: e.store, Log: e.leaks.Log, StepWait: -1}
	for _, step := range []string{"Prepare", "Cordon"} {
		if s, err = steps.Run(ctx, step, s); err != nil {
			t.Fatalf("drain step %s: %v", step, e.leaks.err(err))
		}
	}
	c.denyTerminate()
	if _, err := steps.Run(ctx, "Terminate", s); err == nil {
		t.Errorf("Terminate with a refused key succeeded")
	} else {
		e.leaks.err(err)
		s.Error = &drain.ErrorInfo{Error: drain.ErrorName(err), Cause: err.Error()}
	}
	if _, err := steps.Run(ctx, "Rollback", s); err != nil {
		t.Fatalf("Rollback: %v", e.leaks.err(err))
	}
	rec, err := e.store.GetDrain(ctx, node, s.DrainID)
	if err != nil || rec.Status != state.DrainRolledBack {
		t.Errorf("drain record %+v (%v), want rolled back", rec, err)
	}
	e.leaks.say(rec.Error)
	if !e.cloudHas(providerID) || e.cloudTarget() != 1 {
		t.Errorf("a refused Terminate changed the cloud: target %d, has %s: %v", e.cloudTarget(), providerID, e.cloudHas(providerID))
	}
	if lines := e.leaks.lines(`"msg":"drain step failed"`, `"step":"Terminate"`); len(lines) != 1 {
		t.Errorf("Terminate failure log lines: %q, want one", lines)
	}
}

func TestSecretsStayOutAWS(t *testing.T) {
	creds := newAWSCreds()
	e, d := awsE2E(t, creds)
	authCase{
		e: e,
		denyRead: func() {
			d.FailNext("DescribeAutoScalingGroups", 1, fakeaws.Fault{Status: 403, Code: "SignatureDoesNotMatch",
				Message: "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."})
		},
		denyScaleUp: func() {
			d.FailNext("SetDesiredCapacity", 1, fakeaws.Fault{Status: 403, Code: "InvalidClientTokenId",
				Message: "The security token included in the request is invalid."})
		},
		denyTerminate: func() {
			d.FailNext("TerminateInstanceInAutoScalingGroup", 1, fakeaws.Fault{Status: 403, Code: "AccessDenied",
				Message: "User: arn:aws:sts::123456789012:assumed-role/nodetide/evaluate is not authorized to perform: autoscaling:TerminateInstanceInAutoScalingGroup"})
		},
		flaky: func() { d.FailNext("DescribeAutoScalingGroups", 2, fakeaws.InternalFailure()) },
	}.run(t)
}

func TestSecretsStayOutScaleway(t *testing.T) {
	key := newUUID()
	wrongKey := nearMiss(key)
	e, d := scwE2E(t, key, wrongKey)
	cfg := scaleway.CloudConfig{ClusterID: d.ClusterID(), SecretKey: key, Region: d.Region().String(), APIURL: d.URL()}
	authCase{
		e:             e,
		wrong:         scwProvider(t, d, e.group, wrongKey),
		denyRead:      func() { d.Inject(fakescaleway.Fault{Op: fakescaleway.OpListPools, Status: 401}) },
		denyScaleUp:   func() { d.Inject(fakescaleway.Fault{Op: fakescaleway.OpUpdatePool, Status: 403}) },
		denyTerminate: func() { d.Inject(fakescaleway.Fault{Op: fakescaleway.OpDeleteNode, Status: 401}) },
		flaky:         func() { d.Inject(fakescaleway.Fault{Op: fakescaleway.OpListPools, Status: 503, Times: 2}) },
		dumps:         []any{cfg, &cfg, scaleway.Options{CloudConfig: cfg}},
	}.run(t)
}

func TestSecretsStayOutKamatera(t *testing.T) {
	ks := newKamateraSecrets()
	wrongSecret := nearMiss(ks.secret)
	e, d, cfg := kamateraE2E(t, ks, wrongSecret)
	parsed, err := kamatera.ParseCloudConfig(strings.NewReader(cfg.ini()), "kamatera.ini")
	if err != nil {
		t.Fatal(err)
	}
	authCase{
		e:             e,
		wrong:         kamateraProvider(t, cfg, ks.clientID, wrongSecret, e.leaks.Log),
		denyRead:      func() { d.InjectStatus("/service/servers", 401, 1) },
		denyScaleUp:   func() { d.InjectStatus("/service/server", 401, 1) },
		denyTerminate: func() { d.InjectStatus("/service/server/terminate", 403, 1) },
		flaky:         func() { d.InjectStatus("/service/servers", 503, 2) },
		dumps:         []any{parsed, *parsed, parsed.NodeGroups[0], parsed.NodeGroups[0].Server},
	}.run(t)
}

// TestSecretsNotPrinted prints each provider's own values — the provider,
// its groups, its config — with every fmt verb, as JSON and through slog,
// and looks for the credentials in the output.
func TestSecretsNotPrinted(t *testing.T) {
	ctx := t.Context()
	type printed struct {
		name    string
		value   any
		secrets []string
	}
	var values []printed

	creds := newAWSCreds()
	ad := fakeaws.New()
	t.Cleanup(ad.Close)
	ad.AddGroup(awsGroup(ad, "print", 0, 3, 1, nil))
	ap := awsProvider(t, ad, "print", creds)
	ag, err := ap.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	awsSecrets := []string{creds.secretAccessKey, creds.securityToken}
	values = append(values, printed{"aws-provider", ap, awsSecrets}, printed{"aws-group", ag[0], awsSecrets})

	key := newUUID()
	sd := fakescaleway.New(fakescaleway.Options{SecretKey: key})
	t.Cleanup(sd.Close)
	sd.AddPool(fakescaleway.PoolSpec{Name: "print", Size: 1, MaxSize: 3})
	sp := scwProvider(t, sd, "print", key)
	sg, err := sp.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scwCfg := scaleway.CloudConfig{ClusterID: sd.ClusterID(), SecretKey: key, Region: sd.Region().String(), APIURL: sd.URL()}
	values = append(values, printed{"scaleway-provider", sp, []string{key}}, printed{"scaleway-group", sg[0], []string{key}},
		printed{"scaleway-config", scwCfg, []string{key}}, printed{"scaleway-options", scaleway.Options{CloudConfig: scwCfg}, []string{key}})

	ks := newKamateraSecrets()
	kd := newKamateraDouble(t, ks.clientID, ks.secret)
	kcfg := kamateraConfig{url: kd.URL(), cluster: "print", group: "print", namePrefix: "pr", maxSize: 3,
		password: ks.password, joinToken: ks.joinToken, apiClientID: ks.clientID, apiSecret: ks.secret}
	kp := kamateraProvider(t, kcfg, ks.clientID, ks.secret, nil)
	kg, err := kp.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := kamatera.ParseCloudConfig(strings.NewReader(kcfg.ini()), "kamatera.ini")
	if err != nil {
		t.Fatal(err)
	}
	kamSecrets := []string{ks.secret, ks.password, kcfg.scriptBase64()}
	values = append(values, printed{"kamatera-provider", kp, kamSecrets}, printed{"kamatera-group", kg[0], kamSecrets},
		printed{"kamatera-config", *parsed, kamSecrets}, printed{"kamatera-config-pointer", parsed, kamSecrets},
		printed{"kamatera-group-config", parsed.NodeGroups[0], kamSecrets})

	verbs := map[string]string{"v": "%v", "+v": "%+v", "#v": "%#v", "s": "%s", "q": "%q", "d": "%d", "x": "%x"}
	for _, p := range values {
		t.Run(p.name, func(t *testing.T) {
			outputs := map[string]string{}
			for name, verb := range verbs {
				outputs[name] = fmt.Sprintf(verb, p.value)
			}
			if out, err := json.Marshal(p.value); err == nil {
				outputs["json"] = string(out)
			}
			var buf syncBuffer
			slog.New(slog.NewJSONHandler(&buf, nil)).Info("value", "value", p.value)
			outputs["slog"] = buf.String()
			for _, name := range slices.Sorted(maps.Keys(outputs)) {
				t.Run(name, func(t *testing.T) {
					out := outputs[name]
					for _, s := range p.secrets {
						if i := strings.Index(out, s); i >= 0 {
							t.Errorf("a secret shows: …%s…", out[max(0, i-100):min(len(out), i+len(s)+20)])
						}
					}
				})
			}
		})
	}
}
