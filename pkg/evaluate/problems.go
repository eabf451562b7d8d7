package evaluate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// The kinds of problem a cycle reports (Status.Problems): what the
// essential monitoring level's one alarm fires on, named for the person it
// pages.
const (
	// Events of this cycle, also counted by the metrics their code records
	// (metrics.ProblemCounter).
	ProblemScaleUpFailed        = "ScaleUpFailed"        // the cloud refused a scale-up; the group is backed off
	ProblemDrainEndedUnfinished = "DrainEndedUnfinished" // a drain's execution ended without finishing it; recovery finished it
	ProblemStrayCordon          = "StrayCordon"          // a node carried the draining taint with no drain; recovery freed it
	// Counted by the cycle itself: it failed (its error is also the
	// invocation's, which lands in the failure queue when scheduled), or
	// conditions, each cycle while they last.
	ProblemCycleFailed  = "CycleFailed"
	ProblemPodsPending  = "PodsPending" // pods unschedulable for longer than PendingAlarm
	ProblemGroupBackoff = "GroupBackedOff"
	ProblemDrainOverdue = "DrainOverdue" // a running drain past its deadline by more than overdueGrace
	// ProblemHeadroomGroupNotFound is a headroom naming a group the cycle
	// did not find. Reported, not alarmed on: a discovered group may come
	// and go, and the config is the operator's to fix.
	ProblemHeadroomGroupNotFound = "HeadroomGroupNotFound"
	// ProblemStatusNotPublished is a status the cluster refused to store
	// (the status ConfigMap: RBAC, a missing namespace). Reported, not
	// alarmed on: the cycle's work is done, and `nodetide status` still reads
	// the stored status.
	ProblemStatusNotPublished = "StatusNotPublished"
	// ProblemShadowCompareFailed is a shadow cycle that could not read
	// what cluster-autoscaler did (its status ConfigMap or Events: missing,
	// stale, malformed, refused). Reported, not alarmed on: nothing is
	// changed in shadow mode, and the cycle counts as disagreeing.
	ProblemShadowCompareFailed = "ShadowCompareFailed"
	// ProblemPriceMissing is a group that may grow (max above 0) without a
	// price while scaleUp.expander lists price: the price expander ranks
	// it after every priced group. Reported, not alarmed on: the config (or
	// the provider's price source) is the operator's to fix.
	ProblemPriceMissing = "PriceMissing"
)

// Problem is one kind of problem the cycle found, how many, and which.
type Problem struct {
	Kind   string `json:"kind"`
	Count  int    `json:"count"`
	Detail string `json:"detail"`
}

// DefaultPendingAlarm is how long a pod may stay unschedulable before it is a
// problem, unless EnvPendingAlarmMinutes says otherwise.
const DefaultPendingAlarm = 10 * time.Minute

// EnvPendingAlarmMinutes is the stack's pendingPodAlarmMinutes, which the
// evaluate function reads at start (PendingAlarmFromEnv).
const EnvPendingAlarmMinutes = "NODETIDE_PENDING_POD_ALARM_MINUTES"

// PendingAlarmFromEnv reads EnvPendingAlarmMinutes (1 to 1440; unset:
// DefaultPendingAlarm).
func PendingAlarmFromEnv(getenv func(string) string) (time.Duration, error) {
	v := getenv(EnvPendingAlarmMinutes)
	if v == "" {
		return DefaultPendingAlarm, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1440 {
		return 0, fmt.Errorf("%s: want whole minutes from 1 to 1440, got %q", EnvPendingAlarmMinutes, v)
	}
	return time.Duration(n) * time.Minute, nil
}

// overdueGrace is how long past its deadline a drain may still run: the
// state machine acts on the deadline at its next step (up to the drain
// function's 120 s timeout) before a running drain is a problem.
const overdueGrace = 5 * time.Minute

// maxProblemNames caps the names a Problem's detail lists.
const maxProblemNames = 5

// problems lists what is wrong after a cycle: its error, its failed
// scale-ups and recovered drains, and the conditions it saw (pods pending
// too long, groups backed off, drains overdue). A cycle that read nothing
// has only its error and events.
func (e *Evaluator) problems(snap snapshot.Snapshot, res Result, drains []DrainSummary, cycleErr error) []Problem {
	var out []Problem
	add := func(kind string, names []string, extra string) {
		if len(names) == 0 {
			return
		}
		shown := names[:min(len(names), maxProblemNames)]
		detail := strings.Join(shown, ", ")
		if len(names) > len(shown) {
			detail += fmt.Sprintf(" and %d more", len(names)-len(shown))
		}
		if extra != "" {
			detail += "; " + extra
		}
		out = append(out, Problem{Kind: kind, Count: len(names), Detail: detail})
	}
	if cycleErr != nil {
		out = append(out, Problem{Kind: ProblemCycleFailed, Count: 1, Detail: clip(cycleErr.Error())})
	}
	var failed []string
	for _, a := range res.Actions {
		if a.Kind == "scaleUp" && a.Error != "" {
			failed = append(failed, a.NodeGroup+" ("+a.Reason+")")
		}
	}
	add(ProblemScaleUpFailed, failed, "")
	if r := res.Recovered; r != nil {
		add(ProblemDrainEndedUnfinished, append(slices.Clone(r.RolledBack), r.Completed...), "")
		add(ProblemStrayCordon, r.Untainted, "")
	}
	if res.Plan == nil {
		return out
	}
	now := snap.CapturedAt
	limit := e.PendingAlarm
	if limit <= 0 {
		limit = DefaultPendingAlarm
	}
	var pending []string
	oldest := time.Duration(0)
	for i := range snap.Pods {
		p := &snap.Pods[i]
		if since, ok := podfacts.UnschedulableSince(p); ok && now.Sub(since) > limit {
			pending = append(pending, p.Namespace+"/"+p.Name)
			oldest = max(oldest, now.Sub(since))
		}
	}
	slices.Sort(pending)
	add(ProblemPodsPending, pending, fmt.Sprintf("the oldest for %s, over %s", oldest.Round(time.Second), limit))
	var backedOff []string
	for g, until := range res.Plan.State.BackoffUntil {
		if until.After(now) {
			backedOff = append(backedOff, g+" until "+until.UTC().Format(time.RFC3339))
		}
	}
	slices.Sort(backedOff)
	add(ProblemGroupBackoff, backedOff, "")
	var overdue []string
	for _, d := range drains {
		if !d.Deadline.IsZero() && now.Sub(d.Deadline) > overdueGrace {
			overdue = append(overdue, d.Node+" (deadline "+d.Deadline.UTC().Format(time.RFC3339)+")")
		}
	}
	add(ProblemDrainOverdue, overdue, "")
	add(ProblemHeadroomGroupNotFound, unmatchedHeadroom(e.Headroom, snap.NodeGroups),
		"names are matched exactly; a headroom applies once its group is found")
	switch {
	case e.Settings.ScaleUp.HasExpander(planner.ExpanderPrice):
		add(ProblemPriceMissing, unpriced(snap.NodeGroups),
			"the price expander ranks a group without a price after every priced one; set nodeGroups[].price")
	case e.Settings.UsesPrices():
		add(ProblemPriceMissing, unpriced(snap.NodeGroups),
			"replace consolidation never replaces nodes of, or with nodes of, a group without a price; set nodeGroups[].price")
	}
	return out
}

// unpriced names, sorted, the groups that may grow but have no price.
func unpriced(groups []snapshot.NodeGroup) []string {
	var out []string
	for _, g := range groups {
		if g.Price == nil && g.MaxSize > 0 {
			out = append(out, g.Name)
		}
	}
	slices.Sort(out)
	return out
}

// recordProblems adds to metrics.Problems what the cycle counted itself;
// its events are counted by their own counters (metrics.ProblemCounter).
func recordProblems(ctx context.Context, ps []Problem) {
	n := 0
	for _, p := range ps {
		switch p.Kind {
		case ProblemCycleFailed, ProblemPodsPending, ProblemGroupBackoff, ProblemDrainOverdue:
			n += p.Count
		}
	}
	if n > 0 {
		metrics.From(ctx).Add(metrics.Problems, float64(n), nil)
	}
}
