package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/internal/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// TestSeedBuildsTheCluster builds a small cluster on the test bed as
// -bed-scale builds its own and checks it is what the plan says: nodes,
// Deployments owning ReplicaSets owning their replicas, Running with their
// requests, the DaemonSet on every node, the budgets.
func TestSeedBuildsTheCluster(t *testing.T) {
	cp := testbed.Cluster(t)
	ctx := t.Context()
	p, err := planCluster(clusterSpec{Nodes: 5, Pods: 45, PodsPerDeployment: 5, Namespaces: 2,
		Utilization: 0.5, SingleFraction: 0.2, PDBFraction: 0.5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	client, err := seedingClient(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := workersTemplate(cp.KubeconfigPath, "http://127.0.0.1:1", p.Spec.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	// As -bed-scale builds its clusters: Deployments left paused.
	sd := &seeder{client: client, template: tpl, log: slog.New(slog.DiscardHandler), workers: 4, keepPaused: true}
	if err := sd.seed(ctx, p, true); err != nil {
		t.Fatal(err)
	}
	checkSeededPods(ctx, t, client, p)
	checkSeededObjects(ctx, t, client, p)
}

// checkSeededPods checks every pod is Running, owned by the DaemonSet or
// by its Deployment's ReplicaSet with the Deployment's requests, and each
// Deployment has its replicas, bound. Not where each runs: resumed, the
// ReplicaSet controller can see a ReplicaSet before its pods and replace a
// few, which the scheduler places where it likes.
func checkSeededPods(ctx context.Context, t *testing.T, client kubernetes.Interface, p clusterPlan) {
	t.Helper()
	planned := map[string]plannedDeployment{}
	for _, d := range p.Deployments {
		planned[d.Namespace+"/"+d.Name] = d
	}
	rss, err := client.AppsV1().ReplicaSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rsOf := map[string]string{} // ReplicaSet to its Deployment
	for _, rs := range rss.Items {
		if o := metav1.GetControllerOf(&rs); o != nil && o.Kind == "Deployment" {
			rsOf[rs.Namespace+"/"+rs.Name] = rs.Namespace + "/" + o.Name
		}
	}
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas := map[string]int{}
	daemon := 0
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
			t.Errorf("pod %s/%s is %s on %q, want Running on a node", pod.Namespace, pod.Name, pod.Status.Phase, pod.Spec.NodeName)
		}
		o := metav1.GetControllerOf(&pod)
		if o != nil && o.Kind == "DaemonSet" {
			daemon++
			continue
		}
		d, ok := planned[rsOf[pod.Namespace+"/"+ownerName(o)]]
		if !ok || o.Kind != "ReplicaSet" {
			t.Errorf("pod %s/%s is not owned by a planned Deployment's ReplicaSet: %+v", pod.Namespace, pod.Name, o)
			continue
		}
		if got := pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(); got != int64(d.CPUMilli) {
			t.Errorf("pod %s/%s requests %dm CPU, want %dm", pod.Namespace, pod.Name, got, d.CPUMilli)
		}
		replicas[d.Namespace+"/"+d.Name]++
	}
	if daemon != p.Spec.Nodes {
		t.Errorf("%d DaemonSet pods, want one on each of %d nodes", daemon, p.Spec.Nodes)
	}
	for name, d := range planned {
		if replicas[name] != d.Replicas {
			t.Errorf("Deployment %s has %d pods, want %d", name, replicas[name], d.Replicas)
		}
	}
}

func ownerName(o *metav1.OwnerReference) string {
	if o == nil {
		return ""
	}
	return o.Name
}

// checkSeededObjects checks the Deployments (left paused), ReplicaSets and
// budgets are as many as planned, and what the run's section reports.
func checkSeededObjects(ctx context.Context, t *testing.T, client kubernetes.Interface, p clusterPlan) {
	t.Helper()
	want := p.summary(true)
	deps, err := client.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rss, err := client.AppsV1().ReplicaSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != want.Deployments || len(rss.Items) != want.Deployments {
		t.Errorf("%d Deployments and %d ReplicaSets, want %d of each", len(deps.Items), len(rss.Items), want.Deployments)
	}
	for _, d := range deps.Items {
		if !d.Spec.Paused {
			t.Errorf("Deployment %s/%s resumed, want it left paused", d.Namespace, d.Name)
		}
	}
	pdbs, err := client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pdbs.Items) != want.PDBs {
		t.Errorf("%d PodDisruptionBudgets, want %d", len(pdbs.Items), want.PDBs)
	}
	st, err := countPods(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != want.Pods() || st.Running != want.Pods() || st.Ready != want.Pods() {
		t.Errorf("pods %+v, want %d Running and Ready", st, want.Pods())
	}
	if got := bedScaleMarkdown(bedScaleRun{Cluster: want, Pods: st}); !strings.Contains(got, "## Scale on the test bed: evaluate at 5 nodes") {
		t.Errorf("section:\n%s", got)
	}
}

// TestWritePendingPods: the pending pods -bed-scale writes are marked
// unschedulable by the scheduler, without the controller-manager, and go
// when removed.
func TestWritePendingPods(t *testing.T) {
	cp := testbed.Cluster(t)
	ctx := t.Context()
	client, err := seedingClient(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-0"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := (&seeder{client: client}).waitServiceAccounts(ctx, 1); err != nil {
		t.Fatal(err)
	}
	b := &bed{client: client, log: slog.New(slog.DiscardHandler)}
	if err := b.writePending(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := b.removePending(ctx); err != nil {
		t.Fatal(err)
	}
}
