package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/nodetide/nodetide/pkg/providers"
)

// Applier carries out a schedule's effects: it scales the workloads the
// schedule names and sets its node groups' desired sizes.
type Applier struct {
	Client kubernetes.Interface
	// Groups lists the managed node groups; nil means the schedule's
	// node-group effects are reported as not applied.
	Groups func(context.Context) ([]providers.NodeGroup, error)
	Log    *slog.Logger
}

// The outcomes of one Change.
const (
	OutcomeScaled    = "scaled"
	OutcomeUnchanged = "unchanged"
	// OutcomePending is a smaller desired size than the group's target:
	// removing nodes goes through drains, which schedules don't start yet.
	OutcomePending = "pending"
	OutcomeFailed  = "failed"
)

// Change is one effect of an applied schedule.
type Change struct {
	// Kind is "Deployment", "StatefulSet" or "NodeGroup".
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitzero"`
	Name      string `json:"name"`
	From      *int   `json:"from,omitzero"`
	To        int    `json:"to"`
	Outcome   string `json:"outcome"`
	Message   string `json:"message,omitzero"`
}

// Result is what one schedule did at one fire time (or by hand).
type Result struct {
	Schedule string `json:"schedule"`
	// Action is "fire", "skip", "run" (by hand) or "lost" (another tick
	// claimed the fire time first, so nothing was applied here).
	Action  string    `json:"action"`
	FireAt  time.Time `json:"fireAt,omitzero"`
	Reason  string    `json:"reason,omitzero"`
	Changes []Change  `json:"changes,omitzero"`
	// Notes tell what was not done and why, without being failures.
	Notes []string `json:"notes,omitzero"`
	// Errors are the effects that failed; the others were still applied.
	Errors []string `json:"errors,omitzero"`
}

// Err joins the result's errors, or is nil.
func (r Result) Err() error {
	if len(r.Errors) == 0 {
		return nil
	}
	errs := make([]error, len(r.Errors))
	for i, e := range r.Errors {
		errs[i] = errors.New(e)
	}
	return fmt.Errorf("schedule %q: %w", r.Schedule, errors.Join(errs...))
}

func (r *Result) fail(c Change, err error) {
	c.Outcome, c.Message = OutcomeFailed, err.Error()
	r.Changes = append(r.Changes, c)
	r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", c.target(), err))
}

func (c Change) target() string {
	if c.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", c.Kind, c.Namespace, c.Name)
	}
	return fmt.Sprintf("%s %s", c.Kind, c.Name)
}

// Apply carries out s's effects into res. One effect failing doesn't stop
// the others; each failure is recorded in res.Errors.
func (a *Applier) Apply(ctx context.Context, s Schedule, res *Result) {
	a.applyNodeGroups(ctx, s, res)
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
		a.log().Info("schedule effect", "schedule", s.Name, "target", c.target(), "to", c.To, "outcome", c.Outcome, "message", c.Message)
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
func (a *Applier) applyTemplate(ctx context.Context, t AppScaleTemplate, res *Result) {
	sel := labels.Set{"app": t.App}.AsSelector().String()
	list, err := a.Client.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		res.fail(Change{Kind: KindDeployment, Name: sel, To: int(*t.Replicas)}, fmt.Errorf("list: %w", err))
		return
	}
	if len(list.Items) == 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("appScaleTemplates: no Deployment is labelled %s", sel))
		return
	}
	for _, d := range list.Items {
		a.scale(ctx, KindDeployment, d.Namespace, d.Name, *t.Replicas, res)
	}
}

// scale sets a workload's replicas through its scale subresource.
func (a *Applier) scale(ctx context.Context, kind, ns, name string, replicas int32, res *Result) {
	c := Change{Kind: kind, Namespace: ns, Name: name, To: int(replicas)}
	var get func(context.Context, string, metav1.GetOptions) (*autoscalingv1.Scale, error)
	var update func(context.Context, string, *autoscalingv1.Scale, metav1.UpdateOptions) (*autoscalingv1.Scale, error)
	switch kind {
	case KindDeployment:
		get, update = a.Client.AppsV1().Deployments(ns).GetScale, a.Client.AppsV1().Deployments(ns).UpdateScale
	case KindStatefulSet:
		get, update = a.Client.AppsV1().StatefulSets(ns).GetScale, a.Client.AppsV1().StatefulSets(ns).UpdateScale
	default:
		res.fail(c, fmt.Errorf("kind %q is not %s or %s", kind, KindDeployment, KindStatefulSet))
		return
	}
	c.Outcome = OutcomeScaled
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
			c.Outcome = OutcomeUnchanged
			return nil
		}
		sc.Spec.Replicas = replicas
		_, err = update(ctx, name, sc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		res.fail(c, err)
		return
	}
	res.Changes = append(res.Changes, c)
}

// groupTargets is the desired size per group name: desiredCapacity for
// every managed group, then nodeGroups entries by name.
func groupTargets(s Schedule, groups []providers.NodeGroup) (map[string]int, []string) {
	want := map[string]int{}
	var names []string
	set := func(name string, v int) {
		if _, ok := want[name]; !ok {
			names = append(names, name)
		}
		want[name] = v
	}
	if s.DesiredCapacity != nil {
		for _, g := range groups {
			set(g.Name(), *s.DesiredCapacity)
		}
	}
	for _, g := range s.NodeGroups {
		if g.Desired != nil {
			set(g.Name, *g.Desired)
		}
	}
	return want, names
}

// applyNodeGroups sets each group's desired size. Growing calls the
// group's IncreaseSize, never past its maximum; shrinking is recorded as
// pending, since nodes are removed only through drains.
func (a *Applier) applyNodeGroups(ctx context.Context, s Schedule, res *Result) {
	hasDesired := s.DesiredCapacity != nil || slices.ContainsFunc(s.NodeGroups, func(g NodeGroup) bool { return g.Desired != nil })
	if slices.ContainsFunc(s.NodeGroups, func(g NodeGroup) bool { return g.Min != nil || g.Max != nil }) {
		res.Notes = append(res.Notes, "nodeGroups min/max: effective size limits from schedules are not applied yet; only desired sizes are")
	}
	if !hasDesired {
		return
	}
	if a.Groups == nil {
		res.Errors = append(res.Errors, "node groups: none are configured here, so desired sizes were not applied")
		return
	}
	groups, err := a.Groups(ctx)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Sprintf("node groups: %v", err))
		return
	}
	byName := map[string]providers.NodeGroup{}
	for _, g := range groups {
		byName[g.Name()] = g
	}
	want, names := groupTargets(s, groups)
	for _, name := range names {
		desired := want[name]
		c := Change{Kind: "NodeGroup", Name: name, To: desired}
		g, ok := byName[name]
		if !ok {
			res.fail(c, errors.New("no such node group is managed"))
			continue
		}
		target, err := g.TargetSize(ctx)
		if err != nil {
			res.fail(c, fmt.Errorf("target size: %w", err))
			continue
		}
		c.From = &target
		switch {
		case desired == target:
			c.Outcome = OutcomeUnchanged
		case desired > g.MaxSize():
			res.fail(c, fmt.Errorf("desired size %d is above the node group's maximum size %d; left at %d", desired, g.MaxSize(), target))
			continue
		case desired > target:
			if err := g.IncreaseSize(ctx, desired-target); err != nil {
				res.fail(c, fmt.Errorf("increase size by %d: %w", desired-target, err))
				continue
			}
			c.Outcome = OutcomeScaled
		default:
			c.Outcome = OutcomePending
			c.Message = fmt.Sprintf("desired %d is below the target %d: scale-down by schedule goes through drains, which this version does not start; the group was left at %d", desired, target, target)
			a.log().Warn("schedule scale-down not applied", "schedule", s.Name, "nodeGroup", name, "desired", desired, "target", target,
				"reason", "scale-down by schedule goes through drains, not implemented yet")
		}
		res.Changes = append(res.Changes, c)
	}
}
