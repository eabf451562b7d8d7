package testbed

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/childproc"
)

const (
	namespaceTimeout = 30 * time.Second
	pdbTimeout       = 30 * time.Second
)

// WaitFor polls cond until it returns true and fails the test if it returns
// an error or timeout passes first; what names the awaited state in the
// failure. cond gets a context that ends with the wait.
func (c *ControlPlane) WaitFor(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	c.waitFor(t, timeout, what, nil, cond)
}

// waitFor is WaitFor that, on failure, also reports the end of the log of the
// process responsible for the awaited state, when there is one.
func (c *ControlPlane) waitFor(t testing.TB, timeout time.Duration, what string, p *childproc.Process, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := poll(t.Context(), timeout, p, cond); err != nil {
		t.Fatalf("testbed: wait for %s: %v", what, err)
	}
}

// kwok is the kwok process, whose log explains nodes and pods that never get
// ready.
func (c *ControlPlane) kwok() *childproc.Process {
	for _, p := range c.procs {
		if p.Name() == "kwok" {
			return p
		}
	}
	return nil
}

// Namespace creates a namespace named after the test, waits until pods can be
// created in it (its "default" ServiceAccount exists) and deletes it, with
// its pods at once, when the test ends.
func (c *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	ns, err := c.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testbed: create a namespace: %v", err)
	}
	name := ns.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Pods on nodes already deleted would otherwise linger until the
		// controller-manager's pod GC, and be seen by cluster-wide listings of
		// later tests. Their controllers go first, or they would make new,
		// Pending ones meanwhile.
		all := metav1.ListOptions{}
		del := metav1.DeleteOptions{}
		apps := c.Client.AppsV1()
		for what, err := range map[string]error{
			"deployments":  apps.Deployments(name).DeleteCollection(ctx, del, all),
			"replicasets":  apps.ReplicaSets(name).DeleteCollection(ctx, del, all),
			"statefulsets": apps.StatefulSets(name).DeleteCollection(ctx, del, all),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("testbed: delete the %s of namespace %s: %v", what, name, err)
			}
		}
		err := c.Client.CoreV1().Pods(name).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testbed: delete the pods of namespace %s: %v", name, err)
		}
		err = c.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testbed: delete namespace %s: %v", name, err)
		}
	})
	c.waitFor(t, namespaceTimeout, "the default ServiceAccount of namespace "+name, c.controllerManager(),
		func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		})
	return name
}

func (c *ControlPlane) controllerManager() *childproc.Process {
	for _, p := range c.procs {
		if p.Name() == "kube-controller-manager" {
			return p
		}
	}
	return nil
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// namespacePrefix turns a test name into a namespace GenerateName: a DNS label
// short enough to leave room for the random suffix.
func namespacePrefix(testName string) string {
	s := notDNSLabel.ReplaceAllString(strings.ToLower(testName), "-")
	s = strings.Trim(s, "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	if s == "" {
		s = "test"
	}
	return s + "-"
}

// WaitPodsRunning waits until at least n pods of ns matching labelSelector
// are Running (and not being deleted).
func (c *ControlPlane) WaitPodsRunning(t testing.TB, ns, labelSelector string, n int, timeout time.Duration) {
	t.Helper()
	var seen string
	err := poll(t.Context(), timeout, nil, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelSelector})
		if err != nil {
			return false, err
		}
		running := 0
		var states []string
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
			states = append(states, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
		}
		seen = fmt.Sprintf("%d running of %d: %s", running, len(pods.Items), strings.Join(states, ", "))
		return running >= n, nil
	})
	if err != nil {
		t.Fatalf("testbed: wait for %d running pods %q in namespace %s (last seen %s): %v", n, labelSelector, ns, seen, err)
	}
}

// WaitPodsUnschedulable waits until exactly n pods of ns carry the
// scheduler's PodScheduled=False/Unschedulable condition.
func (c *ControlPlane) WaitPodsUnschedulable(t testing.TB, ns string, n int, timeout time.Duration) {
	t.Helper()
	count := 0
	err := poll(t.Context(), timeout, nil, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		count = 0
		for i := range pods.Items {
			if podUnschedulable(&pods.Items[i]) {
				count++
			}
		}
		return count == n, nil
	})
	if err != nil {
		t.Fatalf("testbed: wait for %d unschedulable pods in namespace %s (last seen %d): %v", n, ns, count, err)
	}
}

// WaitPodUnschedulable waits until the scheduler has marked the pod
// PodScheduled=False with reason Unschedulable.
func (c *ControlPlane) WaitPodUnschedulable(t testing.TB, ns, name string, timeout time.Duration) {
	t.Helper()
	var seen []corev1.PodCondition
	err := poll(t.Context(), timeout, nil, func(ctx context.Context) (bool, error) {
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		seen = pod.Status.Conditions
		return podUnschedulable(pod), nil
	})
	if err != nil {
		t.Fatalf("testbed: wait for pod %s/%s to be unschedulable (conditions %+v): %v", ns, name, seen, err)
	}
}

// WaitPDBObserved waits until the disruption controller has processed the
// PodDisruptionBudget's current generation; until then the Eviction API
// refuses every eviction it covers.
func (c *ControlPlane) WaitPDBObserved(t testing.TB, ns, name string) {
	t.Helper()
	c.waitFor(t, pdbTimeout, "PodDisruptionBudget "+ns+"/"+name+" to be observed", c.controllerManager(),
		func(ctx context.Context) (bool, error) {
			pdb, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return pdb.Status.ObservedGeneration == pdb.Generation, nil
		})
}
