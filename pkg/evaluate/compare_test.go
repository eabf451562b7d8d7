package evaluate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/shadowcompare"
	"github.com/nodetide/nodetide/pkg/statusmap"
)

// caStatusName is cluster-autoscaler's status ConfigMap; the tests keep it
// in their own namespace.
const caStatusName = "cluster-autoscaler-status"

// caStandIn writes what cluster-autoscaler writes, in its shapes (its
// source: clusterstate/api's status as YAML, the Events of its scale-up
// status processor and of its scale-down actuator), for shadow mode to
// compare with. The real cluster-autoscaler cannot be downloaded through the
// Go module proxy (it refuses k8s.io/autoscaler/cluster-autoscaler), so it
// cannot run on the bed.
type caStandIn struct {
	t      *testing.T
	client kubernetes.Interface
	ns     string
}

// status writes the status of a running cluster-autoscaler with these
// targets, stamped now.
func (c caStandIn) status(targets map[string]int) {
	c.t.Helper()
	at := time.Now().UTC().Format(shadowcompare.TimeFormat)
	var b strings.Builder
	fmt.Fprintf(&b, "time: %s\nautoscalerStatus: Running\nclusterWide:\n  health:\n    status: Healthy\n  scaleUp:\n    status: NoActivity\n  scaleDown:\n    status: NoCandidates\nnodeGroups:\n", at)
	for g, n := range targets {
		fmt.Fprintf(&b, "- name: %s\n  health:\n    status: Healthy\n    nodeCounts:\n      registered: {total: %d, ready: %d, notStarted: 0}\n      longUnregistered: 0\n      unregistered: 0\n    cloudProviderTarget: %d\n    minSize: 0\n    maxSize: 3\n  scaleUp:\n    status: NoActivity\n  scaleDown:\n    status: NoCandidates\n", g, n, n, n)
	}
	c.raw(b.String(), at)
}

// raw writes the status ConfigMap's status key as given.
func (c caStandIn) raw(doc, at string) {
	c.t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: caStatusName, Namespace: c.ns, Annotations: map[string]string{shadowcompare.LastUpdatedAnnotation: at}},
		Data:       map[string]string{shadowcompare.StatusKey: doc},
	}
	_, err := c.client.CoreV1().ConfigMaps(c.ns).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		_, err = c.client.CoreV1().ConfigMaps(c.ns).Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// event records one of cluster-autoscaler's Events on the object, now.
func (c caStandIn) event(obj corev1.ObjectReference, reason, msg string) {
	c.t.Helper()
	now := metav1.NewTime(time.Now())
	ns := obj.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // where Events on cluster-scoped objects go
	}
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: obj.Name + ".", Namespace: ns},
		InvolvedObject: obj, Reason: reason, Message: msg, Type: corev1.EventTypeNormal, Count: 1,
		Source:         corev1.EventSource{Component: shadowcompare.Component},
		FirstTimestamp: now, LastTimestamp: now,
	}
	if _, err := c.client.CoreV1().Events(ns).Create(context.Background(), e, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// scaleUp records TriggeredScaleUp, with msg, on each of the namespace's
// pending pods.
func (c caStandIn) scaleUp(msg string) {
	c.t.Helper()
	pods, err := c.client.CoreV1().Pods(c.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName="})
	if err != nil || len(pods.Items) == 0 {
		c.t.Fatalf("pending pods: %d, %v", len(pods.Items), err)
	}
	for _, p := range pods.Items {
		c.event(corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}, shadowcompare.ReasonTriggeredScaleUp, msg)
	}
}

func (c caStandIn) scaleDown(node string) {
	c.t.Helper()
	c.event(corev1.ObjectReference{Kind: "Node", Name: node}, shadowcompare.ReasonScaleDown, shadowcompare.ScaleDownMessage)
}

// shadowBeside is a shadow evaluator comparing with the stand-in's
// ConfigMap, publishing its status ConfigMap.
func shadowBeside(f *fixture) *evaluate.Evaluator {
	ev := f.evaluator("shadow-compare")
	ev.Shadow = true
	ev.Compare = &shadowcompare.Reader{Client: f.cp.Client, Namespace: f.ns, Name: caStatusName, StaleAfter: shadowcompare.DefaultStaleAfter}
	ev.StatusMap = &statusmap.Writer{Client: f.cp.Client, Namespace: f.ns, Name: statusCM, Cluster: "prod"}
	return ev
}

// TestShadowCompareBesideClusterAutoscaler runs shadow cycles beside a
// stand-in for cluster-autoscaler: agreement is the same target and the
// same removals, shown in the result, the stored status, the status
// ConfigMap's text and the ShadowAgreement metric; a status that does not
// parse is a problem and never agreement.
func TestShadowCompareBesideClusterAutoscaler(t *testing.T) {
	cases := []struct {
		name string
		// pending: pods of 3 CPUs to deploy (one per node); nodes: nodes to
		// start with.
		pending, nodes int
		ca             func(c caStandIn, pool string, nodes []string)
		agree          bool
		why            string
		problem        string
		text           string
	}{
		{
			name: "agreeing scale-up", pending: 2,
			ca: func(c caStandIn, pool string, _ []string) {
				c.status(map[string]int{pool: 0})
				c.scaleUp(fmt.Sprintf("pod triggered scale-up: [{%s 0->2 (max: 3)}]", pool))
			},
			agree: true, text: "Beside cluster-autoscaler: agree",
		},
		{
			name: "disagreeing size", pending: 2,
			ca: func(c caStandIn, pool string, _ []string) {
				c.status(map[string]int{pool: 0})
				c.scaleUp(fmt.Sprintf("pod triggered scale-up: [{%s 0->1 (max: 3)}]", pool))
			},
			why: "target: nodetide 2, cluster-autoscaler 1", text: "target 1 (up 1)",
		},
		{
			name: "cluster-autoscaler idle while nodetide would scale up", pending: 2,
			ca:  func(c caStandIn, pool string, _ []string) { c.status(map[string]int{pool: 0}) },
			why: "target: nodetide 2, cluster-autoscaler 0", text: "target 2 (up 2)",
		},
		{
			name: "cluster-autoscaler removes a node, nodetide would not", nodes: 2,
			ca: func(c caStandIn, pool string, nodes []string) {
				c.status(map[string]int{pool: 2})
				c.scaleDown(nodes[0])
			},
			why: "removals: nodetide 0, cluster-autoscaler 1", text: "removing ", // and the node's name
		},
		{
			name: "malformed status ConfigMap", pending: 2,
			ca: func(c caStandIn, _ string, _ []string) {
				c.raw("autoscalerStatus: Running\nnodeGroups: [{name: x, health: {cloudProviderTarget: many}}]\n",
					time.Now().UTC().Format(shadowcompare.TimeFormat))
			},
			why: "could not be read", problem: "status ConfigMap", text: "Not read:",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0, 3, nil)
			ctx := context.Background()
			var nodes []string
			if tc.nodes > 0 {
				nodes = f.nodes(t, tc.nodes)
			}
			if tc.pending > 0 {
				f.deploy(t, "big", int32(tc.pending), "3")
				f.waitUnschedulable(t, tc.pending)
			}
			tc.ca(caStandIn{t: t, client: f.cp.Client, ns: f.ns}, f.pool, nodes)

			ev := shadowBeside(f)
			m := metrics.New("prod", nil)
			res, err := ev.Run(metrics.NewContext(ctx, m))
			if err != nil {
				t.Fatal(err)
			}
			c := res.ShadowCompare
			if c == nil || len(c.Groups) != 1 {
				t.Fatalf("comparison %+v, want one of the group", c)
			}
			g := c.Groups[0]
			if c.Agree != tc.agree || g.Agree != tc.agree || (tc.why != "" && !strings.Contains(g.Why, tc.why)) {
				t.Errorf("agree %v, group %+v; want %v %q", c.Agree, g, tc.agree, tc.why)
			}
			if tc.problem != "" && (len(c.Problems) == 0 || !strings.Contains(c.Problems[0], tc.problem)) {
				t.Errorf("problems %q, want %q", c.Problems, tc.problem)
			}
			if got := f.target(t); got != 0 && tc.nodes == 0 {
				t.Errorf("shadow cycle changed the target to %d", got)
			}

			cm := statusMapOf(t, f)
			var st evaluate.Status
			if err := json.Unmarshal([]byte(cm.Data[statusmap.KeyJSON]), &st); err != nil {
				t.Fatal(err)
			}
			if st.ShadowCompare == nil || st.ShadowCompare.Agree != tc.agree {
				t.Errorf("status ConfigMap's comparison %+v, want agree %v", st.ShadowCompare, tc.agree)
			}
			hasProblem := false
			for _, p := range st.Problems {
				hasProblem = hasProblem || p.Kind == evaluate.ProblemShadowCompareFailed
			}
			if hasProblem != (tc.problem != "") {
				t.Errorf("problems %+v: ShadowCompareFailed %v, want %v", st.Problems, hasProblem, tc.problem != "")
			}
			want := tc.text
			if len(nodes) > 0 {
				want += nodes[0]
			}
			if text := cm.Data[statusmap.KeyText]; !strings.Contains(text, want) || !strings.Contains(text, "CLUSTER-AUTOSCALER DID") {
				t.Errorf("status text lacks %q:\n%s", want, text)
			}

			var emf bytes.Buffer
			for _, doc := range m.Documents() {
				if err := json.NewEncoder(&emf).Encode(doc); err != nil {
					t.Fatal(err)
				}
			}
			wantMetric := fmt.Sprintf(`"ShadowAgreement":%d`, map[bool]int{true: 1, false: 0}[tc.agree])
			if strings.Count(emf.String(), wantMetric) != 2 { // under Cluster, and by NodeGroup
				t.Errorf("metrics: want %s under Cluster and by NodeGroup:\n%s", wantMetric, emf.String())
			}
		})
	}
}

// nodes makes the group n Ready nodes and returns their names.
func (f *fixture) nodes(t *testing.T, n int) []string {
	t.Helper()
	if err := f.group.IncreaseSize(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	var names []string
	f.cp.WaitFor(t, time.Minute, fmt.Sprintf("%d nodes of the group", n), func(ctx context.Context) (bool, error) {
		list, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + f.pool})
		names = names[:0]
		for _, node := range list.Items {
			names = append(names, node.Name)
		}
		return err == nil && len(names) == n, err
	})
	return names
}

// TestShadowCompareWithEvaluateRBAC: evaluate's RBAC from deploy/rbac.yaml
// (its ClusterRole and its Role beside the status ConfigMap) is enough to
// read cluster-autoscaler's status ConfigMap and its Events.
func TestShadowCompareWithEvaluateRBAC(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	applyStatusRBAC(t, f, "ConfigMap", "Role", "RoleBinding")
	group := applyEvaluateClusterRole(t, f)
	cfg := rest.CopyConfig(f.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nodetide-evaluate-test", Groups: []string{"nodetide-evaluate", group}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.deploy(t, "big", 1, "3")
	f.waitUnschedulable(t, 1)
	ca := caStandIn{t: t, client: f.cp.Client, ns: f.ns}
	ca.status(map[string]int{f.pool: 0})
	ca.scaleUp(fmt.Sprintf("pod triggered scale-up: [{%s 0->1 (max: 3)}]", f.pool))

	r := &shadowcompare.Reader{Client: client, Namespace: f.ns, Name: caStatusName}
	var obs shadowcompare.Observed
	f.cp.WaitFor(t, time.Minute, "evaluate's RBAC to allow the reads", func(ctx context.Context) (bool, error) {
		obs = r.Read(ctx, time.Now().Add(-time.Minute), time.Now().Add(time.Second))
		return len(obs.Problems) == 0, nil
	})
	found := false
	for _, up := range obs.ScaleUps {
		found = found || (up.Group == f.pool && up.To == 1)
	}
	if obs.Status == nil || obs.Status.Targets[f.pool] != 0 || !found {
		t.Errorf("read with evaluate's RBAC: %+v", obs)
	}
	// Nothing more: another ConfigMap there stays out of reach.
	if _, err := client.CoreV1().ConfigMaps(f.ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get of another ConfigMap: %v, want forbidden", err)
	}
}

// applyEvaluateClusterRole makes deploy/rbac.yaml's nodetide-evaluate
// ClusterRole under a name of the test's, bound to a group of the test's
// (a ClusterRole is not namespaced: others' tests must not see it), and
// returns that group.
func applyEvaluateClusterRole(t *testing.T, f *fixture) string {
	t.Helper()
	file, err := os.Open("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	dec := k8syaml.NewYAMLOrJSONDecoder(file, 4096)
	ctx := context.Background()
	name := f.ns + "-evaluate"
	for {
		var obj struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
			Rules    []rbacv1.PolicyRule
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if obj.Kind != "ClusterRole" || obj.Metadata.Name != "nodetide-evaluate" {
			continue
		}
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: obj.Rules}
		if _, err := f.cp.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: name}}}
		if _, err := f.cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = f.cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = f.cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		return name
	}
	t.Fatal("deploy/rbac.yaml has no ClusterRole nodetide-evaluate")
	return ""
}

// TestHandOverFromClusterAutoscaler walks the guide's steps on the bed:
// in shadow mode beside a stand-in that scales the group as
// cluster-autoscaler would, the two agree; with the stand-in stopped (scaled
// to 0) its status goes stale and the comparison says so, never agreeing;
// with shadow off nodetide scales the group itself.
func TestHandOverFromClusterAutoscaler(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	ca := caStandIn{t: t, client: f.cp.Client, ns: f.ns}
	f.deploy(t, "big", 2, "3")
	f.waitUnschedulable(t, 2)

	// 1. cluster-autoscaler scales up; nodetide, in shadow mode, would have
	// done the same.
	if err := f.group.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	ca.scaleUp(fmt.Sprintf("pod triggered scale-up: [{%s 0->2 (max: 3)}]", f.pool))
	ca.status(map[string]int{f.pool: 2})
	ev := shadowBeside(f)
	reader := ev.Compare.(*shadowcompare.Reader)
	reader.StaleAfter = 3 * time.Second
	res, err := ev.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.ShadowCompare; c == nil || !c.Agree {
		t.Fatalf("beside cluster-autoscaler's scale-up: %+v, want agreement", c)
	}
	if got := f.target(t); got != 2 {
		t.Fatalf("target %d, want cluster-autoscaler's 2", got)
	}

	// 2. cluster-autoscaler scaled to 0: its status is no longer written.
	time.Sleep(reader.StaleAfter + time.Second)
	res, err = ev.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.ShadowCompare; c == nil || c.Agree || len(c.Problems) == 0 || !strings.Contains(c.Problems[0], "is cluster-autoscaler running?") {
		t.Fatalf("with cluster-autoscaler stopped: %+v, want a stale status and no agreement", c)
	}

	// 3. shadow off: nodetide acts, and compares no more.
	ev.Shadow = false
	f.deploy(t, "more", 1, "3")
	f.waitUnschedulable(t, 1)
	res, err = ev.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.target(t); got != 3 || res.ShadowCompare != nil {
		t.Errorf("shadow off: target %d (want 3), comparison %+v (want none)", got, res.ShadowCompare)
	}
}
