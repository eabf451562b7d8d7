package evaluate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/statusmap"
)

const statusCM = "nodetide-status"

// statusMapOf returns the test's status ConfigMap, failing if it is absent.
func statusMapOf(t *testing.T, f *fixture) *corev1.ConfigMap {
	t.Helper()
	cm, err := f.cp.Client.CoreV1().ConfigMaps(f.ns).Get(context.Background(), statusCM, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("status ConfigMap: %v", err)
	}
	return cm
}

// TestStatusConfigMapWrittenWhenChanged: a cycle writes the ConfigMap; an
// identical one (warm, or a cold start) leaves it alone; a new pending pod
// and its scale-up update it; the text is the table of the same status.
func TestStatusConfigMapWrittenWhenChanged(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	ev := f.evaluator("statusmap")
	w := &statusmap.Writer{Client: f.cp.Client, Namespace: f.ns, Name: statusCM, Cluster: "prod"}
	ev.StatusMap = w
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	first := statusMapOf(t, f)
	if first.Labels[statusmap.LabelManagedBy] != "nodetide" || first.Annotations[statusmap.AnnotationCluster] != "prod" {
		t.Errorf("labels %v, annotations %v", first.Labels, first.Annotations)
	}
	if _, err := time.Parse(time.RFC3339Nano, first.Annotations[statusmap.AnnotationWrittenAt]); err != nil {
		t.Errorf("written-at: %v", err)
	}
	stored, err := evaluate.ReadStatus(ctx, f.store.(state.StatusStore))
	if err != nil {
		t.Fatal(err)
	}
	var inMap evaluate.Status
	if err := json.Unmarshal([]byte(first.Data[statusmap.KeyJSON]), &inMap); err != nil {
		t.Fatal(err)
	}
	if !inMap.CycleAt.Equal(stored.CycleAt) || len(inMap.NodeGroups) != 1 || inMap.NodeGroups[0].Name != f.pool {
		t.Errorf("status.json = %+v, want the stored status %+v", inMap, stored)
	}
	want, err := statusmap.Data("prod", inMap)
	if err != nil {
		t.Fatal(err)
	}
	if text := first.Data[statusmap.KeyText]; text != want[statusmap.KeyText] || !strings.Contains(text, "Cluster:      prod") {
		t.Errorf("status text:\n%s\nwant the table of status.json:\n%s", text, want[statusmap.KeyText])
	}

	// Nothing changed: neither this writer nor a cold one writes.
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	ev.StatusMap = &statusmap.Writer{Client: f.cp.Client, Namespace: f.ns, Name: statusCM, Cluster: "prod"}
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if rv := statusMapOf(t, f).ResourceVersion; rv != first.ResourceVersion {
		t.Errorf("identical cycles updated the ConfigMap: resourceVersion %s, was %s", rv, first.ResourceVersion)
	}

	// A pending pod and its scale-up change the status.
	f.deploy(t, "big", 1, "3")
	f.waitUnschedulable(t, 1)
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	changed := statusMapOf(t, f)
	var after evaluate.Status
	if err := json.Unmarshal([]byte(changed.Data[statusmap.KeyJSON]), &after); err != nil {
		t.Fatal(err)
	}
	if changed.ResourceVersion == first.ResourceVersion || len(after.Actions) != 1 || after.Actions[0].Kind != "scaleUp" ||
		after.NodeGroups[0].TargetSize != 1 || after.NodeGroups[0].LastScaleUp == nil {
		t.Errorf("after a scale-up: resourceVersion %s (was %s), status %+v", changed.ResourceVersion, first.ResourceVersion, after)
	}
}

// TestStatusConfigMapRefreshesTimes: when only times changed, the ConfigMap
// is written again once Refresh has passed, so its age tells a reader how
// fresh it is.
func TestStatusConfigMapRefreshesTimes(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	ev := f.evaluator("statusmap-refresh")
	ev.StatusMap = &statusmap.Writer{Client: f.cp.Client, Namespace: f.ns, Name: statusCM, Cluster: "prod", Refresh: time.Nanosecond}
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	first := statusMapOf(t, f)
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	again := statusMapOf(t, f)
	if again.ResourceVersion == first.ResourceVersion || again.Annotations[statusmap.AnnotationDigest] != first.Annotations[statusmap.AnnotationDigest] {
		t.Errorf("refresh: resourceVersion %s (was %s), digest %s (was %s)", again.ResourceVersion, first.ResourceVersion,
			again.Annotations[statusmap.AnnotationDigest], first.Annotations[statusmap.AnnotationDigest])
	}
}

// TestStatusConfigMapRBAC: with evaluate's RBAC from deploy/rbac.yaml the
// cycle writes its ConfigMap and no other; without it the cycle still
// succeeds, its status says why, and the refusal is logged once.
func TestStatusConfigMapRBAC(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	applyStatusRBAC(t, f, "ConfigMap", "Role", "RoleBinding")
	evaluateClient := impersonate(t, f, "nodetide-evaluate")
	f.cp.WaitFor(t, time.Minute, "the Role to allow reading the status ConfigMap", func(ctx context.Context) (bool, error) {
		_, err := evaluateClient.CoreV1().ConfigMaps(f.ns).Get(ctx, statusCM, metav1.GetOptions{})
		return err == nil, nil
	})
	ev := f.evaluator("statusmap-rbac")
	ev.StatusMap = &statusmap.Writer{Client: evaluateClient, Namespace: f.ns, Name: statusCM, Cluster: "prod"}
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if cm := statusMapOf(t, f); cm.Data[statusmap.KeyJSON] == "" || cm.Data[statusmap.KeyText] == "" {
		t.Errorf("with evaluate's Role the ConfigMap was not written: %v", cm.Data)
	}

	// Deleted: evaluate may not create it, and says how to.
	if err := f.cp.Client.CoreV1().ConfigMaps(f.ns).Delete(ctx, statusCM, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &statusmap.Writer{Client: evaluateClient, Namespace: f.ns, Name: statusCM, Cluster: "prod"}
	if err := w.Write(ctx, evaluate.Status{}); err == nil || !strings.Contains(err.Error(), "kubectl apply -f deploy/rbac.yaml") {
		t.Errorf("write of a deleted ConfigMap: %v, want a refusal saying how to make it", err)
	}
	applyStatusRBAC(t, f, "ConfigMap")
	if err := w.Write(ctx, evaluate.Status{}); err != nil {
		t.Fatalf("write once made again: %v", err)
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: f.ns}}
	if _, err := f.cp.Client.CoreV1().ConfigMaps(f.ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other.Data = map[string]string{"x": "y"}
	if _, err := evaluateClient.CoreV1().ConfigMaps(f.ns).Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("update of another ConfigMap: %v, want forbidden", err)
	}
	made := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "made", Namespace: f.ns}}
	if _, err := evaluateClient.CoreV1().ConfigMaps(f.ns).Create(ctx, made, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create of a ConfigMap: %v, want forbidden", err)
	}

	// A group with no Role: refused, reported, logged once.
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	ev.StatusMap = &statusmap.Writer{Client: impersonate(t, f, "nodetide-nothing"), Namespace: f.ns, Name: statusCM, Cluster: "prod", Log: log}
	for range 2 {
		if _, err := ev.Run(ctx); err != nil {
			t.Fatalf("a refused status ConfigMap failed the cycle: %v", err)
		}
	}
	st, err := evaluate.ReadStatus(ctx, f.store.(state.StatusStore))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range st.Problems {
		found = found || (p.Kind == evaluate.ProblemStatusNotPublished && strings.Contains(p.Detail, "forbidden"))
	}
	if !found {
		t.Errorf("problems %+v, want %s saying forbidden", st.Problems, evaluate.ProblemStatusNotPublished)
	}
	if n := strings.Count(logs.String(), `"msg":"status ConfigMap"`); n != 1 {
		t.Errorf("the refusal was logged %d times over two cycles, want once:\n%s", n, logs.String())
	}
}

// applyStatusRBAC creates deploy/rbac.yaml's objects of the kinds given (its
// status ConfigMap, Role and RoleBinding) in the test's namespace instead of
// kube-system.
func applyStatusRBAC(t *testing.T, f *fixture, kinds ...string) {
	t.Helper()
	file, err := os.Open("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	dec := yaml.NewYAMLOrJSONDecoder(file, 4096)
	ctx := context.Background()
	for {
		var obj struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
			Rules    []rbacv1.PolicyRule
			Subjects []rbacv1.Subject `json:"subjects"`
			RoleRef  rbacv1.RoleRef   `json:"roleRef"`
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		meta := metav1.ObjectMeta{Name: obj.Metadata.Name, Namespace: f.ns, Labels: obj.Metadata.Labels}
		if !slices.Contains(kinds, obj.Kind) {
			continue
		}
		switch obj.Kind {
		case "ConfigMap":
			_, err = f.cp.Client.CoreV1().ConfigMaps(f.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta}, metav1.CreateOptions{})
		case "Role":
			_, err = f.cp.Client.RbacV1().Roles(f.ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: obj.Rules}, metav1.CreateOptions{})
		case "RoleBinding":
			_, err = f.cp.Client.RbacV1().RoleBindings(f.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: obj.Subjects, RoleRef: obj.RoleRef}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("%s %s: %v", obj.Kind, obj.Metadata.Name, err)
		}
	}
}

// impersonate is a client acting as a member of group alone.
func impersonate(t *testing.T, f *fixture, group string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(f.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: group + "-test", Groups: []string{group}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// TestStatusConfigMapConflict: when someone else updated the ConfigMap since
// the writer read it, the writer reads it again and writes, keeping what
// they added.
func TestStatusConfigMapConflict(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	w := &statusmap.Writer{Client: f.cp.Client, Namespace: f.ns, Name: statusCM, Cluster: "prod"}
	st := evaluate.Status{CycleAt: time.Now().UTC(), NodeGroups: []evaluate.GroupSummary{}, Problems: []evaluate.Problem{}}
	if err := w.Write(ctx, st); err != nil {
		t.Fatal(err)
	}
	cm := statusMapOf(t, f)
	cm.Labels["team"] = "platform"
	if _, err := f.cp.Client.CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st.UnschedulablePods = 3
	if err := w.Write(ctx, st); err != nil {
		t.Fatalf("write after someone else's update: %v", err)
	}
	got := statusMapOf(t, f)
	var back evaluate.Status
	if err := json.Unmarshal([]byte(got.Data[statusmap.KeyJSON]), &back); err != nil {
		t.Fatal(err)
	}
	if back.UnschedulablePods != 3 || got.Labels["team"] != "platform" {
		t.Errorf("after the conflict: %d unschedulable, labels %v; want 3 and the team label kept", back.UnschedulablePods, got.Labels)
	}
}

// TestStatusConfigMapMissingNamespace: a namespace that is not there does
// not fail the cycle; its status says why.
func TestStatusConfigMapMissingNamespace(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	ev := f.evaluator("statusmap-nons")
	ev.StatusMap = &statusmap.Writer{Client: f.cp.Client, Namespace: f.ns + "-gone", Name: statusCM, Cluster: "prod"}
	if _, err := ev.Run(ctx); err != nil {
		t.Fatalf("a missing namespace failed the cycle: %v", err)
	}
	st, err := evaluate.ReadStatus(ctx, f.store.(state.StatusStore))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st.Problems); n != 1 || st.Problems[0].Kind != evaluate.ProblemStatusNotPublished || !strings.Contains(st.Problems[0].Detail, "not found") {
		t.Errorf("problems %+v, want %s saying the namespace is not found", st.Problems, evaluate.ProblemStatusNotPublished)
	}
}
