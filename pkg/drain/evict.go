package drain

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/state"
)

// workloadOf names the controller whose replacement the drain waits for.
func (d *Steps) workloadOf(ctx context.Context, p *corev1.Pod) (*Workload, error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return nil, nil
	}
	switch ref.Kind {
	case "ReplicaSet":
		dep, err := d.deploymentOf(ctx, p)
		if err != nil {
			return nil, err
		}
		if dep != nil {
			return &Workload{Kind: "Deployment", Namespace: p.Namespace, Name: dep.Name}, nil
		}
		return &Workload{Kind: "ReplicaSet", Namespace: p.Namespace, Name: ref.Name}, nil
	case "StatefulSet":
		return &Workload{Kind: "StatefulSet", Namespace: p.Namespace, Name: ref.Name}, nil
	}
	return nil, nil
}

// evict asks the Eviction API to remove every movable pod; a PDB refusal
// (429) leaves the pod for the next round. Evicted is set when no movable
// pod is left on the node.
func (d *Steps) evict(ctx context.Context, s State, _ state.DrainRecord) (State, error) {
	err := d.settle(ctx, func() (bool, error) {
		refused, err := d.evictRound(ctx, &s)
		// Refused pods wait for the state machine's next round; pods on
		// their way out are worth a short wait here.
		return len(s.Remaining) == refused, err
	})
	if err != nil {
		return s, err
	}
	s.Evicted = len(s.Remaining) == 0
	s.PastDeadline = !d.now().Before(s.Deadline)
	if s.Evicted {
		return s, d.setPhase(ctx, s, state.PhaseEvicted)
	}
	return s, nil
}

// evictRound asks for the eviction of every movable pod on the node and
// returns how many a PodDisruptionBudget refused.
func (d *Steps) evictRound(ctx context.Context, s *State) (refused int, err error) {
	pods, err := d.podsOn(ctx, s.Node)
	if err != nil {
		return 0, err
	}
	s.Remaining = s.Remaining[:0]
	for i := range pods {
		p := &pods[i]
		if !movable(p) {
			continue
		}
		if err := d.noteWorkload(ctx, s, p); err != nil {
			return 0, err
		}
		s.Remaining = append(s.Remaining, p.Namespace+"/"+p.Name)
		if p.DeletionTimestamp != nil {
			continue // on its way out
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		err := d.Client.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			refused++
			d.log().Info("eviction refused for now", "node", s.Node, "pod", p.Namespace+"/"+p.Name, "reason", err.Error())
		default:
			return 0, fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return refused, nil
}

func (d *Steps) noteWorkload(ctx context.Context, s *State, p *corev1.Pod) error {
	w, err := d.workloadOf(ctx, p)
	if err != nil || w == nil {
		return err
	}
	if !slices.Contains(s.Workloads, *w) {
		s.Workloads = append(s.Workloads, *w)
	}
	return nil
}

// forceDelete deletes the movable pods still on the node at the deadline
// (policy force), PodDisruptionBudgets notwithstanding.
func (d *Steps) forceDelete(ctx context.Context, s State, rec state.DrainRecord) (State, error) {
	// s carries the record's policy and deadline (see checked).
	if s.Policy != PolicyForce {
		return s, stepErr(ErrNameInvalidInput, "step ForceDelete: drain %s of node %s has policy %s, not force", s.DrainID, s.Node, s.Policy)
	}
	if d.now().Before(s.Deadline) {
		return s, stepErr(ErrNameInvalidInput, "step ForceDelete: drain %s of node %s is before its deadline %s", s.DrainID, s.Node, s.Deadline.Format(time.RFC3339))
	}
	// A surge that never got its replacements Ready gives way too: the
	// Deployment goes back to its recorded count.
	if err := d.restoreSurged(ctx, &rec); err != nil {
		return s, err
	}
	pods, err := d.podsOn(ctx, s.Node)
	if err != nil {
		return s, err
	}
	for i := range pods {
		p := &pods[i]
		if !movable(p) || p.DeletionTimestamp != nil {
			continue
		}
		if err := d.noteWorkload(ctx, &s, p); err != nil {
			return s, err
		}
		err := d.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return s, fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		d.log().Warn("pod deleted at the drain deadline (policy force)", "node", s.Node, "pod", p.Namespace+"/"+p.Name)
	}
	s.Remaining, s.Evicted = nil, true
	return s, d.setPhase(ctx, s, state.PhaseEvicted)
}
