package drain_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/kubeevents"
)

// nodeEvents lists nodetide's events on a node (not the node
// controller's), in the order they were written.
func (b *bed) nodeEvents(t *testing.T, node string) []corev1.Event {
	t.Helper()
	list, err := b.cp.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node, "source": kubeevents.Component}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	evs := list.Items
	rv := func(e corev1.Event) int { n, _ := strconv.Atoi(e.ResourceVersion); return n }
	slices.SortFunc(evs, func(a, b corev1.Event) int { return rv(a) - rv(b) })
	return evs
}

func reasons(evs []corev1.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Reason
	}
	return out
}

func (b *bed) withEvents() {
	b.steps.Events = &kubeevents.Recorder{Client: b.cp.Client, Instance: "drain-test"}
}

func TestDrainRecordsStartedThenScaleDown(t *testing.T) {
	b := newBed(t, 0, 1)
	b.withEvents()
	victim := b.nodes(t)[0].Name
	if _, err := b.runSteps(t, b.start(victim, time.Minute, drain.PolicyAbort)); err != nil {
		t.Fatal(err)
	}
	evs := b.nodeEvents(t, victim)
	if got := reasons(evs); !slices.Equal(got, []string{"DrainStarted", "ScaleDown"}) {
		t.Fatalf("events on %s: %v, want [DrainStarted ScaleDown]", victim, got)
	}
	for _, e := range evs {
		if e.Type != corev1.EventTypeNormal || e.Source.Component != "nodetide" || !strings.Contains(e.Message, "test-"+victim) {
			t.Errorf("%s: %s %q from %q, want Normal, naming the drain, from nodetide", e.Reason, e.Type, e.Message, e.Source.Component)
		}
	}
	if !strings.HasPrefix(evs[1].Message, "node removed: drain test-"+victim+" completed") {
		t.Errorf("ScaleDown message %q", evs[1].Message)
	}
}

func TestDrainRecordsRollBack(t *testing.T) {
	b := newBed(t, 0, 1)
	b.withEvents()
	victim := b.nodes(t)[0].Name
	b.deploy(t, "guarded", 2, "")
	b.pdb(t, "guarded", "guarded", 2)
	s := b.start(victim, 3*time.Second, drain.PolicyAbort)
	s.Surge = false
	if _, err := b.runSteps(t, s); err == nil {
		t.Fatal("a drain the PDB holds past its deadline succeeded")
	}
	evs := b.nodeEvents(t, victim)
	if got := reasons(evs); !slices.Equal(got, []string{"DrainStarted", "DrainRolledBack"}) {
		t.Fatalf("events on %s: %v, want [DrainStarted DrainRolledBack]", victim, got)
	}
	rb := evs[1]
	if rb.Type != corev1.EventTypeWarning || !strings.Contains(rb.Message, "node schedulable again: DrainTimeout") {
		t.Errorf("DrainRolledBack: %s %q, want a Warning naming the cause", rb.Type, rb.Message)
	}
}

func TestRefusedDrainRecordsDrainFailed(t *testing.T) {
	b := newBed(t, 1, 1) // at its minimum
	b.withEvents()
	victim := b.nodes(t)[0].Name
	_, err := b.steps.Run(context.Background(), "Prepare", b.start(victim, time.Minute, drain.PolicyAbort))
	if drain.ErrorName(err) != drain.ErrNameBelowMinSize {
		t.Fatalf("Prepare = %v, want BelowMinSize", err)
	}
	evs := b.nodeEvents(t, victim)
	if got := reasons(evs); !slices.Equal(got, []string{"DrainFailed"}) {
		t.Fatalf("events on %s: %v, want [DrainFailed]", victim, got)
	}
	if e := evs[0]; e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "failed at Prepare: BelowMinSize") {
		t.Errorf("DrainFailed: %s %q", e.Type, e.Message)
	}
}

// TestRefusedEventsDoNotFailADrain: an events API that refuses every write
// (a user with no RBAC at all, on the real API server) changes nothing for
// the drain.
func TestRefusedEventsDoNotFailADrain(t *testing.T) {
	b := newBed(t, 0, 1)
	cfg := rest.CopyConfig(b.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nodetide-without-events"}
	denied, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.steps.Events = &kubeevents.Recorder{Client: denied}
	victim := b.nodes(t)[0].Name
	if _, err := b.runSteps(t, b.start(victim, time.Minute, drain.PolicyAbort)); err != nil {
		t.Fatalf("drain failed: %v", err)
	}
	if len(b.nodes(t)) != 0 {
		t.Error("node not removed")
	}
	if got := b.nodeEvents(t, victim); len(got) != 0 {
		t.Errorf("%d events written by a user who may not", len(got))
	}
}
