package evaluate_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// podEvents lists the events of reason in the fixture's namespace, by pod.
func (f *fixture) podEvents(t *testing.T, reason string) map[string]corev1.Event {
	t.Helper()
	list, err := f.cp.Client.CoreV1().Events(f.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Pod", "reason": reason}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Event{}
	for _, ev := range list.Items {
		if _, dup := out[ev.InvolvedObject.Name]; dup {
			t.Errorf("pod %s has two %s events", ev.InvolvedObject.Name, reason)
		}
		out[ev.InvolvedObject.Name] = ev
	}
	return out
}

func (f *fixture) recorder(client kubernetes.Interface, log *slog.Logger) *kubeevents.Recorder {
	return &kubeevents.Recorder{Client: client, Instance: "evaluate-test", Log: log}
}

func TestScaleUpRecordsTriggeredScaleUp(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	f.deploy(t, "big", 2, "3") // one pod per 4-CPU node
	f.waitUnschedulable(t, 2)
	ev := f.evaluator("events-up")
	ev.Events = f.recorder(f.cp.Client, nil)
	res, err := ev.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.ScaleUp) != 1 || res.Plan.ScaleUp[0].Delta != 2 {
		t.Fatalf("scale-up = %+v, want one of 2 nodes", res.Plan.ScaleUp)
	}
	pods, err := f.cp.Client.CoreV1().Pods(f.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := f.podEvents(t, kubeevents.ReasonTriggeredScaleUp)
	if len(got) != 2 {
		t.Fatalf("TriggeredScaleUp events = %d, want 2 (one per pod)", len(got))
	}
	want := "pod triggered scale-up: [{" + f.pool + " 0->2 (max: 3)}]"
	for _, p := range pods.Items {
		e, ok := got[p.Name]
		if !ok {
			t.Errorf("pod %s: no TriggeredScaleUp event", p.Name)
			continue
		}
		if e.Message != want || e.Type != corev1.EventTypeNormal || e.InvolvedObject.UID != p.UID ||
			e.Source.Component != "nodetide" || e.ReportingController != "nodetide" || e.Count != 1 {
			t.Errorf("pod %s: event = %q %s uid %s source %q controller %q count %d, want %q Normal uid %s nodetide nodetide 1",
				p.Name, e.Message, e.Type, e.InvolvedObject.UID, e.Source.Component, e.ReportingController, e.Count, want, p.UID)
		}
	}
}

// twoGroups: the fixture's group, at its max, and a group whose nodes the
// pods' selector does not match.
func twoGroups(t *testing.T, f *fixture) *evaluate.Evaluator {
	t.Helper()
	other := kwok.New(f.cp.Client, f.pool+"-other", 0, 5, snapshot.Template{
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods: resource.MustParse("110"),
		},
		Labels: map[string]string{"pool": f.pool + "-other"},
	})
	ev := f.evaluator("events-not")
	ev.Groups = func(context.Context) ([]providers.NodeGroup, error) {
		return []providers.NodeGroup{f.group, other}, nil
	}
	return ev
}

func TestImpossibleScaleUpRecordsNotTriggerScaleUpOncePerInterval(t *testing.T) {
	f := newFixture(t, 0, 0, nil) // at max from the start
	f.deploy(t, "stuck", 1, "1")
	f.waitUnschedulable(t, 1)
	ev := twoGroups(t, f)
	ev.Events = f.recorder(f.cp.Client, nil)
	ev.EventSettings.NotTriggerScaleUpInterval = time.Hour
	ctx := context.Background()

	for range 2 { // the second cycle is within the interval: no new write
		if _, err := ev.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := f.podEvents(t, kubeevents.ReasonNotTriggerScaleUp)
	if len(got) != 1 {
		t.Fatalf("NotTriggerScaleUp events = %d, want 1", len(got))
	}
	want := "pod didn't trigger scale-up: 1 max node group size reached, 1 node(s) didn't match Pod's node affinity/selector"
	for name, e := range got {
		if e.Message != want || e.Count != 1 {
			t.Fatalf("pod %s: %q count %d, want %q count 1", name, e.Message, e.Count, want)
		}
	}

	// Once the interval has passed the same event is counted again, not
	// written as a second object.
	ev.EventSettings.NotTriggerScaleUpInterval = time.Nanosecond
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for name, e := range f.podEvents(t, kubeevents.ReasonNotTriggerScaleUp) {
		if e.Count != 2 {
			t.Fatalf("pod %s: count %d after the interval, want 2", name, e.Count)
		}
	}
}

func TestPodEventsPerCycleAreBounded(t *testing.T) {
	f := newFixture(t, 0, 0, nil)
	f.deploy(t, "many", 5, "1")
	f.waitUnschedulable(t, 5)
	ev := f.evaluator("events-bound")
	ev.Events = f.recorder(f.cp.Client, nil)
	ev.EventSettings = evaluate.EventSettings{MaxPodEventsPerCycle: 2, NotTriggerScaleUpInterval: time.Hour}
	ctx := context.Background()
	for cycle, want := range []int{2, 4, 5} {
		if _, err := ev.Run(ctx); err != nil {
			t.Fatal(err)
		}
		// The pods left out get theirs in the next cycles.
		if got := len(f.podEvents(t, kubeevents.ReasonNotTriggerScaleUp)); got != want {
			t.Fatalf("after cycle %d: %d pods have NotTriggerScaleUp, want %d", cycle+1, got, want)
		}
	}
}

// syncBuffer is a log sink safe for the cycle's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRefusedEventsDoNotFailTheCycle(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	f.deploy(t, "refused", 2, "3")
	f.waitUnschedulable(t, 2)
	// A user with no RBAC at all: the real API server refuses its writes.
	cfg := rest.CopyConfig(f.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nodetide-without-events"}
	denied, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ev := f.evaluator("events-refused")
	ev.Events = f.recorder(denied, slog.New(slog.NewJSONHandler(&logs, nil)))
	res, err := ev.Run(context.Background())
	if err != nil {
		t.Fatalf("cycle failed: %v", err)
	}
	if len(res.Actions) != 1 || res.Actions[0].Kind != "scaleUp" || res.Actions[0].Error != "" {
		t.Fatalf("actions = %+v, want one scale-up that worked", res.Actions)
	}
	if n := f.target(t); n != 2 {
		t.Fatalf("target = %d, want 2", n)
	}
	if !strings.Contains(logs.String(), "kubernetes events not recorded") || !strings.Contains(logs.String(), "forbidden") {
		t.Fatalf("no warning about the refused events in the log:\n%s", logs.String())
	}
	if got := len(f.podEvents(t, kubeevents.ReasonTriggeredScaleUp)); got != 0 {
		t.Fatalf("%d events written by a user who may not", got)
	}
}

// drainStarter stands in for the drain state machine: it only says whether
// starting worked.
type drainStarter struct{ err error }

func (d *drainStarter) StartDrain(context.Context, planner.ScaleDown, time.Time) error { return d.err }

func TestStartedDrainRecordsScaleDownOnTheNode(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	if err := f.group.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.waitOneNodeReady(t)
	ev := f.evaluator("events-down")
	ev.Settings.ScaleDown.UnneededTime, ev.Settings.ScaleDown.DelayAfterAdd = 0, 0
	ev.Events = f.recorder(f.cp.Client, nil)
	starter := &drainStarter{err: errors.New("state machine unreachable")}
	ev.Drainer = starter

	nodeEvents := func() []corev1.Event {
		list, err := f.cp.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.kind": "Node", "reason": kubeevents.ReasonScaleDown}.String(),
		})
		if err != nil {
			t.Fatal(err)
		}
		var out []corev1.Event
		for _, e := range list.Items {
			if strings.HasPrefix(e.InvolvedObject.Name, f.pool) {
				out = append(out, e)
			}
		}
		return out
	}
	// A drain that did not start: no event.
	res, err := ev.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.ScaleDown) != 1 {
		t.Fatalf("scale-down = %+v, want the empty node", res.Plan.ScaleDown)
	}
	if got := nodeEvents(); len(got) != 0 {
		t.Fatalf("ScaleDown recorded for a drain that did not start: %+v", got)
	}
	starter.err = nil
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	got := nodeEvents()
	if len(got) != 1 || got[0].InvolvedObject.Name != res.Plan.ScaleDown[0].Node ||
		!strings.HasPrefix(got[0].Message, "node chosen for removal, drain started: utilisation") {
		t.Fatalf("ScaleDown events = %+v, want one on %s", got, res.Plan.ScaleDown[0].Node)
	}
}

// TestNotTriggerScaleUpMessage: each group reason code reads as
// cluster-autoscaler words it, counted; a code without a phrase keeps its
// reason.
func TestNotTriggerScaleUpMessage(t *testing.T) {
	gr := func(group, code, reason string) planner.GroupReason {
		return planner.GroupReason{NodeGroup: group, Code: code, Reason: reason}
	}
	tests := []struct {
		name   string
		groups []planner.GroupReason
		want   string
	}{
		{"no groups", nil, "pod didn't trigger scale-up: there are no node groups"},
		{"counted and sorted", []planner.GroupReason{
			gr("a", planner.ReasonMaxSizeReached, "node group a at max size 3"),
			gr("b", planner.ReasonTopologySpread, "node group b: topology spread on topology.kubernetes.io/zone (maxSkew 1)"),
			gr("c", planner.ReasonTopologySpread, "node group c: topology spread on topology.kubernetes.io/zone (maxSkew 1)"),
		}, "pod didn't trigger scale-up: 1 max node group size reached, 2 node(s) didn't match pod topology spread constraints"},
		{"ports and affinity", []planner.GroupReason{
			gr("a", planner.ReasonHostPort, "node group a: host port TCP/80 already in use"),
			gr("b", planner.ReasonPodAffinity, "node group b: pod anti-affinity on kubernetes.io/hostname"),
		}, "pod didn't trigger scale-up: 1 node(s) didn't have free ports for the requested pod ports, 1 node(s) didn't match pod affinity/anti-affinity rules"},
		{"insufficient names the resource", []planner.GroupReason{
			gr("a", planner.ReasonInsufficient, "insufficient cpu (needs 5, template has 4)"),
		}, "pod didn't trigger scale-up: 1 Insufficient cpu"},
		{"other keeps its reason", []planner.GroupReason{
			gr("a", planner.ReasonOther, "volume zone rule"),
		}, "pod didn't trigger scale-up: 1 volume zone rule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := evaluate.NotTriggerScaleUpMessage(tt.groups); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
