// Command demo shows nodetide's evaluate cycle on a local control plane
// (etcd, kube-apiserver, controller-manager, scheduler, kwok) with DynamoDB
// state on dynalite: pending pods, the decision, nodes joining, pods Running.
// It stops everything it started, also on Ctrl-C. Run it with `make demo`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/setup"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/testbed"
)

const configTemplate = `cluster:
  name: demo
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
scaleUp: {pendingPodMinAge: 2s}
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo failed: %v\n", err)
		os.Exit(1)
	}
}

type demo struct {
	out    io.Writer
	start  time.Time
	client kubernetes.Interface
}

func (d *demo) step(format string, args ...any) {
	fmt.Fprintf(d.out, "\n[%5.1fs] ▸ %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "          %s\n", fmt.Sprintf(format, args...))
}

func run(ctx context.Context, out io.Writer) (err error) {
	d := &demo{out: out, start: time.Now()}
	d.step("Starting a local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) and dynalite")
	cp, err := testbed.Start(ctx)
	if err != nil {
		return err
	}
	defer func() {
		d.step("Stopping everything the demo started")
		err = errors.Join(err, cp.Stop())
	}()
	db, err := testbed.StartDynalite(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Stop()) }()
	d.client = cp.Client
	d.say("API server ready; DynamoDB (dynalite) at %s", db.Endpoint)

	dir, err := os.MkdirTemp("", "nodetide-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgPath := filepath.Join(dir, "nodetide.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(configTemplate, cp.KubeconfigPath, db.Endpoint)), 0o600); err != nil {
		return err
	}
	cfg, err := config.LoadFile(cfgPath)
	if err != nil {
		return err
	}
	a := &setup.AWS{}
	ddb, err := setup.DynamoDBClient(ctx, "", db.Endpoint, a)
	if err != nil {
		return err
	}
	if err := state.CreateTable(ctx, ddb, "nodetide"); err != nil {
		return err
	}
	logs, err := os.Create(filepath.Join(dir, "evaluate.log"))
	if err != nil {
		return err
	}
	defer logs.Close()
	ev, err := setup.Evaluator(ctx, cfg, "", a, slog.New(slog.NewJSONHandler(logs, nil)), "demo")
	if err != nil {
		return err
	}

	d.step("Node group %q: kwok, min 1, max 5, each node 4 CPU / 16Gi; adding its first node", "workers")
	if _, err := ev.Add(ctx, "workers", 1); err != nil {
		return err
	}
	if err := d.waitNodes(ctx, 1); err != nil {
		return err
	}

	d.step("Deploying %q: 6 replicas × 1500m CPU / 2Gi — one node holds 2, so 4 cannot be scheduled", "web")
	if err := d.deploy(ctx, "web", 6); err != nil {
		return err
	}
	if err := d.waitPending(ctx, 4); err != nil {
		return err
	}

	d.step("Evaluate cycle: snapshot → plan → act")
	res, err := ev.Run(ctx)
	if err != nil {
		return err
	}
	d.showPlan(res)

	d.step("Nodes joining (kwok marks them Ready)")
	if err := d.waitNodes(ctx, 3); err != nil {
		return err
	}
	d.step("Pods running")
	if err := d.waitRunning(ctx, "web", 6); err != nil {
		return err
	}

	d.step("Evaluate cycle again: nothing pending, nothing to add")
	res, err = ev.Run(ctx)
	if err != nil {
		return err
	}
	d.showPlan(res)
	d.step("Done: %d pods Running on %d nodes. Scale-down (drains) is planned and logged, not yet acted on.", 6, 3)
	return nil
}

func (d *demo) deploy(ctx context.Context, name string, replicas int32) error {
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"pool": "workers"},
					Containers: []corev1.Container{{
						Name: "web", Image: "nginx",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("1500m"),
							corev1.ResourceMemory: resource.MustParse("2Gi"),
						}},
					}},
				},
			},
		},
	}
	_, err := d.client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{})
	return err
}

// poll calls check every 250 ms until it reports done, for at most a minute.
func poll(ctx context.Context, what string, check func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (d *demo) waitNodes(ctx context.Context, want int) error {
	seen := map[string]bool{}
	return poll(ctx, fmt.Sprintf("%d ready nodes", want), func() (bool, error) {
		nodes, err := d.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=workers"})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
					if !seen[n.Name] {
						seen[n.Name] = true
						d.say("node %s Ready (providerID %s)", n.Name, n.Spec.ProviderID)
					}
				}
			}
		}
		return ready >= want, nil
	})
}

func (d *demo) waitPending(ctx context.Context, want int) error {
	return poll(ctx, fmt.Sprintf("%d unschedulable pods", want), func() (bool, error) {
		pods, err := d.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var pending []string
		msg := ""
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					pending = append(pending, p.Name)
					msg = c.Message
				}
			}
		}
		if len(pending) < want {
			return false, nil
		}
		d.say("%d pods Pending, scheduler says: %s", len(pending), msg)
		for _, p := range pending {
			d.say("  %s", p)
		}
		// Let them age past scaleUp.pendingPodMinAge, as on a real cluster.
		time.Sleep(2 * time.Second)
		return true, nil
	})
}

func (d *demo) waitRunning(ctx context.Context, app string, want int) error {
	last := -1
	return poll(ctx, fmt.Sprintf("%d running pods", want), func() (bool, error) {
		pods, err := d.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running != last {
			d.say("%d/%d pods Running", running, want)
			last = running
		}
		return running >= want, nil
	})
}

func (d *demo) showPlan(res evaluate.Result) {
	if res.Plan == nil {
		d.say("skipped: %s", res.Skipped)
		return
	}
	p := *res.Plan
	tw := tabwriter.NewWriter(d.out, 0, 4, 2, ' ', 0)
	for _, g := range p.NodeGroups {
		fmt.Fprintf(tw, "          group %s\tnodes %d\ttarget %d\tcpu %.0f%%\tmemory %.0f%%\n", g.Name, g.Nodes, g.TargetSize, 100*g.CPUUtilization, 100*g.MemoryUtilization)
	}
	tw.Flush()
	if len(p.ScaleUp) == 0 {
		d.say("decision: no scale-up")
	}
	for _, u := range p.ScaleUp {
		d.say("decision: scale up %s by %d to %d — %s", u.NodeGroup, u.Delta, u.NewTargetSize, u.Reason)
		d.say("          for pods %s", strings.Join(u.Pods, ", "))
	}
	for _, u := range p.Unschedulable {
		d.say("still unschedulable: %s — %s", u.Pod, u.Reason)
	}
	for _, a := range res.Actions {
		status := "done"
		if a.Error != "" {
			status = "failed: " + a.Error
		}
		d.say("action: %s %s %+d %s", a.Kind, a.NodeGroup, a.Delta, status)
	}
}
