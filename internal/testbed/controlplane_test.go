package testbed_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodetide/nodetide/internal/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

func TestNodeObject(t *testing.T) {
	tests := []struct {
		name            string
		node            testbed.Node
		wantAllocatable map[corev1.ResourceName]string
		wantLabels      map[string]string
		wantAnnotations map[string]string
		wantProviderID  string
	}{
		{
			name:            "defaults",
			node:            testbed.Node{Name: "n1", CPU: "4", Memory: "16Gi"},
			wantAllocatable: map[corev1.ResourceName]string{"cpu": "4", "memory": "16Gi", "pods": "110"},
			wantLabels:      map[string]string{"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux"},
			wantAnnotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			wantProviderID:  "kwok://n1",
		},
		{
			name: "everything set",
			node: testbed.Node{
				Name: "n2", CPU: "500m", Memory: "1Gi", Pods: "8", GPU: "2",
				Labels:      map[string]string{"pool": "gpu", "kubernetes.io/arch": "arm64"},
				Annotations: map[string]string{"example.com/a": "b"},
				ProviderID:  "aws:///eu-west-1a/i-0abc",
			},
			wantAllocatable: map[corev1.ResourceName]string{"cpu": "500m", "memory": "1Gi", "pods": "8", "nvidia.com/gpu": "2"},
			wantLabels:      map[string]string{"pool": "gpu", "kubernetes.io/arch": "arm64", "kubernetes.io/hostname": "n2"},
			wantAnnotations: map[string]string{"kwok.x-k8s.io/node": "fake", "example.com/a": "b"},
			wantProviderID:  "aws:///eu-west-1a/i-0abc",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := testbed.NodeObject(tt.node)
			if node.Name != tt.node.Name {
				t.Errorf("name = %q, want %q", node.Name, tt.node.Name)
			}
			if len(node.Status.Allocatable) != len(tt.wantAllocatable) {
				t.Errorf("allocatable = %v, want %v", node.Status.Allocatable, tt.wantAllocatable)
			}
			for r, want := range tt.wantAllocatable {
				for _, list := range []corev1.ResourceList{node.Status.Allocatable, node.Status.Capacity} {
					if got := list[r]; got.Cmp(resource.MustParse(want)) != 0 {
						t.Errorf("%s = %s, want %s", r, got.String(), want)
					}
				}
			}
			for k, want := range tt.wantLabels {
				if got := node.Labels[k]; got != want {
					t.Errorf("label %s = %q, want %q", k, got, want)
				}
			}
			for k, want := range tt.wantAnnotations {
				if got := node.Annotations[k]; got != want {
					t.Errorf("annotation %s = %q, want %q", k, got, want)
				}
			}
			if node.Spec.ProviderID != tt.wantProviderID {
				t.Errorf("providerID = %q, want %q", node.Spec.ProviderID, tt.wantProviderID)
			}
		})
	}
}

func TestDirMissingBinaries(t *testing.T) {
	t.Setenv("NODETIDE_TESTBED_DIR", t.TempDir())
	_, err := testbed.Dir()
	if err == nil {
		t.Fatal("Dir() succeeded on an empty directory")
	}
	for _, want := range []string{"make testbed", "kube-apiserver", "kwok"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Dir() error %q does not mention %q", err, want)
		}
	}
}

func TestStartReportsComponentFailure(t *testing.T) {
	testbed.Integration(t, "starts a control plane of its own")
	real, err := testbed.Dir()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		message      string // what the failing apiserver prints before exiting
		wantAttempts int
	}{
		{name: "crash", message: "E0101 flag provided but not defined: -bogus", wantAttempts: 1},
		// A port taken between picking and binding it: Start retries on new ports.
		{name: "port taken", message: "listen tcp 127.0.0.1:6443: bind: address already in use", wantAttempts: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			for _, f := range []string{"etcd", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
				if err := os.Symlink(filepath.Join(real, f), filepath.Join(bin, f)); err != nil {
					t.Fatal(err)
				}
			}
			attempts := filepath.Join(bin, "attempts")
			script := "#!/bin/sh\necho started >> " + attempts + "\necho '" + tt.message + "' >&2\nexit 1\n"
			if err := os.WriteFile(filepath.Join(bin, "kube-apiserver"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("NODETIDE_TESTBED_DIR", bin)
			before := ownedBedDirs(t)
			children := childProcesses(t)

			c, err := testbed.Start(t.Context())
			if err == nil {
				c.Stop()
				t.Fatal("Start succeeded with a failing kube-apiserver")
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error does not include the end of the apiserver's log:\n%v", err)
			}
			data, _ := os.ReadFile(attempts)
			if got := strings.Count(string(data), "started"); got != tt.wantAttempts {
				t.Errorf("apiserver started %d times, want %d", got, tt.wantAttempts)
			}
			if after := ownedBedDirs(t); len(after) != len(before) {
				t.Errorf("bed directories left behind: before %v, after %v", before, after)
			}
			if after := childProcesses(t); !slices.Equal(after, children) {
				t.Errorf("child processes before Start %v, after %v", children, after)
			}
			t.Logf("Start failed with: %v", err)
		})
	}
}

// ownedBedDirs lists the bed directories this test binary owns.
func ownedBedDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "nodetide-testbed-*"))
	if err != nil {
		t.Fatal(err)
	}
	var owned []string
	for _, d := range dirs {
		pid, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err == nil && string(pid) == strconv.Itoa(os.Getpid()) {
			owned = append(owned, d)
		}
	}
	return owned
}

func TestNodeBecomesReady(t *testing.T) {
	t.Parallel()
	c := testbed.Cluster(t)
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	node := c.AddNode(t, testbed.Node{
		Name: "ready-node", CPU: "4", Memory: "16Gi", GPU: "2",
		Labels: map[string]string{"pool": "ready"},
		Taints: []corev1.Taint{taint},
	})

	for r, want := range map[corev1.ResourceName]string{"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"} {
		if got := node.Status.Allocatable[r]; got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", r, got.String(), want)
		}
	}
	if got := node.Labels["pool"]; got != "ready" {
		t.Errorf("label pool = %q, want ready", got)
	}
	if len(node.Spec.Taints) != 1 || !node.Spec.Taints[0].MatchTaint(&taint) {
		t.Errorf("taints = %v, want [%v]", node.Spec.Taints, taint)
	}
	if node.Spec.ProviderID != "kwok://ready-node" {
		t.Errorf("providerID = %q, want kwok://ready-node", node.Spec.ProviderID)
	}
}

func TestDeploymentRunsOnNode(t *testing.T) {
	t.Parallel()
	c := testbed.Cluster(t)
	ns := c.Namespace(t)
	c.AddNode(t, testbed.Node{Name: "deploy-node", CPU: "4", Memory: "16Gi", Labels: map[string]string{"pool": "deploy"}})

	createDeployment(t, c, ns, "web", 1, "deploy")
	c.WaitPodsRunning(t, ns, "app=web", 1, 30*time.Second)

	pods, err := c.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "deploy-node" {
			t.Errorf("pod %s runs on %q, want deploy-node", p.Name, p.Spec.NodeName)
		}
	}
}

func TestPendingPodScheduledOnBigNode(t *testing.T) {
	t.Parallel()
	c := testbed.Cluster(t)
	ns := c.Namespace(t)
	c.AddNode(t, testbed.Node{Name: "small-node", CPU: "2", Memory: "4Gi", Labels: map[string]string{"pool": "pending"}})

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"pool": "pending"},
			Containers: []corev1.Container{{
				Name: "app", Image: "app",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("64"),
				}},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPodUnschedulable(t, ns, "big", 30*time.Second)

	c.AddNode(t, testbed.Node{Name: "big-node", CPU: "96", Memory: "64Gi", Labels: map[string]string{"pool": "pending"}})
	c.WaitFor(t, 30*time.Second, "pod big running on big-node", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "big", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Spec.NodeName == "big-node" && p.Status.Phase == corev1.PodRunning, nil
	})
}

func TestPDBRefusesEviction(t *testing.T) {
	t.Parallel()
	c := testbed.Cluster(t)
	ns := c.Namespace(t)
	c.AddNode(t, testbed.Node{Name: "pdb-node", CPU: "4", Memory: "16Gi", Labels: map[string]string{"pool": "pdb"}})

	createDeployment(t, c, ns, "db", 2, "pdb")
	minAvailable := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		},
	}
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPodsRunning(t, ns, "app=db", 2, 30*time.Second)
	c.WaitPDBObserved(t, ns, "db")

	pods, err := c.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=db"})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Client.CoreV1().Pods(ns).EvictV1(t.Context(), &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pods.Items[0].Name, Namespace: ns},
	})
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting %s: got %v, want 429 Too Many Requests", pods.Items[0].Name, err)
	}
}

func TestStopLeavesNothing(t *testing.T) {
	testbed.Integration(t, "starts a control plane of its own")
	t.Parallel()
	began := time.Now()
	c, err := testbed.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("private control plane ready in %v", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() { _ = c.Stop() })
	dir := filepath.Dir(c.KubeconfigPath)
	if !strings.Contains(filepath.Base(dir), "nodetide-testbed-") {
		t.Fatalf("kubeconfig %s is not in a test bed directory", c.KubeconfigPath)
	}
	if _, err := c.Client.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("private control plane does not serve: %v", err)
	}
	// Every component names the bed's directory in its arguments.
	if got := processesMentioning(t, dir); len(got) != 5 {
		t.Fatalf("%d processes of the bed before Stop (%v), want 5", len(got), got)
	}

	began = time.Now()
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("stopped in %v", time.Since(began).Round(time.Millisecond))
	if got := processesMentioning(t, dir); len(got) != 0 {
		t.Errorf("processes still alive after Stop: %v", got)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s still there after Stop (stat: %v)", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// childProcesses lists the pids of this test binary's live children.
func childProcesses(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state, ppid, ...
		_, rest, ok := bytes.Cut(stat, []byte(") "))
		fields := strings.Fields(string(rest))
		if !ok || len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		if fields[1] == strconv.Itoa(os.Getpid()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processesMentioning lists the live processes whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		name, _, _ := bytes.Cut(cmdline, []byte{0})
		found = append(found, e.Name()+":"+filepath.Base(string(name)))
	}
	return found
}

// createDeployment creates a Deployment whose pods (label app=name) only run
// on nodes labelled pool=pool, so parallel tests don't share nodes.
func createDeployment(t *testing.T, c *testbed.ControlPlane, ns, name string, replicas int32, pool string) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"pool": pool},
					Containers: []corev1.Container{{
						Name: "app", Image: "app",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("100m"),
							corev1.ResourceMemory: resource.MustParse("128Mi"),
						}},
					}},
				},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment %s: %v", name, err)
	}
}
