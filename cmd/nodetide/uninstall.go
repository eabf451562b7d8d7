package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/podfacts"
	awsprovider "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/setup"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/trigger"
)

const (
	// legacyHookName is the one hook of releases before per-cluster hooks.
	legacyHookName = "nodetide-drain"
	// managedByLabel marks the objects nodetide itself writes into a
	// cluster (the webhook configuration, its status ConfigMaps).
	managedByLabel = "app.kubernetes.io/managed-by"
	// nameLabel marks the objects of deploy/rbac.yaml.
	nameLabel = "app.kubernetes.io/name"
)

// rbacObjects are the objects of deploy/rbac.yaml (a test holds the two
// together).
var rbacObjects = []struct{ Kind, Name string }{
	{"ClusterRole", "nodetide-evaluate"}, {"ClusterRole", "nodetide-drain"}, {"ClusterRole", "nodetide-schedule"},
	{"ClusterRoleBinding", "nodetide-evaluate"}, {"ClusterRoleBinding", "nodetide-drain"}, {"ClusterRoleBinding", "nodetide-schedule"},
}

// uninstallItem is one object the plan removes or keeps; do removes it and
// says what it did.
type uninstallItem struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Detail string `json:"detail,omitempty"`
	do     func(context.Context) (string, error)
}

type uninstallPlan struct {
	Cluster       string               `json:"cluster"`
	LifecycleHook string               `json:"lifecycleHook"`
	Remove        []uninstallItem      `json:"remove"`
	Keep          []uninstallItem      `json:"keep"`
	RunningDrains []state.RunningDrain `json:"runningDrains"`
}

type uninstallFlags struct {
	yes, dryRun, force, legacyHook bool
}

func newUninstallCmd(g *globals) *cobra.Command {
	var f uninstallFlags
	cmd := &cobra.Command{
		Use:   "uninstall [--yes]",
		Short: "Remove what nodetide put in the cluster and on its Auto Scaling groups (prints the plan; --yes acts)",
		Long: "Lists, then with --yes removes, this cluster's lifecycle hooks " + config.LifecycleHookPrefix + "<cluster> on every Auto Scaling group\n" +
			"the config names or discovers, the webhook configuration " + trigger.WebhookConfigName + ", ConfigMaps labelled " + managedByLabel + "=nodetide,\n" +
			"the draining taint (and nodetide's cordon) on nodes, and the ClusterRoles, ClusterRoleBindings, Role and RoleBinding of deploy/rbac.yaml.\n" +
			"It keeps the state table, the node groups at their size and the stack (cdk destroy removes it, after this).\n" +
			"It refuses while drains run, unless --force. Run it again: it finds nothing left to do.",
		Example: `  nodetide uninstall --config nodetide.yaml
  nodetide uninstall --config nodetide.yaml -o json
  nodetide uninstall --config nodetide.yaml --yes
  nodetide uninstall --config nodetide.yaml --yes --legacy-hook`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runUninstall(cmd.Context(), g, f) },
	}
	cmd.Flags().BoolVar(&f.yes, "yes", false, "remove what the plan lists (without it the plan is printed and nothing changes)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print the plan and change nothing (the default without --yes)")
	cmd.Flags().BoolVar(&f.force, "force", false, "go on although drains are running (their nodes are freed too)")
	cmd.Flags().BoolVar(&f.legacyHook, "legacy-hook", false, "also delete the hook "+legacyHookName+" of releases before per-cluster hooks (only if no other deployment of such a release uses the groups)")
	addOutputFlag(cmd, g, "table", "table", "json", "yaml")
	return cmd
}

func runUninstall(ctx context.Context, g *globals, f uninstallFlags) error {
	switch {
	case f.yes && f.dryRun:
		return errors.New("--yes and --dry-run: choose one")
	case f.yes && g.output != "table":
		return fmt.Errorf("-o %s prints the plan only: drop it to act with --yes", g.output)
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	client, err := g.adminClient()
	if err != nil {
		return err
	}
	a := &setup.AWS{}
	store, err := setup.Store(ctx, cfg, a)
	if err != nil {
		return err
	}
	p, err := planUninstall(ctx, cfg, client, a, store, f.legacyHook)
	if err != nil {
		return err
	}
	if g.output != "table" {
		return g.printDoc(p)
	}
	if !f.yes {
		return writeUninstallPlan(g.stdout, p, f.force)
	}
	if len(p.RunningDrains) > 0 && !f.force && len(p.Remove) > 0 {
		return fmt.Errorf("%s: nothing changed; wait for them to end (nodetide status) or pass --force", runningDrainsText(p.RunningDrains))
	}
	return applyUninstall(ctx, g.stdout, p)
}

// planUninstall reads what nodetide left behind; it changes nothing.
func planUninstall(ctx context.Context, cfg *config.Config, client kubernetes.Interface, a *setup.AWS, store setup.Stores, legacy bool) (*uninstallPlan, error) {
	p := &uninstallPlan{Cluster: cfg.Cluster.Name, LifecycleHook: cfg.LifecycleHookName(), Remove: []uninstallItem{}, Keep: []uninstallItem{}}
	running, err := store.RunningDrains(ctx)
	if err != nil {
		return nil, fmt.Errorf("running drains: %w", err)
	}
	p.RunningDrains = append([]state.RunningDrain{}, running...)
	// The webhook first: with --yes, removals go in plan order, and the
	// webhook is what starts new cycles.
	steps := []func(context.Context, *uninstallPlan) error{
		func(ctx context.Context, p *uninstallPlan) error { return planWebhook(ctx, client, p) },
		func(ctx context.Context, p *uninstallPlan) error { return planHooks(ctx, cfg, a, legacy, p) },
		func(ctx context.Context, p *uninstallPlan) error { return planNodes(ctx, client, store, p) },
		func(ctx context.Context, p *uninstallPlan) error { return planConfigMaps(ctx, client, p) },
		func(ctx context.Context, p *uninstallPlan) error { return planRBAC(ctx, client, p) },
		func(ctx context.Context, p *uninstallPlan) error { return planStatusRBAC(ctx, client, p) },
	}
	for _, step := range steps {
		if err := step(ctx, p); err != nil {
			return nil, err
		}
	}
	p.Keep = append(p.Keep, keptOnPurpose(cfg)...)
	return p, nil
}

func planWebhook(ctx context.Context, client kubernetes.Interface, p *uninstallPlan) error {
	w, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, trigger.WebhookConfigName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", trigger.WebhookConfigName, err)
	case w.Labels[managedByLabel] != "nodetide":
		p.Keep = append(p.Keep, uninstallItem{Kind: "ValidatingWebhookConfiguration", Name: w.Name, Detail: "not made by nodetide (no label " + managedByLabel + "=nodetide)"})
		return nil
	}
	p.Remove = append(p.Remove, uninstallItem{Kind: "ValidatingWebhookConfiguration", Name: w.Name, Detail: "the webhook trigger",
		do: func(ctx context.Context) (string, error) {
			found, err := trigger.Uninstall(ctx, client)
			if err != nil || !found {
				return "validatingwebhookconfiguration/" + trigger.WebhookConfigName + " was already gone", err
			}
			return "validatingwebhookconfiguration/" + trigger.WebhookConfigName + " deleted", nil
		}})
	return nil
}

// planHooks finds this cluster's hook (and with legacy the old shared one)
// on every Auto Scaling group the config names or discovers. Another
// deployment's hook on the same group is listed as kept.
func planHooks(ctx context.Context, cfg *config.Config, a *setup.AWS, legacy bool, p *uninstallPlan) error {
	if !usesAWSGroups(cfg) {
		return nil
	}
	groups, err := setup.AutoScalingGroups(ctx, cfg, a)
	if err != nil {
		return err
	}
	for _, asg := range groups {
		out, err := asg.Client.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: awssdk.String(asg.Name)})
		if err != nil {
			return fmt.Errorf("%s: lifecycle hooks of Auto Scaling group %s: %w", asg.Entry, asg.Name, err)
		}
		found := "named"
		if asg.Discovered {
			found = "discovered"
		}
		p.Keep = append(p.Keep, uninstallItem{Kind: "AutoScalingGroup", Name: asg.Name, Detail: found + " by " + asg.Entry + ": stays at its current size, its machines as they are"})
		for _, h := range out.LifecycleHooks {
			name := awssdk.ToString(h.LifecycleHookName)
			item := uninstallItem{Kind: "LifecycleHook", Name: asg.Name + "/" + name}
			switch {
			case name == p.LifecycleHook || legacy && name == legacyHookName:
				item.Detail = fmt.Sprintf("%s by %s; machines waiting on it go on (AWS continues their actions)", found, asg.Entry)
				item.do = deleteHook(asg.Client, asg.Name, name)
				p.Remove = append(p.Remove, item)
			case name == legacyHookName:
				item.Detail = "the hook of releases before per-cluster hooks: --legacy-hook deletes it (once no deployment of such a release uses this group)"
				p.Keep = append(p.Keep, item)
			case strings.HasPrefix(name, config.LifecycleHookPrefix):
				item.Detail = "another cluster's deployment"
				p.Keep = append(p.Keep, item)
			}
		}
	}
	return nil
}

func usesAWSGroups(cfg *config.Config) bool {
	for _, g := range cfg.NodeGroups {
		if g.Provider == awsprovider.ProviderName {
			return true
		}
	}
	return false
}

// deleteHook deletes a hook; AWS first completes the actions waiting on it
// (CONTINUE for a terminating machine). A hook gone meanwhile is no error.
func deleteHook(as *autoscaling.Client, group, hook string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		what := fmt.Sprintf("lifecyclehook %s/%s", group, hook)
		_, err := as.DeleteLifecycleHook(ctx, &autoscaling.DeleteLifecycleHookInput{AutoScalingGroupName: &group, LifecycleHookName: &hook})
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "ValidationError" && strings.Contains(api.ErrorMessage(), "No Lifecycle Hook found") {
			return what + " was already gone", nil
		}
		if err != nil {
			return "", fmt.Errorf("delete %s: %w", what, err)
		}
		return what + " deleted", nil
	}
}

// planNodes lists the nodes carrying nodetide's draining taint: the taint
// is nodetide's alone, so it proves the cordon was too, unless the node's
// last drain found it cordoned already. A node cordoned without the taint
// is a person's: it is listed as kept.
func planNodes(ctx context.Context, client kubernetes.Interface, store state.DrainStore, p *uninstallPlan) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !hasDrainingTaint(n) {
			if n.Spec.Unschedulable {
				p.Keep = append(p.Keep, uninstallItem{Kind: "Node", Name: n.Name, Detail: "cordoned, not by nodetide: stays cordoned"})
			}
			continue
		}
		keepCordon := false
		last, err := store.LastDrain(ctx, n.Name)
		switch {
		case err == nil:
			keepCordon = last.WasUnschedulable
		case !errors.Is(err, state.ErrNoDrain):
			return fmt.Errorf("node %s: its last drain: %w", n.Name, err)
		}
		name := n.Name
		item := uninstallItem{Kind: "NodeTaint", Name: name, Detail: "taint " + podfacts.TaintDraining + " and nodetide's cordon"}
		item.do = func(ctx context.Context) (string, error) {
			if err := k8s.Uncordon(ctx, client, name, podfacts.TaintDraining); err != nil && !apierrors.IsNotFound(err) {
				return "", err
			}
			return "node/" + name + " untainted and uncordoned", nil
		}
		if keepCordon || !n.Spec.Unschedulable {
			item.Detail = "taint " + podfacts.TaintDraining + " (not cordoned)"
			if keepCordon {
				item.Detail = "taint " + podfacts.TaintDraining + " (cordoned before its drain: stays cordoned)"
			}
			item.do = func(ctx context.Context) (string, error) {
				if err := k8s.RemoveTaint(ctx, client, name, podfacts.TaintDraining); err != nil && !apierrors.IsNotFound(err) {
					return "", err
				}
				return "node/" + name + " untainted", nil
			}
		}
		p.Remove = append(p.Remove, item)
	}
	return nil
}

func hasDrainingTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == podfacts.TaintDraining && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// planConfigMaps lists the ConfigMaps nodetide writes (labelled
// managed-by nodetide), in every namespace.
func planConfigMaps(ctx context.Context, client kubernetes.Interface, p *uninstallPlan) error {
	cms, err := client.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: managedByLabel + "=nodetide"})
	if err != nil {
		return fmt.Errorf("list ConfigMaps labelled %s=nodetide: %w", managedByLabel, err)
	}
	for _, cm := range cms.Items {
		ns, name, uid := cm.Namespace, cm.Name, cm.UID
		p.Remove = append(p.Remove, uninstallItem{Kind: "ConfigMap", Name: ns + "/" + name, Detail: "labelled " + managedByLabel + "=nodetide",
			do: func(ctx context.Context) (string, error) {
				return deleted(fmt.Sprintf("configmap %s/%s", ns, name), client.CoreV1().ConfigMaps(ns).Delete(ctx, name, uidPrecondition(uid)))
			}})
	}
	return nil
}

// planRBAC lists the objects of deploy/rbac.yaml that carry its label
// app.kubernetes.io/name=nodetide; one of the same name without it is a
// person's and kept.
func planRBAC(ctx context.Context, client kubernetes.Interface, p *uninstallPlan) error {
	rbac := client.RbacV1()
	for _, o := range rbacObjects {
		var meta metav1.ObjectMeta
		var err error
		var del func(context.Context, string, metav1.DeleteOptions) error
		if o.Kind == "ClusterRole" {
			var r *rbacv1.ClusterRole
			r, err = rbac.ClusterRoles().Get(ctx, o.Name, metav1.GetOptions{})
			if err == nil {
				meta = r.ObjectMeta
			}
			del = rbac.ClusterRoles().Delete
		} else {
			var b *rbacv1.ClusterRoleBinding
			b, err = rbac.ClusterRoleBindings().Get(ctx, o.Name, metav1.GetOptions{})
			if err == nil {
				meta = b.ObjectMeta
			}
			del = rbac.ClusterRoleBindings().Delete
		}
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("get %s %s: %w", o.Kind, o.Name, err)
		case meta.Labels[nameLabel] != "nodetide":
			p.Keep = append(p.Keep, uninstallItem{Kind: o.Kind, Name: o.Name, Detail: "not deploy/rbac.yaml's (no label " + nameLabel + "=nodetide)"})
			continue
		}
		what, name, uid := strings.ToLower(o.Kind)+" "+o.Name, o.Name, meta.UID
		p.Remove = append(p.Remove, uninstallItem{Kind: o.Kind, Name: o.Name, Detail: "deploy/rbac.yaml",
			do: func(ctx context.Context) (string, error) { return deleted(what, del(ctx, name, uidPrecondition(uid))) }})
	}
	return nil
}

func uidPrecondition(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// deleted reports a delete; one already gone (or replaced by another
// object of the name since the plan read it) is left as it is.
func deleted(what string, err error) (string, error) {
	switch {
	case apierrors.IsNotFound(err):
		return what + " was already gone", nil
	case apierrors.IsConflict(err):
		return what + " was replaced since the plan read it: left alone", nil
	case err != nil:
		return "", fmt.Errorf("delete %s: %w", what, err)
	}
	return what + " deleted", nil
}

// keptOnPurpose is what uninstall leaves, and how to remove it by hand.
func keptOnPurpose(cfg *config.Config) []uninstallItem {
	var out []uninstallItem
	if d := cfg.State.DynamoDB; d != nil {
		out = append(out, uninstallItem{Kind: "DynamoDBTable", Name: d.Table,
			Detail: "state, schedules and drain history (of every cluster sharing it); the stack retains it too: aws dynamodb delete-table --table-name " + d.Table},
			uninstallItem{Kind: "Schedules", Name: d.Table, Detail: "kept in the table; what they last scaled stays at that size"})
	}
	for _, g := range cfg.NodeGroups {
		if g.Provider == awsprovider.ProviderName {
			continue // listed with their hooks
		}
		out = append(out, uninstallItem{Kind: "NodeGroup", Name: g.Name, Detail: string(g.Provider) + ": stays at its current size, its nodes as they are"})
	}
	out = append(out, uninstallItem{Kind: "CloudFormationStack", Name: "Nodetide-" + cfg.Cluster.Name,
		Detail: "the stack (its default name): functions, state machine, rules and the named groups' hooks; cdk destroy removes it, after this command"})
	return out
}

func runningDrainsText(running []state.RunningDrain) string {
	names := make([]string, 0, len(running))
	for _, r := range running {
		names = append(names, r.Node+" ("+r.ID+")")
	}
	return fmt.Sprintf("%d drain(s) running: %s", len(running), strings.Join(names, ", "))
}

func writeUninstallPlan(w io.Writer, p *uninstallPlan, force bool) error {
	fmt.Fprintf(w, "Uninstall plan for cluster %s (lifecycle hook %s):\n", p.Cluster, p.LifecycleHook)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tKIND\tNAME\tDETAIL")
	for _, it := range p.Remove {
		fmt.Fprintf(tw, "remove\t%s\t%s\t%s\n", it.Kind, it.Name, it.Detail)
	}
	for _, it := range p.Keep {
		fmt.Fprintf(tw, "keep\t%s\t%s\t%s\n", it.Kind, it.Name, it.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(p.RunningDrains) > 0 && !force && len(p.Remove) > 0 {
		fmt.Fprintf(w, "Refused with --yes: %s; wait for them to end, or pass --force.\n", runningDrainsText(p.RunningDrains))
	}
	if len(p.Remove) == 0 {
		_, err := fmt.Fprintln(w, "Nothing to remove.")
		return err
	}
	_, err := fmt.Fprintf(w, "Nothing changed: run again with --yes to remove the %d object(s) marked remove.\n", len(p.Remove))
	return err
}

// applyUninstall removes the plan's objects in its order, one line each;
// a failure does not stop the others (a second run retries what is left).
func applyUninstall(ctx context.Context, w io.Writer, p *uninstallPlan) error {
	if len(p.Remove) == 0 {
		fmt.Fprintf(w, "Nothing to remove: cluster %s has nothing of nodetide's left.\n", p.Cluster)
	}
	var errs []error
	for _, it := range p.Remove {
		line, err := it.do(ctx)
		if err != nil {
			fmt.Fprintf(w, "failed: %s %s: %v\n", it.Kind, it.Name, err)
			errs = append(errs, err)
			continue
		}
		fmt.Fprintln(w, line)
	}
	for _, it := range p.Keep {
		fmt.Fprintf(w, "kept: %s %s: %s\n", it.Kind, it.Name, it.Detail)
	}
	if len(errs) > 0 {
		return fmt.Errorf("uninstall: %d of %d removals failed: %w", len(errs), len(p.Remove), errors.Join(errs...))
	}
	return nil
}
