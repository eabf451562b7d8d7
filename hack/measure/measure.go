package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/setup"
)

// bed is the running test bed and what the functions need of it.
type bed struct {
	root, work, rie string
	cp              *testbed.ControlPlane
	db              *testbed.Dynalite
	client          kubernetes.Interface
	log             *slog.Logger
	// Drains records, per drain, its state transitions and function
	// invocations (from the execution history), for the cost estimate.
	Drains []drainCount
}

type drainCount struct{ Transitions, Invocations int }

const stateTable = "nodetide"

// Function timeouts under the emulator: generous, so a slow run is
// measured rather than cut off.
const (
	evaluateTimeout = 90 * time.Second
	scheduleTimeout = 60 * time.Second
	drainTimeout    = 300 * time.Second
)

// functionConfig is the nodetide.yaml the functions read: the cluster
// through kubeconfig, state in DynamoDB at endpoint. Group "large" is empty:
// only it fits the pending pods of the plan phase.
func functionConfig(kubeconfig, endpoint string, workersMax int) string {
	return fmt.Sprintf(`cluster:
  name: measure
  kubernetes: {kubeconfig: %q}
state: {dynamodb: {table: %s, endpoint: %q}}
nodeGroups:
  - name: %s
    provider: kwok
    minSize: 3
    maxSize: %d
    kwok:
      template:
        allocatable: {cpu: "%d", memory: %dGi, pods: "%d"}
        labels: {pool: workers}
  - name: large
    provider: kwok
    minSize: 0
    maxSize: 20
    kwok:
      template:
        allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
        labels: {pool: large}
scaleUp: {pendingPodMinAge: 2s}
evaluate: {watchFor: 0s}
drain: {timeout: 10m, onTimeout: abort, surge: true}
`, kubeconfig, stateTable, endpoint, workersGroup, workersMax, nodeCPUMilli/1000, nodeMemoryMi>>10, nodePodCapacity)
}

func run(ctx context.Context, o options, log *slog.Logger) (err error) {
	began := time.Now()
	p, err := planCluster(o.Cluster)
	if err != nil {
		return err
	}
	b, stop, err := startBed(ctx, functionNames, log)
	if err != nil {
		return errors.Join(err, stop())
	}
	defer func() { err = errors.Join(err, stop()) }()
	if err := b.seed(ctx, p, o.DaemonSet, seedWorkers, false, 0); err != nil {
		return err
	}
	var samples []sample
	for _, phase := range []struct {
		name string
		fn   func(context.Context, *bed, options, clusterPlan) ([]sample, error)
	}{
		{"evaluate", measureEvaluate},
		{"schedule", measureSchedule},
		{"drain", measureDrain},
	} {
		log.Info("measuring", "function", phase.name)
		s, err := phase.fn(ctx, b, o, p)
		if err != nil {
			return fmt.Errorf("%s: %w", phase.name, err)
		}
		samples = append(samples, s...)
	}

	log.Info("measuring", "function", "evaluate (webhook trigger)", "trials", o.TriggerTrials)
	tf, err := measureTrigger(ctx, b, o)
	if err != nil {
		return fmt.Errorf("trigger: %w", err)
	}

	rows := summarizeRows(samples, o.Memories, o.Net)
	m := newMeta(o, p, b.Drains, time.Since(began))
	m.Trigger = tf
	// The scale sections (-bed-scale, -scale) and the snapshot file
	// section are carried over.
	old, _ := os.ReadFile(o.Out)
	kept := keptSection(o.Out)
	if err := writeOut(o.Out, func(w io.Writer) error {
		if err := writeMarkdown(w, m, rows); err != nil {
			return err
		}
		for _, sec := range []string{markedSection(string(old), bedScaleBegin, bedScaleEnd), scaleSection(string(old))} {
			if sec == "" {
				continue
			}
			if _, err := io.WriteString(w, "\n"+sec); err != nil {
				return err
			}
		}
		_, err := io.WriteString(w, kept)
		return err
	}); err != nil {
		return err
	}
	log.Info("done", "wrote", o.Out, "took", time.Since(began).Round(time.Second))
	return nil
}

// functionNames are the three functions, as their directories under
// functions/ name them.
var functionNames = []string{"evaluate", "schedule", "drain"}

// buildFunctions builds each of fns's bootstrap for this machine, with the
// Makefile's Lambda flags but this GOARCH, in one go build (it links them
// in parallel).
func buildFunctions(ctx context.Context, root, work string, fns []string, log *slog.Logger) error {
	began := time.Now()
	bin := filepath.Join(work, "bin")
	args := []string{"build", "-trimpath", "-tags", "lambda.norpc", "-ldflags", "-s -w", "-o", bin + "/"}
	for _, fn := range fns {
		args = append(args, "./functions/"+fn)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the functions: %w\n%s", err, b)
	}
	for _, fn := range fns {
		if err := os.MkdirAll(filepath.Join(work, fn), 0o700); err != nil {
			return fmt.Errorf("build the functions: %w", err)
		}
		// go build names a single package's binary by the -o directory
		// too: bin/<fn>.
		if err := os.Rename(filepath.Join(bin, fn), bootstrapPath(work, fn)); err != nil {
			return fmt.Errorf("build the functions: %w", err)
		}
	}
	log.Info("functions built", "took", time.Since(began).Round(time.Millisecond))
	return nil
}

func bootstrapPath(work, fn string) string { return filepath.Join(work, fn, "bootstrap") }

// functionEnv gives a function its own counting proxies, a kubeconfig
// through them and its config.
func (b *bed) functionEnv(fn string, workersMax int) (*proxies, string, error) {
	kube, err := startKubeProxy(b.cp.Config.Host, b.cp.Config.CAData)
	if err != nil {
		return nil, "", err
	}
	ddb, err := startDDBProxy(b.db.Endpoint)
	if err != nil {
		return nil, "", errors.Join(err, kube.close())
	}
	px := &proxies{kube: kube, ddb: ddb}
	kubeconfig := filepath.Join(b.work, fn+".kubeconfig")
	if err := writeKubeconfig(kubeconfig, kube.URL, kube.CAPEM, b.cp.Config.BearerToken); err != nil {
		return nil, "", errors.Join(err, px.close())
	}
	return px, functionConfig(kubeconfig, ddb.URL, workersMax), nil
}

// writeKubeconfig writes a kubeconfig with a bearer token, readable by this
// user only.
func writeKubeconfig(path, server string, caPEM []byte, token string) error {
	kc := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"current-context": "measure",
		"clusters": []map[string]any{{"name": "measure", "cluster": map[string]any{
			"server": server, "certificate-authority-data": caPEM}}},
		"users":    []map[string]any{{"name": "measure", "user": map[string]any{"token": token}}},
		"contexts": []map[string]any{{"name": "measure", "context": map[string]any{"cluster": "measure", "user": "measure"}}},
	}
	// JSON is YAML; []byte marshals to base64, as certificate-authority-data
	// wants.
	data, err := json.Marshal(kc)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	return nil
}

// fnUnderTest is one function under its own emulator.
type fnUnderTest struct {
	name    string
	px      *proxies
	tap     *runtimeTap
	emu     *emulator
	timeout time.Duration
	calls   int
}

// startFunction starts fn under its own emulator; extraEnv adds to what
// Lambda sets.
func (b *bed) startFunction(ctx context.Context, fn string, timeout time.Duration, workersMax int, extraEnv ...string) (*fnUnderTest, error) {
	px, yaml, err := b.functionEnv(fn, workersMax)
	if err != nil {
		return nil, err
	}
	tap, wrapper, err := startRuntimeTap(fn, b.work, bootstrapPath(b.work, fn), px.kube, px.ddb, b.log)
	if err != nil {
		return nil, errors.Join(err, px.close())
	}
	env := append(append(lambdaEnv(fn, timeout), extraEnv...), setup.EnvConfig+"="+yaml)
	emu, err := startEmulator(ctx, b.rie, fn, wrapper, env, b.log)
	if err != nil {
		return nil, errors.Join(err, tap.close(), px.close())
	}
	return &fnUnderTest{name: fn, px: px, tap: tap, emu: emu, timeout: timeout}, nil
}

func (f *fnUnderTest) stop() error {
	return errors.Join(f.emu.stop(), f.tap.close(), f.px.close())
}

// invoke sends one event and returns its samples: the start-up's too on the
// first invocation.
func (f *fnUnderTest) invoke(ctx context.Context, action string, payload []byte) ([]sample, []byte, error) {
	id, resp, err := f.emu.invoke(ctx, payload, f.timeout)
	if err != nil {
		return nil, resp, err
	}
	rep, logged, err := f.emu.report(ctx, id)
	if err != nil {
		return nil, resp, err
	}
	st, calls, err := f.tap.phases()
	if err != nil {
		return nil, resp, err
	}
	i := slices.IndexFunc(calls, func(c tapped) bool { return c.RequestID == id })
	if i < 0 || st == nil {
		return nil, resp, fmt.Errorf("%s: the runtime tap did not see invocation %s", f.name, id)
	}
	var out []sample
	cold := f.calls == 0
	if cold {
		out = append(out, initSample(f.name, *st))
	}
	f.calls++
	out = append(out, sampleOf(f.name, action, cold, calls[i], rep, logged))
	return out, resp, nil
}

func readEvent(root, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, "events", name))
	if err != nil {
		return nil, fmt.Errorf("sample event: %w", err)
	}
	return b, nil
}

// measureEvaluate: scheduled ticks (the watch off), then plans with pending
// pods.
func measureEvaluate(ctx context.Context, b *bed, o options, p clusterPlan) (out []sample, err error) {
	f, err := b.startFunction(ctx, "evaluate", evaluateTimeout, p.Spec.Nodes+50)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.stop()) }()
	tick, err := readEvent(b.root, "evaluate-scheduled.json")
	if err != nil {
		return nil, err
	}
	for range 1 + o.Ticks {
		s, resp, err := f.invoke(ctx, "tick", tick)
		if err != nil {
			return nil, err
		}
		if err := checkTick(resp); err != nil {
			return nil, err
		}
		out = append(out, s...)
	}

	if err := b.createPending(ctx, o.Pending); err != nil {
		return nil, err
	}
	plan, err := readEvent(b.root, "evaluate-plan.json")
	if err != nil {
		return nil, err
	}
	for range o.Plans {
		s, resp, err := f.invoke(ctx, "plan", plan)
		if err != nil {
			return nil, err
		}
		if err := checkPlan(resp); err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, b.deletePending(ctx)
}

// checkTick makes sure a tick was the steady-state cycle it is reported as.
func checkTick(resp []byte) error {
	var r struct {
		Skipped string `json:"skipped"`
		Plan    *struct {
			ScaleUp   []json.RawMessage `json:"scaleUp"`
			ScaleDown []json.RawMessage `json:"scaleDown"`
		} `json:"plan"`
		Actions []json.RawMessage `json:"actions"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return fmt.Errorf("tick result: %w: %s", err, resp)
	}
	if r.Skipped != "" || r.Plan == nil || len(r.Plan.ScaleUp) > 0 || len(r.Plan.ScaleDown) > 0 || len(r.Actions) > 0 {
		return fmt.Errorf("tick did not find the steady state it is measured in: %.500s", resp)
	}
	return nil
}

// checkPlan makes sure the plan scaled the empty group up.
func checkPlan(resp []byte) error {
	var r struct {
		ScaleUp []struct {
			NodeGroup string `json:"nodeGroup"`
			Delta     int    `json:"delta"`
		} `json:"scaleUp"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return fmt.Errorf("plan result: %w: %.500s", err, resp)
	}
	if len(r.ScaleUp) != 1 || r.ScaleUp[0].NodeGroup != "large" || r.ScaleUp[0].Delta < 1 {
		return fmt.Errorf("plan did not scale group large up: %.500s", resp)
	}
	return nil
}

const pendingName = "batch"

// createPending deploys n pods of 12 CPU, more than a worker node has, and
// waits until the scheduler has marked them unschedulable and they are old
// enough to count as pending.
func (b *bed) createPending(ctx context.Context, n int) error {
	replicas := int32(n)
	labels := map[string]string{"app": pendingName}
	_, err := b.client.AppsV1().Deployments("team-0").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: pendingName, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "batch", Image: "registry.example.com/batch:3.0",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("12"), corev1.ResourceMemory: resource.MustParse("8Gi"),
					}},
				}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the pending deployment: %w", err)
	}
	return b.waitPending(ctx, n)
}

// waitPending waits until the scheduler has marked n pending pods
// unschedulable and they are old enough to count as pending.
func (b *bed) waitPending(ctx context.Context, n int) error {
	var since time.Time
	return poll(ctx, 2*time.Minute, "pending pods", func(ctx context.Context) (bool, error) {
		pods, err := b.client.CoreV1().Pods("team-0").List(ctx, metav1.ListOptions{LabelSelector: "app=" + pendingName})
		if err != nil {
			return false, err
		}
		unschedulable := 0
		for _, pod := range pods.Items {
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		if unschedulable < n {
			return false, nil
		}
		if since.IsZero() {
			since = time.Now()
		}
		// scaleUp.pendingPodMinAge is 2 s.
		return time.Since(since) > 3*time.Second, nil
	})
}

func (b *bed) deletePending(ctx context.Context) error {
	fg := metav1.DeletePropagationForeground
	if err := b.client.AppsV1().Deployments("team-0").Delete(ctx, pendingName, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		return fmt.Errorf("delete the pending deployment: %w", err)
	}
	return poll(ctx, 2*time.Minute, "the pending pods to go", func(ctx context.Context) (bool, error) {
		pods, err := b.client.CoreV1().Pods("team-0").List(ctx, metav1.ListOptions{LabelSelector: "app=" + pendingName})
		return err == nil && len(pods.Items) == 0, err
	})
}

// scheduleDoc is a schedule for the put action: it scales a Deployment and
// the workers group to the sizes they have.
func scheduleDoc(name, cron string, d plannedDeployment, nodes int) map[string]any {
	return map[string]any{"action": "put", "schedule": map[string]any{
		"name": name, "cron": cron, "timezone": "Europe/Amsterdam",
		"description":       "measurement: sizes as they are",
		"nodeGroups":        []map[string]any{{"name": workersGroup, "desired": nodes}},
		"appScaleTemplates": []map[string]any{{"app": d.Name, "replicas": d.Replicas}},
	}}
}

// measureSchedule: puts, ticks with nothing due, lists, then ticks that
// fire every schedule.
func measureSchedule(ctx context.Context, b *bed, o options, p clusterPlan) (out []sample, err error) {
	f, err := b.startFunction(ctx, "schedule", scheduleTimeout, p.Spec.Nodes+50)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.stop()) }()
	call := func(action string, payload []byte) ([]byte, error) {
		s, resp, err := f.invoke(ctx, action, payload)
		out = append(out, s...)
		return resp, err
	}
	put := func(cron string) error {
		for i := range o.Schedules {
			doc, err := json.Marshal(scheduleDoc(fmt.Sprintf("measure-%d", i), cron, p.Deployments[i%len(p.Deployments)], p.Spec.Nodes))
			if err != nil {
				return err
			}
			if _, err := call("put", doc); err != nil {
				return err
			}
		}
		return nil
	}
	tick, err := readEvent(b.root, "schedule-scheduled.json")
	if err != nil {
		return nil, err
	}
	list, err := readEvent(b.root, "schedule-list.json")
	if err != nil {
		return nil, err
	}
	// Once a day: never due while this runs.
	if err := put("0 0 3 * * *"); err != nil {
		return nil, err
	}
	for range o.Runs {
		resp, err := call("tick, none due", tick)
		if err != nil {
			return nil, err
		}
		if n, err := firedCount(resp); err != nil || n != 0 {
			return nil, fmt.Errorf("tick with nothing due fired %d (%v): %.500s", n, err, resp)
		}
	}
	for range o.Runs {
		if _, err := call("list", list); err != nil {
			return nil, err
		}
	}
	// Every second: each tick, a second or more after the last, finds every
	// schedule due.
	if err := put("* * * * * *"); err != nil {
		return nil, err
	}
	due := fmt.Sprintf("tick, %d due", o.Schedules)
	for range o.Runs {
		time.Sleep(1100 * time.Millisecond)
		resp, err := call(due, tick)
		if err != nil {
			return nil, err
		}
		if n, err := firedCount(resp); err != nil || n != o.Schedules {
			return nil, fmt.Errorf("tick fired %d of %d schedules (%v): %.500s", n, o.Schedules, err, resp)
		}
	}
	return out, nil
}

// firedCount counts the schedules a tick fired without error.
func firedCount(resp []byte) (int, error) {
	var r struct {
		Schedules []struct {
			Action string   `json:"action"`
			Errors []string `json:"errors"`
		} `json:"schedules"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return 0, fmt.Errorf("tick result: %w", err)
	}
	n := 0
	for _, s := range r.Schedules {
		if s.Action == "fire" && len(s.Errors) == 0 {
			n++
		}
	}
	return n, nil
}

// drainCandidates picks the nodes to drain: those running a single-replica
// Deployment's pod (so the drain surges), busiest first.
func drainCandidates(p clusterPlan, n int) []string {
	single := make([]bool, p.Spec.Nodes)
	for _, d := range p.Deployments {
		if d.Replicas == 1 {
			single[d.Nodes[0]] = true
		}
	}
	idx := make([]int, p.Spec.Nodes)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if single[a] != single[b] {
			if single[a] {
				return -1
			}
			return 1
		}
		return p.NodePods[b] - p.NodePods[a]
	})
	var out []string
	for _, i := range idx[:min(n, len(idx))] {
		out = append(out, nodeName(i))
	}
	return out
}

// measureDrain runs real drains through the state machine, its tasks on
// the drain function under the emulator.
func measureDrain(ctx context.Context, b *bed, o options, p clusterPlan) (out []sample, err error) {
	px, yaml, err := b.functionEnv("drain", p.Spec.Nodes+50)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, px.close()) }()
	tap, wrapper, err := startRuntimeTap("drain", b.work, bootstrapPath(b.work, "drain"), px.kube, px.ddb, b.log)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, tap.close()) }()
	svc, err := sfnlocal.Start(ctx, sfnlocal.Options{
		Functions: []sfnlocal.Function{{
			Name: "drain", Bootstrap: wrapper, Instances: 1, Timeout: drainTimeout,
			Env: []string{setup.EnvConfig + "=" + yaml, "AWS_EC2_METADATA_DISABLED=true"},
		}},
		StateMachines: []sfnlocal.StateMachine{{Name: sfnlocal.DrainStateMachine,
			DefinitionFile: filepath.Join(b.root, "functions", "drain", "statemachine.asl.json")}},
		MaxWait: o.DrainWait,
		Root:    b.root,
	})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, svc.Stop()) }()

	cfg, err := config.Parse([]byte(functionConfig(b.cp.KubeconfigPath, b.db.Endpoint, p.Spec.Nodes+50)), "measure")
	if err != nil {
		return nil, err
	}
	store, err := setup.Store(ctx, cfg, &setup.AWS{})
	if err != nil {
		return nil, err
	}
	client := svc.Client(ctx)
	starter := &drain.Starter{SFN: client, StateMachineArn: svc.StateMachineArn[sfnlocal.DrainStateMachine], Store: store,
		Timeout: 10 * time.Minute, Policy: drain.PolicyAbort, Surge: true}
	for _, node := range drainCandidates(p, o.Drains) {
		began := time.Now()
		ex, err := starter.Shutdown(ctx, drain.ShutdownRequest{Node: node})
		if err != nil {
			return nil, err
		}
		status, err := waitExecution(ctx, client, ex.ExecutionArn)
		if err != nil {
			return nil, err
		}
		if status != sfntypes.ExecutionStatusSucceeded {
			return nil, fmt.Errorf("drain of %s ended %s; function log:\n%s", node, status, lastLines(svc.FunctionLogs("drain"), 40))
		}
		dc, err := countHistory(ctx, client, ex.ExecutionArn)
		if err != nil {
			return nil, err
		}
		b.Drains = append(b.Drains, dc)
		b.log.Info("drained", "node", node, "took", time.Since(began).Round(time.Millisecond),
			"transitions", dc.Transitions, "invocations", dc.Invocations)
	}

	reports, logs := map[string]report{}, newLogAccount()
	sc := bufio.NewScanner(strings.NewReader(svc.FunctionLogs("drain")))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		logs.add(sc.Text())
		if rep, ok, err := parseReport(sc.Text()); ok && err == nil {
			reports[rep.RequestID] = rep
		}
	}
	st, calls, err := tap.phases()
	if err != nil {
		return nil, err
	}
	if st == nil || len(calls) == 0 {
		return nil, errors.New("the runtime tap saw no drain invocation")
	}
	for i, c := range calls {
		rep, ok := reports[c.RequestID]
		if !ok {
			return nil, fmt.Errorf("no REPORT line for drain invocation %s", c.RequestID)
		}
		var ev struct {
			Step string `json:"step"`
		}
		if err := json.Unmarshal(c.Payload, &ev); err != nil || ev.Step == "" {
			return nil, fmt.Errorf("drain invocation %s is not a step: %.200s", c.RequestID, c.Payload)
		}
		if i == 0 {
			out = append(out, initSample("drain", *st))
		}
		out = append(out, sampleOf("drain", "step "+ev.Step, i == 0, c, rep, logs.bytes[c.RequestID]))
	}
	return out, nil
}

func waitExecution(ctx context.Context, client *sfn.Client, arn string) (sfntypes.ExecutionStatus, error) {
	var status sfntypes.ExecutionStatus
	err := poll(ctx, 5*time.Minute, "the drain execution", func(ctx context.Context) (bool, error) {
		out, err := client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
		if err != nil {
			return false, err
		}
		status = out.Status
		return status != sfntypes.ExecutionStatusRunning, nil
	})
	return status, err
}

// countHistory counts an execution's state transitions (every state
// entered, as Step Functions bills them) and its Lambda invocations.
func countHistory(ctx context.Context, client *sfn.Client, arn string) (drainCount, error) {
	var dc drainCount
	pages := sfn.NewGetExecutionHistoryPaginator(client, &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return dc, fmt.Errorf("drain history: %w", err)
		}
		for _, ev := range page.Events {
			switch {
			case strings.HasSuffix(string(ev.Type), "StateEntered"):
				dc.Transitions++
			case ev.Type == sfntypes.HistoryEventTypeLambdaFunctionScheduled:
				dc.Invocations++
			}
		}
	}
	return dc, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// snapshotFileSection heads the section of the measurements that make
// bench measures (the snapshot file); a run of measure keeps it as it is.
const snapshotFileSection = "\n## Snapshot file"

// keptSection is the snapshot file section of the measurements at path,
// or "".
func keptSection(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if i := strings.Index(string(data), snapshotFileSection); i >= 0 {
		return string(data[i:])
	}
	return ""
}
