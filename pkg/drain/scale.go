package drain

import (
	"context"
	"fmt"
	"math"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/state"
)

// grow adds the workload's delta to its replicas once. What it is about to
// do (the count it read) is recorded before the write, which is conditioned
// on the resourceVersion read with the count; a retry after a crash or a
// lost answer then tells from the count whether the write happened: still
// the count read, not yet; that plus the delta, done. Any other count (a
// person changed it too) is taken as not grown, since one replica too many
// is better than one too few.
func (d *Steps) grow(ctx context.Context, rec *state.DrainRecord, i int) error {
	w := &rec.Surged[i]
	if w.Grown {
		return nil
	}
	deps := d.Client.AppsV1().Deployments(w.Namespace)
	for attempt := 0; ; attempt++ {
		scale, err := deps.GetScale(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("deployment %s/%s: get scale: %w", w.Namespace, w.Name, err)
		}
		if nextSurgeMove(*w, scale.Spec.Replicas, 0) == surgeGrown {
			w.Grown = true
			return d.save(ctx, rec)
		}
		w.Growing, w.GrowFrom = true, scale.Spec.Replicas
		if err := d.save(ctx, rec); err != nil {
			return err
		}
		scale.Spec.Replicas = addReplicas(scale.Spec.Replicas, w.Delta)
		_, err = deps.UpdateScale(ctx, w.Name, scale, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue // refused: nothing changed
		}
		if err != nil {
			return fmt.Errorf("deployment %s/%s: grow by %d: %w", w.Namespace, w.Name, w.Delta, err)
		}
		w.Grown = true
		return d.save(ctx, rec)
	}
}

// shrink takes the surge back once: the count goes back to what grow found
// only while it is still the count grow wrote, by a write conditioned on the
// resourceVersion read with it (a conflict re-reads and decides again). Any
// other count is someone else's and is left, with why in the record, the
// log and an event (see decideRestore).
func (d *Steps) shrink(ctx context.Context, rec *state.DrainRecord, i int) error {
	w := &rec.Surged[i]
	if w.Restored {
		return nil
	}
	if !w.Grown {
		if err := d.settleGrow(ctx, rec, i); err != nil {
			return err
		}
		if !w.Grown {
			w.Restored = true
			return d.save(ctx, rec)
		}
	}
	deps := d.Client.AppsV1().Deployments(w.Namespace)
	for attempt := 0; ; attempt++ {
		scale, err := deps.GetScale(ctx, w.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			w.Restored = true
			return d.save(ctx, rec)
		}
		if err != nil {
			return fmt.Errorf("deployment %s/%s: get scale: %w", w.Namespace, w.Name, err)
		}
		dec := decideRestore(addReplicas(w.GrowFrom, w.Delta), w.Delta, scale.Spec.Replicas, w.Shrinking)
		if !dec.Write {
			w.Restored, w.Left = true, dec.Left
			if err := d.save(ctx, rec); err != nil {
				return err
			}
			if dec.Left != "" {
				d.surgeLeft(ctx, rec.Node, w.Namespace, w.Name, "not taken back: "+dec.Left)
			}
			return nil
		}
		w.Shrinking, w.ShrinkFrom = true, scale.Spec.Replicas
		if err := d.save(ctx, rec); err != nil {
			return err
		}
		scale.Spec.Replicas = dec.To
		_, err = deps.UpdateScale(ctx, w.Name, scale, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 5 {
			w.Shrinking = false // refused: nothing changed
			continue
		}
		if err != nil {
			return fmt.Errorf("deployment %s/%s: take back %d: %w", w.Namespace, w.Name, w.Delta, err)
		}
		w.Restored = true
		return d.save(ctx, rec)
	}
}

// settleGrow decides a grow in doubt (recorded as about to happen, not as
// done) without changing the Deployment.
func (d *Steps) settleGrow(ctx context.Context, rec *state.DrainRecord, i int) error {
	w := &rec.Surged[i]
	if w.Grown || !w.Growing {
		return nil
	}
	scale, err := d.Client.AppsV1().Deployments(w.Namespace).GetScale(ctx, w.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deployment %s/%s: get scale: %w", w.Namespace, w.Name, err)
	}
	if nextSurgeMove(*w, scale.Spec.Replicas, 0) == surgeGrown {
		w.Grown = true
		return d.save(ctx, rec)
	}
	return nil
}

// addReplicas adds without wrapping past the largest replica count.
func addReplicas(n, delta int32) int32 {
	if delta > 0 && n > math.MaxInt32-delta {
		return math.MaxInt32
	}
	return n + delta
}

// restoreSurged takes back the delta of every surged Deployment of rec
// not yet restored.
func (d *Steps) restoreSurged(ctx context.Context, rec *state.DrainRecord) error {
	for i := range rec.Surged {
		if err := d.shrink(ctx, rec, i); err != nil {
			return err
		}
	}
	return nil
}
