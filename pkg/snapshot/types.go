// Package snapshot is the snapshot document: everything a decision reads (the
// node groups, nodes, pods, PDBs, volumes and the planner's remembered state),
// its JSON codec in two forms and the Trimmer that keeps only what the planner
// reads.
//
// A snapshot's JSON document comes in two forms, both read by ReadSnapshot,
// a value at a time from the stream: the full form (WriteSnapshot), with
// nodes, pods and PDBs as the API serves them, and the compact form
// (WriteCompactSnapshot, FormatCompact), with only what the planner reads
// and what the pods of one controller share written once.
package snapshot

import (
	"fmt"
	"strings"
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
	// TemplateFrom is where Template came from: "provider" (the cloud's
	// description of the group, its tags or its API) or "node NAME" (one of
	// the group's Ready nodes, sanitised). Empty in snapshots written
	// before it was recorded.
	TemplateFrom string `json:"templateFrom,omitempty"`
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
	// Price is what one node of the group costs per hour (config's
	// nodeGroups[].price); nil is unknown, never zero. Part of the
	// snapshot so a replay compares groups as the cycle did.
	Price *Price `json:"price,omitempty"`
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

// TemplateFromProvider is TemplateFrom for a template the provider gave.
const TemplateFromProvider = "provider"

// templateFromNode prefixes TemplateFrom for a template taken from a node.
const templateFromNode = "node "

// TemplateFromNode is TemplateFrom for a template taken from the named node.
func TemplateFromNode(name string) string { return templateFromNode + name }

// TemplateNode is the node g's template was taken from, if it was.
func (g *NodeGroup) TemplateNode() (string, bool) {
	name, ok := strings.CutPrefix(g.TemplateFrom, templateFromNode)
	return name, ok && name != ""
}

// State is what the planner remembers between cycles.
type State struct {
	UnneededSince map[string]time.Time `json:"unneededSince"`
	LastScaleUp   map[string]time.Time `json:"lastScaleUp"`
	// BackoffUntil holds groups whose last scale-up did not register in time.
	BackoffUntil map[string]time.Time `json:"backoffUntil,omitempty"`
	// Replacing are the consolidation replacements under way, by ID: new
	// nodes asked for, the nodes they replace kept until they are Ready.
	Replacing map[string]Replacement `json:"replacing,omitempty"`
}

// MaxReplacementNodes bounds a replacement's new and replaced nodes.
const MaxReplacementNodes = 100

// MaxReplacementReceivers bounds the nodes a drained replacement holds
// besides its new ones: its old nodes' pods go to a few nodes (first fit),
// and the bound keeps the state table's item far below DynamoDB's 400 KB
// whatever the names.
const MaxReplacementReceivers = 1000

// Replacement is one consolidation replacement under way: Delta new nodes
// of NodeGroup were asked for at Since; Nodes go once they are Ready and
// the pods of Nodes fit on what stays.
//
// Once Nodes drain, the replacement stays a while to hold the nodes that
// received their pods: its new nodes (the group's nodes created since
// Since) and Receivers. Drained is when the pods moved: the plan that
// drained Nodes, then each plan that still saw one of them draining. It is
// zero until then.
type Replacement struct {
	NodeGroup string    `json:"nodeGroup"`
	Delta     int       `json:"delta"`
	Nodes     []string  `json:"nodes"`
	Since     time.Time `json:"since"`
	Drained   time.Time `json:"drained,omitzero"`
	// Receivers are the nodes the drain moved the pods of Nodes onto, by
	// name, at most MaxReplacementReceivers: only a drained replacement
	// has them.
	Receivers []string `json:"receivers,omitempty"`
}
