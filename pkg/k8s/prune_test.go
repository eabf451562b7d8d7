package k8s

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/randfill"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// randomPods are pods with every field filled at random (some left empty),
// as protobuf has them: encoded and decoded once, so that a comparison sees
// only what pruning changes.
func randomPods(t *testing.T, seed int64, n int) []corev1.Pod {
	t.Helper()
	f := randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1e6), resource.DecimalSI)
		},
		// Some pods bound, some not: the conditions are kept only of
		// those not bound.
		func(s *corev1.PodSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if c.Bool() {
				s.NodeName = ""
			}
		},
		// Some annotations the Trimmer keeps, and some pods of one
		// controller, which it compares to share their shape.
		func(m *metav1.ObjectMeta, c randfill.Continue) {
			c.FillNoCustom(m)
			if c.Bool() {
				m.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": c.String(4)}
			}
			if c.Bool() {
				m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-1", Controller: new(true)}}
			}
		},
		// Some pods waiting to be scheduled.
		func(pc *corev1.PodCondition, c randfill.Continue) {
			c.FillNoCustom(pc)
			if c.Bool() {
				pc.Type = corev1.PodScheduled
			}
		},
		// Some volumes of the kinds kept, alone: a filled VolumeSource
		// has every kind set.
		func(v *corev1.VolumeSource, c randfill.Continue) {
			c.FillNoCustom(v)
			switch c.Intn(3) {
			case 0:
				*v = corev1.VolumeSource{EmptyDir: v.EmptyDir}
			case 1:
				*v = corev1.VolumeSource{ConfigMap: v.ConfigMap}
			}
		},
	)
	pods := make([]corev1.Pod, n)
	for i := range pods {
		var p corev1.Pod
		f.Fill(&p)
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := pods[i].Unmarshal(b); err != nil {
			t.Fatal(err)
		}
	}
	return pods
}

// encodeList is pods as the API server sends a page of them.
func encodeList(t testing.TB, pods []corev1.Pod) []byte {
	t.Helper()
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), Protobuf)
	var b bytes.Buffer
	l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"}, Items: pods}
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(l, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A pod decoded pruned trims to what it trims to decoded whole, whatever
// its fields: the pruning cuts only what the Trimmer drops. (A Trimmer that
// starts reading a field the pruning cuts fails here.)
func TestPrunedPodTrimsAlike(t *testing.T) {
	for seed := range int64(10) {
		pods := randomPods(t, seed, 30)
		got, meta, err := decodePrunedPods(encodeList(t, pods), &podPruner{}, nil)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if meta.ResourceVersion != "42" || meta.Continue != "next" || len(got) != len(pods) {
			t.Fatalf("seed %d: list meta %+v, %d pods, want 42, next and %d", seed, meta, len(got), len(pods))
		}
		// One Trimmer for the list, as a read has: the pods share shapes.
		whole, pruned := snapshot.NewTrimmer(), snapshot.NewTrimmer()
		for i := range pods {
			want, have := whole.Pod(&pods[i]), pruned.Pod(&got[i])
			if !reflect.DeepEqual(have, want) {
				t.Fatalf("seed %d, pod %d: trimmed after pruning\n%+v\nwant\n%+v", seed, i, have, want)
			}
		}
	}
}

// Pruning cuts what a real pod carries most of and the Trimmer drops.
func TestPrunedPodDropsBulk(t *testing.T) {
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{NodeName: "n1",
			Containers: []corev1.Container{{Name: "app", Image: "img", Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}},
			Volumes: []corev1.Volume{
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}},
	}
	got, _, err := decodePrunedPods(encodeList(t, []corev1.Pod{pod}), &podPruner{}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("%d pods, %v", len(got), err)
	}
	p := got[0]
	c := p.Spec.Containers[0]
	switch {
	case p.ManagedFields != nil, c.Image != "", c.Env != nil, c.Resources.Limits != nil,
		p.Status.PodIP != "", p.Status.ContainerStatuses != nil, p.Status.Conditions != nil:
		t.Errorf("bulk kept: %+v", p)
	case p.Name != "p" || p.Labels["app"] != "a" || p.Spec.NodeName != "n1" || c.Name != "app" ||
		c.Resources.Requests.Cpu().String() != "1" || len(c.Ports) != 1 || p.Status.Phase != corev1.PodRunning:
		t.Errorf("read fields lost: %+v", p)
	case len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].Name != "scratch":
		t.Errorf("volumes %+v, want only scratch", p.Spec.Volumes)
	}
}

// Broken bodies are errors, never a panic or a silent empty page.
func TestDecodePrunedPodsRejectsMalformed(t *testing.T) {
	good := encodeList(t, randomPods(t, 1, 3))
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"no magic", []byte(`{"kind":"PodList"}`), "magic number"},
		{"cut short", good[:len(good)-7], "malformed protobuf"},
		{"bad tag", append(append([]byte{}, protoMagic...), 0x00), "malformed protobuf"},
		{"encoded", append(append([]byte{}, protoMagic...), appendBytesField(nil, unknownContentEncoding, []byte("gzip"))...), "content encoding"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decodePrunedPods(tc.body, &podPruner{}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// Pods read pruned keep the API's errors: a continued page that expired
// (410) restarts the list once, as through the typed client.
func TestPrunedListRestartsExpiredContinue(t *testing.T) {
	pods := randomPods(t, 2, 4)
	for i := range pods {
		pods[i].Namespace, pods[i].Name = "ns", fmt.Sprintf("p%d", i)
	}
	page := func(items []corev1.Pod, cont string) []byte {
		info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), Protobuf)
		var b bytes.Buffer
		l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: cont}, Items: items}
		if err := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(l, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	var mu sync.Mutex
	expired := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/pods" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Query().Get("continue") == "" {
			w.Header().Set("Content-Type", Protobuf)
			w.Write(page(pods[:2], "c1"))
			return
		}
		if expired == 0 {
			expired++
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"The provided continue parameter is too old"}`)
			return
		}
		w.Header().Set("Content-Type", Protobuf)
		w.Write(page(pods[2:], ""))
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(ReadConfig(&rest.Config{Host: srv.URL, QPS: -1}))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := listAll(t.Context(), 2, podKind(client), snapshot.NewTrimmer())
	if err != nil {
		t.Fatal(err)
	}
	if expired != 1 || len(got) != 4 || got[0].Name != "p0" || got[3].Name != "p3" {
		t.Errorf("%d expired, %d pods (%v), want a restart and p0 to p3", expired, len(got), got)
	}
}
