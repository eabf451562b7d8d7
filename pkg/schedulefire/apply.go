package schedulefire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/schedule"
)

// Applier carries out a schedule's effects: it scales the workloads the
// schedule names and sets its node groups' desired sizes.
type Applier struct {
	Client kubernetes.Interface
	// Groups lists the managed node groups with their configured bounds
	// (no schedule's override: a fired schedule replaces it); nil means
	// the schedule's node-group effects are reported as not applied.
	Groups func(context.Context) ([]providers.NodeGroup, error)
	// Overrides records the sizes a fired schedule sets, which evaluate
	// and drain then keep to; nil applies desired sizes only.
	Overrides schedule.OverrideStore
	// Shrinker drains surplus nodes; nil reports shrinking as failed.
	Shrinker Shrinker
	Log      *slog.Logger
}

// Shrinker removes node groups' surplus nodes now: given back when they
// never registered, else drained. The evaluate cycle is one, so a
// schedule's removals follow the same rules and lease as evaluate's.
type Shrinker interface {
	// Shrink brings each group down to its size; from names the cause
	// ("schedule night").
	Shrink(ctx context.Context, sizes map[string]int, from string) ([]Removal, error)
}

// Removal is one thing a Shrink did: Delta unregistered machines given
// back, or the drain of Node started.
type Removal struct {
	NodeGroup string
	Node      string
	Delta     int
	Error     string
}

func (r Removal) what() string {
	if r.Node != "" {
		return "drain of " + r.Node
	}
	return fmt.Sprintf("giving back %d unregistered", r.Delta)
}

// Apply carries out s's effects into res. One effect failing doesn't stop
// the others; each failure is recorded in res.Errors.
// firedAt is the fire time (now, when run by hand); it orders the overrides
// of schedules naming the same group.
func (a *Applier) Apply(ctx context.Context, s schedule.Schedule, firedAt time.Time, res *schedule.Result) {
	a.applyNodeGroups(ctx, s, firedAt, res)
	for _, t := range s.AppScaleTemplates {
		if t.Replicas == nil {
			continue
		}
		a.applyTemplate(ctx, t, res)
	}
	for _, app := range s.Apps {
		if app.Replicas == nil {
			continue
		}
		a.scale(ctx, app.Kind, app.Namespace, app.Name, *app.Replicas, res)
	}
	for _, c := range res.Changes {
		a.log().Info("schedule effect", "schedule", s.Name, "target", c.Target(), "to", c.To, "outcome", c.Outcome, "message", c.Message)
	}
}

func (a *Applier) log() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Log
}

// applyTemplate scales every Deployment labelled app=<App>, in all
// namespaces, as scalerd does.
func (a *Applier) applyTemplate(ctx context.Context, t schedule.AppScaleTemplate, res *schedule.Result) {
	sel := labels.Set{"app": t.App}.AsSelector().String()
	list, err := a.Client.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		res.Fail(schedule.Change{Kind: schedule.KindDeployment, Name: sel, To: int(*t.Replicas)}, fmt.Errorf("list: %w", err))
		return
	}
	if len(list.Items) == 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("appScaleTemplates: no Deployment is labelled %s", sel))
		return
	}
	for _, d := range list.Items {
		a.scale(ctx, schedule.KindDeployment, d.Namespace, d.Name, *t.Replicas, res)
	}
}

// scale sets a workload's replicas through its scale subresource.
func (a *Applier) scale(ctx context.Context, kind schedule.Kind, ns, name string, replicas int32, res *schedule.Result) {
	c := schedule.Change{Kind: kind, Namespace: ns, Name: name, To: int(replicas)}
	var get func(context.Context, string, metav1.GetOptions) (*autoscalingv1.Scale, error)
	var update func(context.Context, string, *autoscalingv1.Scale, metav1.UpdateOptions) (*autoscalingv1.Scale, error)
	switch kind {
	case schedule.KindDeployment:
		get, update = a.Client.AppsV1().Deployments(ns).GetScale, a.Client.AppsV1().Deployments(ns).UpdateScale
	case schedule.KindStatefulSet:
		get, update = a.Client.AppsV1().StatefulSets(ns).GetScale, a.Client.AppsV1().StatefulSets(ns).UpdateScale
	default:
		res.Fail(c, fmt.Errorf("kind %q is not %s or %s", kind, schedule.KindDeployment, schedule.KindStatefulSet))
		return
	}
	c.Outcome = schedule.OutcomeScaled
	// The controllers write the workload too; a conflict is retried on a
	// fresh read.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		from := int(sc.Spec.Replicas)
		c.From = &from
		if sc.Spec.Replicas == replicas {
			c.Outcome = schedule.OutcomeUnchanged
			return nil
		}
		sc.Spec.Replicas = replicas
		_, err = update(ctx, name, sc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		res.Fail(c, err)
		return
	}
	res.Changes = append(res.Changes, c)
}

// applyNodeGroups sets the effective sizes of the groups s names: it
// records each group's override (min, max, desired), then moves the group
// to its desired size clamped into those bounds (or into them, when only
// bounds are given). Growing calls IncreaseSize; shrinking drains the
// surplus nodes through the Shrinker. A desired size outside the group's
// bounds is an error for that group, which is then left as it was.
func (a *Applier) applyNodeGroups(ctx context.Context, s schedule.Schedule, firedAt time.Time, res *schedule.Result) {
	if s.DesiredCapacity == nil && len(s.NodeGroups) == 0 {
		return
	}
	if a.Groups == nil {
		res.Errors = append(res.Errors, "node groups: none are configured here, so the schedule's node-group sizes were not applied")
		return
	}
	groups, err := a.Groups(ctx)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Sprintf("node groups: %v", err))
		return
	}
	byName := map[string]providers.NodeGroup{}
	names := make([]string, 0, len(groups))
	for _, g := range groups {
		byName[g.Name()] = g
		names = append(names, g.Name())
	}
	shrink := map[string]int{}
	pending := map[string]schedule.Change{}
	for _, o := range schedule.OverridesOf(s, names, firedAt) {
		g, ok := byName[o.Group]
		if !ok {
			res.Fail(schedule.Change{Kind: schedule.KindNodeGroup, Name: o.Group}, errors.New("no such node group is managed"))
			continue
		}
		if c, want, shrinking := a.applyOverride(ctx, o, g, res); shrinking {
			shrink[o.Group] = want
			pending[o.Group] = c
		}
	}
	if len(shrink) > 0 {
		a.shrink(ctx, s, shrink, pending, res)
	}
}

// applyOverride records o and grows g to the size o wants, recording the
// outcome in res. When g must shrink, it records nothing yet and returns
// the change and the size for the caller to shrink to: the Shrinker takes
// all of a schedule's groups at once.
func (a *Applier) applyOverride(ctx context.Context, o schedule.Override, g providers.NodeGroup, res *schedule.Result) (schedule.Change, int, bool) {
	c := schedule.Change{Kind: schedule.KindNodeGroup, Name: o.Group}
	want, ok := a.wantedSize(ctx, o, g, &c, res)
	if !ok || !a.recordOverride(ctx, o, &c, res) {
		return c, 0, false
	}
	target := *c.From
	switch {
	case want == target:
		c.Outcome = schedule.OutcomeUnchanged
	case want > target:
		// From the target read under the group's lock: concurrent
		// fires asking for the same size grow the group once.
		from, err := providers.GrowTo(ctx, g, want)
		if err != nil {
			res.Fail(c, fmt.Errorf("grow to %d: %w", want, err))
			return c, 0, false
		}
		c.From = &from
		c.Outcome = schedule.OutcomeScaled
		if from >= want {
			c.Outcome = schedule.OutcomeUnchanged
		}
	default:
		return c, want, true
	}
	res.Changes = append(res.Changes, c)
	return c, 0, false
}

// wantedSize fills c with o's effective bounds, g's target and the size o
// wants: its desired size, or the target clamped into the bounds. It returns
// false, having recorded the failure, when the target cannot be read or the
// desired size is outside the bounds.
func (a *Applier) wantedSize(ctx context.Context, o schedule.Override, g providers.NodeGroup, c *schedule.Change, res *schedule.Result) (int, bool) {
	b := g.Bounds()
	lo, hi, note := schedule.EffectiveBounds(o, b.Min, b.Max)
	if note != "" {
		res.Notes = append(res.Notes, fmt.Sprintf("node group %s: %s", o.Group, note))
	}
	if o.Bounds() {
		c.Min, c.Max = &lo, &hi
	}
	target, err := g.TargetSize(ctx)
	if err != nil {
		res.Fail(*c, fmt.Errorf("target size: %w", err))
		return 0, false
	}
	c.From = &target
	want := min(max(target, lo), hi)
	if o.Desired != nil {
		want = *o.Desired
		c.To = want
		switch {
		case want > hi:
			res.Fail(*c, fmt.Errorf("desired size %d is above the node group's maximum size %d; left at %d", want, hi, target))
			return 0, false
		case want < lo:
			res.Fail(*c, fmt.Errorf("desired size %d is below the node group's minimum size %d; left at %d", want, lo, target))
			return 0, false
		}
	}
	c.To = want
	return want, true
}

// recordOverride stores o, which evaluate and drain then keep to. It returns
// false, having recorded the outcome, when storing fails or a schedule
// fired later has already set the group's sizes.
func (a *Applier) recordOverride(ctx context.Context, o schedule.Override, c *schedule.Change, res *schedule.Result) bool {
	if a.Overrides == nil {
		if o.Bounds() {
			res.Notes = append(res.Notes, fmt.Sprintf("node group %s: no override store here, so evaluate and drain keep to the configured bounds", o.Group))
		}
		return true
	}
	won, err := a.Overrides.SetOverride(ctx, o)
	if err != nil {
		res.Fail(*c, fmt.Errorf("record the override: %w", err))
		return false
	}
	if !won {
		c.Outcome = schedule.OutcomeUnchanged
		c.Message = "a schedule fired later has set this group's sizes; left as they are"
		res.Changes = append(res.Changes, *c)
		return false
	}
	return true
}

// shrink drains the surplus nodes of the groups a schedule shrinks.
func (a *Applier) shrink(ctx context.Context, s schedule.Schedule, sizes map[string]int, changes map[string]schedule.Change, res *schedule.Result) {
	names := slices.Sorted(maps.Keys(sizes))
	if a.Shrinker == nil {
		for _, name := range names {
			res.Fail(changes[name], errors.New("removing nodes needs the drain state machine, which is not configured here; the group was left as it was"))
		}
		return
	}
	removals, err := a.Shrinker.Shrink(ctx, sizes, "schedule "+s.Name)
	if err != nil {
		for _, name := range names {
			res.Fail(changes[name], fmt.Errorf("shrink: %w", err))
		}
		return
	}
	for _, name := range names {
		c := changes[name]
		var nodes, failed []string
		given := 0
		for _, r := range removals {
			switch {
			case r.NodeGroup != name:
			case r.Error != "":
				failed = append(failed, fmt.Sprintf("%s: %s", r.what(), r.Error))
			case r.Node == "":
				given += r.Delta
			default:
				nodes = append(nodes, r.Node)
			}
		}
		if len(failed) > 0 {
			res.Fail(c, errors.New(strings.Join(failed, "; ")))
			continue
		}
		var parts []string
		if given > 0 {
			parts = append(parts, fmt.Sprintf("gave back %d unregistered", given))
		}
		if len(nodes) > 0 {
			parts = append(parts, "draining "+strings.Join(nodes, ", "))
		}
		removed := given + len(nodes)
		if removed < *c.From-c.To {
			parts = append(parts, fmt.Sprintf("%d more cannot go now (nodes that must not be disrupted, or already draining)", *c.From-c.To-removed))
		}
		c.Outcome = schedule.OutcomeDraining
		if removed == 0 {
			c.Outcome = schedule.OutcomeUnchanged
		}
		c.Message = strings.Join(parts, "; ")
		res.Changes = append(res.Changes, c)
	}
}
