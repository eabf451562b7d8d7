package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/trigger"
)

// rbacManifest reads deploy/rbac.yaml's objects.
func rbacManifest(t *testing.T) (roles []rbacv1.ClusterRole, bindings []rbacv1.ClusterRoleBinding) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var head metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		switch head.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			roles = append(roles, r)
		case "ClusterRoleBinding":
			var r rbacv1.ClusterRoleBinding
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			bindings = append(bindings, r)
		case "", "Role", "RoleBinding", "ConfigMap": // TestUninstallKnowsTheStatusRBAC
		default:
			t.Fatalf("deploy/rbac.yaml: kind %s, which uninstall does not know", head.Kind)
		}
	}
	return roles, bindings
}

// TestUninstallKnowsTheRBACManifest: uninstall removes exactly the objects
// of deploy/rbac.yaml, each carrying the label it checks.
func TestUninstallKnowsTheRBACManifest(t *testing.T) {
	roles, bindings := rbacManifest(t)
	var got []string
	for _, r := range roles {
		got = append(got, "ClusterRole/"+r.Name)
		if r.Labels[nameLabel] != "nodetide" {
			t.Errorf("ClusterRole %s lacks the label %s=nodetide uninstall checks", r.Name, nameLabel)
		}
	}
	for _, r := range bindings {
		got = append(got, "ClusterRoleBinding/"+r.Name)
		if r.Labels[nameLabel] != "nodetide" {
			t.Errorf("ClusterRoleBinding %s lacks the label %s=nodetide uninstall checks", r.Name, nameLabel)
		}
	}
	var want []string
	for _, o := range rbacObjects {
		want = append(want, o.Kind+"/"+o.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("deploy/rbac.yaml holds %v, uninstall removes %v", got, want)
	}
}

// TestUninstallKnowsTheStatusRBAC: uninstall removes deploy/rbac.yaml's
// namespaced objects: its Role and RoleBinding by name and label, its status
// ConfigMap by the managed-by label.
func TestUninstallKnowsTheStatusRBAC(t *testing.T) {
	b, err := os.ReadFile("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var obj struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "Role", "RoleBinding":
			got = append(got, obj.Kind+"/"+obj.Namespace+"/"+obj.Name)
			if obj.Labels[nameLabel] != "nodetide" {
				t.Errorf("%s %s lacks the label %s=nodetide uninstall checks", obj.Kind, obj.Name, nameLabel)
			}
		case "ConfigMap":
			if obj.Labels[managedByLabel] != "nodetide" {
				t.Errorf("ConfigMap %s lacks the label %s=nodetide uninstall removes it by", obj.Name, managedByLabel)
			}
		}
	}
	var want []string
	for _, o := range statusRBACObjects {
		want = append(want, o.Kind+"/"+o.Namespace+"/"+o.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("deploy/rbac.yaml holds %v, uninstall removes %v", got, want)
	}
}

func applyRBAC(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	roles, bindings := rbacManifest(t)
	for _, r := range roles {
		if _, err := client.RbacV1().ClusterRoles().Create(ctx, &r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.RbacV1().ClusterRoles().Delete(context.Background(), r.Name, metav1.DeleteOptions{})
		})
	}
	for _, b := range bindings {
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
		})
	}
}

func hookNames(d *fakeaws.Server, group string) []string {
	var out []string
	for _, h := range d.Hooks(group) {
		out = append(out, h.Name)
	}
	return out
}

// uninstallWorld is what the test puts in the bed and the AWS double.
type uninstallWorld struct {
	cp                 *testbed.ControlPlane
	d                  *fakeaws.Server
	named, disc, other string // groups: named by the config, discovered, another cluster's
	freed, wasCordoned string // nodes with the draining taint: no drain on record, cordoned before its drain
	personal           string // cordoned by a person
	ns                 string
}

func (w *uninstallWorld) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := w.cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (w *uninstallWorld) cordon(t *testing.T, name string) {
	t.Helper()
	n := w.node(t, name)
	n.Spec.Unschedulable = true
	if _, err := w.cp.Client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// state is the part of the world uninstall may change, as one string.
func (w *uninstallWorld) state(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	c := w.cp.Client
	var b strings.Builder
	fmt.Fprintf(&b, "hooks %v %v %v\n", hookNames(w.d, w.named), hookNames(w.d, w.disc), hookNames(w.d, w.other))
	_, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, trigger.WebhookConfigName, metav1.GetOptions{})
	fmt.Fprintf(&b, "webhook %v\n", err == nil)
	_, err = c.CoreV1().ConfigMaps("kube-system").Get(ctx, "nodetide-status", metav1.GetOptions{})
	fmt.Fprintf(&b, "status configmap %v\n", err == nil)
	_, err = c.CoreV1().ConfigMaps(w.ns).Get(ctx, "mine", metav1.GetOptions{})
	fmt.Fprintf(&b, "person's configmap %v\n", err == nil)
	for _, name := range []string{w.freed, w.wasCordoned, w.personal} {
		n := w.node(t, name)
		fmt.Fprintf(&b, "node %s unschedulable=%v tainted=%v\n", name, n.Spec.Unschedulable, hasDrainingTaint(n))
	}
	for _, o := range rbacObjects {
		var err error
		if o.Kind == "ClusterRole" {
			_, err = c.RbacV1().ClusterRoles().Get(ctx, o.Name, metav1.GetOptions{})
		} else {
			_, err = c.RbacV1().ClusterRoleBindings().Get(ctx, o.Name, metav1.GetOptions{})
		}
		fmt.Fprintf(&b, "%s %s %v\n", o.Kind, o.Name, err == nil)
	}
	return b.String()
}

// TestUninstall on the bed and the AWS double, through the CLI: the plan
// changes nothing (without --yes, with --dry-run, with -o json); --yes is
// refused while a drain runs; then it removes this cluster's hook from the
// named and the discovered group (the machine waiting on it goes on), the
// webhook, the status ConfigMap, the draining taint (and nodetide's cordon
// only), the RBAC objects of deploy/rbac.yaml; it keeps another cluster's
// hook on the same group, the old shared hook (until --legacy-hook), a
// group the config does not manage, a person's cordon and ConfigMap, and
// the table with its records. A second run has nothing to do; a drain
// running again is refused, and --force goes on.
func TestUninstall(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	db := testbed.DynamoDB(t)
	table := "cli-uninstall"
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	d := fakeaws.New(fakeaws.WithAutoBoot())
	t.Cleanup(d.Close)
	w := &uninstallWorld{cp: cp, d: d, ns: ns, named: ns + "-named", disc: ns + "-disc", other: ns + "-other",
		freed: ns + "-freed", wasCordoned: ns + "-was-cordoned", personal: ns + "-personal"}
	const cluster = "prod"
	hook := func(group, name, transition string) {
		t.Helper()
		if err := d.PutLifecycleHook(fakeaws.LifecycleHook{Group: group, Name: name, Transition: transition,
			DefaultResult: fakeaws.ResultContinue, HeartbeatTimeout: 720 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	d.AddGroup(fakeaws.Group{Name: w.named, MaxSize: 3, DesiredCapacity: 2})
	d.AddGroup(fakeaws.Group{Name: w.disc, MaxSize: 3, Tags: map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/" + cluster: "owned"}})
	d.AddGroup(fakeaws.Group{Name: w.other, MaxSize: 3, Tags: map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/staging": "owned"}})
	hook(w.named, "nodetide-drain-"+cluster, fakeaws.TransitionTerminating)
	hook(w.named, "their-launch-hook", fakeaws.TransitionLaunching)
	hook(w.disc, "nodetide-drain-"+cluster, fakeaws.TransitionTerminating)
	hook(w.disc, "nodetide-drain-staging", fakeaws.TransitionTerminating)
	hook(w.disc, legacyHookName, fakeaws.TransitionTerminating)
	hook(w.other, "nodetide-drain-"+cluster, fakeaws.TransitionTerminating) // same name, a group not this config's
	g, _ := d.Group(w.named)
	waiting, err := d.ScaleIn(w.named, g.Instances[0].ID)
	if err != nil || waiting.Token == "" {
		t.Fatalf("scale in: %+v, %v", waiting, err)
	}
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_AUTO_SCALING": d.URL(), "AWS_ENDPOINT_URL_EC2": d.URL(), "AWS_REGION": d.Region(),
		"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "not-a-secret",
	} {
		t.Setenv(k, v)
	}
	cfg := writeFile(t, "nodetide.yaml", fmt.Sprintf(`cluster: {name: %s}
state: {dynamodb: {table: %s, endpoint: %s}}
nodeGroups:
  - {name: named, provider: aws, aws: {autoScalingGroup: %s}}
  - provider: aws
    aws: {autoDiscovery: [k8s.io/cluster-autoscaler/enabled, k8s.io/cluster-autoscaler/%s]}
`, cluster, table, db.Endpoint, w.named, cluster))

	// The cluster: the webhook, a status ConfigMap and a person's, RBAC,
	// three nodes.
	wh, err := trigger.Webhook("https://trigger.example.com/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := trigger.Install(ctx, cp.Client, wh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = trigger.Uninstall(context.Background(), cp.Client) })
	status := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nodetide-status", Namespace: "kube-system", Labels: map[string]string{managedByLabel: "nodetide"}}}
	// An earlier test's `nodetide run` may have written one already.
	if err := cp.Client.CoreV1().ConfigMaps("kube-system").Delete(ctx, status.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, status, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), "nodetide-status", metav1.DeleteOptions{})
	})
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyRBAC(t, cp.Client)
	taint := []corev1.Taint{{Key: podfacts.TaintDraining, Effect: corev1.TaintEffectNoSchedule}}
	cp.AddNode(t, testbed.Node{Name: w.freed, CPU: "2", Taints: taint})
	cp.AddNode(t, testbed.Node{Name: w.wasCordoned, CPU: "2", Taints: taint})
	cp.AddNode(t, testbed.Node{Name: w.personal, CPU: "2"})
	for _, n := range []string{w.freed, w.wasCordoned, w.personal} {
		w.cordon(t, n)
	}
	// A drain of was-cordoned, still running; the node was cordoned before.
	store := state.NewDynamoDB(db.Client(t), table, cluster)
	now := time.Now()
	if _, err := store.BeginDrain(ctx, state.DrainRecord{Node: w.wasCordoned, ID: "d1", NodeGroup: "named", Status: state.DrainRunning,
		StartedAt: now, WasUnschedulable: true}); err != nil {
		t.Fatal(err)
	}

	uninstall := func(args ...string) (string, int) {
		t.Helper()
		out, errOut, code := nodetide(t, append([]string{"uninstall", "--config", cfg, "--kubeconfig", cp.KubeconfigPath}, args...)...)
		return out + errOut, code
	}
	before := w.state(t)
	for _, args := range [][]string{nil, {"--dry-run"}, {"-o", "yaml"}, {"--yes"}} {
		out, code := uninstall(args...)
		wantCode := 0
		if slices.Contains(args, "--yes") {
			wantCode = 1 // a drain runs
			if !strings.Contains(out, "1 drain(s) running: "+w.wasCordoned+" (d1)") || !strings.Contains(out, "nothing changed") {
				t.Errorf("uninstall --yes with a drain running: %s", out)
			}
		}
		if code != wantCode {
			t.Fatalf("uninstall %v: exit %d, want %d: %s", args, code, wantCode, out)
		}
		if after := w.state(t); after != before {
			t.Fatalf("uninstall %v changed things:\n%s\nwas\n%s\n%s", args, after, before, out)
		}
	}
	out, code := uninstall("-o", "json")
	if code != 0 {
		t.Fatalf("uninstall -o json: exit %d: %s", code, out)
	}
	var plan uninstallPlan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	items := func(list []uninstallItem) []string {
		var s []string
		for _, it := range list {
			s = append(s, it.Kind+" "+it.Name)
		}
		return s
	}
	wantRemove := []string{"ValidatingWebhookConfiguration " + trigger.WebhookConfigName,
		"LifecycleHook " + w.named + "/nodetide-drain-prod", "LifecycleHook " + w.disc + "/nodetide-drain-prod",
		"NodeTaint " + w.freed, "NodeTaint " + w.wasCordoned, "ConfigMap kube-system/nodetide-status"}
	for _, o := range rbacObjects {
		wantRemove = append(wantRemove, o.Kind+" "+o.Name)
	}
	if got := items(plan.Remove); !slices.Equal(got, wantRemove) {
		t.Errorf("plan removes\n%q\nwant\n%q", got, wantRemove)
	}
	keep := items(plan.Keep)
	for _, want := range []string{"LifecycleHook " + w.disc + "/nodetide-drain-staging", "LifecycleHook " + w.disc + "/" + legacyHookName,
		"Node " + w.personal, "DynamoDBTable " + table, "AutoScalingGroup " + w.named, "AutoScalingGroup " + w.disc, "CloudFormationStack Nodetide-prod"} {
		if !slices.Contains(keep, want) {
			t.Errorf("plan keeps %q, not %q", keep, want)
		}
	}
	if len(plan.RunningDrains) != 1 || plan.RunningDrains[0].Node != w.wasCordoned {
		t.Errorf("plan's running drains %+v", plan.RunningDrains)
	}

	// The drain ends; now it goes.
	if err := store.EndDrain(ctx, w.wasCordoned, "d1", state.DrainSucceeded, "", now); err != nil {
		t.Fatal(err)
	}
	out, code = uninstall("--yes")
	if code != 0 {
		t.Fatalf("uninstall --yes: exit %d: %s", code, out)
	}
	for _, line := range []string{"validatingwebhookconfiguration/" + trigger.WebhookConfigName + " deleted",
		"lifecyclehook " + w.named + "/nodetide-drain-prod deleted", "node/" + w.freed + " untainted and uncordoned",
		"node/" + w.wasCordoned + " untainted\n", "configmap kube-system/nodetide-status deleted", "clusterrolebinding nodetide-drain deleted"} {
		if !strings.Contains(out, line) {
			t.Errorf("uninstall --yes does not say %q:\n%s", line, out)
		}
	}
	wantState := fmt.Sprintf(`hooks [their-launch-hook] [%s nodetide-drain-staging] [nodetide-drain-prod]
webhook false
status configmap false
person's configmap true
node %s unschedulable=false tainted=false
node %s unschedulable=true tainted=false
node %s unschedulable=true tainted=false
`, legacyHookName, w.freed, w.wasCordoned, w.personal)
	for _, o := range rbacObjects {
		wantState += o.Kind + " " + o.Name + " false\n"
	}
	if got := w.state(t); got != wantState {
		t.Errorf("after uninstall --yes:\n%s\nwant\n%s", got, wantState)
	}
	if a, _ := d.Action(waiting.Token); a.Result != fakeaws.ResultContinue {
		t.Errorf("the action waiting on the deleted hook: result %q, want CONTINUE (the machine goes on)", a.Result)
	}
	if _, err := db.Client(t).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: awssdk.String(table)}); err != nil {
		t.Errorf("the table is gone: %v", err)
	}
	if last, err := store.LastDrain(ctx, w.wasCordoned); err != nil || last.ID != "d1" {
		t.Errorf("the drain record: %+v, %v; want it kept", last, err)
	}

	// Again: nothing to do, nothing changes.
	after := w.state(t)
	out, code = uninstall("--yes")
	if code != 0 || !strings.Contains(out, "Nothing to remove") || strings.Contains(out, " deleted") {
		t.Errorf("second uninstall --yes: exit %d:\n%s", code, out)
	}
	if got := w.state(t); got != after {
		t.Errorf("second uninstall changed things:\n%s\nwas\n%s", got, after)
	}

	// A drain starts again on a node: refused, then --force goes on and
	// frees that node too. --legacy-hook takes the old shared hook, never
	// another cluster's.
	if _, err := store.BeginDrain(ctx, state.DrainRecord{Node: w.freed, ID: "d2", NodeGroup: "named", Status: state.DrainRunning, StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	n := w.node(t, w.freed)
	n.Spec.Unschedulable, n.Spec.Taints = true, taint
	if _, err := cp.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before = w.state(t)
	if out, code = uninstall("--yes", "--legacy-hook"); code != 1 || w.state(t) != before {
		t.Errorf("uninstall --yes --legacy-hook with a drain running: exit %d, want 1 and nothing changed:\n%s", code, out)
	}
	if out, code = uninstall("--yes", "--legacy-hook", "--force"); code != 0 || !strings.Contains(out, "lifecyclehook "+w.disc+"/"+legacyHookName+" deleted") ||
		!strings.Contains(out, "node/"+w.freed+" untainted and uncordoned") {
		t.Errorf("uninstall --yes --legacy-hook --force: exit %d:\n%s", code, out)
	}
	// With nothing left, a running drain is no reason to refuse.
	if out, code = uninstall("--yes"); code != 0 || !strings.Contains(out, "Nothing to remove") {
		t.Errorf("uninstall --yes with nothing left and a drain running: exit %d:\n%s", code, out)
	}
	if got := hookNames(d, w.disc); !slices.Equal(got, []string{"nodetide-drain-staging"}) {
		t.Errorf("discovered group's hooks %v, want only the other cluster's", got)
	}
}
