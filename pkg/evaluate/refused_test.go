package evaluate_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/metricstest"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// A scale-up the cloud refuses shows where docs/operations.md says, end to end: the
// status item in DynamoDB (what `nodetide status` prints) has the error as
// the last error, the failed action, the group BackedOff and ScaleUpFailed
// with its backoff, and the problems ScaleUpFailed and GroupBackedOff; the
// essential Problems metric counts both; the pending pod's Kubernetes Event
// is NotTriggerScaleUp, "in backoff after failed scale-up", and it gets no
// TriggeredScaleUp (that is for a scale-up the provider took).
func TestRefusedScaleUpShowsInStatusProblemsAndEvent(t *testing.T) {
	tests := []struct {
		name     string
		fault    fakeaws.Fault
		attempts int    // the SDK retries throttling, not a validation error
		reason   string // the action's and the ScaleUpFailed problem's
		apiError string // what the status's error says of the cloud's answer
	}{
		{"max size lowered meanwhile", fakeaws.ValidationError("New SetDesiredCapacity value 1 is above max value 0 for the AutoScalingGroup."), 1,
			evaluate.ReasonAboveMax, "api error ValidationError: New SetDesiredCapacity value 1 is above max value 0 for the AutoScalingGroup."},
		{"throttled", fakeaws.Throttling(), 5, evaluate.ReasonThrottled, "api error Throttling: Rate exceeded"},
	}
	client := testbed.DynamoDB(t).Client(t)
	ctx := context.Background()
	const table = "evaluate-refused"
	if err := state.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := testbed.Cluster(t)
			ns := cp.Namespace(t)
			d, p := fakeASG(t, ns, 2)
			store := state.NewDynamoDB(client, table, ns)
			f := &fixture{cp: cp, ns: ns, pool: ns, store: store}
			f.deploy(t, "web", 1, "3")
			f.waitUnschedulable(t, 1)

			now := time.Now().UTC()
			s := planner.DefaultSettings()
			s.ScaleUp.PendingPodMinAge = 0
			e := &evaluate.Evaluator{
				Client:   cp.Client,
				Groups:   func(ctx context.Context) ([]providers.NodeGroup, error) { return p.NodeGroups(ctx) },
				Store:    store,
				Settings: s,
				Holder:   "test",
				LeaseTTL: time.Minute,
				Now:      func() time.Time { return now },
				Events:   f.recorder(cp.Client, nil),
			}
			d.FailNext("SetDesiredCapacity", tt.attempts, tt.fault)
			m := metrics.New("prod", nil)
			m.SetLevel(metrics.LevelEssential)
			if _, err := e.Run(metrics.NewContext(ctx, m)); err != nil {
				t.Fatalf("cycle: %v", err)
			}
			if got := len(d.Requests("SetDesiredCapacity")); got != tt.attempts {
				t.Errorf("%d SetDesiredCapacity calls, want %d", got, tt.attempts)
			}
			if g, _ := d.Group(ns); g.DesiredCapacity != 0 {
				t.Errorf("desired capacity %d after the refusal, want 0", g.DesiredCapacity)
			}

			// Problems: the failure and the group backed off.
			var out bytes.Buffer
			if err := m.Write(&out); err != nil {
				t.Fatal(err)
			}
			published, err := metricstest.Parse(out.Bytes(), "prod")
			if err != nil {
				t.Fatal(err)
			}
			if got := published.Sum(metrics.Problems, nil); got != 2 {
				t.Errorf("Problems = %v, want 2 (ScaleUpFailed, GroupBackedOff)", got)
			}

			// The status item, read back from DynamoDB as `nodetide status` reads it.
			st, err := evaluate.ReadStatus(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			checkRefusedStatus(t, st, ns, now, tt.reason, tt.apiError)

			// The pod's Event.
			pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(pods.Items) != 1 {
				t.Fatalf("pods: %v, %v", pods, err)
			}
			pod := pods.Items[0]
			if pod.Spec.NodeName != "" {
				t.Errorf("pod bound to %s", pod.Spec.NodeName)
			}
			if got := f.podEvents(t, kubeevents.ReasonTriggeredScaleUp); len(got) != 0 {
				t.Errorf("TriggeredScaleUp for a refused scale-up: %+v", got)
			}
			ev, ok := f.podEvents(t, kubeevents.ReasonNotTriggerScaleUp)[pod.Name]
			const want = "pod didn't trigger scale-up: 1 in backoff after failed scale-up"
			if !ok || ev.Message != want || ev.Type != corev1.EventTypeNormal || ev.InvolvedObject.UID != pod.UID ||
				ev.Source.Component != "nodetide" || ev.ReportingController != "nodetide" {
				t.Errorf("pod %s: NotTriggerScaleUp %v: %q %s uid %s source %q controller %q; want %q Normal uid %s from nodetide",
					pod.Name, ok, ev.Message, ev.Type, ev.InvolvedObject.UID, ev.Source.Component, ev.ReportingController, want, pod.UID)
			}
		})
	}
}

// checkRefusedStatus checks the status of a cycle whose scale-up of group
// was refused at now, for reason, with the cloud's apiError.
func checkRefusedStatus(t *testing.T, st evaluate.Status, group string, now time.Time, reason, apiError string) {
	t.Helper()
	if st.Error != "" {
		t.Errorf("cycle error %q: a refused scale-up does not fail the cycle", st.Error)
	}
	if st.LastError == nil || !st.LastError.At.Equal(now) || !strings.HasPrefix(st.LastError.Message, "scaleUp "+group+": ") ||
		!strings.Contains(st.LastError.Message, apiError) {
		t.Errorf("last error %+v, want at %s \"scaleUp %s: ...%s\"", st.LastError, now, group, apiError)
	}
	if len(st.Actions) != 1 || st.Actions[0].Kind != "scaleUp" || st.Actions[0].Delta != 1 ||
		st.Actions[0].Reason != reason || !strings.Contains(st.Actions[0].Error, apiError) {
		t.Errorf("actions %+v, want the scaleUp of 1 with its %s error", st.Actions, reason)
	}
	if len(st.NodeGroups) != 1 {
		t.Fatalf("node groups %+v, want %s", st.NodeGroups, group)
	}
	g := st.NodeGroups[0]
	if !slices.Contains(g.Health, evaluate.HealthBackedOff) || !slices.Contains(g.Health, evaluate.HealthScaleUpFailed) ||
		g.BackoffUntil == nil || !g.BackoffUntil.After(now) || g.LastScaleUp != nil {
		t.Errorf("group %s: health %v, backoff until %v, last scale-up %v; want BackedOff and ScaleUpFailed, backed off, no scale-up",
			g.Name, g.Health, g.BackoffUntil, g.LastScaleUp)
	}
	problems := map[string]evaluate.Problem{}
	for _, p := range st.Problems {
		problems[p.Kind] = p
	}
	if p := problems[evaluate.ProblemScaleUpFailed]; p.Count != 1 || p.Detail != group+" ("+reason+")" {
		t.Errorf("problem %s = %+v, want 1: %s (%s)", evaluate.ProblemScaleUpFailed, p, group, reason)
	}
	if g.BackoffUntil != nil {
		want := group + " until " + g.BackoffUntil.UTC().Format(time.RFC3339)
		if p := problems[evaluate.ProblemGroupBackoff]; p.Count != 1 || p.Detail != want {
			t.Errorf("problem %s = %+v, want 1: %s", evaluate.ProblemGroupBackoff, p, want)
		}
	}
}
