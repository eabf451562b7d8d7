package drain_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/metricstest"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/metrics"
)

// The drain steps publish what happened to each drain: started once
// however often Prepare runs, a refusal apart from failures, a rollback
// and a removal with their durations, and a stray draining taint that
// recovery takes off.
func TestDrainMetrics(t *testing.T) {
	b := newBed(t, 0, 2)
	m := metrics.New("prod", nil)
	ctx := metrics.NewContext(context.Background(), m)
	b.ctx = ctx
	nodes := b.nodes(t)
	rolled, removed := nodes[0].Name, nodes[1].Name

	// A drain that is refused a second time, then rolled back.
	s := b.start(rolled, time.Minute, drain.PolicyAbort)
	for _, step := range []string{"Prepare", "Prepare", "Cordon"} {
		var err error
		if s, err = b.steps.Run(ctx, step, s); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	other := s
	other.DrainID = "other"
	if _, err := b.steps.Run(ctx, "Prepare", other); drain.ErrorName(err) != drain.ErrNameAlreadyDraining {
		t.Fatalf("second drain: %v, want AlreadyDraining", err)
	}
	s.Error = &drain.ErrorInfo{Error: "Transient", Cause: "test"}
	for _, step := range []string{"Rollback", "Rollback"} { // the retry ends nothing new
		if _, err := b.steps.Run(ctx, step, s); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}

	// A drain that removes its node.
	if _, err := b.runSteps(t, b.start(removed, time.Minute, drain.PolicyAbort)); err != nil {
		t.Fatalf("drain of %s: %v", removed, err)
	}

	// A draining taint no drain holds (a lost Rollback, a person's copy).
	if err := k8s.Cordon(ctx, b.cp.Client, rolled, drain.TaintKey); err != nil {
		t.Fatal(err)
	}
	list, err := b.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + rolled})
	if err != nil {
		t.Fatal(err)
	}
	if freed, err := (&drain.Recovery{Steps: b.steps}).Untaint(ctx, list.Items); err != nil || len(freed) != 1 {
		t.Fatalf("untaint: %v, %v", freed, err)
	}

	var out bytes.Buffer
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	got, err := metricstest.Parse(out.Bytes(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		metrics.DrainsStarted:         2,
		metrics.DrainsRejected:        1,
		metrics.DrainsRolledBack:      1,
		metrics.DrainsSucceeded:       1,
		metrics.NodesRemoved:          1,
		metrics.StrayCordonsRecovered: 1,
	} {
		if got.Sum(name, nil) != want {
			t.Errorf("%s = %v, want %v", name, got.Sum(name, nil), want)
		}
	}
	if d := got[metrics.DrainDuration]; len(d) != 2 || d[0] < 0 || d[1] < 0 {
		t.Errorf("drain durations %v, want one for the rollback and one for the removal", d)
	}
}
