// Package planner holds nodetide's decisions: a Snapshot of the cluster and its
// node groups, plus Settings and the current instant, in; a Plan, carrying the
// next State, out. It does no I/O and reads no clock, so every decision can be
// replayed from a recorded snapshot (`nodetide plan --snapshot`).
//
// A snapshot's JSON document comes in two forms, both read by ReadSnapshot,
// a value at a time from the stream: the full form (WriteSnapshot), with
// nodes, pods and PDBs as the API serves them, and the compact form
// (WriteCompactSnapshot, FormatCompact), with only what the planner reads
// and what the pods of one controller share written once.
package planner

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Snapshot is everything a decision reads. Its JSON form is the document
// `nodetide snapshot` writes and `nodetide plan --snapshot` reads.
type Snapshot struct {
	CapturedAt           time.Time                      `json:"capturedAt"`
	NodeGroups           []NodeGroup                    `json:"nodeGroups"`
	Nodes                []corev1.Node                  `json:"nodes"`
	Pods                 []corev1.Pod                   `json:"pods"`
	PodDisruptionBudgets []policyv1.PodDisruptionBudget `json:"podDisruptionBudgets"`
	// The volumes' topology: a pod's claims, the volumes they are bound to
	// and the classes of those still unbound restrict where it fits.
	// Snapshots without them plan as if no pod had a claim.
	PersistentVolumeClaims []corev1.PersistentVolumeClaim `json:"persistentVolumeClaims,omitempty"`
	PersistentVolumes      []corev1.PersistentVolume      `json:"persistentVolumes,omitempty"`
	StorageClasses         []storagev1.StorageClass       `json:"storageClasses,omitempty"`
	State                  State                          `json:"state"`
}

// NodeGroup is one provider-managed group as the planner sees it. MinSize and
// MaxSize are the effective bounds (provider, narrowed by config, overridden by
// a schedule); MaxFrom says what set the max.
type NodeGroup struct {
	Name       string   `json:"name"`
	Provider   string   `json:"provider"`
	MinSize    int      `json:"minSize"`
	MaxSize    int      `json:"maxSize"`
	TargetSize int      `json:"targetSize"`
	Template   Template `json:"template"`
	// Instances are provider IDs; a Node belongs to the group when its
	// spec.providerID is one of them (never by name).
	Instances []string `json:"instances"`
	// MaxFrom is what set MaxSize (MaxSource reads it). It decides what a
	// group above its max means: only a schedule's max is an instruction
	// to shrink the group now.
	MaxFrom BoundSource `json:"maxFrom,omitempty"`
	// BoundsFrom names the schedule that set MaxSize ("schedule night"),
	// for reasons and the status; empty for the provider and the config.
	BoundsFrom string `json:"boundsFrom,omitempty"`
	// Zones are the zones a new node of the group may start in
	// (topology.kubernetes.io/zone values), sorted; empty when unknown.
	// With several, the cloud picks each new node's zone, so the planner
	// only promises a pod a new node when it fits every one of them.
	Zones []string `json:"zones,omitempty"`
	// Headroom is the spare capacity the group keeps ready (config's
	// nodeGroups[].headroom); nil keeps none. It is part of the snapshot so
	// a replay decides as the cycle did.
	Headroom *Headroom `json:"headroom,omitempty"`
}

// BoundSource is what set a group's bound.
type BoundSource string

// Sources of a group's max size.
const (
	// BoundProvider, the zero value, is the cloud group's own bound (an
	// Auto Scaling Group's, a Kapsule pool's; a kwok group's is its
	// configured one).
	BoundProvider BoundSource = ""
	// BoundConfig is the config's nodeGroups[].maxSize where it lowered
	// the provider's (or replaced a Kapsule pool's max_size).
	BoundConfig BoundSource = "config"
	// BoundSchedule is a fired schedule's max (BoundsFrom names it).
	BoundSchedule BoundSource = "schedule"
)

// MaxSource is what set g's max: MaxFrom, or a schedule when only
// BoundsFrom names one (snapshots written before MaxFrom was).
func (g *NodeGroup) MaxSource() BoundSource {
	if g.MaxFrom == BoundProvider && g.BoundsFrom != "" {
		return BoundSchedule
	}
	return g.MaxFrom
}

// Headroom is spare capacity a group keeps ready for pods not yet created.
// One form is set: Nodes (empty nodes), CPUMillis and/or MemoryBytes (free
// allocatable across the group), or Utilization (grow when the group's
// requests ÷ allocatable reach it, 0 < Utilization ≤ 1).
type Headroom struct {
	Nodes       int     `json:"nodes,omitempty"`
	CPUMillis   int64   `json:"cpuMillis,omitempty"`
	MemoryBytes int64   `json:"memoryBytes,omitempty"`
	Utilization float64 `json:"utilization,omitempty"`
}

// Check reports a headroom that is not exactly one valid form.
func (h Headroom) Check() error {
	forms := 0
	if h.Nodes != 0 {
		forms++
	}
	if h.CPUMillis != 0 || h.MemoryBytes != 0 {
		forms++
	}
	if h.Utilization != 0 {
		forms++
	}
	switch {
	case forms != 1:
		return fmt.Errorf("set exactly one of nodes, cpu/memory, utilization")
	case h.Nodes < 0:
		return fmt.Errorf("nodes must be at least 1, got %d", h.Nodes)
	case h.CPUMillis < 0 || h.MemoryBytes < 0:
		return fmt.Errorf("cpu and memory must not be negative")
	case h.Utilization != 0 && !(h.Utilization > 0 && h.Utilization <= 1):
		return fmt.Errorf("utilization must be in (0, 1], got %v", h.Utilization)
	}
	return nil
}

// Template describes a new node of a group, so pods can be packed onto nodes
// that do not exist yet (also when the group is at zero).
type Template struct {
	Allocatable corev1.ResourceList `json:"allocatable"`
	Labels      map[string]string   `json:"labels"`
	Taints      []corev1.Taint      `json:"taints"`
}

// State is what the planner remembers between cycles.
type State struct {
	UnneededSince map[string]time.Time `json:"unneededSince"`
	LastScaleUp   map[string]time.Time `json:"lastScaleUp"`
	// BackoffUntil holds groups whose last scale-up did not register in time.
	BackoffUntil map[string]time.Time `json:"backoffUntil,omitempty"`
}

// Plan is the planner's output; its JSON form is `nodetide plan -o json`.
type Plan struct {
	ScaleUp        []ScaleUp        `json:"scaleUp"`
	ScaleDown      []ScaleDown      `json:"scaleDown"`
	DecreaseTarget []DecreaseTarget `json:"decreaseTarget,omitempty"`
	Unschedulable  []Unschedulable  `json:"unschedulable"`
	NodeGroups     []GroupStatus    `json:"nodeGroups"`
	State          State            `json:"state"`
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
// (MaxSizeReached, BackedOff, MaxNodesPerStep, NoRoom), or its template
// does not fit the pod (the rest).
const (
	ReasonMaxSizeReached  = "MaxSizeReached"
	ReasonBackedOff       = "BackedOff"
	ReasonMaxNodesPerStep = "MaxNodesPerStep"
	ReasonNoRoom          = "NoRoom"
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

// Expanders pick among the groups that could host pending pods.
const (
	ExpanderLeastWaste = "least-waste"
	ExpanderPriority   = "priority"
)

// ScaleUpSettings tune scale-up.
type ScaleUpSettings struct {
	PendingPodMinAge     time.Duration
	MaxNodesPerStep      int
	MaxNodeProvisionTime time.Duration
	Backoff              time.Duration
	Expander             string
	// Priorities (expander "priority"): higher wins; ties fall back to least waste.
	Priorities map[string]int
	// BalanceSimilarNodeGroups splits each scale-up across the groups
	// similar to the one the expander picked (balance.go).
	BalanceSimilarNodeGroups bool
}

// ScaleDownSettings tune scale-down.
type ScaleDownSettings struct {
	Enabled              bool
	UtilizationThreshold float64
	UnneededTime         time.Duration
	DelayAfterAdd        time.Duration
	MaxConcurrentDrains  int
}

// DefaultSettings follow cluster-autoscaler's defaults.
func DefaultSettings() Settings {
	return Settings{
		ScaleUp: ScaleUpSettings{
			PendingPodMinAge:     10 * time.Second,
			MaxNodesPerStep:      10,
			MaxNodeProvisionTime: 15 * time.Minute,
			Backoff:              5 * time.Minute,
			Expander:             ExpanderLeastWaste,
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
