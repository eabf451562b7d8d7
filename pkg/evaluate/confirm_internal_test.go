package evaluate

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// growingGroup is an empty group that records its size increases.
type growingGroup struct {
	recordingGroup
	increases []int
}

func (g *growingGroup) IncreaseSize(_ context.Context, delta int) error {
	g.target += delta
	g.increases = append(g.increases, delta)
	return nil
}

// heldStore runs meanwhile once, right after the cycle has loaded the state:
// what happens while a cycle is held up after reading.
type heldStore struct {
	*state.Memory
	meanwhile func(context.Context)
}

func (s *heldStore) LoadState(ctx context.Context) (snapshot.State, error) {
	st, err := s.Memory.LoadState(ctx)
	if f := s.meanwhile; f != nil {
		s.meanwhile = nil
		f(ctx)
	}
	return st, err
}

// TestCycleOvertakenWhileDecidingDoesNotAct: a cycle held up past its lease
// after reading (here, with a pending pod it would scale up for) acts only
// if no other run has taken the lease and recorded an act meanwhile.
func TestCycleOvertakenWhileDecidingDoesNotAct(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	later := t0.Add(2 * time.Minute) // past the cycle's lease of one minute
	for _, tc := range []struct {
		name string
		// meanwhile is what another run does while the cycle is held.
		meanwhile func(ctx context.Context, s *state.Memory) error
		acts      bool
	}{
		{"nobody else ran", func(context.Context, *state.Memory) error { return nil }, true},
		{"another run took the lease and scaled up", func(ctx context.Context, s *state.Memory) error {
			l, err := s.AcquireLease(ctx, LeaseName, "other", time.Minute, later)
			if err != nil {
				return err
			}
			prev, err := s.LoadState(ctx)
			if err != nil {
				return err
			}
			next := prev.Normal()
			next.LastScaleUp["g"] = later
			if err := s.SaveState(ctx, prev, next); err != nil {
				return err
			}
			return s.ReleaseLease(ctx, l)
		}, false},
		{"another run holds the lease", func(ctx context.Context, s *state.Memory) error {
			_, err := s.AcquireLease(ctx, LeaseName, "other", time.Minute, later)
			return err
		}, false},
		{"a drain ended, clearing its node's unneeded time", func(ctx context.Context, s *state.Memory) error {
			prev, err := s.LoadState(ctx)
			if err != nil {
				return err
			}
			next := prev.Normal()
			delete(next.UnneededSince, "gone")
			return s.SaveState(ctx, prev, next)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem := state.NewMemory("c")
			prev, _ := mem.LoadState(ctx)
			next := prev.Normal()
			next.UnneededSince["gone"] = t0.Add(-time.Hour)
			if err := mem.SaveState(ctx, prev, next); err != nil {
				t.Fatal(err)
			}
			clock := t0
			store := &heldStore{Memory: mem}
			store.meanwhile = func(ctx context.Context) {
				clock = later
				if err := tc.meanwhile(ctx, mem); err != nil {
					t.Fatal(err)
				}
			}
			pending := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute)),
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs"}}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
					Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
			}
			g := &growingGroup{}
			set := planner.DefaultSettings()
			set.ScaleUp.PendingPodMinAge = 0
			ev := &Evaluator{Client: fake.NewClientset(pending), Store: store, Settings: set, Holder: "held", Log: slog.New(slog.DiscardHandler),
				LeaseTTL: time.Minute, Now: func() time.Time { return clock },
				Groups: func(context.Context) ([]providers.NodeGroup, error) { return []providers.NodeGroup{g}, nil }}
			res, err := ev.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.acts {
				if len(g.increases) != 1 || g.increases[0] != 1 || res.Skipped != "" {
					t.Errorf("size increases %v, skipped %q; want the scale-up of 1", g.increases, res.Skipped)
				}
				return
			}
			if len(g.increases) != 0 || len(res.Actions) != 0 || !strings.Contains(res.Skipped, "took the lease") {
				t.Errorf("size increases %v, actions %+v, skipped %q; want nothing done, skipped as superseded", g.increases, res.Actions, res.Skipped)
			}
			st, _ := mem.LoadState(ctx)
			if got, ok := st.LastScaleUp["g"]; ok && got.Equal(t0) {
				t.Errorf("the superseded cycle recorded its scale-up at %s", got)
			}
		})
	}
}
