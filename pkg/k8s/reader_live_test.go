package k8s

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// readBed is a namespace and its own nodes (labelled with the namespace), so
// a test compares only what it made.
type readBed struct {
	cp   *testbed.ControlPlane
	ns   string
	pool map[string]string
}

func newReadBed(t *testing.T) *readBed {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	return &readBed{cp: cp, ns: ns, pool: map[string]string{"nodetide.io/test-pool": ns}}
}

func (b *readBed) node(t *testing.T, name string) {
	t.Helper()
	b.cp.AddNode(t, testbed.Node{Name: b.ns + "-" + name, CPU: "4", Memory: "8Gi", Labels: b.pool})
}

// pod creates a pod of app "read" asking for cpu.
func (b *readBed) pod(t *testing.T, name, cpu string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "read"}},
		Spec: corev1.PodSpec{
			NodeSelector: b.pool,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		},
	}
	if _, err := b.cp.Client.CoreV1().Pods(b.ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (b *readBed) pdb(t *testing.T, name string, minAvailable int32) {
	t.Helper()
	n := intstr.FromInt32(minAvailable)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &n,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "read"}},
		},
	}
	if _, err := b.cp.Client.PolicyV1().PodDisruptionBudgets(b.ns).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// mine keeps of objs what belongs to the bed.
func (b *readBed) mine(objs Objects) Objects {
	var out Objects
	for _, n := range objs.Nodes {
		if strings.HasPrefix(n.Name, b.ns+"-") {
			out.Nodes = append(out.Nodes, n)
		}
	}
	for _, p := range objs.Pods {
		if p.Namespace == b.ns {
			out.Pods = append(out.Pods, p)
		}
	}
	for _, d := range objs.PodDisruptionBudgets {
		if d.Namespace == b.ns {
			out.PodDisruptionBudgets = append(out.PodDisruptionBudgets, d)
		}
	}
	return out
}

func names[T any](items []T, name func(*T) string) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		out = append(out, name(&items[i]))
	}
	return out
}

func (o Objects) names() string {
	return fmt.Sprint(
		names(o.Nodes, func(n *corev1.Node) string { return n.Name }),
		names(o.Pods, func(p *corev1.Pod) string { return p.Name }),
		names(o.PodDisruptionBudgets, func(d *policyv1.PodDisruptionBudget) string { return d.Name }))
}

// readClient is a protobuf client for the read path, with wrap (if not nil)
// around its transport and dial (if not nil) making its connections.
func readClient(t *testing.T, cp *testbed.ControlPlane, wrap func(http.RoundTripper) http.RoundTripper,
	dial func(ctx context.Context, network, addr string) (net.Conn, error)) kubernetes.Interface {
	t.Helper()
	cfg := ReadConfig(cp.Config)
	cfg.WrapTransport = wrap
	cfg.Dial = dial
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// sameAsList waits until the reader's view of the bed equals a fresh LIST's
// (the controllers and kwok keep updating statuses, so one comparison could
// race them; a reader that misses a change never converges).
func (b *readBed) sameAsList(t *testing.T, r *Reader, client kubernetes.Interface) {
	t.Helper()
	var got, want Objects
	b.cp.WaitFor(t, time.Minute, "the reader's objects equal a fresh list's", func(ctx context.Context) (bool, error) {
		objs, _, err := r.Read(ctx)
		if err != nil {
			return false, err
		}
		got = b.mine(objs)
		fresh, err := List(ctx, client)
		if err != nil {
			return false, err
		}
		want = b.mine(fresh)
		return reflect.DeepEqual(got, want), nil
	})
}

func TestReaderCatchesUpLive(t *testing.T) {
	b := newReadBed(t)
	b.node(t, "n0")
	b.node(t, "n1")
	spare := b.ns + "-spare" // no pod can land on it: removing it strands none
	b.cp.AddNode(t, testbed.Node{Name: spare, CPU: "1", Memory: "1Gi"})
	for i := range 3 {
		b.pod(t, fmt.Sprintf("p%d", i), "100m")
	}
	b.pdb(t, "pdb0", 1)
	b.cp.WaitPodsRunning(t, b.ns, "app=read", 3, time.Minute)

	client := readClient(t, b.cp, nil, nil)
	r := NewReader(client, nil)
	_, st, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"nodes", "pods", "poddisruptionbudgets", "persistentvolumeclaims", "persistentvolumes", "storageclasses"}; !slices.Equal(st.Listed, want) {
		t.Fatalf("first read listed %v, want %v", st.Listed, want)
	}

	// Changes while the reader is idle (a frozen Lambda).
	ctx := t.Context()
	cs := b.cp.Client
	b.pod(t, "new", "100m")
	if err := cs.CoreV1().Pods(b.ns).Delete(ctx, "p0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"tier":"gold"}}}`)
	if _, err := cs.CoreV1().Pods(b.ns).Patch(ctx, "p1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, spare, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.node(t, "n2")
	if _, err := cs.PolicyV1().PodDisruptionBudgets(b.ns).Patch(ctx, "pdb0", types.MergePatchType,
		[]byte(`{"spec":{"minAvailable":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	b.pdb(t, "pdb1", 1)

	objs, st, err := r.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Listed) != 0 || st.Events == 0 {
		t.Fatalf("warm read listed %v and applied %d events, want a catch-up", st.Listed, st.Events)
	}
	mine := b.mine(objs)
	if got, want := mine.names(), fmt.Sprint(
		[]string{b.ns + "-n0", b.ns + "-n1", b.ns + "-n2"},
		[]string{"new", "p1", "p2"}, []string{"pdb0", "pdb1"}); got != want {
		t.Errorf("after catch-up: %s, want %s", got, want)
	}
	for _, p := range mine.Pods {
		if p.Name == "p1" && p.Labels["tier"] != "gold" {
			t.Errorf("p1 labels %v: the update was missed", p.Labels)
		}
	}
	for _, d := range mine.PodDisruptionBudgets {
		if d.Name == "pdb0" && d.Spec.MinAvailable.IntValue() != 2 {
			t.Errorf("pdb0 minAvailable %v: the update was missed", d.Spec.MinAvailable)
		}
	}
	b.sameAsList(t, r, client)
}

// expireWatches answers a watch from resource version rv as the API server
// does once etcd has compacted it away: 410 Gone, "too old resource version".
// (The local API server's watch cache keeps a quiet cluster's whole history,
// so a real compaction cannot be forced within a test.)
func expireWatches(rv string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			q := r.URL.Query()
			if q.Get("watch") != "true" || q.Get("resourceVersion") != rv {
				return rt.RoundTrip(r)
			}
			body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",`+
				`"message":"too old resource version: %s (300)","reason":"Expired","code":410}`, rv)
			return &http.Response{
				StatusCode: http.StatusGone, Status: "410 Gone", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header:  http.Header{"Content-Type": {"application/json"}},
				Body:    io.NopCloser(strings.NewReader(body)),
				Request: r,
			}, nil
		})
	}
}

func TestReaderTooOldResourceVersionListsLive(t *testing.T) {
	b := newReadBed(t)
	b.node(t, "n0")
	b.pod(t, "p0", "100m")
	b.cp.WaitPodsRunning(t, b.ns, "app=read", 1, time.Minute)

	const ancient = "1"
	client := readClient(t, b.cp, expireWatches(ancient), nil)
	r := NewReader(client, nil)
	if _, _, err := r.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	// As if the reader had been frozen past the server's history: an
	// ancient resource version, and a pod that has since gone.
	ghost := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "ghost"}}
	r.pods.apply(map[objKey]*corev1.Pod{{b.ns, "ghost"}: &ghost})
	r.pods.rv = ancient
	b.pod(t, "p1", "100m")

	objs, st, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Listed, []string{"pods"}) {
		t.Errorf("listed %v, want pods listed afresh", st.Listed)
	}
	if got := names(b.mine(objs).Pods, func(p *corev1.Pod) string { return p.Name }); !slices.Equal(got, []string{"p0", "p1"}) {
		t.Errorf("pods %v, want [p0 p1]", got)
	}
	b.sameAsList(t, r, client)
}

// cutter makes a client's connections and cuts them all when armed and a
// watch response starts arriving.
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	armed atomic.Bool
	cuts  atomic.Int32
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
	}
	return conn, err
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
	c.cuts.Add(1)
}

func (c *cutter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if err == nil && r.URL.Query().Get("watch") == "true" {
			resp.Body = &cutBody{ReadCloser: resp.Body, c: c}
		}
		return resp, err
	})
}

type cutBody struct {
	io.ReadCloser
	c *cutter
}

func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.c.armed.CompareAndSwap(true, false) {
		b.c.cut() // after this first piece of the watch has been handed on
	}
	return n, err
}

func TestReaderWatchCutLive(t *testing.T) {
	b := newReadBed(t)
	b.node(t, "n0")
	for i := range 2 {
		b.pod(t, fmt.Sprintf("p%d", i), "100m")
	}
	b.cp.WaitPodsRunning(t, b.ns, "app=read", 2, time.Minute)

	c := &cutter{}
	client := readClient(t, b.cp, c.wrap, c.dial)
	r := NewReader(client, nil)
	if _, _, err := r.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		b.pod(t, fmt.Sprintf("new%d", i), "100m")
	}
	if err := b.cp.Client.CoreV1().Pods(b.ns).Delete(t.Context(), "p0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	c.armed.Store(true)
	objs, st, err := r.Read(t.Context())
	if c.cuts.Load() == 0 {
		t.Fatal("the connection was never cut")
	}
	if err != nil {
		t.Logf("read failed cleanly: %v", err) // allowed; the next read must recover
	} else {
		// Every change made before the read, or an error: never part of them.
		got := names(b.mine(objs).Pods, func(p *corev1.Pod) string { return p.Name })
		if want := []string{"new0", "new1", "new2", "new3", "new4", "p1"}; !slices.Equal(got, want) {
			t.Errorf("pods after a cut catch-up %v, want %v (listed %v)", got, want, st.Listed)
		}
	}
	b.sameAsList(t, r, client)
}

// The trimmed read plans as the full read does, and so does a warm reader
// that caught up.
func TestCompactReadSamePlanLive(t *testing.T) {
	b := newReadBed(t)
	for i := range 3 {
		b.node(t, fmt.Sprintf("n%d", i))
	}
	for i := range 6 {
		b.pod(t, fmt.Sprintf("small%d", i), "300m")
	}
	b.pdb(t, "pdb0", 4)
	b.cp.WaitPodsRunning(t, b.ns, "app=read", 6, time.Minute)
	client := readClient(t, b.cp, nil, nil)
	r := NewReader(client, nil)
	if _, _, err := r.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		b.pod(t, fmt.Sprintf("big%d", i), "3800m") // one per node at most: some stay pending
	}
	b.cp.WaitPodsUnschedulable(t, b.ns, 3, time.Minute)
	b.cp.WaitPDBObserved(t, b.ns, "pdb0")

	group := snapshot.NodeGroup{
		Name: "pool", Provider: "kwok", MinSize: 0, MaxSize: 10,
		Template: snapshot.Template{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Labels: b.pool,
		},
	}
	for i := range 3 {
		group.Instances = append(group.Instances, fmt.Sprintf("kwok://%s-n%d", b.ns, i))
	}
	group.TargetSize = len(group.Instances)
	settings := planner.DefaultSettings()
	settings.ScaleUp.PendingPodMinAge = 0
	now := time.Now().Add(time.Hour) // every node past unneededTime's start
	plan := func(objs Objects) string {
		mine := b.mine(objs)
		p := planner.Decide(snapshot.Snapshot{
			CapturedAt: now, NodeGroups: []snapshot.NodeGroup{group},
			Nodes: mine.Nodes, Pods: mine.Pods, PodDisruptionBudgets: mine.PodDisruptionBudgets,
		}, settings, now)
		return fmt.Sprintf("%+v", p)
	}

	b.cp.WaitFor(t, time.Minute, "full, trimmed and caught-up reads plan alike", func(ctx context.Context) (bool, error) {
		full, err := List(ctx, client, WithFull())
		if err != nil {
			return false, err
		}
		trimmed, err := List(ctx, client)
		if err != nil {
			return false, err
		}
		warm, _, err := r.Read(ctx)
		if err != nil {
			return false, err
		}
		pf, pt, pw := plan(full), plan(trimmed), plan(warm)
		if pf != pt || pf != pw {
			t.Logf("plans differ (the cluster may still be settling):\nfull    %s\ntrimmed %s\nwarm    %s", pf, pt, pw)
			return false, nil
		}
		if !strings.Contains(pf, "big") {
			return false, fmt.Errorf("the plan does not place the pending pods: %s", pf)
		}
		return true, nil
	})
}
