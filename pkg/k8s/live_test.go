package k8s

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/internal/testbed"
)

// The tests below run against the local control plane (etcd, kube-apiserver,
// controller-manager, scheduler, kwok).
func TestMain(m *testing.M) { testbed.Main(m) }

func TestFromKubeconfigFileLive(t *testing.T) {
	cp := testbed.Cluster(t)
	cfg, err := FromKubeconfigFile(cp.KubeconfigPath, "")
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("get namespace default with the kubeconfig's credentials: %v", err)
	}
}

// listRequests counts, per resource path, the LIST requests made and how many
// of them continued a previous page.
type listRequests struct {
	mu        sync.Mutex
	total     map[string]int
	continued map[string]int
}

func (l *listRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && r.URL.Query().Get("limit") != "" {
			l.mu.Lock()
			l.total[r.URL.Path]++
			if r.URL.Query().Get("continue") != "" {
				l.continued[r.URL.Path]++
			}
			l.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestListLive(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	pool := map[string]string{"nodetide.io/test-pool": ns}
	var nodeNames []string
	for i := range 3 {
		n := cp.AddNode(t, testbed.Node{Name: fmt.Sprintf("%s-n%d", ns, i), CPU: "4", Memory: "8Gi", Labels: pool})
		nodeNames = append(nodeNames, n.Name)
	}
	const nPods, nPDBs = 5, 3
	for i := range nPods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"app": "list"}},
			Spec: corev1.PodSpec{
				NodeSelector: pool,
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("100m")}}}},
			},
		}
		if _, err := cp.Client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range nPDBs {
		one := intstr.FromInt32(1)
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pdb%d", i)},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: &one,
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "list"}},
			},
		}
		if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cp.WaitPodsRunning(t, ns, "app=list", nPods, time.Minute)

	requests := &listRequests{total: map[string]int{}, continued: map[string]int{}}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WrapTransport = requests.wrap
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	paged, err := List(t.Context(), client, WithPageSize(2))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := List(t.Context(), client)
	if err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"/api/v1/nodes", "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets"} {
		if requests.continued[path] == 0 {
			t.Errorf("%s: no continued page with page size 2 (%d requests)", path, requests.total[path])
		}
	}

	for _, objs := range []Objects{paged, whole} {
		var nodes, pods, pdbs []string
		for _, n := range objs.Nodes {
			if n.APIVersion != "v1" || n.Kind != "Node" {
				t.Errorf("node %s TypeMeta %+v", n.Name, n.TypeMeta)
			}
			if n.Labels["nodetide.io/test-pool"] == ns {
				nodes = append(nodes, n.Name)
			}
		}
		for _, p := range objs.Pods {
			if p.APIVersion != "v1" || p.Kind != "Pod" {
				t.Errorf("pod %s/%s TypeMeta %+v", p.Namespace, p.Name, p.TypeMeta)
			}
			if p.Namespace == ns {
				pods = append(pods, p.Name)
				if !slices.Contains(nodeNames, p.Spec.NodeName) || p.Status.Phase != corev1.PodRunning {
					t.Errorf("pod %s: node %q phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
				}
			}
		}
		for _, p := range objs.PodDisruptionBudgets {
			if p.APIVersion != "policy/v1" || p.Kind != "PodDisruptionBudget" {
				t.Errorf("pdb %s/%s TypeMeta %+v", p.Namespace, p.Name, p.TypeMeta)
			}
			if p.Namespace == ns {
				pdbs = append(pdbs, p.Name)
			}
		}
		slices.Sort(nodes)
		slices.Sort(pods)
		slices.Sort(pdbs)
		if !slices.Equal(nodes, nodeNames) || len(pods) != nPods || len(pdbs) != nPDBs {
			t.Errorf("listed nodes %v, pods %v, pdbs %v; want nodes %v, %d pods, %d pdbs", nodes, pods, pdbs, nodeNames, nPods, nPDBs)
		}
	}
	if len(paged.Nodes) != len(whole.Nodes) || len(paged.Pods) != len(whole.Pods) ||
		len(paged.PodDisruptionBudgets) != len(whole.PodDisruptionBudgets) {
		t.Errorf("paged and whole lists differ: %d/%d/%d vs %d/%d/%d nodes/pods/pdbs",
			len(paged.Nodes), len(paged.Pods), len(paged.PodDisruptionBudgets),
			len(whole.Nodes), len(whole.Pods), len(whole.PodDisruptionBudgets))
	}

	// The JSON written into a snapshot reads as the API serves it.
	b, err := json.Marshal(paged.Pods[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"kind":"Pod","apiVersion":"v1",`) {
		t.Errorf("pod JSON starts %.40s", b)
	}
}

func TestCordonUncordonLive(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t) // for a unique node name
	other := corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}
	name := cp.AddNode(t, testbed.Node{Name: ns + "-cordon", CPU: "2", Memory: "4Gi", Taints: []corev1.Taint{other}}).Name
	nodes := cp.Client.CoreV1().Nodes()

	get := func() *corev1.Node {
		t.Helper()
		n, err := nodes.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	has := func(n *corev1.Node, taint corev1.Taint) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool {
			return x.Key == taint.Key && x.Value == taint.Value && x.Effect == taint.Effect
		})
	}
	ours := corev1.Taint{Key: testTaint, Effect: corev1.TaintEffectNoSchedule}

	steps := []struct {
		name        string
		op          func() error
		wantUnsched bool
	}{
		{"cordon", func() error { return Cordon(t.Context(), cp.Client, name, testTaint) }, true},
		{"cordon again", func() error { return Cordon(t.Context(), cp.Client, name, testTaint) }, true},
		{"uncordon", func() error { return Uncordon(t.Context(), cp.Client, name, testTaint) }, false},
		{"uncordon again", func() error { return Uncordon(t.Context(), cp.Client, name, testTaint) }, false},
	}
	for _, s := range steps {
		if err := s.op(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		n := get()
		if n.Spec.Unschedulable != s.wantUnsched || has(n, ours) != s.wantUnsched {
			t.Errorf("%s: unschedulable %v, taints %+v", s.name, n.Spec.Unschedulable, n.Spec.Taints)
		}
		if !has(n, other) {
			t.Errorf("%s: lost the node's own taint: %+v", s.name, n.Spec.Taints)
		}
		count := 0
		for _, x := range n.Spec.Taints {
			if x.Key == testTaint {
				count++
			}
		}
		if count > 1 {
			t.Errorf("%s: taint %s added %d times", s.name, testTaint, count)
		}
	}

	if err := Cordon(t.Context(), cp.Client, ns+"-ghost", testTaint); err == nil {
		t.Error("cordoning a missing node succeeded")
	}
}
