package evaluate

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// recordCycle publishes what one cycle saw and did (pkg/metrics,
// docs/operations.md "Metrics"): the cluster's pressure, each group's size, and the actions
// that failed.
func recordCycle(ctx context.Context, snap snapshot.Snapshot, plan planner.Plan, actions []Action, took time.Duration, shadow bool) {
	m := metrics.From(ctx)
	if m == nil {
		return
	}
	m.Add(metrics.CycleCompleted, 1, nil)
	m.Observe(metrics.CycleDuration, metrics.Seconds, took.Seconds(), nil)
	m.Gauge(metrics.SnapshotNodes, metrics.Count, float64(len(snap.Nodes)), nil)
	m.Gauge(metrics.SnapshotPods, metrics.Count, float64(len(snap.Pods)), nil)

	pending, oldest := 0, time.Duration(0)
	for i := range snap.Pods {
		since, ok := podfacts.UnschedulableSince(&snap.Pods[i])
		if !ok {
			continue
		}
		pending++
		oldest = max(oldest, snap.CapturedAt.Sub(since))
	}
	m.Gauge(metrics.PendingPods, metrics.Count, float64(pending), nil)
	m.Gauge(metrics.UnschedulablePods, metrics.Count, float64(len(plan.Unschedulable)), nil)
	m.Gauge(metrics.OldestPendingPodAge, metrics.Seconds, oldest.Seconds(), nil)

	groupOf := map[string]string{} // providerID -> group
	for _, g := range snap.NodeGroups {
		for _, id := range g.Instances {
			groupOf[id] = g.Name
		}
	}
	registered, ready, unneeded := map[string]int{}, map[string]int{}, map[string]int{}
	nodeGroup := map[string]string{}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		g, ok := groupOf[n.Spec.ProviderID]
		if !ok {
			continue
		}
		nodeGroup[n.Name] = g
		registered[g]++
		if nodeReady(n) {
			ready[g]++
		}
	}
	for node := range plan.State.UnneededSince {
		if g, ok := nodeGroup[node]; ok {
			unneeded[g]++
		}
	}
	for _, g := range snap.NodeGroups {
		d := metrics.Dims{metrics.DimNodeGroup: g.Name}
		m.Gauge(metrics.TargetSize, metrics.Count, float64(g.TargetSize), d)
		m.Gauge(metrics.RegisteredNodes, metrics.Count, float64(registered[g.Name]), d)
		m.Gauge(metrics.ReadyNodes, metrics.Count, float64(ready[g.Name]), d)
		m.Gauge(metrics.UnneededNodes, metrics.Count, float64(unneeded[g.Name]), d)
	}
	if c := plan.Cost; c != nil {
		for _, t := range c.Now {
			m.Gauge(metrics.CostPerHour, metrics.None, t.PerHour, metrics.Dims{metrics.DimCurrency: t.Currency})
		}
		for _, t := range c.Totals {
			m.Gauge(metrics.PlannedCostPerHour, metrics.None, t.PerHour, metrics.Dims{metrics.DimCurrency: t.Currency})
		}
		for _, g := range c.NodeGroups {
			d := metrics.Dims{metrics.DimCurrency: g.Currency, metrics.DimNodeGroup: g.NodeGroup}
			m.Gauge(metrics.CostPerHour, metrics.None, float64(g.NodesNow)*g.PerNodeHour, d)
			m.Gauge(metrics.PlannedCostPerHour, metrics.None, g.PerHour, d)
		}
	}
	if shadow {
		// Under Cluster alone every shadow cycle, 0 included: the marker
		// that the deployment plans without acting (by NodeGroup in
		// recordActions).
		ups, downs := 0, 0
		for _, a := range actions {
			switch {
			case a.Kind == KindShadow && a.Would == "scaleUp":
				ups += a.Delta
			case a.Kind == KindShadow && a.Would == "drain":
				downs++
			}
		}
		m.Add(metrics.ShadowScaleUps, float64(ups), nil)
		m.Add(metrics.ShadowScaleDowns, float64(downs), nil)
	}
	recordActions(ctx, actions)
}

// recordActions publishes the nodes asked of providers and the actions that
// failed (a cycle's, or a schedule's shrink).
func recordActions(ctx context.Context, actions []Action) {
	m := metrics.From(ctx)
	for _, a := range actions {
		switch {
		case a.Kind == KindShadow && a.Would == "scaleUp":
			m.Add(metrics.ShadowScaleUps, float64(a.Delta), metrics.Dims{metrics.DimNodeGroup: a.NodeGroup})
		case a.Kind == KindShadow && a.Would == "drain":
			m.Add(metrics.ShadowScaleDowns, 1, metrics.Dims{metrics.DimNodeGroup: a.NodeGroup})
		case a.Kind == "scaleUp" && a.Error == "":
			m.Add(metrics.ScaleUpNodes, float64(a.Delta), metrics.Dims{metrics.DimNodeGroup: a.NodeGroup})
		case a.Kind == "scaleUp":
			m.AddRollUp(metrics.ScaleUpFailures, 1, metrics.Dims{metrics.DimReason: a.Reason})
		case a.Kind == "drain" && a.Error != "" && !strings.HasPrefix(a.Error, notStarted):
			m.Add(metrics.DrainStartFailures, 1, nil)
		}
	}
}

// notStarted begins the error of a removal with no drainer configured:
// planned, by design not acted on, so not a failure to alarm on.
const notStarted = "not started:"

// The reasons a scale-up failed, the ScaleUpFailures metric's Reason.
const (
	ReasonAboveMax   = "AboveMax"   // the provider refused a size above the group's max
	ReasonThrottled  = "Throttled"  // the cloud throttled the request past the SDK's retries
	ReasonCloudError = "CloudError" // the cloud answered with a server error
	ReasonTimeout    = "Timeout"    // no answer in time (deadline, network)
	ReasonRefused    = "Refused"    // any other refusal (permissions, validation, quota)
)

// failureReason sorts a provider's scale-up error into a few stable reasons.
func failureReason(err error) string {
	var status interface{ HTTPStatusCode() int }
	var api smithy.APIError
	var netErr net.Error
	switch {
	case errors.Is(err, providers.ErrAboveMax):
		return ReasonAboveMax
	case errors.As(err, &api) && throttled(api.ErrorCode()),
		errors.As(err, &status) && status.HTTPStatusCode() == 429:
		return ReasonThrottled
	case errors.As(err, &status) && status.HTTPStatusCode() >= 500:
		return ReasonCloudError
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr):
		return ReasonTimeout
	}
	return ReasonRefused
}

// throttled tells the AWS error codes of a rate limit.
func throttled(code string) bool {
	switch code {
	case "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException":
		return true
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
