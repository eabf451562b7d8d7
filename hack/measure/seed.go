package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// seeder creates the planned cluster.
//
// The controller-manager's API client is limited to 20 requests a second
// (its default), so letting the ReplicaSet controller create thousands of
// pods would take minutes. Instead the controller-manager is paused while
// the seeder writes, for each Deployment, the Deployment, the ReplicaSet
// its controller would make (owned by it, template equal but for
// pod-template-hash, which is how the Deployment controller finds its
// ReplicaSet) and the pods that ReplicaSet would own, already bound to
// their nodes. Resumed, the controllers find every object as they would
// have made it and only fill in status; kwok runs the pods.
type seeder struct {
	client   kubernetes.Interface
	template snapshot.Template
	log      *slog.Logger
	workers  int
	// slack multiplies the waits for the controllers and kwok: a larger
	// cluster takes them longer to catch up with (0 counts as 1).
	slack int
	// keepPaused leaves the Deployments paused and waits on their
	// ReplicaSets instead: the Deployment controller, at its 20 requests a
	// second, takes many minutes to count thousands of ReplicaSets, and
	// paused Deployments are as the planner reads them (it reads pods).
	keepPaused bool
	// settle, when set, bounds the wait for the controllers and kwok to
	// catch up: the cluster is then measured as it is. kwok marks about
	// 20 pods a second Running on a busy 2-core machine, so 30,000 pods
	// take it half an hour.
	settle time.Duration
}

// wait is d stretched by the seeder's slack.
func (s *seeder) wait(d time.Duration) time.Duration { return d * time.Duration(max(1, s.slack)) }

const seedWorkers = 8

// forEach runs fn for 0..n-1 on the seeder's workers, returning the errors.
func (s *seeder) forEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range max(1, s.workers) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					cancel()
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if len(errs) > 3 {
		errs = append(errs[:3], fmt.Errorf("and %d more errors", len(errs)-3))
	}
	return errors.Join(errs...)
}

// seed creates the cluster and waits until the controllers have caught up.
func (s *seeder) seed(ctx context.Context, p clusterPlan, daemonSet bool) error {
	began := time.Now()
	err := s.forEach(ctx, p.Spec.Nodes, func(ctx context.Context, i int) error {
		_, err := s.client.CoreV1().Nodes().Create(ctx, kwok.NodeObject(workersGroup, nodeName(i), s.template), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", nodeName(i), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range p.Spec.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%d", i)}}
		if _, err := s.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns.Name, err)
		}
	}
	// Pods are refused until their namespace's default ServiceAccount
	// exists, which the controller-manager creates; kwok runs pods only on
	// nodes it has made Ready.
	if err := s.waitServiceAccounts(ctx, p.Spec.Namespaces); err != nil {
		return err
	}
	if err := s.waitNodesReady(ctx, p.Spec.Nodes, false); err != nil {
		return err
	}
	s.log.Info("nodes ready", "nodes", p.Spec.Nodes, "took", time.Since(began).Round(time.Millisecond))

	cm, err := controllerManagerPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(cm, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause the controller-manager: %w", err)
	}
	paused := time.Now()
	resume := func() error {
		if err := syscall.Kill(cm, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("resume the controller-manager: %w", err)
		}
		return nil
	}
	err = s.forEach(ctx, len(p.Deployments), func(ctx context.Context, i int) error {
		return s.createDeployment(ctx, p.Deployments[i])
	})
	if rerr := resume(); rerr != nil {
		return errors.Join(err, rerr)
	}
	if err != nil {
		return err
	}
	s.log.Info("deployments written", "deployments", len(p.Deployments), "pods", p.summary(false).DeploymentPods,
		"controller-manager paused for", time.Since(paused).Round(time.Millisecond))
	if !s.keepPaused {
		if err := s.unpause(ctx, p); err != nil {
			return err
		}
	}
	if daemonSet {
		if err := s.createDaemonSet(ctx); err != nil {
			return err
		}
	}
	if err := s.waitSettled(ctx, p, daemonSet); err != nil {
		if s.settle == 0 || !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return err
		}
		s.log.Info("the cluster has not settled; measuring it as it is", "waited", s.settle, "status", err)
	}
	if err := s.waitNodesReady(ctx, p.Spec.Nodes, true); err != nil {
		return err
	}
	s.log.Info("cluster settled", "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// controllerManagerPID finds the test bed's controller-manager: a child of
// this process (the test bed runs in it), so nothing else can be picked.
func controllerManagerPID() (int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, fmt.Errorf("find the controller-manager: %w", err)
	}
	self := os.Getpid()
	var found []int
	for _, statPath := range dirs {
		b, err := os.ReadFile(statPath)
		if err != nil {
			continue // gone meanwhile
		}
		comm, ppid, ok := statCommPPID(b)
		// The kernel keeps the first 15 bytes of the command name.
		if ok && ppid == self && comm == "kube-controller" {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(statPath)))
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("find the controller-manager: %d child processes named kube-controller-manager, want 1", len(found))
	}
	return found[0], nil
}

// statCommPPID returns the command name and parent pid of /proc/<pid>/stat.
func statCommPPID(stat []byte) (string, int, bool) {
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return s[open+1 : end], ppid, err == nil
}

func (s *seeder) waitServiceAccounts(ctx context.Context, namespaces int) error {
	return poll(ctx, time.Minute, "default ServiceAccounts", func(ctx context.Context) (bool, error) {
		for i := range namespaces {
			_, err := s.client.CoreV1().ServiceAccounts(fmt.Sprintf("team-%d", i)).Get(ctx, "default", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// waitNodesReady waits for n Ready nodes of the group; untainted also
// waits for the controller-manager to lift the taints of a new node, which
// keep the scheduler from placing pods there.
func (s *seeder) waitNodesReady(ctx context.Context, n int, untainted bool) error {
	return poll(ctx, s.wait(2*time.Minute), "nodes Ready", func(ctx context.Context) (bool, error) {
		list, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + workersGroup})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, node := range list.Items {
			if nodeReady(&node, untainted) {
				ready++
			}
		}
		return ready >= n, nil
	})
}

func nodeReady(node *corev1.Node, untainted bool) bool {
	for _, t := range node.Spec.Taints {
		if untainted && (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) {
			return false
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podTemplate is a Deployment's pods: a realistic amount of spec (ports,
// probes, environment, a projected token volume from admission).
func podTemplate(d plannedDeployment) corev1.PodTemplateSpec {
	cpu := resource.MustParse(strconv.Itoa(d.CPUMilli) + "m")
	mem := resource.MustParse(strconv.Itoa(d.MemoryMi) + "Mi")
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": d.Name, "tier": "backend"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.example.com/" + d.Namespace + "/" + d.Name + ":1.4.2",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
				Env: []corev1.EnvVar{
					{Name: "APP_NAME", Value: d.Name},
					{Name: "LOG_LEVEL", Value: "info"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: mem},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
					PeriodSeconds: 10,
				},
			}},
		},
	}
}

// hashAlphabet is the one Kubernetes draws generated name suffixes from.
const hashAlphabet = "bcdfghjklmnpqrstvwxz2456789"

func randomSuffix(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random name: %w", err)
	}
	for i := range b {
		b[i] = hashAlphabet[int(b[i])%len(hashAlphabet)]
	}
	return string(b), nil
}

// createDeployment writes a Deployment, its ReplicaSet and its pods, and
// its PodDisruptionBudget. The Deployment starts paused: once resumed, the
// controllers' caches fill from separate watches, and a Deployment seen
// before its ReplicaSet would get a second one (and its pods replaced);
// paused, its controller creates no ReplicaSet. unpause resumes it once the
// controller has seen the ReplicaSet.
func (s *seeder) createDeployment(ctx context.Context, d plannedDeployment) error {
	replicas := int32(d.Replicas)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.Name}}
	dep, err := s.client.AppsV1().Deployments(d.Namespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, Labels: map[string]string{"app": d.Name}},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: selector, Template: podTemplate(d), Paused: true},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	hash, err := randomSuffix(10)
	if err != nil {
		return err
	}
	// The ReplicaSet's template is the Deployment's as the API server
	// defaulted it, plus the hash label.
	tpl := *dep.Spec.Template.DeepCopy()
	tpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	isController := true
	rs, err := s.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, Labels: tpl.Labels,
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID,
				Controller: &isController, BlockOwnerDeletion: &isController}},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.Name, appsv1.DefaultDeploymentUniqueLabelKey: hash}},
			Template: tpl,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create replicaset for %s/%s: %w", d.Namespace, d.Name, err)
	}
	for _, node := range d.Nodes {
		suffix, err := randomSuffix(5)
		if err != nil {
			return err
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: rs.Name + "-" + suffix, Namespace: d.Namespace, Labels: tpl.Labels, Annotations: tpl.Annotations,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
					Controller: &isController, BlockOwnerDeletion: &isController}},
			},
			Spec: *tpl.Spec.DeepCopy(),
		}
		pod.Spec.NodeName = nodeName(node)
		if _, err := s.client.CoreV1().Pods(d.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod of %s/%s: %w", d.Namespace, d.Name, err)
		}
	}
	if d.PDB == "" {
		return nil
	}
	one := intstr.FromInt32(1)
	spec := policyv1.PodDisruptionBudgetSpec{Selector: selector}
	if d.PDB == "minAvailable" {
		spec.MinAvailable = &one
	} else {
		spec.MaxUnavailable = &one
	}
	_, err = s.client.PolicyV1().PodDisruptionBudgets(d.Namespace).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace}, Spec: spec,
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pdb %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}

// unpause waits until the Deployment controller counts each Deployment's
// written ReplicaSet in its status, then resumes the Deployments.
func (s *seeder) unpause(ctx context.Context, p clusterPlan) error {
	err := poll(ctx, s.wait(2*time.Minute), "the Deployment controller to see the ReplicaSets", func(ctx context.Context) (bool, error) {
		deps, err := s.client.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen := 0
		for _, d := range deps.Items {
			if d.Status.Replicas == *d.Spec.Replicas {
				seen++
			}
		}
		return seen >= len(p.Deployments), nil
	})
	if err != nil {
		return err
	}
	s.log.Info("replicasets seen; resuming the deployments")
	patch := []byte(`{"spec":{"paused":false}}`)
	return s.forEach(ctx, len(p.Deployments), func(ctx context.Context, i int) error {
		d := p.Deployments[i]
		if _, err := s.client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("resume deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		return nil
	})
}

const daemonSetName = "node-agent"

// createDaemonSet adds a node agent on every node, as clusters run for logs
// and networking; its controller creates the pods.
func (s *seeder) createDaemonSet(ctx context.Context) error {
	labels := map[string]string{"app": daemonSetName}
	_, err := s.client.AppsV1().DaemonSets(metav1.NamespaceSystem).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: daemonSetName, Namespace: metav1.NamespaceSystem, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: "agent", Image: "registry.example.com/node-agent:2.1.0",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
					}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create daemonset: %w", err)
	}
	return nil
}

// waitSettled waits until the controllers own what was written: every
// Deployment ready with the one ReplicaSet written for it, every
// PodDisruptionBudget computed over healthy pods, the DaemonSet on every
// node.
func (s *seeder) waitSettled(ctx context.Context, p clusterPlan, daemonSet bool) error {
	want := p.summary(daemonSet)
	var last string
	reported := time.Now()
	timeout := s.wait(4 * time.Minute)
	if s.settle > 0 {
		timeout = s.settle
	}
	err := poll(ctx, timeout, "the controllers to settle", func(ctx context.Context) (bool, error) {
		rss, err := s.client.AppsV1().ReplicaSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready, err := s.readyDeployments(ctx, rss)
		if err != nil {
			return false, err
		}
		pdbs, err := s.client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		healthy := 0
		for _, b := range pdbs.Items {
			if b.Status.ObservedGeneration == b.Generation && b.Status.ExpectedPods > 0 && b.Status.CurrentHealthy == b.Status.ExpectedPods {
				healthy++
			}
		}
		dsReady := true
		if daemonSet {
			ds, err := s.client.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, daemonSetName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			dsReady = ds.Status.NumberReady == int32(want.Nodes) && ds.Status.DesiredNumberScheduled == int32(want.Nodes)
		}
		if len(rss.Items) > want.Deployments {
			// The Deployment controller did not take a written ReplicaSet as
			// its own and is rolling it over: the pods would churn.
			return false, fmt.Errorf("%d ReplicaSets for %d Deployments: a written ReplicaSet was not adopted", len(rss.Items), want.Deployments)
		}
		last = fmt.Sprintf("%d/%d deployments ready, %d/%d PDBs healthy, daemonset ready %t", ready, want.Deployments, healthy, want.PDBs, dsReady)
		if time.Since(reported) >= 10*time.Second {
			s.log.Info("waiting for the controllers", "status", last)
			reported = time.Now()
		}
		return ready == want.Deployments && healthy == want.PDBs && dsReady, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return nil
}

// readyDeployments counts the Deployments whose replicas are all ready: by
// the Deployments' status, or with keepPaused by their ReplicaSets'.
func (s *seeder) readyDeployments(ctx context.Context, rss *appsv1.ReplicaSetList) (int, error) {
	ready := 0
	if s.keepPaused {
		for _, rs := range rss.Items {
			if rs.Status.ObservedGeneration == rs.Generation && rs.Status.ReadyReplicas == *rs.Spec.Replicas &&
				rs.Status.Replicas == *rs.Spec.Replicas {
				ready++
			}
		}
		return ready, nil
	}
	deps, err := s.client.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, d := range deps.Items {
		if d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == *d.Spec.Replicas &&
			d.Status.Replicas == *d.Spec.Replicas {
			ready++
		}
	}
	return ready, nil
}

// poll calls cond every 250 ms until it returns true or an error, or the
// timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
