package evaluate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// EventSettings bound the Kubernetes Events a cycle writes.
type EventSettings struct {
	// MaxPodEventsPerCycle caps TriggeredScaleUp and NotTriggerScaleUp
	// events per cycle (TriggeredScaleUp first); the pods left out get
	// theirs in a later cycle. Zero means DefaultMaxPodEventsPerCycle.
	MaxPodEventsPerCycle int
	// NotTriggerScaleUpInterval is how long a pod waits before it gets
	// NotTriggerScaleUp again, and a node ScaleDownBlocked. Zero means
	// DefaultNotTriggerScaleUpInterval.
	NotTriggerScaleUpInterval time.Duration
}

// Defaults of EventSettings.
const (
	DefaultMaxPodEventsPerCycle      = 100
	DefaultNotTriggerScaleUpInterval = 5 * time.Minute
)

func (s EventSettings) withDefaults() EventSettings {
	if s.MaxPodEventsPerCycle <= 0 {
		s.MaxPodEventsPerCycle = DefaultMaxPodEventsPerCycle
	}
	if s.NotTriggerScaleUpInterval <= 0 {
		s.NotTriggerScaleUpInterval = DefaultNotTriggerScaleUpInterval
	}
	return s
}

// podEventMemory is when each pod last got NotTriggerScaleUp from this
// process. It lives as long as the process (a warm Lambda container): a
// cold start may repeat a pod's event once, early.
type podEventMemory struct {
	mu   sync.Mutex
	last map[types.UID]time.Time
}

// due reports whether uid may get the event at now.
func (m *podEventMemory) due(uid types.UID, now time.Time, every time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.last[uid]
	return !ok || now.Sub(t) >= every
}

func (m *podEventMemory) mark(uids []types.UID, now time.Time, every time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[types.UID]time.Time{}
	}
	// Forget the pods whose interval has passed, so the map holds at
	// most one interval's worth of pods.
	for uid, t := range m.last {
		if now.Sub(t) >= every {
			delete(m.last, uid)
		}
	}
	for _, uid := range uids {
		m.last[uid] = now
	}
}

// recordEvents writes the cycle's events: TriggeredScaleUp on the pods of
// every scale-up that the provider took, NotTriggerScaleUp on the pods left
// pending, those of a refused scale-up included (each at most once per
// interval), both within the per-cycle cap,
// ScaleDown on every node whose drain was started, and ScaleDownBlocked on
// the under-used nodes a pod, a budget or room keeps. It never fails.
func (e *Evaluator) recordEvents(ctx context.Context, plan planner.Plan, snap snapshot.Snapshot, actions []Action) {
	if e.Events == nil {
		return
	}
	set := e.EventSettings.withDefaults()
	budget := set.MaxPodEventsPerCycle
	failedUp := map[string]bool{}
	started := map[string]bool{}
	for _, a := range actions {
		switch {
		case a.Kind == "scaleUp" && a.Error != "":
			failedUp[a.NodeGroup] = true
		case a.Kind == "drain" && a.Error == "":
			started[a.Node] = true
		}
	}
	groups := make(map[string]snapshot.NodeGroup, len(snap.NodeGroups))
	for _, g := range snap.NodeGroups {
		groups[g.Name] = g
	}

	type podEvent struct {
		key, reason, typ, msg string
	}
	var want []podEvent
	for _, up := range plan.ScaleUp {
		if failedUp[up.NodeGroup] {
			continue
		}
		msg := fmt.Sprintf("pod triggered scale-up: [{%s %d->%d (max: %d)}]",
			up.NodeGroup, up.NewTargetSize-up.Delta, up.NewTargetSize, groups[up.NodeGroup].MaxSize)
		for _, p := range up.Pods {
			if len(want) == budget {
				break
			}
			want = append(want, podEvent{p, kubeevents.ReasonTriggeredScaleUp, corev1.EventTypeNormal, msg})
		}
	}
	now := snap.CapturedAt
	uids := podUIDs(snap.Pods, plan)
	var marked []types.UID
	// The pods of a scale-up the provider refused are left pending too, and
	// the group is now backed off: they hear why in this cycle, not the next.
	for _, up := range plan.ScaleUp {
		if !failedUp[up.NodeGroup] {
			continue
		}
		msg := NotTriggerScaleUpMessage([]planner.GroupReason{{NodeGroup: up.NodeGroup, Code: planner.ReasonBackedOff}})
		for _, p := range up.Pods {
			if len(want) >= budget {
				break
			}
			if uid := uids[p]; e.notTriggered.due(uid, now, set.NotTriggerScaleUpInterval) {
				want = append(want, podEvent{p, kubeevents.ReasonNotTriggerScaleUp, corev1.EventTypeNormal, msg})
				marked = append(marked, uid)
			}
		}
	}
	for _, u := range plan.Unschedulable {
		if len(want) >= budget {
			break
		}
		uid := uids[u.Pod]
		if !e.notTriggered.due(uid, now, set.NotTriggerScaleUpInterval) {
			continue
		}
		want = append(want, podEvent{u.Pod, kubeevents.ReasonNotTriggerScaleUp, corev1.EventTypeNormal, NotTriggerScaleUpMessage(u.NodeGroups)})
		marked = append(marked, uid)
	}

	evs := make([]kubeevents.Event, 0, len(want)+len(started))
	for _, w := range want {
		ns, name, _ := strings.Cut(w.key, "/")
		evs = append(evs, kubeevents.Event{Object: kubeevents.Pod(ns, name, uids[w.key]), Type: w.typ, Reason: w.reason, Message: w.msg})
	}
	for _, d := range plan.ScaleDown {
		if !started[d.Node] {
			continue
		}
		evs = append(evs, kubeevents.Event{
			Object: kubeevents.Node(d.Node, nodeUID(snap.Nodes, d.Node)), Type: corev1.EventTypeNormal,
			Reason: kubeevents.ReasonScaleDown, Message: "node chosen for removal, drain started: " + d.Reason,
		})
	}
	evs = append(evs, e.blockedEvents(plan, snap, set)...)
	e.Events.RecordAll(ctx, evs)
	// Marked whether or not the writes landed: a refusing events API is
	// not asked again for every pod every cycle.
	e.notTriggered.mark(marked, now, set.NotTriggerScaleUpInterval)
}

// blockedCodes are the kept nodes that get ScaleDownBlocked: under the
// threshold, and kept by what a person can change (a pod, a budget, room);
// not the waits that pass by themselves (unneededTime, delayAfterAdd).
var blockedCodes = []string{planner.KeptBlockedByPod, planner.KeptNotEnoughPdb, planner.KeptNoPlaceToMovePods}

// blockedEvents are ScaleDownBlocked on the plan's kept nodes of
// blockedCodes, each node at most once per NotTriggerScaleUpInterval; the
// plan lists at most planner.MaxKept nodes, these first.
func (e *Evaluator) blockedEvents(plan planner.Plan, snap snapshot.Snapshot, set EventSettings) []kubeevents.Event {
	now := snap.CapturedAt
	var evs []kubeevents.Event
	var marked []types.UID
	for _, k := range plan.Kept {
		if !slices.Contains(blockedCodes, k.Code) {
			continue
		}
		uid := nodeUID(snap.Nodes, k.Node)
		if !e.blockedNoted.due(uid, now, set.NotTriggerScaleUpInterval) {
			continue
		}
		marked = append(marked, uid)
		evs = append(evs, kubeevents.Event{
			Object: kubeevents.Node(k.Node, uid), Type: corev1.EventTypeNormal,
			Reason: kubeevents.ReasonScaleDownBlocked, Message: "node not removed (" + k.Code + "): " + k.Reason,
		})
	}
	e.blockedNoted.mark(marked, now, set.NotTriggerScaleUpInterval)
	return evs
}

// podUIDs maps "ns/name" to UID for the pods the plan names.
func podUIDs(pods []corev1.Pod, plan planner.Plan) map[string]types.UID {
	wanted := map[string]bool{}
	for _, up := range plan.ScaleUp {
		for _, p := range up.Pods {
			wanted[p] = true
		}
	}
	for _, u := range plan.Unschedulable {
		wanted[u.Pod] = true
	}
	out := make(map[string]types.UID, len(wanted))
	if len(wanted) == 0 {
		return out
	}
	for i := range pods {
		k := pods[i].Namespace + "/" + pods[i].Name
		if wanted[k] {
			out[k] = pods[i].UID
		}
	}
	return out
}

func nodeUID(nodes []corev1.Node, name string) types.UID {
	for i := range nodes {
		if nodes[i].Name == name {
			return nodes[i].UID
		}
	}
	return ""
}

// NotTriggerScaleUpMessage counts the node groups by why they do not take
// the pod, in cluster-autoscaler's words: "pod didn't trigger scale-up: 1
// max node group size reached, 2 node(s) didn't match Pod's node
// affinity/selector".
func NotTriggerScaleUpMessage(groups []planner.GroupReason) string {
	if len(groups) == 0 {
		return "pod didn't trigger scale-up: there are no node groups"
	}
	counts := map[string]int{}
	for _, g := range groups {
		counts[reasonPhrase(g)]++
	}
	phrases := make([]string, 0, len(counts))
	for p := range counts {
		phrases = append(phrases, p)
	}
	slices.Sort(phrases)
	parts := make([]string, len(phrases))
	for i, p := range phrases {
		parts[i] = fmt.Sprintf("%d %s", counts[p], p)
	}
	return "pod didn't trigger scale-up: " + strings.Join(parts, ", ")
}

func reasonPhrase(g planner.GroupReason) string {
	switch g.Code {
	case planner.ReasonMaxSizeReached:
		return "max node group size reached"
	case planner.ReasonBackedOff:
		return "in backoff after failed scale-up"
	case planner.ReasonMaxNodesPerStep:
		return "max nodes per step reached"
	case planner.ReasonNoRoom:
		return "no room on the new nodes planned this cycle"
	case planner.ReasonNodeSelector:
		return "node(s) didn't match Pod's node affinity/selector"
	case planner.ReasonTaint:
		return "node(s) had untolerated taint"
	case planner.ReasonHostPort:
		return "node(s) didn't have free ports for the requested pod ports"
	case planner.ReasonPodAffinity:
		return "node(s) didn't match pod affinity/anti-affinity rules"
	case planner.ReasonTopologySpread:
		return "node(s) didn't match pod topology spread constraints"
	case planner.ReasonInsufficient:
		// "insufficient cpu (needs 5, template has 4)" → "Insufficient cpu"
		word, _, _ := strings.Cut(strings.TrimPrefix(g.Reason, "insufficient "), " ")
		return "Insufficient " + word
	}
	return g.Reason
}
