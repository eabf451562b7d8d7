package evaluate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodetide/nodetide/pkg/podfacts"
)

// minWatchRunGap keeps a burst of new pending pods (a Deployment scaled by
// hundreds) from turning into a burst of cycles.
const minWatchRunGap = 3 * time.Second

// Watch keeps a watch on pods without a node until the deadline and runs the
// cycle again as soon as a pod the scheduler marked Unschedulable is
// PendingPodMinAge old, so scale-up need not wait for the next minute's tick.
// It returns the results of the extra cycles.
func (e *Evaluator) Watch(ctx context.Context, until time.Time) ([]Result, error) {
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	pods := e.Client.CoreV1().Pods(metav1.NamespaceAll)
	opts := metav1.ListOptions{FieldSelector: "spec.nodeName=", Limit: 1}
	list, err := pods.List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("watch pending pods: list: %w", err)
	}
	opts.Limit = 0
	opts.ResourceVersion = list.ResourceVersion
	w, err := pods.Watch(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("watch pending pods: %w", err)
	}
	defer w.Stop()

	var results []Result
	var due time.Time // zero: nothing waiting
	var lastRun time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return results, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return results, nil // the server closed the watch; the next tick covers the rest
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod || ev.Type == watch.Deleted || !podfacts.IsUnschedulable(pod) {
				continue
			}
			at := pod.CreationTimestamp.Add(e.Settings.ScaleUp.PendingPodMinAge)
			if next := lastRun.Add(minWatchRunGap); at.Before(next) {
				at = next
			}
			if due.IsZero() || at.Before(due) {
				due = at
				timer.Reset(max(time.Until(due), 0))
			}
		case <-timer.C:
			if due.IsZero() {
				continue
			}
			due, lastRun = time.Time{}, time.Now()
			res, err := e.Run(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return results, nil
				}
				return results, err
			}
			results = append(results, res)
		}
	}
}
