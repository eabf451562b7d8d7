package main

// evaluate at scale on the test bed (-bed-scale N): the real control plane
// (etcd, kube-apiserver, controller-manager, scheduler; kwok faking the
// kubelets) holding N nodes and 30 pods a node of Deployments, ReplicaSets,
// a DaemonSet and PodDisruptionBudgets, with a few pods no node fits; the
// evaluate bootstrap under the Lambda Runtime Interface Emulator plans
// against it cold, then warm, then ticks. Its figures are the process's, as
// in the main table.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	bedScaleBegin = "<!-- bed scale: written by make measure (go run ./hack/measure -bed-scale ...) -->"
	bedScaleEnd   = "<!-- bed scale end -->"
	// bedPodsPerNode: 29 Deployment pods and the DaemonSet's one, as the
	// API double's clusters have 30.
	bedPodsPerNode = 30
	// bedEvaluateTimeout: a cold read of tens of thousands of pods on a
	// shared machine is measured, not cut off.
	bedEvaluateTimeout = 5 * time.Minute
	// bedSeedWorkers write the cluster in parallel; the API server, not
	// the client, is the limit.
	bedSeedWorkers = 32
	// bedSettle bounds the wait for kwok to run the pods: the run
	// measures the cluster as it is then, and says so.
	bedSettle = 3 * time.Minute
)

// bedScaleSpec is the cluster of nodes nodes a -bed-scale run builds: the
// main run's shape, 30 pods a node.
func bedScaleSpec(nodes int) clusterSpec {
	return clusterSpec{Nodes: nodes, Pods: nodes * (bedPodsPerNode - 1), PodsPerDeployment: 20, Namespaces: 10,
		Utilization: 0.55, SingleFraction: 0.1, PDBFraction: 0.3, Seed: 1}
}

// bedScaleRun is what a -bed-scale run measured.
type bedScaleRun struct {
	Cluster  clusterSummary
	Pending  int
	Pods     podStates // when evaluate ran
	Samples  []sample
	Seeding  time.Duration
	Elapsed  time.Duration
	MemoryMB int
}

// podStates counts the cluster's pods by phase, and the Running ones kwok
// has marked Ready.
type podStates struct {
	Total, Running, Ready, Pending, Other int
}

// runBedScale builds the cluster on the test bed, measures evaluate against
// it and writes the bed scale section of o.Out.
func runBedScale(ctx context.Context, o options, log *slog.Logger) (err error) {
	began := time.Now()
	p, err := planCluster(bedScaleSpec(o.BedScale))
	if err != nil {
		return err
	}
	b, stop, err := startBed(ctx, []string{"evaluate"}, log)
	if err != nil {
		return errors.Join(err, stop())
	}
	defer func() { err = errors.Join(err, stop()) }()

	seedBegan := time.Now()
	if err := b.seed(ctx, p, true, bedSeedWorkers, true, bedSettle); err != nil {
		return err
	}
	run := bedScaleRun{Cluster: p.summary(true), Pending: o.Pending, Seeding: time.Since(seedBegan), MemoryMB: o.BedMemoryMB}

	log.Info("measuring", "function", "evaluate", "nodes", p.Spec.Nodes)
	if run.Samples, run.Pods, err = measureEvaluateAtScale(ctx, b, o, p); err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	run.Elapsed = time.Since(began)
	return writeSection(o.Out, bedScaleBegin, bedScaleEnd, bedScaleMarkdown(run))
}

// measureEvaluateAtScale: with the pending pods, a cold plan and a warm
// one; without them, two warm ticks (the steady state).
func measureEvaluateAtScale(ctx context.Context, b *bed, o options, p clusterPlan) (out []sample, pods podStates, err error) {
	f, err := b.startFunction(ctx, "evaluate", bedEvaluateTimeout, p.Spec.Nodes+50,
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d", o.BedMemoryMB))
	if err != nil {
		return nil, pods, err
	}
	defer func() { err = errors.Join(err, f.stop()) }()
	if err := b.writePending(ctx, o.Pending); err != nil {
		return nil, pods, err
	}
	if pods, err = countPods(ctx, b.client); err != nil {
		return nil, pods, err
	}
	calls := []struct {
		action, event string
		check         func([]byte) error
	}{
		{"plan", "evaluate-plan.json", checkPlan},
		{"plan", "evaluate-plan.json", checkPlan},
		{"tick", "evaluate-scheduled.json", checkTick},
		{"tick", "evaluate-scheduled.json", checkTick},
	}
	for i, c := range calls {
		if c.action == "tick" && calls[i-1].action != "tick" {
			if err := b.removePending(ctx); err != nil {
				return nil, pods, err
			}
		}
		event, err := readEvent(b.root, c.event)
		if err != nil {
			return nil, pods, err
		}
		s, resp, err := f.invoke(ctx, c.action, event)
		if err != nil {
			return nil, pods, err
		}
		if err := c.check(resp); err != nil {
			return nil, pods, err
		}
		out = append(out, s...)
	}
	return out, pods, nil
}

// writePending writes n pods of 12 CPU, more than a worker node has, owned
// by a ReplicaSet written with them, and waits until the scheduler has
// marked them unschedulable and they are old enough to count as pending.
// Through a Deployment, as the main run makes them, they would wait behind
// the controller-manager's backlog of thousands of status updates.
func (b *bed) writePending(ctx context.Context, n int) error {
	d := plannedDeployment{Name: pendingName, Namespace: "team-0", Replicas: n, CPUMilli: 12000, MemoryMi: 8192}
	tpl := podTemplate(d)
	tpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "pending"
	replicas := int32(n)
	rs, err := b.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: pendingName, Namespace: d.Namespace, Labels: tpl.Labels},
		Spec:       appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the pending pods' ReplicaSet: %w", err)
	}
	isController := true
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", pendingName, i), Namespace: d.Namespace, Labels: tpl.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
					Controller: &isController, BlockOwnerDeletion: &isController}}},
			Spec: *tpl.Spec.DeepCopy(),
		}
		if _, err := b.client.CoreV1().Pods(d.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pending pod %s: %w", pod.Name, err)
		}
	}
	return b.waitPending(ctx, n)
}

// removePending deletes the pending pods and their ReplicaSet and waits
// until they are gone (unbound, they go at once).
func (b *bed) removePending(ctx context.Context) error {
	if err := b.client.AppsV1().ReplicaSets("team-0").Delete(ctx, pendingName, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete the pending pods' ReplicaSet: %w", err)
	}
	sel := metav1.ListOptions{LabelSelector: "app=" + pendingName}
	if err := b.client.CoreV1().Pods("team-0").DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return fmt.Errorf("delete the pending pods: %w", err)
	}
	return poll(ctx, 2*time.Minute, "the pending pods to go", func(ctx context.Context) (bool, error) {
		pods, err := b.client.CoreV1().Pods("team-0").List(ctx, sel)
		return err == nil && len(pods.Items) == 0, err
	})
}

// countPods counts every pod by phase.
func countPods(ctx context.Context, client kubernetes.Interface) (podStates, error) {
	var st podStates
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return st, fmt.Errorf("count the pods: %w", err)
	}
	for i := range list.Items {
		pod := &list.Items[i]
		st.Total++
		switch pod.Status.Phase {
		case corev1.PodRunning:
			st.Running++
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					st.Ready++
				}
			}
		case corev1.PodPending:
			st.Pending++
		default:
			st.Other++
		}
	}
	return st, nil
}

// writeSection replaces the section between begin and end of the document
// at path (or writes it to standard output for "-").
func writeSection(path, begin, end, section string) error {
	if path == "-" {
		fmt.Print(section)
		return nil
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return writeOut(path, func(w io.Writer) error {
		_, err := io.WriteString(w, withSection(string(old), begin, end, section))
		return err
	})
}

func bedScaleMarkdown(r bedScaleRun) string {
	var b strings.Builder
	c := r.Cluster
	fmt.Fprintln(&b, bedScaleBegin)
	fmt.Fprintf(&b, "## Scale on the test bed: evaluate at %d nodes\n\n", c.Nodes)
	fmt.Fprintf(&b, "Measured on %s with %s %s/%s, %d CPUs (%s). `go run ./hack/measure -bed-scale %d` (part of `make measure`); "+
		"the run took %s, %s of it building the cluster.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(),
		c.Nodes, r.Elapsed.Round(time.Second), r.Seeding.Round(time.Second))
	fmt.Fprintf(&b, "The test bed's real control plane (etcd, kube-apiserver, controller-manager, scheduler; kwok fakes the "+
		"kubelets) holds %d nodes (%s CPU, %s memory, %d pods each) and %d pods: %d of %d Deployments over %d namespaces, "+
		"each with its ReplicaSet, owner references, requests and labels (%d single-replica), %d of a DaemonSet, "+
		"%d PodDisruptionBudgets, CPU requests %.0f%% of allocatable on average; plus %d pending pods of 12 CPU that no "+
		"node fits. The running pods are bound to their nodes as written (the scheduler places the DaemonSet's and the "+
		"pending ones); kwok runs them. The Deployments stay paused as written (the Deployment controller, at its 20 requests "+
		"a second, would take many minutes to count %d ReplicaSets; evaluate reads pods, not Deployments). When evaluate ran, of %d pods %d were Running (%d of them Ready), %d Pending, %d in "+
		"another phase.\n\n",
		c.Nodes, c.NodeCPU, c.NodeMemory, c.NodePods, c.Pods(), c.DeploymentPods, c.Deployments, c.Namespaces,
		c.SingleReplica, c.DaemonSetPods, c.PDBs, 100*c.CPUUtilization, r.Pending, c.Deployments,
		r.Pods.Total, r.Pods.Running, r.Pods.Ready, r.Pods.Pending, r.Pods.Other)
	if r.Pods.Pending > r.Pending {
		fmt.Fprintf(&b, "kwok had not caught up when the wait for it ended (after %s): it marks pods Running at a few "+
			"tens a second on this machine, so the bound pods still Pending were being marked Running as evaluate ran, "+
			"and the warm reads catch up on those changes too. Bound, a pending pod counts on its node as a running one "+
			"does, so the plan's work is the same.\n\n", bedSettle)
	}
	fmt.Fprintf(&b, "The evaluate bootstrap, built as for Lambda but for this machine, runs under the Lambda Runtime Interface "+
		"Emulator told it has %d MB (so `GOMEMLIMIT` is what Lambda's start-up sets), its API traffic through a counting "+
		"proxy: `{\"action\":\"plan\"}` cold (the first invocation: a LIST of every node, pod and PodDisruptionBudget) and "+
		"warm (a catch-up by watch), then, the pending pods gone, two scheduled ticks (the steady state: nothing to act on). "+
		"Columns as in the main table: **duration** the emulator's, **CPU** the process's user + system time, **peak RSS** "+
		"its VmHWM over the invocation (over the process's life for the first). A warm read waits about a second for the "+
		"API server's watch bookmark, which is duration, not CPU.\n\n", r.MemoryMB)
	fmt.Fprintln(&b, "| invocation | duration | CPU | peak RSS | Kubernetes requests | Kubernetes KiB |")
	fmt.Fprintln(&b, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for i, s := range r.Samples {
		name := s.Action
		switch {
		case s.Action == actionInit:
		case i == 1:
			name += " (cold)"
		default:
			name += " (warm)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %s |\n", name, ms(s.Wall), ms(s.CPU), mib(s.PeakRSS), s.KubeRequests, kib(s.KubeBytes))
	}
	fmt.Fprintln(&b, bedScaleEnd)
	return b.String()
}
