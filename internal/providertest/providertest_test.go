package providertest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodetide/nodetide/internal/providertest"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestReference runs the contract against memGroup, a minimal group that
// keeps it, so the suite is known to be satisfiable on its own, apart from
// any cloud.
func TestReference(t *testing.T) {
	providertest.Run(t, func(t *testing.T, spec providertest.Spec) *providertest.Bed {
		g := &memGroup{min: spec.MinSize, max: spec.MaxSize, labels: spec.Labels}
		for range spec.Size {
			g.add(providers.StateRunning)
		}
		return &providertest.Bed{
			Provider: providers.Static{g},
			Group:    g.Name(),
			Boot:     func(testing.TB) { g.boot() },
			Unstarted: func(_ testing.TB, _ providers.NodeGroup, n int) {
				g.mu.Lock()
				defer g.mu.Unlock()
				g.unstarted += n
			},
			UnknownID: "mem://missing",
			IDPrefix:  "mem://",
			Mutations: func() int { g.mu.Lock(); defer g.mu.Unlock(); return g.mutations },
		}
	})
}

// memGroup is a node group in memory: machines are created, booted by
// boot, and removed at once; unstarted is capacity with no machine yet.
type memGroup struct {
	mu        sync.Mutex
	min, max  int
	labels    map[string]string
	machines  []providers.Instance
	unstarted int
	seq       int
	mutations int
}

func (g *memGroup) Name() string             { return "mem" }
func (g *memGroup) Provider() string         { return "mem" }
func (g *memGroup) Bounds() providers.Bounds { return providers.Bounds{Min: g.min, Max: g.max} }

func (g *memGroup) add(st providers.InstanceState) {
	g.seq++
	g.machines = append(g.machines, providers.Instance{ProviderID: fmt.Sprintf("mem://m-%d", g.seq), State: st})
}

func (g *memGroup) boot() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.machines {
		if g.machines[i].State == providers.StateCreating {
			g.machines[i].State = providers.StateRunning
		}
	}
}

func (g *memGroup) targetLocked() int {
	n := g.unstarted
	for _, m := range g.machines {
		if m.State != providers.StateDeleting {
			n++
		}
	}
	return n
}

func (g *memGroup) TargetSize(context.Context) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.targetLocked(), nil
}

func (g *memGroup) Instances(context.Context) ([]providers.Instance, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]providers.Instance(nil), g.machines...), nil
}

func (g *memGroup) Template(context.Context) (snapshot.Template, error) {
	return snapshot.Template{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
		Labels:      g.labels,
	}, nil
}

func (g *memGroup) IncreaseSize(_ context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("increase must be positive, got %d", delta)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := providers.CheckIncrease("size", g.targetLocked(), delta, g.max); err != nil {
		return err
	}
	for range delta {
		g.add(providers.StateCreating)
	}
	g.mutations++
	return nil
}

func (g *memGroup) DeleteInstance(_ context.Context, providerID string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, m := range g.machines {
		if m.ProviderID != providerID {
			continue
		}
		if m.State == providers.StateDeleting {
			return nil
		}
		if n := g.targetLocked(); n-1 < g.min {
			return fmt.Errorf("size %d - 1: %w (%d)", n, providers.ErrBelowMin, g.min)
		}
		g.machines[i].State = providers.StateDeleting
		g.mutations++
		return nil
	}
	return fmt.Errorf("%q: %w", providerID, providers.ErrUnknownInstance)
}

func (g *memGroup) DecreaseTargetSize(_ context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("decrease must be negative, got %d", delta)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if -delta > g.unstarted {
		return fmt.Errorf("decrease by %d with %d unstarted: %w", -delta, g.unstarted, providers.ErrNothingToDecrease)
	}
	if n := g.targetLocked(); n+delta < g.min {
		return fmt.Errorf("size %d - %d: %w (%d)", n, -delta, providers.ErrBelowMin, g.min)
	}
	g.unstarted += delta
	g.mutations++
	return nil
}
