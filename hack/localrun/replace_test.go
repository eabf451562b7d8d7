package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/state"
)

// TestReplaceThroughTheLocalStateMachine: with consolidation: replace, an
// expensive node holding one small single-replica Deployment behind a PDB
// is replaced by a cheap node: the cheap node
// first, then the old one's drain (surging the replica, evicting within the
// PDB) through the local state machine. Drained, the replacement stays in
// the state table, naming the cheap node it holds, for the window after the
// drain (max(delayAfterAdd, unneededTime): 2s here), and is forgotten once
// the window has passed. A sampler checks the Deployment is never without
// a Running pod.
func TestReplaceThroughTheLocalStateMachine(t *testing.T) {
	testbed.Integration(t, "builds the CLI and the drain function and starts the local Step Functions service")
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	db := testbed.DynamoDB(t)
	ctx := t.Context()
	table := "localrun-" + ns
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	big, small := ns+"-big", ns+"-small"
	path := writeConfig(t, fmt.Sprintf(`cluster: {name: %[1]s, kubernetes: {kubeconfig: %[2]s}}
state: {dynamodb: {table: %[3]s, endpoint: %[4]s}}
nodeGroups:
  - name: %[5]s
    provider: kwok
    minSize: 0
    maxSize: 1
    price: {perHour: 0.40, currency: USD}
    kwok: {template: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}, labels: {tier: %[1]s}}}
  - name: %[6]s
    provider: kwok
    minSize: 0
    maxSize: 2
    price: {perHour: 0.05, currency: USD}
    kwok: {template: {allocatable: {cpu: "1", memory: 2Gi, pods: "110"}, labels: {tier: %[1]s}}}
scaleDown: {unneededTime: 2s, delayAfterAdd: 0s, consolidation: replace}
drain: {timeout: 3m, onTimeout: abort}
`, ns, cp.KubeconfigPath, table, db.Endpoint, big, small))
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := kwok.BlockOf(cfg.NodeGroups[0].Entry()).Template.Planner()
	if err != nil {
		t.Fatal(err)
	}
	oldNode := big + "-0"
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, kwok.NodeObject(big, oldNode, tpl), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, g := range []string{big, small} {
			_ = cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + g})
		}
	})
	cp.WaitFor(t, time.Minute, "the old node Ready", func(ctx context.Context) (bool, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, oldNode, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})

	labels := map[string]string{"app": "web"}
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"tier": ns},
					Containers: []corev1.Container{{Name: "app", Image: "app",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi"),
						}}}},
				},
			},
		},
	}
	if _, err := cp.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One disruption allowed: the planner counts PDB room as the PDB's
	// status gives it (a PDB allowing none keeps the node, NotEnoughPdb),
	// and the drain still surges the single replica before it evicts.
	maxUnavailable := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &maxUnavailable, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitPodsRunning(t, ns, "app=web", 1, time.Minute)
	cp.WaitPDBObserved(t, ns, "web")

	// Sample the Deployment's Running pods until the end: never none.
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var (
		mu      sync.Mutex
		gaps    []string
		samples int
	)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			pods, err := cp.Client.CoreV1().Pods(ns).List(sampleCtx, metav1.ListOptions{LabelSelector: "app=web"})
			if err == nil {
				running := 0
				for _, p := range pods.Items {
					if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
						running++
					}
				}
				mu.Lock()
				samples++
				if running == 0 {
					gaps = append(gaps, time.Now().Format(time.RFC3339Nano))
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	runCtx, stop := context.WithCancel(ctx)
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(runCtx, []string{"--config", path, "--interval", "2s"}, &out, &errOut) }()
	defer func() {
		stop()
		stopSampling()
		<-sampled
	}()

	// The REPLACE# items of the cluster, as stored now.
	replaceItems := func() []map[string]types.AttributeValue {
		t.Helper()
		items, err := db.Client(t).Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(table),
			KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": &types.AttributeValueMemberS{Value: "CLUSTER#" + ns},
				":p":  &types.AttributeValueMemberS{Value: "REPLACE#"},
			},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		return items.Items
	}

	// Until the old node is gone and the replacement forgotten, watch the
	// item for its drained form. As in the test above, the drain
	// function's build alone can take minutes on a loaded two-core machine.
	deadline := time.Now().Add(15 * time.Minute)
	var drainedItem string
	for {
		_, err := cp.Client.CoreV1().Nodes().Get(ctx, oldNode, metav1.GetOptions{})
		gone := apierrors.IsNotFound(err)
		items := replaceItems()
		for _, it := range items {
			if v, ok := it["replacement"].(*types.AttributeValueMemberS); ok && strings.Contains(v.Value, `"drained"`) {
				drainedItem = v.Value
			}
		}
		if gone && len(items) == 0 {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("localrun ended (exit %d) with the old node there (%v) or %d REPLACE# items left:\n%s", code, !gone, len(items), errOut.String())
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("in 15m, old node %s not replaced (err %v) or %d REPLACE# items left:\n%s", oldNode, err, len(items), errOut.String())
		}
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after SIGTERM:\n%s", code, errOut.String())
	}

	// The pod runs on the one cheap node.
	nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + small})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("%d nodes in the cheap group, want 1", len(nodes.Items))
	}
	cp.WaitPodsRunning(t, ns, "app=web", 1, time.Minute)
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != nodes.Items[0].Name {
			t.Errorf("pod %s runs on %s, want the new node %s", p.Name, p.Spec.NodeName, nodes.Items[0].Name)
		}
	}
	log := errOut.String()
	for _, want := range []string{`"phase":"Requested"`, `"phase":"Draining"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the run's log does not show a replacement %s:\n%s", want, log)
		}
	}
	// Drained, it held the cheap node; the loop above saw it forgotten
	// once its window had passed, with the run still going.
	if want := `"receivers":["` + nodes.Items[0].Name + `"]`; !strings.Contains(drainedItem, want) {
		t.Errorf("the REPLACE# item seen drained is %q, want it holding the new node (%s)", drainedItem, want)
	}

	stopSampling()
	<-sampled
	mu.Lock()
	defer mu.Unlock()
	if samples < 10 || len(gaps) > 0 {
		t.Errorf("of %d samples, %d saw no Running pod of the Deployment (at %v)", samples, len(gaps), gaps)
	}
}
