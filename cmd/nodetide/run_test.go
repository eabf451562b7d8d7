package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/metricstest"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/state"
)

// TestRunFiresSchedules: with DynamoDB state, `nodetide run` also ticks the
// schedules, firing each due one once.
func TestRunFiresSchedules(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	db := testbed.DynamoDB(t)
	ctx := context.Background()
	table := "run-" + ns
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, "nodetide.yaml", fmt.Sprintf(`cluster: {name: %[1]s, kubernetes: {kubeconfig: %[2]s}}
state: {dynamodb: {table: %[3]s, endpoint: %[4]s}}
nodeGroups:
  - name: %[1]s
    provider: kwok
    minSize: 0
    maxSize: 3
    kwok: {template: {allocatable: {cpu: "2", memory: 8Gi}, labels: {pool: %[1]s}}}
`, ns, cp.KubeconfigPath, table, db.Endpoint))
	one := int32(1)
	labels := map[string]string{"app": "web"}
	if _, err := cp.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every second, so one is due by the time run ticks.
	file := writeFile(t, "every.json", fmt.Sprintf(`{"name":"every","cron":"* * * * * *","apps":[{"namespace":%q,"kind":"Deployment","name":"web","replicas":2}]}`, ns))
	if _, errOut, code := nodetide(t, "schedules", "create", file, "--config", cfg); code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	// A run within the second the schedule was created finds nothing due
	// (a new schedule does not fire for the past), so run until one fires.
	var errOut string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var code int
		var out string
		out, errOut, code = nodetide(t, "run", "--once", "--config", cfg)
		if code != 0 {
			t.Fatalf("run --once: exit %d: %s", code, errOut)
		}
		if strings.Contains(out, `"_aws"`) {
			t.Fatalf("run printed metrics without --emf:\n%s", out)
		}
		if strings.Contains(errOut, "schedule every: fire") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(errOut, "schedule every: fire") || !strings.Contains(errOut, "Deployment web -> 2 scaled") {
		t.Errorf("run's output does not show the fire:\n%s", errOut)
	}
	d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 2 {
		t.Fatalf("web: %v, %v; want 2 replicas", err, d.Spec.Replicas)
	}

	// --emf: the cycle's metrics on stdout, as in Lambda.
	out, errOut, code := nodetide(t, "run", "--once", "--emf", "--config", cfg)
	if code != 0 {
		t.Fatalf("run --once --emf: exit %d: %s", code, errOut)
	}
	published, err := metricstest.Parse([]byte(out), ns)
	if err != nil {
		t.Fatal(err)
	}
	if published.Sum(metrics.CycleCompleted, nil) != 1 || !published.Has(metrics.TargetSize, metrics.Dims{metrics.DimNodeGroup: ns}) {
		t.Errorf("run --emf published %v, want a completed cycle and the group's target size", published)
	}
}
