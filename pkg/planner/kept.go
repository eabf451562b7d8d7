package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Kept is a node of a group that scale-down considered and keeps, with the
// first reason found: what `nodetide plan` lists under KEPT.
type Kept struct {
	Node      string `json:"node"`
	NodeGroup string `json:"nodeGroup"`
	// Code classifies Reason: one of the Kept* constants.
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// KeptCount is how many nodes of a group are kept for one code.
type KeptCount struct {
	NodeGroup string `json:"nodeGroup"`
	Code      string `json:"code"`
	Nodes     int    `json:"nodes"`
}

// MaxKept bounds Plan.Kept: past it, Plan.KeptOmitted counts the rest
// (Plan.KeptCounts still counts every node).
const MaxKept = 50

// Codes of Kept, cluster-autoscaler's unremovable reasons where one
// matches. The node's own state first, then the scale-down simulation,
// then the plan's limits.
const (
	KeptNotReady                = "NotReady"
	KeptUnschedulable           = "Unschedulable" // cordoned by hand
	KeptPendingPodPlaced        = "PendingPodPlaced"
	KeptScaleDownDisabled       = "ScaleDownDisabledAnnotation"
	KeptNotUnderutilized        = "NotUnderutilized"
	KeptNodeTooNew              = "NodeTooNew"
	KeptBlockedByPod            = "BlockedByPod"
	KeptNotEnoughPdb            = "NotEnoughPdb"
	KeptNoPlaceToMovePods       = "NoPlaceToMovePods"
	KeptGroupShrinking          = "GroupShrinking"
	KeptNotUnneededLongEnough   = "NotUnneededLongEnough"
	KeptScaleDownInCooldown     = "ScaleDownInCooldown"
	KeptPendingPodFits          = "PendingPodFits"
	KeptNodeGroupMinSizeReached = "NodeGroupMinSizeReached"
	KeptDisruptionLimitReached  = "DisruptionLimitReached"
	KeptHeadroom                = "Headroom"
	KeptReplacing               = "Replacing"
	KeptReceivesMovedPods       = "ReceivesMovedPods"
	KeptReceivedMovedPods       = "ReceivedMovedPods"
)

// keptCode indexes keptCodes; the order is the order Plan.Kept lists.
type keptCode uint8

const (
	kBlockedByPod keptCode = iota
	kNotEnoughPdb
	kNoPlaceToMovePods
	kNotUnneededLongEnough
	kScaleDownInCooldown
	kPendingPodFits
	kMinSizeReached
	kDisruptionLimit
	kHeadroom
	kReplacing
	kReceivesMovedPods
	kReceivedMovedPods
	kGroupShrinking
	kScaleDownDisabled
	kNodeTooNew
	kPendingPodPlaced
	kNotReady
	kUnschedulable
	kNotUnderutilized // last: busy nodes are the least asked about
	kNone
)

var keptCodes = [...]string{
	kBlockedByPod: KeptBlockedByPod, kNotEnoughPdb: KeptNotEnoughPdb, kNoPlaceToMovePods: KeptNoPlaceToMovePods,
	kNotUnneededLongEnough: KeptNotUnneededLongEnough, kScaleDownInCooldown: KeptScaleDownInCooldown,
	kPendingPodFits: KeptPendingPodFits, kMinSizeReached: KeptNodeGroupMinSizeReached,
	kDisruptionLimit: KeptDisruptionLimitReached, kHeadroom: KeptHeadroom, kReplacing: KeptReplacing, kReceivesMovedPods: KeptReceivesMovedPods,
	kReceivedMovedPods: KeptReceivedMovedPods, kGroupShrinking: KeptGroupShrinking,
	kScaleDownDisabled: KeptScaleDownDisabled, kNodeTooNew: KeptNodeTooNew, kPendingPodPlaced: KeptPendingPodPlaced,
	kNotReady: KeptNotReady, kUnschedulable: KeptUnschedulable, kNotUnderutilized: KeptNotUnderutilized,
}

// keptRec is one kept node, recorded cheaply on the hot path; only the
// first MaxKept become messages. a and b depend on the code: the budget
// and the pods it needed (NotEnoughPdb), the class that did not fit
// (NoPlaceToMovePods), the pending pod (PendingPodFits), the nodes already
// disrupting (DisruptionLimitReached, NodeGroupMinSizeReached).
type keptRec struct {
	node int32
	code keptCode
	a, b int32
}

func (m *model) keep(node int32, code keptCode, a, b int32) {
	m.kept = append(m.kept, keptRec{node, code, a, b})
}

// keptBefore reports whether node i is no candidate for removal, and
// records why. Draining and deleted nodes, and those this plan already
// removes, are on their way out: not kept.
func (m *model) keptBefore(i int32, util float64) bool {
	n := &m.nodes[i]
	switch {
	case n.group < 0 || n.draining || n.leaving || n.node.DeletionTimestamp != nil:
		return true
	case n.replacing:
		m.keep(i, kReplacing, 0, 0)
	case n.receiving:
		m.keep(i, kReceivesMovedPods, 0, 0)
	case n.received:
		m.keep(i, kReceivedMovedPods, 0, 0)
	case !n.ready:
		m.keep(i, kNotReady, 0, 0)
	case !n.schedulable:
		// Not cordoned by hand: this plan's shrink removes it (overMax).
		if n.node.Spec.Unschedulable {
			m.keep(i, kUnschedulable, 0, 0)
		}
	case n.gotPending:
		m.keep(i, kPendingPodPlaced, 0, 0)
	case nodeOptedOut(n.node):
		m.keep(i, kScaleDownDisabled, 0, 0)
	case util >= m.set.ScaleDown.UtilizationThreshold:
		m.keep(i, kNotUnderutilized, 0, 0)
	case m.young(n):
		m.keep(i, kNodeTooNew, 0, 0)
	default:
		return false
	}
	return true
}

// writeKept turns the records into the plan's Kept list (the first
// MaxKept, by code order, group and node) and each group's counts.
func (m *model) writeKept(plan *Plan, next *snapshot.State) {
	recs := m.kept
	if len(recs) == 0 {
		return
	}
	slices.SortFunc(recs, func(x, y keptRec) int {
		nx, ny := &m.nodes[x.node], &m.nodes[y.node]
		return cmp.Or(cmp.Compare(x.code, y.code),
			strings.Compare(m.groups[nx.group].ng.Name, m.groups[ny.group].ng.Name),
			strings.Compare(nx.node.Name, ny.node.Name))
	})
	plan.KeptCounts = keptCounts(m, recs)
	if len(recs) > MaxKept {
		plan.KeptOmitted = len(recs) - MaxKept
		recs = recs[:MaxKept]
	}
	plan.Kept = make([]Kept, len(recs))
	for i, r := range recs {
		n := &m.nodes[r.node]
		plan.Kept[i] = Kept{Node: n.node.Name, NodeGroup: m.groups[n.group].ng.Name, Code: keptCodes[r.code], Reason: m.keptReason(r, next)}
	}
}

// keptCounts counts the records, sorted by code then group, per group and
// code: by group name, then code order.
func keptCounts(m *model, recs []keptRec) []KeptCount {
	var out []KeptCount
	for _, r := range recs {
		g, code := m.groups[m.nodes[r.node].group].ng.Name, keptCodes[r.code]
		if l := len(out) - 1; l >= 0 && out[l].NodeGroup == g && out[l].Code == code {
			out[l].Nodes++
			continue
		}
		out = append(out, KeptCount{NodeGroup: g, Code: code, Nodes: 1})
	}
	slices.SortStableFunc(out, func(x, y KeptCount) int { return strings.Compare(x.NodeGroup, y.NodeGroup) })
	return out
}

// keptReason says why the recorded node stays, naming what keeps it.
func (m *model) keptReason(r keptRec, next *snapshot.State) string {
	n := &m.nodes[r.node]
	g := &m.groups[n.group]
	sd := m.set.ScaleDown
	switch r.code {
	case kBlockedByPod:
		return m.blockingPod(r.node)
	case kNotEnoughPdb:
		b := &m.snap.PodDisruptionBudgets[r.a]
		return fmt.Sprintf("PodDisruptionBudget %s/%s has too few disruptions left (status.disruptionsAllowed %d) for the node's %s it covers",
			b.Namespace, b.Name, b.Status.DisruptionsAllowed, plural(int(r.b), "pod"))
	case kNoPlaceToMovePods:
		return m.unplaceable(r.node, r.a)
	case kNotUnneededLongEnough:
		since := next.UnneededSince[n.node.Name]
		return fmt.Sprintf("unneeded since %s, for %s of scaleDown.unneededTime %s",
			since.UTC().Format(time.RFC3339), m.now.Sub(since).Round(time.Second), sd.UnneededTime)
	case kScaleDownInCooldown:
		return fmt.Sprintf("group scaled up at %s, within scaleDown.delayAfterAdd %s",
			next.LastScaleUp[g.ng.Name].UTC().Format(time.RFC3339), sd.DelayAfterAdd)
	case kPendingPodFits:
		return fmt.Sprintf("pending pod %s fits the group's template: removing a node would only make room for a scale-up", podKey(&m.snap.Pods[r.a]))
	case kMinSizeReached:
		return fmt.Sprintf("group at its min size %d (target %d, %d draining or removed by this plan)", g.ng.MinSize, g.target, r.a)
	case kDisruptionLimit:
		if r.b < 0 {
			return fmt.Sprintf("scaleDown.maxConcurrentDrains %d reached (%d draining or removed by this plan)", sd.MaxConcurrentDrains, r.a)
		}
		return fmt.Sprintf("disruption budget allows %s of the group at once, %d draining or removed by this plan", plural(int(r.b), "node"), r.a)
	case kHeadroom:
		return "removing it would break the group's headroom"
	case kReplacing:
		return "a consolidation replacement holds it until its new nodes are Ready (see the plan's replace)"
	case kReceivesMovedPods:
		return "a consolidation replacement under way moves, or is to move, the pods of the nodes it replaces onto it (see the plan's replace)"
	case kReceivedMovedPods:
		return m.heldBy[r.node].reason()
	case kGroupShrinking:
		return fmt.Sprintf("group above its max size %d: the surplus goes by shrinking it", g.ng.MaxSize)
	case kScaleDownDisabled:
		return Blocker{Node: n.node.Name, Rule: nodeBlocker(n.node)}.String()
	case kNodeTooNew:
		return fmt.Sprintf("created %s, within %s (the longer of delayAfterAdd and unneededTime)",
			n.node.CreationTimestamp.UTC().Format(time.RFC3339), max(sd.DelayAfterAdd, sd.UnneededTime))
	case kPendingPodPlaced:
		return "a pending pod is placed on it this cycle"
	case kNotReady:
		return "node is not Ready"
	case kUnschedulable:
		return "node is cordoned (spec.unschedulable) and not draining"
	}
	cpu, mem := n.utilization()
	return fmt.Sprintf("utilisation %d%% (cpu %d%%, memory %d%%) not below %d%%", pct(max(cpu, mem)), pct(cpu), pct(mem), pct(sd.UtilizationThreshold))
}

// blockingPod names the first pod of node ni that keeps it, and the rule.
func (m *model) blockingPod(ni int32) string {
	budgets := m.budgetIndex()
	for _, pi := range m.podsOf(ni) {
		if !m.pods[pi].blocks {
			continue
		}
		p := &m.snap.Pods[pi]
		return Blocker{Pod: podKey(p), Rule: podBlocker(p, len(budgets.matching(p, nil)) > 0)}.String()
	}
	return "a pod keeps the node"
}

// unplaceable names a pod of class c on node ni that fits on no node that
// stays.
func (m *model) unplaceable(ni, c int32) string {
	for _, pi := range m.podsOf(ni) {
		if !m.pods[pi].stays && !m.pods[pi].blocks && m.classOf(pi) == c {
			return "pod " + podKey(&m.snap.Pods[pi]) + " fits on no other node"
		}
	}
	return "pods moved here fit on no other node"
}
