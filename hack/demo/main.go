// Command demo shows nodetide's evaluate cycle on a local control plane
// (etcd, kube-apiserver, controller-manager, scheduler, kwok) with DynamoDB
// state on dynalite: pending pods, the decision, nodes joining, pods Running;
// then the workload shrinks and unneeded nodes are drained (PDB respected)
// and removed through the drain state machine run locally; last, a night
// schedule caps the group at one node, and evaluate keeps to it.
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
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/setup"
	"github.com/nodetide/nodetide/pkg/state"
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
scaleDown: {unneededTime: 10s, delayAfterAdd: 0s}
drain: {timeout: 2m, onTimeout: abort}
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdout)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted:
		// Ctrl-C: what the demo started has been stopped; that is not a failure.
		fmt.Fprintln(os.Stderr, "demo stopped; everything it started has been removed")
	case err != nil:
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
	logs, err := os.Create(filepath.Join(dir, "evaluate.log"))
	if err != nil {
		return err
	}
	defer logs.Close()
	cfg, a, ev, err := newEvaluator(ctx, dir, cp.KubeconfigPath, db.Endpoint, logs)
	if err != nil {
		return err
	}
	if err := d.scaleUp(ctx, ev); err != nil {
		return err
	}
	return d.scaleDown(ctx, ev, cfg, a, dir)
}

// newEvaluator writes the demo's config into dir, makes its DynamoDB table
// and wires the evaluate cycle, logging to logs.
func newEvaluator(ctx context.Context, dir, kubeconfig, dynamoDB string, logs io.Writer) (*config.Config, *setup.AWS, *evaluate.Evaluator, error) {
	cfgPath := filepath.Join(dir, "nodetide.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(configTemplate, kubeconfig, dynamoDB)), 0o600); err != nil {
		return nil, nil, nil, err
	}
	cfg, err := config.LoadFile(cfgPath)
	if err != nil {
		return nil, nil, nil, err
	}
	a := &setup.AWS{}
	ddb, err := setup.DynamoDBClient(ctx, "", dynamoDB, a)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := state.CreateTable(ctx, ddb, "nodetide"); err != nil {
		return nil, nil, nil, err
	}
	ev, err := setup.Evaluator(ctx, cfg, "", a, slog.New(slog.NewJSONHandler(logs, nil)), "demo")
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, a, ev, nil
}

// scaleUp deploys more than one node holds and lets the cycle add nodes for
// the pending pods.
func (d *demo) scaleUp(ctx context.Context, ev *evaluate.Evaluator) error {
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
	d.showEvents(ctx, "Pod", "TriggeredScaleUp", 2)

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
	return nil
}

// scaleDown shrinks the workload and lets the cycle find the unneeded
// nodes and drain them, one at a time, through the drain state machine run
// locally (the same ASL file the stack deploys, its steps in the drain
// function's bootstrap under the Lambda Runtime Interface Emulator).
func (d *demo) scaleDown(ctx context.Context, ev *evaluate.Evaluator, cfg *config.Config, a *setup.AWS, dir string) error {
	svc, err := d.startLocalDrains(ctx, ev, cfg, a, dir)
	if err != nil {
		return err
	}
	defer svc.Stop()
	if err := d.shrinkWeb(ctx); err != nil {
		return err
	}

	d.step("Evaluate cycles every 3 s: nodes under 50%% whose pods fit elsewhere become unneeded; after 10 s each is drained and removed")
	seen := map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		res, err := ev.Run(ctx)
		if err != nil {
			return err
		}
		nodes, err := d.showCycle(ctx, res, seen)
		if err != nil {
			return err
		}
		// Two nodes are what four 1500m pods need on 4-CPU nodes.
		if len(nodes) == 2 && res.Plan != nil && len(res.Plan.ScaleDown) == 0 && !anyDraining(nodes) {
			if err := d.waitRunning(ctx, "web", 4); err != nil {
				return err
			}
			d.step("Done: the group shrank from 3 nodes to %d; the pod moved through the Eviction API, within the PDB", len(nodes))
			d.showEvents(ctx, "Node", "", 6)
			if err := d.showSpread(ctx); err != nil {
				return err
			}
			if err := d.showExecutions(ctx, svc.Client(ctx), svc.StateMachineArn[sfnlocal.DrainStateMachine]); err != nil {
				return err
			}
			return d.night(ctx, ev, cfg, a)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
	return fmt.Errorf("the group did not shrink to 2 nodes within 3 minutes")
}

// startLocalDrains builds the drain function, starts the drain state
// machine locally and points the cycle's removals at it.
func (d *demo) startLocalDrains(ctx context.Context, ev *evaluate.Evaluator, cfg *config.Config, a *setup.AWS, dir string) (*sfnlocal.Service, error) {
	d.step("Building the drain function for this machine and starting the drain state machine locally")
	root, err := testbed.RepoRoot()
	if err != nil {
		return nil, err
	}
	yaml, err := os.ReadFile(filepath.Join(dir, "nodetide.yaml"))
	if err != nil {
		return nil, err
	}
	svc, err := sfnlocal.StartDrain(ctx, root, string(yaml), 2*time.Second)
	if err != nil {
		return nil, err
	}
	store, err := setup.Store(ctx, cfg, a)
	if err != nil {
		svc.Stop()
		return nil, err
	}
	ds := cfg.DrainSettings()
	ev.Drainer = &drain.Starter{SFN: svc.Client(ctx), StateMachineArn: svc.StateMachineArn[sfnlocal.DrainStateMachine], Store: store,
		Timeout: ds.Timeout, Policy: ds.OnTimeout, Surge: ds.Surge}
	d.say("Step Functions (local) at %s, state machine %s", svc.Endpoint, svc.StateMachineArn[sfnlocal.DrainStateMachine])
	return svc, nil
}

// shrinkWeb scales web to 4 replicas under a PodDisruptionBudget, leaving
// two nodes half empty.
func (d *demo) shrinkWeb(ctx context.Context) error {
	d.step("Scaling %q down to 4 replicas, one pod off each of two nodes, guarded by a PodDisruptionBudget (maxUnavailable 1)", "web")
	one := intstr.FromInt32(1)
	if _, err := d.client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := d.markTwoForRemoval(ctx); err != nil {
		return err
	}
	scale, err := d.client.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	scale.Spec.Replicas = 4
	if _, err := d.client.AppsV1().Deployments("default").UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if err := d.waitCount(ctx, "app=web", 4); err != nil {
		return err
	}
	return d.showSpread(ctx)
}

// showCycle says what a cycle found and did that was not said before
// (seen), and returns the group's nodes.
func (d *demo) showCycle(ctx context.Context, res evaluate.Result, seen map[string]bool) ([]corev1.Node, error) {
	if res.Plan != nil {
		for _, n := range sortedKeys(res.Plan.State.UnneededSince) {
			if !seen["unneeded/"+n] {
				seen["unneeded/"+n] = true
				d.say("node %s unneeded since %s", n, res.Plan.State.UnneededSince[n].Format("15:04:05"))
			}
		}
		for _, down := range res.Plan.ScaleDown {
			d.say("decision: remove %s — %s", down.Node, down.Reason)
		}
	}
	for _, act := range res.Actions {
		if act.Kind == "drain" {
			status := "drain execution started"
			if act.Error != "" {
				status = "drain not started: " + act.Error
			}
			d.say("action: %s %s", status, act.Node)
		}
	}
	nodes, err := d.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=workers"})
	if err != nil {
		return nil, err
	}
	for _, n := range nodes.Items {
		for _, t := range n.Spec.Taints {
			if t.Key == drain.TaintKey && !seen["draining/"+n.Name] {
				seen["draining/"+n.Name] = true
				d.say("node %s cordoned and tainted %s: evicting within the PDB", n.Name, drain.TaintKey)
			}
		}
	}
	return nodes.Items, nil
}

// markTwoForRemoval gives one pod on each of two nodes the lowest deletion
// cost, so the ReplicaSet's scale-down leaves those nodes half empty (it
// would otherwise empty one node, and the demo would have no pod to move).
func (d *demo) markTwoForRemoval(ctx context.Context) error {
	pods, err := d.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return err
	}
	marked := map[string]bool{}
	for _, p := range pods.Items {
		if len(marked) == 2 || marked[p.Spec.NodeName] {
			continue
		}
		patch := []byte(`{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"-100"}}}`)
		if _, err := d.client.CoreV1().Pods("default").Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		marked[p.Spec.NodeName] = true
	}
	return nil
}

func anyDraining(nodes []corev1.Node) bool {
	for _, n := range nodes {
		for _, t := range n.Spec.Taints {
			if t.Key == drain.TaintKey {
				return true
			}
		}
	}
	return false
}

// showSpread prints which node runs which pod of web.
func (d *demo) showSpread(ctx context.Context) error {
	pods, err := d.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			d.say("pod %s on %s (%s)", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
	return nil
}

func (d *demo) waitCount(ctx context.Context, selector string, want int) error {
	return poll(ctx, fmt.Sprintf("%d pods", want), func() (bool, error) {
		pods, err := d.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		live := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live++
			}
		}
		return live == want, nil
	})
}

func (d *demo) showExecutions(ctx context.Context, client *sfn.Client, arn string) error {
	out, err := client.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(arn)})
	if err != nil {
		return err
	}
	for _, e := range out.Executions {
		took := ""
		if e.StopDate != nil && e.StartDate != nil {
			took = e.StopDate.Sub(*e.StartDate).Round(100 * time.Millisecond).String()
		}
		d.say("execution %s: %s in %s", aws.ToString(e.Name), e.Status, took)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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

// showEvents prints up to n of nodetide's Kubernetes Events on objects of
// kind (of reason, if given), as kubectl describe shows them.
func (d *demo) showEvents(ctx context.Context, kind, reason string, n int) {
	sel := fields.Set{"involvedObject.kind": kind, "source": "nodetide"}
	if reason != "" {
		sel["reason"] = reason
	}
	list, err := d.client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		d.say("events: %v", err)
		return
	}
	evs := list.Items
	// In the order written: resource versions grow with every write.
	rv := func(i int) int { v, _ := strconv.Atoi(evs[i].ResourceVersion); return v }
	sort.Slice(evs, func(i, j int) bool { return rv(i) < rv(j) })
	if len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	for _, e := range evs {
		d.say("event on %s %s: %s %s: %s", strings.ToLower(kind), e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
	}
}

// night fires a schedule by hand, as `nodetide schedules run night` does:
// it caps the group at one node, which drains the surplus, and scales the
// app down; evaluate then keeps to the cap until the schedule is deleted.
func (d *demo) night(ctx context.Context, ev *evaluate.Evaluator, cfg *config.Config, a *setup.AWS) error {
	d.step("A night schedule: %q at max 1 node, %q at 2 replicas; fired now, by hand", "workers", "web")
	h, err := setup.SchedulesWith(ctx, cfg, a, ev, ev.Log)
	if err != nil {
		return err
	}
	two := int32(2)
	night := schedule.Schedule{Name: "night", Cron: "0 20 * * *", Timezone: "Europe/Amsterdam",
		NodeGroups: []schedule.NodeGroup{{Name: "workers", Max: &[]int{1}[0]}},
		Apps:       []schedule.App{{Namespace: "default", Kind: schedule.KindDeployment, Name: "web", Replicas: &two}}}
	if _, err := h.Put(ctx, night); err != nil {
		return err
	}
	res, err := h.Run(ctx, "night")
	if err != nil {
		return err
	}
	for _, c := range res.Changes {
		from := "?"
		if c.From != nil {
			from = fmt.Sprint(*c.From)
		}
		line := fmt.Sprintf("%s %s: %s -> %d %s", c.Kind, c.Name, from, c.To, c.Outcome)
		if c.Message != "" {
			line += ": " + c.Message
		}
		d.say("%s", line)
	}
	if err := res.Err(); err != nil {
		return err
	}
	if err := poll(ctx, "the group down to 1 node", func() (bool, error) {
		nodes, err := d.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=workers"})
		return err == nil && len(nodes.Items) == 1, err
	}); err != nil {
		return err
	}
	d.say("the surplus node drained and removed")
	if err := d.waitRunning(ctx, "web", 2); err != nil {
		return err
	}

	d.step("Morning traffic before the day schedule: %q back to 4 replicas; evaluate keeps to the night's max", "web")
	if err := d.scaleWeb(ctx, 4); err != nil {
		return err
	}
	if err := d.waitPending(ctx, 2); err != nil {
		return err
	}
	run, err := ev.Run(ctx)
	if err != nil {
		return err
	}
	d.showPlan(run)
	d.showEvents(ctx, "Pod", "NotTriggerScaleUp", 1)

	d.step("Deleting the night schedule gives %q its configured bounds back; the next cycle grows it", "workers")
	del, err := h.Delete(ctx, "night")
	if err != nil {
		return err
	}
	d.say("deleted; node groups back to their configured bounds: %s", strings.Join(del.ClearedOverrides, ", "))
	run, err = ev.Run(ctx)
	if err != nil {
		return err
	}
	d.showPlan(run)
	if err := d.waitNodes(ctx, 2); err != nil {
		return err
	}
	return d.waitRunning(ctx, "web", 4)
}

func (d *demo) scaleWeb(ctx context.Context, replicas int32) error {
	sc, err := d.client.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	sc.Spec.Replicas = replicas
	_, err = d.client.AppsV1().Deployments("default").UpdateScale(ctx, "web", sc, metav1.UpdateOptions{})
	return err
}
