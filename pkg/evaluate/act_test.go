package evaluate

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// recordingGroup records the calls the cycle makes.
type recordingGroup struct {
	target    int
	decreases []int
}

func (r *recordingGroup) Name() string                                            { return "g" }
func (r *recordingGroup) Provider() string                                        { return "test" }
func (r *recordingGroup) Bounds() providers.Bounds                                { return providers.Bounds{Min: 0, Max: 10} }
func (r *recordingGroup) TargetSize(context.Context) (int, error)                 { return r.target, nil }
func (r *recordingGroup) Instances(context.Context) ([]providers.Instance, error) { return nil, nil }
func (r *recordingGroup) IncreaseSize(context.Context, int) error                 { return nil }
func (r *recordingGroup) DeleteInstance(context.Context, string) error            { return nil }
func (r *recordingGroup) Template(context.Context) (snapshot.Template, error) {
	return snapshot.Template{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}}, nil
}
func (r *recordingGroup) DecreaseTargetSize(_ context.Context, d int) error {
	r.decreases = append(r.decreases, d)
	r.target += d
	return nil
}

// TestDecreaseTargetIsNegative: capacity that never registered is given back
// with the negative delta the provider interface takes. (A narrow unit test:
// the fake clientset only stands in for an empty cluster.)
func TestDecreaseTargetIsNegative(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	g := &recordingGroup{target: 2}
	store := state.NewMemory("c")
	prev, _ := store.LoadState(context.Background())
	next := prev
	next.LastScaleUp = map[string]time.Time{"g": now.Add(-30 * time.Minute)}
	if err := store.SaveState(context.Background(), prev, next); err != nil {
		t.Fatal(err)
	}
	ev := &Evaluator{Client: fake.NewClientset(), Store: store, Settings: planner.DefaultSettings(), Now: func() time.Time { return now },
		Groups: func(context.Context) ([]providers.NodeGroup, error) { return []providers.NodeGroup{g}, nil }}
	res, err := ev.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(g.decreases) != 1 || g.decreases[0] != -2 {
		t.Fatalf("DecreaseTargetSize calls = %v, want [-2] (plan %+v)", g.decreases, res.Plan.DecreaseTarget)
	}
	if len(res.Actions) != 1 || res.Actions[0].Error != "" {
		t.Errorf("actions = %+v", res.Actions)
	}
}
