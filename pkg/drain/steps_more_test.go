package drain_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

func TestConflictIsTransient(t *testing.T) {
	err := apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("the object has been modified"))
	for _, e := range []error{err, fmtWrap(err)} {
		if got := drain.ErrorName(e); got != drain.ErrNameTransient {
			t.Errorf("ErrorName(%v) = %s, want %s", e, got, drain.ErrNameTransient)
		}
	}
}

func fmtWrap(err error) error { return errors.Join(errors.New("cordon node n1"), err) }

// TestSurgeOfAPDBProtectedDeployment: a Deployment of several replicas
// whose PDB allows no disruption is surged, never evicted past its budget,
// and the node goes.
func TestSurgeOfAPDBProtectedDeployment(t *testing.T) {
	b := newBed(t, 0, 1)
	ctx := context.Background()
	victim := b.nodes(t)[0].Name
	b.deploy(t, "guarded", 2, "")
	b.pdb(t, "guarded", "guarded", 2)
	// Room for the replacements, after the pods are all on the victim.
	if err := b.group.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	b.waitNodesReady(t, 2)
	stop := b.readyReplicasWatch(t, "guarded")
	s, err := b.runSteps(t, b.start(victim, 45*time.Second, drain.PolicyAbort))
	lowest := stop()
	if err != nil {
		t.Fatalf("drain: %v (state %+v)", err, s)
	}
	if lowest < 2 {
		t.Errorf("the PDB (minAvailable 2) was violated: %d Ready at some moment", lowest)
	}
	rec, err := b.store.GetDrain(ctx, victim, s.DrainID)
	if err != nil || len(rec.Surged) != 1 || rec.Surged[0].Name != "guarded" || len(rec.Surged[0].Pods) != 2 || rec.Surged[0].OriginalReplicas != 2 {
		t.Errorf("drain record surged %+v (%v), want guarded with its 2 pods", rec.Surged, err)
	}
	if got := b.replicas(t, "guarded"); got != 2 {
		t.Errorf("guarded replicas = %d, want 2 restored", got)
	}
	if _, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s still there: %v", victim, err)
	}
}

// TestReplacementNeverReady: the evicted pod's replacement can only run on
// the drained node, so it never becomes Ready; WaitReplacements keeps
// Replaced false, and at the deadline the state machine (policy abort)
// rolls back instead of terminating.
func TestReplacementNeverReady(t *testing.T) {
	ctx := context.Background()
	// Two replicas without a budget are evicted, not surged.
	t.Run("steps", func(t *testing.T) {
		b := newBed(t, 0, 2)
		victim := b.nodes(t)[0].Name
		b.deploy(t, "stuck", 2, victim)
		s := b.start(victim, 4*time.Second, drain.PolicyAbort)
		var err error
		for _, step := range []string{"Prepare", "Cordon", "Surge"} {
			if s, err = b.steps.Run(ctx, step, s); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
		}
		if !s.SurgeDone {
			t.Fatalf("surged a Deployment of two replicas without a budget: %+v", s)
		}
		b.cp.WaitFor(t, time.Minute, "stuck evicted", func(ctx context.Context) (bool, error) {
			s, err = b.steps.Run(ctx, "Evict", s)
			return s.Evicted, err
		})
		b.cp.WaitFor(t, time.Minute, "drain deadline", func(ctx context.Context) (bool, error) {
			s, err = b.steps.Run(ctx, "WaitReplacements", s)
			if s.Replaced {
				t.Fatalf("Replaced with the replacements pending: %+v", s)
			}
			return s.PastDeadline, err
		})
		if len(s.Workloads) != 1 || s.Workloads[0].Name != "stuck" {
			t.Errorf("workloads = %+v, want Deployment stuck", s.Workloads)
		}
		if _, err := b.steps.Run(ctx, "Rollback", s); err != nil {
			t.Fatal(err)
		}
		b.cp.WaitPodsRunning(t, b.ns, "app=stuck", 2, time.Minute)
	})

	t.Run("machine", func(t *testing.T) {
		b := newBed(t, 0, 2)
		victim := b.nodes(t)[0].Name
		m := b.machine(t, b.cp.KubeconfigPath, 8*time.Second, drain.PolicyAbort)
		b.deploy(t, "stuck", 2, victim)
		exec, err := m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: victim})
		if err != nil {
			t.Fatal(err)
		}
		out := m.wait(t, exec.ExecutionArn)
		if out.Status != sfntypes.ExecutionStatusFailed || aws.ToString(out.Error) != "DrainTimeout" {
			t.Fatalf("execution %s %s: %s", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
		}
		n := b.node(t, victim) // not terminated
		if n.Spec.Unschedulable || ours(n) != 0 {
			t.Errorf("node not restored: unschedulable %t, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
		}
		rec, err := m.store.GetDrain(ctx, victim, exec.Name)
		if err != nil || rec.Status != state.DrainRolledBack {
			t.Errorf("drain record = %+v (%v), want rolled back", rec, err)
		}
		b.cp.WaitPodsRunning(t, b.ns, "app=stuck", 2, time.Minute)
	})
}

// TestTerminateRetriedAfterMachineGone: a Terminate run again after the
// machine went (its first answer lost, the retry in a new process that does
// not remember it) succeeds and removes nothing else.
func TestTerminateRetriedAfterMachineGone(t *testing.T) {
	b := newBed(t, 0, 2)
	ctx := context.Background()
	victim := b.nodes(t)[0].Name
	s := b.start(victim, time.Minute, drain.PolicyAbort)
	var err error
	for _, step := range []string{"Prepare", "Cordon", "Surge", "Evict", "Terminate"} {
		if s, err = b.steps.Run(ctx, step, s); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	fresh := kwok.New(b.cp.Client, b.pool, 0, 5, snapshot.Template{})
	retry := *b.steps
	retry.Groups = func(context.Context) ([]providers.NodeGroup, error) { return []providers.NodeGroup{fresh}, nil }
	if err := fresh.DeleteInstance(ctx, s.ProviderID); !errors.Is(err, providers.ErrUnknownInstance) {
		t.Fatalf("the fresh group knows the removed machine: %v", err)
	}
	s.Terminated = false
	if s, err = retry.Run(ctx, "Terminate", s); err != nil || !s.Terminated {
		t.Fatalf("retried Terminate: %v (terminated %t), want success", err, s.Terminated)
	}
	if got := len(b.nodes(t)); got != 1 {
		t.Errorf("group has %d nodes, want 1", got)
	}
}

// TestForceDeleteDeletesThePod: at the deadline with policy force, the pod
// a PDB holds is deleted: it is gone from the API server.
func TestForceDeleteDeletesThePod(t *testing.T) {
	b := newBed(t, 0, 1)
	ctx := context.Background()
	victim := b.nodes(t)[0].Name
	b.deploy(t, "guarded", 1, victim) // its replacement cannot land elsewhere
	b.pdb(t, "guarded", "guarded", 1)
	pods, err := b.cp.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=guarded"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of guarded: %v", err)
	}
	name := pods.Items[0].Name
	s := b.start(victim, 3*time.Second, drain.PolicyForce)
	s.Surge = false
	for _, step := range []string{"Prepare", "Cordon", "Evict"} {
		if s, err = b.steps.Run(ctx, step, s); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	if s.Evicted {
		t.Fatal("the PDB let the pod be evicted")
	}
	// ForceDelete acts only past the drain's recorded deadline.
	b.cp.WaitFor(t, time.Minute, "the drain's deadline", func(context.Context) (bool, error) {
		return time.Now().After(s.Deadline), nil
	})
	if s, err = b.steps.Run(ctx, "ForceDelete", s); err != nil || !s.Evicted {
		t.Fatalf("ForceDelete: %v (evicted %t)", err, s.Evicted)
	}
	b.cp.WaitFor(t, time.Minute, "pod "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := b.cp.Client.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if _, err := b.steps.Run(ctx, "Rollback", s); err != nil {
		t.Fatal(err)
	}
}

// A Deployment an HPA scales is not surged, since the HPA owns its count
// (see docs/drain.md): the drain writes no replica count,
// records why, says so on the Deployment, and evicts its pod like any
// other.
func TestSurgeLeavesHPAManagedDeployments(t *testing.T) {
	b := newBed(t, 0, 2)
	b.withEvents()
	ctx := context.Background()
	b.deploy(t, "scaled", 1, "")
	victim := b.podNode(t, "scaled")
	minReplicas := int32(1)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled-hpa", Namespace: b.ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "scaled"},
			MinReplicas:    &minReplicas, MaxReplicas: 3,
		},
	}
	if _, err := b.cp.Client.AutoscalingV2().HorizontalPodAutoscalers(b.ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := b.cp.Client.AppsV1().Deployments(b.ns).Get(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.runSteps(t, b.start(victim, 2*time.Minute, drain.PolicyAbort))
	if err != nil {
		t.Fatalf("drain: %v (state %+v)", err, s)
	}
	after, err := b.cp.Client.AppsV1().Deployments(b.ns).Get(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *after.Spec.Replicas != 1 || after.Generation != before.Generation {
		t.Errorf("replicas %d at generation %d (was %d): the drain wrote the count an HPA owns", *after.Spec.Replicas, after.Generation, before.Generation)
	}
	rec, err := b.store.GetDrain(ctx, victim, s.DrainID)
	if err != nil || rec.Status != state.DrainSucceeded || len(rec.Surged) != 0 || len(rec.NotSurged) != 1 ||
		rec.NotSurged[0].Name != "scaled" || !strings.Contains(rec.NotSurged[0].Reason, "HorizontalPodAutoscaler scaled-hpa sets its replicas") {
		t.Errorf("drain record %+v (%v), want succeeded with scaled not surged, saying why", rec, err)
	}
	if evs := b.deploymentEvents(t, "scaled"); len(evs) != 1 || evs[0].InvolvedObject.APIVersion != "apps/v1" || !strings.Contains(evs[0].Message, "not surged: HorizontalPodAutoscaler scaled-hpa") {
		t.Errorf("events on the Deployment: %+v, want one saying it was not surged", evs)
	}
	b.cp.WaitPodsRunning(t, b.ns, "app=scaled", 1, time.Minute)
}
