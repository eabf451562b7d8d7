package evaluate

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/podfacts"
)

const (
	// maxTriggerRuns bounds the cycles one triggered run makes.
	maxTriggerRuns = 4
	// leaseRetry is how long a triggered run waits before trying again
	// when another cycle holds the lease: that cycle's snapshot may predate
	// the pod the hint was about.
	leaseRetry = 2 * time.Second
)

// RunTriggered is the cycle the webhook starts. The hint comes as soon as
// the scheduler marks a pod Unschedulable, before the pod is
// pendingPodMinAge old, so the run waits for such pods to come of age (as
// the watch did) and runs again; and when another cycle holds the lease, it
// tries again shortly. It stops watchMargin before the invocation's
// deadline and after maxTriggerRuns cycles. A trailing cycle (the last of a
// window of hints) first waits until notBefore.
func (e *Evaluator) RunTriggered(ctx context.Context, notBefore time.Time) (Result, error) {
	if !notBefore.IsZero() {
		if dl, ok := ctx.Deadline(); ok && notBefore.After(dl.Add(-watchMargin)) {
			notBefore = dl.Add(-watchMargin)
		}
		if !sleepUntil(ctx, notBefore) {
			return Result{Actions: []Action{}, Skipped: "the invocation ended before notBefore"}, nil
		}
	}
	var first Result
	for i := 0; i < maxTriggerRuns; i++ {
		res, err := e.Run(ctx)
		if i == 0 {
			first = res
		} else {
			first.TriggerRuns++
			first.Actions = append(first.Actions, res.Actions...)
			if res.Plan != nil {
				first.Plan = res.Plan
			}
			first.Skipped = res.Skipped
		}
		if err != nil {
			return first, err
		}
		var next time.Time
		switch {
		case res.Skipped != "":
			next = time.Now().Add(leaseRetry)
		case !res.comingOfAge.IsZero():
			next = res.comingOfAge
		default:
			return first, nil
		}
		if dl, ok := ctx.Deadline(); ok && next.After(dl.Add(-watchMargin)) {
			return first, nil
		}
		if !sleepUntil(ctx, next) {
			return first, nil
		}
	}
	return first, nil
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(max(time.Until(t), 0))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// comingOfAge is when the first Unschedulable pod younger than minAge at
// now reaches it; zero when there is none.
func comingOfAge(pods []corev1.Pod, minAge time.Duration, now time.Time) time.Time {
	var due time.Time
	for i := range pods {
		p := &pods[i]
		if !podfacts.IsUnschedulable(p) {
			continue
		}
		at := p.CreationTimestamp.Add(minAge)
		if at.After(now) && (due.IsZero() || at.Before(due)) {
			due = at
		}
	}
	return due
}
