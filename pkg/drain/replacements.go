package drain

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/state"
)

// waitReplacements sets Replaced once every workload whose pods left the
// node is back at its desired ready replicas.
func (d *Steps) waitReplacements(ctx context.Context, s State, _ state.DrainRecord) (State, error) {
	err := d.settle(ctx, func() (bool, error) {
		s.Replaced = true
		for _, w := range s.Workloads {
			ok, err := d.workloadReady(ctx, w)
			if err != nil || !ok {
				s.Replaced = false
				return false, err
			}
		}
		return true, nil
	})
	s.PastDeadline = !d.now().Before(s.Deadline)
	return s, err
}

func (d *Steps) workloadReady(ctx context.Context, w Workload) (bool, error) {
	var want, ready int32
	var err error
	switch w.Kind {
	case "Deployment":
		var o *appsv1.Deployment
		if o, err = d.Client.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			want, ready = derefReplicas(o.Spec.Replicas), o.Status.ReadyReplicas
		}
	case "StatefulSet":
		var o *appsv1.StatefulSet
		if o, err = d.Client.AppsV1().StatefulSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			want, ready = derefReplicas(o.Spec.Replicas), o.Status.ReadyReplicas
		}
	case "ReplicaSet":
		var o *appsv1.ReplicaSet
		if o, err = d.Client.AppsV1().ReplicaSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			want, ready = derefReplicas(o.Spec.Replicas), o.Status.ReadyReplicas
		}
	default:
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		return true, nil // deleted meanwhile: nothing to wait for
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", w, err)
	}
	return ready >= want, nil
}

func derefReplicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
