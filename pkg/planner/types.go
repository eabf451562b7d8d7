// Package planner holds nodetide's decisions: a Snapshot of the cluster and its
// node groups, plus Settings and the current instant, in; a Plan, carrying the
// next State, out. It does no I/O and reads no clock, so every decision can be
// replayed from a recorded snapshot (`nodetide plan --snapshot`). The
// snapshot, its document and the Trimmer are pkg/snapshot's.
package planner

import (
	"time"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Plan is the planner's output; its JSON form is `nodetide plan -o json`.
type Plan struct {
	ScaleUp        []ScaleUp        `json:"scaleUp"`
	ScaleDown      []ScaleDown      `json:"scaleDown"`
	DecreaseTarget []DecreaseTarget `json:"decreaseTarget,omitempty"`
	Unschedulable  []Unschedulable  `json:"unschedulable"`
	// Assignment is set when pending pods compete for the new nodes (some
	// stay pending that a grown group's template fits): the pods listed
	// under each scale-up are a prediction, in the scheduler's queue order.
	Assignment string        `json:"assignment,omitempty"`
	NodeGroups []GroupStatus `json:"nodeGroups"`
	// Kept are nodes scale-down considered and keeps, and why; at most
	// MaxKept, KeptOmitted counting the rest.
	Kept        []Kept `json:"kept,omitempty"`
	KeptOmitted int    `json:"keptOmitted,omitempty"`
	// KeptCounts counts every kept node, per group and code.
	KeptCounts []KeptCount `json:"keptCounts,omitempty"`
	// Replace are the consolidation replacements this plan starts, moves
	// on or gives up (replace.go).
	Replace []Replace `json:"replace,omitempty"`
	// ReplaceNotTaken says why consolidation replace started none
	// (notreplaced.go); at most MaxReplaceNotTaken,
	// ReplaceNotTakenOmitted counting the rest.
	ReplaceNotTaken        []ReplaceNotTaken `json:"replaceNotTaken,omitempty"`
	ReplaceNotTakenOmitted int               `json:"replaceNotTakenOmitted,omitempty"`
	// Cost is what the groups cost at the targets this plan leaves them
	// at; nil when no group has a price.
	Cost  *Cost          `json:"cost,omitempty"`
	State snapshot.State `json:"state"`
}

// ScaleUp grows one group by Delta nodes for the listed pods ("ns/name").
type ScaleUp struct {
	NodeGroup     string   `json:"nodeGroup"`
	Delta         int      `json:"delta"`
	NewTargetSize int      `json:"newTargetSize"`
	Pods          []string `json:"pods"`
	Reason        string   `json:"reason"`
}

// ScaleDown removes one node (through a drain).
type ScaleDown struct {
	NodeGroup string `json:"nodeGroup"`
	Node      string `json:"node"`
	Reason    string `json:"reason"`
	// SavingPerHour is what the node costs, in Currency, when its group
	// has a price.
	SavingPerHour float64 `json:"savingPerHour,omitempty"`
	Currency      string  `json:"currency,omitempty"`
}

// DecreaseTarget gives back capacity that was asked for but never registered
// within the provision time.
type DecreaseTarget struct {
	NodeGroup     string `json:"nodeGroup"`
	Delta         int    `json:"delta"`
	NewTargetSize int    `json:"newTargetSize"`
	Reason        string `json:"reason"`
}

// Unschedulable is a pending pod this plan leaves pending, and why.
type Unschedulable struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
	// NodeGroups says, for every node group, why it does not take the pod
	// (what cluster-autoscaler's NotTriggerScaleUp event counts).
	NodeGroups []GroupReason `json:"nodeGroups,omitempty"`
}

// GroupReason is why one node group does not take a pending pod.
type GroupReason struct {
	NodeGroup string `json:"nodeGroup"`
	// Code classifies Reason: one of the Reason* constants.
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// Codes of GroupReason: the group could host the pod but may not grow
// (MaxSizeReached, BackedOff, MaxNodesPerStep, NoRoom), a rule between the
// pod and the pods planned beside it keeps it off the group's new nodes
// (HostPort, PodAffinity, TopologySpread), or its template does not fit
// the pod (the rest).
const (
	ReasonMaxSizeReached  = "MaxSizeReached"
	ReasonBackedOff       = "BackedOff"
	ReasonMaxNodesPerStep = "MaxNodesPerStep"
	ReasonNoRoom          = "NoRoom"
	ReasonHostPort        = "HostPort"
	ReasonPodAffinity     = "PodAffinity"
	ReasonTopologySpread  = "TopologySpread"
	ReasonNodeSelector    = "NodeSelector"
	ReasonTaint           = "Taint"
	ReasonVolume          = "Volume"
	ReasonInsufficient    = "Insufficient"
	ReasonOther           = "Other"
)

// GroupStatus is a group's size and utilisation (requests ÷ allocatable of its
// registered nodes).
type GroupStatus struct {
	Name              string  `json:"name"`
	Nodes             int     `json:"nodes"`
	TargetSize        int     `json:"targetSize"`
	CPUUtilization    float64 `json:"cpuUtilization"`
	MemoryUtilization float64 `json:"memoryUtilization"`
	// Headroom is how the group's headroom stands; nil when it keeps none.
	Headroom *HeadroomStatus `json:"headroom,omitempty"`
	// TemplateFrom is where the group's template came from (the snapshot's
	// nodeGroups[].templateFrom: "provider" or "node NAME").
	TemplateFrom string `json:"templateFrom,omitempty"`
}

// HeadroomStatus is how a group's headroom stands once the pending pods are
// placed, before the nodes this plan adds for it.
type HeadroomStatus struct {
	// Rule is the headroom ("2 spare nodes", "6 cpu, 8Gi memory spare",
	// "utilisation below 80%"), Free what the group has in its terms ("1
	// free", "1 cpu, 15Gi memory free", "at 85%").
	Rule string `json:"rule"`
	Free string `json:"free"`
	Met  bool   `json:"met"`
	// Need is how many nodes would make it hold; Adding how many this plan
	// adds for it; Blocked why that is fewer.
	Need    int    `json:"need"`
	Adding  int    `json:"adding"`
	Blocked string `json:"blocked,omitempty"`
	// What Free says, in numbers: empty nodes, free allocatable, and the
	// larger of cpu and memory requests ÷ allocatable.
	FreeNodes       int64   `json:"freeNodes"`
	FreeCPUMillis   int64   `json:"freeCPUMillis"`
	FreeMemoryBytes int64   `json:"freeMemoryBytes"`
	Utilization     float64 `json:"utilization"`
}

// Settings are the tunables of a decision (config's scaleUp and scaleDown).
type Settings struct {
	ScaleUp   ScaleUpSettings
	ScaleDown ScaleDownSettings
}

// ScaleUpSettings tune scale-up.
type ScaleUpSettings struct {
	PendingPodMinAge     time.Duration
	MaxNodesPerStep      int
	MaxNodeProvisionTime time.Duration
	Backoff              time.Duration
	// Expanders pick the group to grow, in order, each breaking the ties
	// of the one before (see Chain); empty is least-waste.
	Expanders []string
	// Priorities (expander "priority"): higher wins; ties go to the next
	// expander.
	Priorities map[string]int
	// BalanceSimilarNodeGroups splits each scale-up across the groups
	// similar to the one the expander picked (balance.go).
	BalanceSimilarNodeGroups bool
	// ExpendablePodsPriorityCutoff: pods whose spec.priority is below it are
	// expendable (cluster-autoscaler's --expendable-pods-priority-cutoff):
	// pending, they trigger no scale-up; running, the simulation leaves them
	// out, so they neither keep a node nor need a new home, and a pending
	// pod may take their room as the scheduler would by preempting them.
	ExpendablePodsPriorityCutoff int
	// IgnoredTaints are the startup and status taints (config's
	// scaleUp.startupTaints and scaleUp.statusTaints, besides
	// cluster-autoscaler's prefixes): neither is on a new node, so a
	// template's never keep a pod off it; a node carrying a startup taint is
	// still starting, so pending pods wait for it (as for a booting node)
	// instead of calling for more nodes.
	IgnoredTaints podfacts.IgnoredTaints
}

// ScaleDownSettings tune scale-down.
type ScaleDownSettings struct {
	Enabled              bool
	UtilizationThreshold float64
	UnneededTime         time.Duration
	DelayAfterAdd        time.Duration
	MaxConcurrentDrains  int
	// Consolidation is "" (at most MaxConcurrentDrains drains per group),
	// ConsolidationDelete: as many under-used nodes at once as
	// DisruptionBudgets allow (consolidation.go), or ConsolidationReplace:
	// delete, and nodes replaced by cheaper ones (replace.go).
	Consolidation string
	// DisruptionBudgets bound consolidation; none means one budget of
	// 10% of each group's nodes.
	DisruptionBudgets []DisruptionBudget
	// ReplaceMinSaving is the share of the replaced nodes' cost a
	// replacement must save (ConsolidationReplace); 0 is
	// DefaultReplaceMinSaving.
	ReplaceMinSaving float64
}

// UsesPrices reports whether a decision reads node prices: the price
// expander ranks by them, replace consolidation saves by them.
func (s Settings) UsesPrices() bool {
	return s.ScaleUp.HasExpander(ExpanderPrice) || s.ScaleDown.Consolidation == ConsolidationReplace
}

// DefaultSettings follow cluster-autoscaler's defaults.
func DefaultSettings() Settings {
	return Settings{
		ScaleUp: ScaleUpSettings{
			PendingPodMinAge:     10 * time.Second,
			MaxNodesPerStep:      10,
			MaxNodeProvisionTime: 15 * time.Minute,
			Backoff:              5 * time.Minute,
			Expanders:            []string{ExpanderLeastWaste},

			ExpendablePodsPriorityCutoff: -10,
		},
		ScaleDown: ScaleDownSettings{
			Enabled:              true,
			UtilizationThreshold: 0.5,
			UnneededTime:         10 * time.Minute,
			DelayAfterAdd:        10 * time.Minute,
			MaxConcurrentDrains:  1,
		},
	}
}
