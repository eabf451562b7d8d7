package evaluate_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/buildinfo"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

func TestCycleWritesStatus(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	client := testbed.DynamoDB(t).Client(t)
	if err := state.CreateTable(ctx, client, "evaluate-status"); err != nil {
		t.Fatal(err)
	}
	store := state.NewDynamoDB(client, "evaluate-status", f.pool)
	f.store = store
	// A drain holding a node of the group, as Prepare leaves it.
	started := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if _, err := store.BeginDrain(ctx, state.DrainRecord{Node: "n-draining", ID: "d1", NodeGroup: f.pool,
		StartedAt: started, Phase: state.PhasePrepared}); err != nil {
		t.Fatal(err)
	}
	f.deploy(t, "big", 2, "3")
	f.waitUnschedulable(t, 2)

	ev := f.evaluator("status-cycle")
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := evaluate.ReadStatus(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.NodeGroups) != 1 {
		t.Fatalf("status groups = %+v, want one", st.NodeGroups)
	}
	g := st.NodeGroups[0]
	if g.Name != f.pool || g.MinSize != 0 || g.MaxSize != 3 || g.TargetSize != 2 || g.Registered != 0 || g.LastScaleUp == nil {
		t.Errorf("group = %+v, want min 0 max 3 target 2, none registered yet, a last scale-up", g)
	}
	if len(g.Health) != 1 || g.Health[0] != evaluate.HealthProvisioning {
		t.Errorf("health = %v, want [Provisioning]", g.Health)
	}
	if len(st.Drains) != 1 || st.Drains[0].Node != "n-draining" || st.Drains[0].Phase != state.PhasePrepared.String() || !st.Drains[0].StartedAt.Equal(started) {
		t.Errorf("drains = %+v, want n-draining prepared since %s", st.Drains, started)
	}
	if st.CycleAt.IsZero() || st.Duration == "" || st.Error != "" || st.LastError != nil {
		t.Errorf("cycle at %s took %q, error %q, last error %+v", st.CycleAt, st.Duration, st.Error, st.LastError)
	}
	// The build that ran the cycle: a test binary is not stamped.
	if st.Build == nil || st.Build.Version != buildinfo.Devel || st.Build.GoVersion != runtime.Version() {
		t.Errorf("build = %+v, want devel built with %s", st.Build, runtime.Version())
	}
	if len(st.Actions) != 1 || st.Actions[0].Kind != "scaleUp" {
		t.Errorf("actions = %+v, want the scale-up", st.Actions)
	}

	// A cycle that fails keeps the last known groups and says why.
	ev.Groups = func(context.Context) ([]providers.NodeGroup, error) {
		return nil, errors.New("cloud API unreachable")
	}
	if _, err := ev.Run(ctx); err == nil {
		t.Fatal("cycle without node groups succeeded")
	}
	failed, err := evaluate.ReadStatus(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if failed.Error == "" || failed.LastError == nil || failed.LastError.Message != failed.Error {
		t.Errorf("failed cycle: error %q, last error %+v", failed.Error, failed.LastError)
	}
	if failed.Build == nil || *failed.Build != *st.Build {
		t.Errorf("failed cycle: build %+v, want %+v", failed.Build, st.Build)
	}
	if len(failed.NodeGroups) != 1 || !failed.GroupsAt.Equal(st.GroupsAt) || failed.CycleAt.Before(st.CycleAt) {
		t.Errorf("failed cycle: groups %+v as of %s, want the previous ones as of %s", failed.NodeGroups, failed.GroupsAt, st.GroupsAt)
	}
}
