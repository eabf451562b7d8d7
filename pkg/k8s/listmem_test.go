package k8s

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/internal/fake/fakekubeapi"
	"github.com/nodetide/nodetide/internal/testbed"
)

// maxBytesPerPod bounds what a trimmed List keeps per pod: the Pod struct
// itself (about 1 KB) and its name, UID and node. Measured at about 1,450
// bytes on the test bed and 1,300 against the double; pods of one
// controller that stopped sharing their trimmed spec keep about 3,600.
const maxBytesPerPod = 2000

// retainedByList is the heap a trimmed List keeps, per pod, after a
// collection: the read's objects and nothing else of its pages.
func retainedByList(ctx context.Context, t *testing.T, client kubernetes.Interface) (Objects, int) {
	t.Helper()
	// A first read sets up the client's connection and its buffers, which
	// are the client's, not the read's.
	if _, err := List(ctx, client); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	objs, err := List(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	kept := int64(ms.HeapAlloc) - int64(before)
	runtime.KeepAlive(objs)
	if len(objs.Pods) == 0 {
		t.Fatal("no pods listed")
	}
	return objs, int(kept) / len(objs.Pods)
}

// sharesSpec checks the pods of ns share their trimmed containers with the
// other pods of their controller: one copy for all, not one per pod.
func sharesSpec(t *testing.T, pods []corev1.Pod, ns string) {
	t.Helper()
	first := map[types.UID]*corev1.Container{}
	for i := range pods {
		p := &pods[i]
		owner := metav1.GetControllerOf(p)
		if p.Namespace != ns || owner == nil || len(p.Spec.Containers) == 0 {
			continue
		}
		c, seen := first[owner.UID]
		if !seen {
			first[owner.UID] = &p.Spec.Containers[0]
		} else if &p.Spec.Containers[0] != c {
			t.Fatalf("pod %s/%s has its own trimmed containers (volumes %v): want the ones of the other pods of %s %s",
				p.Namespace, p.Name, p.Spec.Volumes, owner.Kind, owner.Name)
		}
	}
	if len(first) == 0 {
		t.Fatalf("no controlled pods of namespace %s listed", ns)
	}
}

// The double's pods carry what the API server adds to every pod (a token
// volume named per pod, default tolerations): a trimmed List keeps one spec
// per controller and little per pod.
func TestTrimmedListOfDoubleRetainsLittlePerPod(t *testing.T) {
	s := startDouble(t, fakekubeapi.Shape{Nodes: 100, Pods: 3000, Seed: 1})
	objs, perPod := retainedByList(t.Context(), t, doubleClient(t, s, true))
	t.Logf("%d pods: %d bytes kept per pod", len(objs.Pods), perPod)
	sharesSpec(t, objs.Pods, objs.Pods[0].Namespace)
	if perPod > maxBytesPerPod {
		t.Errorf("a trimmed List keeps %d bytes per pod, want at most %d", perPod, maxBytesPerPod)
	}
}

// The same on the real API server, whose admission adds what the double
// imitates: pods of one controller, as a ReplicaSet's are written.
func TestTrimmedListOfBedRetainsLittlePerPod(t *testing.T) {
	cp := testbed.Cluster(t)
	ctx := t.Context()
	ns := cp.Namespace(t)
	node := ns + "-n"
	pool := map[string]string{"nodetide.io/test-pool": ns}
	cp.AddNode(t, testbed.Node{Name: node, CPU: "1000", Memory: "4000Gi", Pods: "5000", Labels: pool})
	cp.AddNode(t, testbed.Node{Name: ns + "-m", CPU: "4", Memory: "16Gi", Labels: pool})
	// A DaemonSet's controller pins each of its pods to its node, so their
	// specs differ by the node's name.
	agent := map[string]string{"app": "agent"}
	_, err := cp.Client.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: agent}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: agent},
			Spec: corev1.PodSpec{NodeSelector: pool, Containers: []corev1.Container{{Name: "agent", Image: "registry.example.com/agent:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}}}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cp.WaitPodsRunning(t, ns, "app=agent", 2, time.Minute)
	// The owner is a ConfigMap, which no controller acts on; the garbage
	// collector keeps the pods while it exists.
	owner, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const pods = 1000
	createPods(ctx, t, cp.Config, pods, func(i int) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-7d9f8c6b5-%05d", i), Namespace: ns,
				Labels:      map[string]string{"app": "app", "pod-template-hash": "7d9f8c6b5"},
				Annotations: map[string]string{"prometheus.io/scrape": "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
					Controller: new(true)}}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/app:1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}}},
			}}},
		}
	})
	client := readClient(t, cp, nil, nil)
	objs, perPod := retainedByList(ctx, t, client)
	t.Logf("%d pods: %d bytes kept per pod", len(objs.Pods), perPod)
	sharesSpec(t, objs.Pods, ns)
	if perPod > maxBytesPerPod {
		t.Errorf("a trimmed List keeps %d bytes per pod, want at most %d", perPod, maxBytesPerPod)
	}
	// Each of the DaemonSet's pods keeps its own pin.
	full, err := List(ctx, client, WithFull())
	if err != nil {
		t.Fatal(err)
	}
	affinity := map[string]*corev1.Affinity{}
	for i := range full.Pods {
		if p := &full.Pods[i]; p.Namespace == ns && p.Labels["app"] == "agent" {
			affinity[p.Name] = p.Spec.Affinity
		}
	}
	pinned := 0
	for i := range objs.Pods {
		p := &objs.Pods[i]
		if p.Namespace != ns || p.Labels["app"] != "agent" {
			continue
		}
		pinned++
		if want := affinity[p.Name]; want == nil || !reflect.DeepEqual(p.Spec.Affinity, want) {
			t.Errorf("pod %s: trimmed affinity %+v, want %+v", p.Name, p.Spec.Affinity, want)
		}
	}
	if pinned != 2 {
		t.Errorf("%d of the DaemonSet's pods listed, want 2", pinned)
	}
}

// createPods creates n pods, pod(i) each, on a few parallel writers.
func createPods(ctx context.Context, t *testing.T, cfg *rest.Config, n int, pod func(i int) *corev1.Pod) {
	t.Helper()
	rc := rest.CopyConfig(cfg)
	rc.QPS, rc.Burst = 5000, 10000
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				p := pod(i)
				if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create pod %s: %w", p.Name, err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
