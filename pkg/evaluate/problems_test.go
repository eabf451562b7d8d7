package evaluate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/metricstest"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// At monitoring essential a cycle publishes one metric, Problems: a refused
// scale-up counts (the failure and its group backed off), the backoff
// counts while it lasts, pods pending past the alarm's minutes count, and a
// quiet cycle publishes nothing. The status names each problem.
func TestProblemsCountAFailedScaleUp(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	d, p := fakeASG(t, ns, 2)
	store := state.NewMemory(ns)
	f := &fixture{cp: cp, ns: ns, pool: ns, store: store}
	f.deploy(t, "web", 1, "3")
	f.waitUnschedulable(t, 1)

	now := time.Now().UTC()
	s := planner.DefaultSettings()
	s.ScaleUp.PendingPodMinAge = 0
	e := &evaluate.Evaluator{
		Client:       cp.Client,
		Groups:       func(ctx context.Context) ([]providers.NodeGroup, error) { return p.NodeGroups(ctx) },
		Store:        store,
		Settings:     s,
		Holder:       "test",
		LeaseTTL:     time.Minute,
		Now:          func() time.Time { return now },
		PendingAlarm: 20 * time.Minute,
	}
	ctx := context.Background()
	// cycle runs one cycle at at and returns what monitoring essential
	// published and the problems the status names.
	cycle := func(at time.Time) (metricstest.Published, map[string]evaluate.Problem) {
		t.Helper()
		now = at
		m := metrics.New("prod", nil)
		m.SetLevel(metrics.LevelEssential)
		if _, err := e.Run(metrics.NewContext(ctx, m)); err != nil {
			t.Fatalf("cycle at %s: %v", at, err)
		}
		var out bytes.Buffer
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		published, err := metricstest.Parse(out.Bytes(), "prod")
		if err != nil {
			t.Fatal(err)
		}
		for key := range published {
			if key != metrics.Problems {
				t.Errorf("essential published %s", key)
			}
		}
		st, err := evaluate.ReadStatus(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]evaluate.Problem{}
		for _, p := range st.Problems {
			kinds[p.Kind] = p
		}
		return published, kinds
	}
	start := now

	d.FailNext("SetDesiredCapacity", 5, fakeaws.InternalFailure())
	published, kinds := cycle(start)
	if got := published.Sum(metrics.Problems, nil); got != 2 {
		t.Errorf("Problems after a refused scale-up = %v, want 2 (the failure, the group backed off)", got)
	}
	if p := kinds[evaluate.ProblemScaleUpFailed]; p.Count != 1 || !strings.Contains(p.Detail, ns+" ("+evaluate.ReasonCloudError+")") {
		t.Errorf("status problem %s = %+v, want the group and its reason", evaluate.ProblemScaleUpFailed, p)
	}
	if p := kinds[evaluate.ProblemGroupBackoff]; p.Count != 1 || !strings.Contains(p.Detail, ns) {
		t.Errorf("status problem %s = %+v", evaluate.ProblemGroupBackoff, p)
	}

	// Backed off: still a problem, each cycle, though nothing failed now.
	published, kinds = cycle(start.Add(time.Minute))
	if got := published.Sum(metrics.Problems, nil); got != 1 || len(kinds) != 1 || kinds[evaluate.ProblemGroupBackoff].Count != 1 {
		t.Errorf("during the backoff: Problems %v, status %+v; want 1, the backoff alone", got, kinds)
	}

	// After the backoff the group scales up; the pod stays pending (no
	// machine boots here) and, past the alarm's minutes, is a problem.
	published, kinds = cycle(start.Add(10 * time.Minute))
	if published.Has(metrics.Problems, nil) || len(kinds) != 0 {
		t.Errorf("after the backoff: published %v, status %+v; want nothing and none", published, kinds)
	}
	published, kinds = cycle(start.Add(24 * time.Minute))
	if got := published.Sum(metrics.Problems, nil); got != 1 {
		t.Errorf("a pod pending past 20 minutes: Problems %v, want 1", got)
	}
	if p := kinds[evaluate.ProblemPodsPending]; p.Count != 1 || !strings.Contains(p.Detail, ns+"/web-") {
		t.Errorf("status problem %s = %+v, want the pod", evaluate.ProblemPodsPending, p)
	}
	doc, _ := json.Marshal(kinds)
	t.Logf("status problems: %s", doc)
}

func TestPendingAlarmFromEnv(t *testing.T) {
	tests := []struct {
		env     string
		want    time.Duration
		wantErr bool
	}{
		{"", evaluate.DefaultPendingAlarm, false},
		{"1", time.Minute, false},
		{"1440", 24 * time.Hour, false},
		{"0", 0, true},
		{"1441", 0, true},
		{"10m", 0, true},
	}
	for _, tc := range tests {
		got, err := evaluate.PendingAlarmFromEnv(func(k string) string {
			if k == evaluate.EnvPendingAlarmMinutes {
				return tc.env
			}
			return ""
		})
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%q: %v, %v; want %v (error %v)", tc.env, got, err, tc.want, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), evaluate.EnvPendingAlarmMinutes) {
			t.Errorf("%q: error %q does not name the variable", tc.env, err)
		}
	}
}

// A cycle that fails is a problem too: it publishes Problems (the
// invocation also fails, which the failure queue's alarm sees when the
// tick was scheduled) and the status names its error.
func TestProblemsCountAFailedCycle(t *testing.T) {
	cp := testbed.Cluster(t)
	store := state.NewMemory("failing")
	e := &evaluate.Evaluator{
		Client: cp.Client,
		Groups: func(context.Context) ([]providers.NodeGroup, error) {
			return nil, errors.New("DescribeAutoScalingGroups: AccessDenied")
		},
		Store: store, Settings: planner.DefaultSettings(), Holder: "test", LeaseTTL: time.Minute,
	}
	m := metrics.New("prod", nil)
	m.SetLevel(metrics.LevelEssential)
	if _, err := e.Run(metrics.NewContext(context.Background(), m)); err == nil {
		t.Fatal("the cycle did not fail")
	}
	var out bytes.Buffer
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	published, err := metricstest.Parse(out.Bytes(), "prod")
	if err != nil || published.Sum(metrics.Problems, nil) != 1 {
		t.Errorf("published %v (%v), want Problems 1", published, err)
	}
	st, err := evaluate.ReadStatus(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Problems) != 1 || st.Problems[0].Kind != evaluate.ProblemCycleFailed || !strings.Contains(st.Problems[0].Detail, "AccessDenied") {
		t.Errorf("status problems %+v, want the cycle's error", st.Problems)
	}
}

// A drain still running more than 5 minutes past its deadline is a problem
// each cycle; one just past it (its next step acts on it) is not yet.
func TestProblemsCountAnOverdueDrain(t *testing.T) {
	cp := testbed.Cluster(t)
	ctx := context.Background()
	store := state.NewMemory("overdue")
	now := time.Now().UTC()
	for node, deadline := range map[string]time.Time{"stuck": now.Add(-10 * time.Minute), "late": now.Add(-time.Minute)} {
		if _, err := store.BeginDrain(ctx, state.DrainRecord{Node: node, ID: node + "-1", NodeGroup: "workers",
			StartedAt: now.Add(-time.Hour), Deadline: deadline, Phase: state.PhasePrepared}); err != nil {
			t.Fatal(err)
		}
	}
	e := &evaluate.Evaluator{
		Client: cp.Client,
		Groups: func(context.Context) ([]providers.NodeGroup, error) { return nil, nil },
		Store:  store, Settings: planner.DefaultSettings(), Holder: "test", LeaseTTL: time.Minute,
		Now: func() time.Time { return now },
	}
	m := metrics.New("prod", nil)
	m.SetLevel(metrics.LevelEssential)
	if _, err := e.Run(metrics.NewContext(ctx, m)); err != nil {
		t.Fatal(err)
	}
	st, err := evaluate.ReadStatus(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	var overdue *evaluate.Problem
	for i, p := range st.Problems {
		if p.Kind == evaluate.ProblemDrainOverdue {
			overdue = &st.Problems[i]
		}
	}
	if overdue == nil || overdue.Count != 1 || !strings.HasPrefix(overdue.Detail, "stuck (deadline ") {
		t.Fatalf("status problems %+v, want the stuck drain alone overdue", st.Problems)
	}
	var out bytes.Buffer
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if published, err := metricstest.Parse(out.Bytes(), "prod"); err != nil || published.Sum(metrics.Problems, nil) < 1 {
		t.Errorf("published %v (%v), want Problems counting the overdue drain", published, err)
	}
}
