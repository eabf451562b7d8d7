// Command up keeps a local nodetide cluster running for `make up`: the test
// bed's control plane (etcd, kube-apiserver, controller-manager, scheduler,
// kwok), dynalite for state, and the drain state machine run locally (its
// steps in the drain function under the Lambda Runtime Interface Emulator).
// It writes a config for the CLI and the functions, a kubeconfig and an env
// file, then waits for SIGTERM or SIGINT (`make down`) and stops everything.
// Its children die with it, so even a crashed or killed up leaves nothing
// running.
//
// hack/up.sh starts it in the background and keeps its pid; run it through
// `make up` / `make down`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/setup"
	"github.com/nodetide/nodetide/pkg/state"
)

// sampleNode is the node the sample events in events/ name; the bed has it,
// so `make invoke` acts on a real node.
const sampleNode = "ip-10-0-12-34.eu-west-1.compute.internal"

// The local config. Group names match the sample events (workers, gpu); the
// timings are short so that a scale-down shows within minutes.
const configTemplate = `# Written by make up for the local cluster; make down removes it.
cluster:
  name: local
  kubernetes: {kubeconfig: %s}
state: {dynamodb: {table: nodetide, endpoint: %s}}
nodeGroups:
  - name: workers
    provider: kwok
    minSize: 1
    maxSize: 5
    kwok:
      template:
        allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
        labels: {pool: workers}
  - name: gpu
    provider: kwok
    minSize: 0
    maxSize: 4
    kwok:
      template:
        allocatable: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "1"}
        labels: {pool: gpu}
        taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
scaleUp: {pendingPodMinAge: 5s}
scaleDown: {unneededTime: 1m, delayAfterAdd: 1m}
drain: {timeout: 5m, onTimeout: abort}
`

func main() {
	dir := flag.String("dir", ".nodetide-up", "directory for the kubeconfig, env file and ready file")
	cfgPath := flag.String("config", "nodetide.local.yaml", "config file to write")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *dir, *cfgPath, log)
	stop()
	if err != nil {
		log.Error("local cluster", "error", err.Error())
		os.Exit(1)
	}
	log.Info("local cluster stopped")
}

func run(ctx context.Context, dir, cfgPath string, log *slog.Logger) (err error) {
	root, err := testbed.RepoRoot()
	if err != nil {
		return err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	if cfgPath, err = filepath.Abs(cfgPath); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	var written files
	defer func() { err = errors.Join(err, written.remove()) }()

	log.Info("starting the control plane")
	cp, err := testbed.Start(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	log.Info("starting dynalite")
	db, err := testbed.StartDynalite(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Stop()) }()

	kubeconfig := filepath.Join(dir, "kubeconfig")
	yaml, cfg, err := prepare(ctx, &written, cp, db, kubeconfig, cfgPath)
	if err != nil {
		return err
	}

	log.Info("starting the drain state machine (building the drain function)")
	// Waits and retry pauses capped at 2 s, as in the demo, so a drain by
	// hand ends in seconds rather than minutes.
	svc, err := sfnlocal.StartDrain(ctx, root, yaml, 2*time.Second)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.Stop()) }()

	if err := written.write(cfgPath, yaml); err != nil {
		return err
	}
	arn := svc.StateMachineArn[sfnlocal.DrainStateMachine]
	env := filepath.Join(dir, "env")
	if err := written.write(env, envFile(kubeconfig, cfgPath, arn, svc.Endpoint)); err != nil {
		return err
	}
	// The ready file last: hack/up.sh waits for it and prints it.
	if err := written.write(filepath.Join(dir, "ready"), usage(root, cfgPath, env, db.Endpoint, svc.Endpoint)); err != nil {
		return err
	}
	log.Info("local cluster up", "config", cfgPath, "dynamodb", db.Endpoint, "stepFunctions", svc.Endpoint)
	keepSampleNode(ctx, cp.Client, cfg, log)
	log.Info("stopping")
	return nil
}

// files are what a run writes. They go when it ends, so a stale file never
// describes a cluster that is gone.
type files []string

func (f *files) write(path, content string) error {
	*f = append(*f, path)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func (f files) remove() error {
	var errs []error
	for _, path := range f {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// prepare copies the admin kubeconfig to kubeconfig, makes the local config
// (returned as written and parsed), its DynamoDB table and the cluster's
// first objects.
func prepare(ctx context.Context, written *files, cp *testbed.ControlPlane, db *testbed.Dynalite, kubeconfig, cfgPath string) (string, *config.Config, error) {
	kc, err := os.ReadFile(cp.KubeconfigPath)
	if err != nil {
		return "", nil, fmt.Errorf("read the admin kubeconfig: %w", err)
	}
	if err := written.write(kubeconfig, string(kc)); err != nil {
		return "", nil, err
	}
	yaml := fmt.Sprintf(configTemplate, kubeconfig, db.Endpoint)
	cfg, err := config.Parse([]byte(yaml), cfgPath)
	if err != nil {
		return "", nil, fmt.Errorf("the local config: %w", err)
	}
	ddb, err := setup.DynamoDBClient(ctx, "", db.Endpoint, &setup.AWS{})
	if err != nil {
		return "", nil, err
	}
	if err := state.CreateTable(ctx, ddb, cfg.State.DynamoDB.Table); err != nil {
		return "", nil, err
	}
	if err := seed(ctx, cp.Client, cfg); err != nil {
		return "", nil, err
	}
	return yaml, cfg, nil
}

// seed gives the bed what the CLI and the sample events act on: one
// workers node, the node the sample events name, and the Deployment the
// sample schedule scales.
func seed(ctx context.Context, client kubernetes.Interface, cfg *config.Config) error {
	tpl, err := kwok.BlockOf(cfg.NodeGroups[0].Entry()).Template.Planner()
	if err != nil {
		return fmt.Errorf("the workers template: %w", err)
	}
	for _, name := range []string{"workers-local", sampleNode} {
		if _, err := client.CoreV1().Nodes().Create(ctx, kwok.NodeObject("workers", name, tpl), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	replicas := int32(2)
	labels := map[string]string{"app": "todo"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "todo", Namespace: metav1.NamespaceDefault},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "todo", Image: "todo",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("500m"),
						corev1.ResourceMemory: resource.MustParse("512Mi"),
					}},
				}}},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create deployment todo: %w", err)
	}
	return nil
}

// keepSampleNode puts the node the sample events name back once a drain
// (events/drain-shutdown.json) has removed it, as a cloud would replace a
// machine, so make invoke can run again. It returns when ctx ends.
func keepSampleNode(ctx context.Context, client kubernetes.Interface, cfg *config.Config, log *slog.Logger) {
	tpl, err := kwok.BlockOf(cfg.NodeGroups[0].Entry()).Template.Planner()
	if err != nil {
		log.Error("sample node", "error", err.Error())
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_, err := client.CoreV1().Nodes().Get(ctx, sampleNode, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			continue
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, kwok.NodeObject("workers", sampleNode, tpl), metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
			log.Warn("re-create the sample node", "error", err.Error())
			continue
		}
		log.Info("sample node re-created", "node", sampleNode)
	}
}

// envFile is what `source .nodetide-up/env` sets: kubectl's cluster, the
// functions' config, and the local drain state machine (Step Functions with
// placeholder credentials, which the local service does not check).
func envFile(kubeconfig, cfgPath, arn, sfnEndpoint string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The local nodetide cluster (make up); make down removes this file.\n")
	for _, kv := range [][2]string{
		{"KUBECONFIG", kubeconfig},
		{setup.EnvConfigFile, cfgPath},
		{setup.EnvDrainStateMachine, arn},
		{"AWS_ENDPOINT_URL_SFN", sfnEndpoint},
		{"AWS_REGION", sfnlocal.Region},
		{"AWS_ACCESS_KEY_ID", "local"},
		{"AWS_SECRET_ACCESS_KEY", "local"},
	} {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func usage(root, cfgPath, env, ddb, sfn string) string {
	rel := func(p string) string {
		if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return p
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("Local cluster up: node groups workers (1 to 5 nodes) and gpu (0 to 4), kwok nodes.")
	w("  DynamoDB (dynalite)  %s", ddb)
	w("  Step Functions       %s (the drain state machine)", sfn)
	w("")
	w("In a shell (it sets KUBECONFIG, the drain state machine and placeholder AWS keys for it):")
	w("  source %s", rel(env))
	w("  make build")
	w("  bin/nodetide nodes --config %s", rel(cfgPath))
	w("  bin/nodetide config validate --config %s", rel(cfgPath))
	w("  bin/nodetide add workers 1 --config %s", rel(cfgPath))
	w("  bin/nodetide run --config %s --interval 10s", rel(cfgPath))
	w("  kubectl get nodes")
	w("  make invoke          # every sample event in events/, through the functions under the Lambda RIE")
	w("  make down            # stop everything")
	return b.String()
}
