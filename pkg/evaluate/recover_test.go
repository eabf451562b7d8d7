package evaluate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/metricstest"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// noExecutions is a Step Functions that has never heard of any execution.
type noExecutions struct{}

func (noExecutions) DescribeExecution(context.Context, *sfn.DescribeExecutionInput, ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	return nil, &sfntypes.ExecutionDoesNotExist{Message: aws.String("does not exist")}
}

func (noExecutions) StopExecution(context.Context, *sfn.StopExecutionInput, ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error) {
	return nil, &sfntypes.ExecutionDoesNotExist{Message: aws.String("does not exist")}
}

// An evaluate cycle first finishes the drains whose execution is gone (the
// node, cordoned by the drain, is given back before the plan reads it) and
// frees a node that carries the draining taint with no drain holding it.
func TestCycleRecoversDrains(t *testing.T) {
	store := state.NewMemory("recover")
	f := newFixture(t, 0, 5, store)
	ctx := context.Background()
	if err := f.group.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var nodes []corev1.Node
	f.cp.WaitFor(t, time.Minute, "2 nodes", func(ctx context.Context) (bool, error) {
		list, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + f.pool})
		nodes = list.Items
		return err == nil && len(nodes) == 2, err
	})
	orphan, stray := nodes[0].Name, nodes[1].Name
	steps := &drain.Steps{Client: f.cp.Client, Store: store, StepWait: -1,
		Groups: func(context.Context) ([]providers.NodeGroup, error) { return []providers.NodeGroup{f.group}, nil }}
	s := drain.State{Node: orphan, DrainID: "gone", Deadline: time.Now().Add(time.Hour), Policy: drain.PolicyAbort}
	for _, step := range []string{"Prepare", "Cordon"} {
		var err error
		if s, err = steps.Run(ctx, step, s); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	if err := k8s.Cordon(ctx, f.cp.Client, stray, drain.TaintKey); err != nil {
		t.Fatal(err)
	}

	ev := f.evaluator("recover")
	ev.Recoverer = &drain.Recovery{Steps: steps, SFN: noExecutions{}, Grace: time.Nanosecond,
		StateMachineArn: "arn:aws:states:us-east-1:000000000000:stateMachine:drain"}
	m := metrics.New("prod", nil)
	res, err := ev.Run(metrics.NewContext(ctx, m))
	if err != nil {
		t.Fatal(err)
	}
	// What pages someone: a drain that ended unfinished, a stray cordon;
	// at monitoring essential both are Problems, and the status names them.
	m.SetLevel(metrics.LevelEssential)
	var essential bytes.Buffer
	for _, doc := range m.Documents() {
		if err := json.NewEncoder(&essential).Encode(doc); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := metricstest.Parse(essential.Bytes(), "prod"); err != nil || got.Sum(metrics.Problems, nil) != 2 || len(got) != 1 {
		t.Errorf("essential published %v (%v), want Problems 2 alone", got, err)
	}
	st, err := evaluate.ReadStatus(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]evaluate.Problem{}
	for _, p := range st.Problems {
		kinds[p.Kind] = p
	}
	if p := kinds[evaluate.ProblemStrayCordon]; p.Count != 1 || p.Detail != stray {
		t.Errorf("status problem %s = %+v, want node %s", evaluate.ProblemStrayCordon, p, stray)
	}
	if p := kinds[evaluate.ProblemDrainEndedUnfinished]; p.Count != 1 || !strings.Contains(p.Detail, orphan+"/gone") {
		t.Errorf("status problem %s = %+v, want drain %s/gone", evaluate.ProblemDrainEndedUnfinished, p, orphan)
	}
	m.SetLevel(metrics.LevelFull)
	var out bytes.Buffer
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	published, err := metricstest.Parse(out.Bytes(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		metrics.DrainsRecovered: 1, metrics.StrayCordonsRecovered: 1, metrics.CycleCompleted: 1,
		metrics.DrainsRolledBack: 0, // recovered, counted apart
	} {
		if got := published.Sum(name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if res.Recovered == nil || len(res.Recovered.RolledBack) != 1 || len(res.Recovered.Untainted) != 1 || res.Recovered.Untainted[0] != stray {
		t.Fatalf("recovered %+v, want the orphaned drain rolled back and %s untainted", res.Recovered, stray)
	}
	for _, name := range []string{orphan, stray} {
		n, err := f.cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		drained := false
		for _, taint := range n.Spec.Taints {
			drained = drained || taint.Key == drain.TaintKey
		}
		if n.Spec.Unschedulable || drained {
			t.Errorf("node %s still cordoned after the cycle: %v", name, n.Spec.Taints)
		}
	}
	if active, _, _ := store.NodeDrain(ctx, orphan); active != "" {
		t.Errorf("node %s still held by %q", orphan, active)
	}
}
