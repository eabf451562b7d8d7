// Package fakekubeapi is a loopback Kubernetes API server double for measuring
// and benchmarking the read path at scale: it serves LIST (paginated with
// continue tokens, remainingItemCount) and WATCH (from a resource version,
// with a bookmark at the current one, 410 for a version older than its event
// history) of nodes, pods and PodDisruptionBudgets, in JSON or protobuf as
// the client asks. Objects are generated from a seed and shaped like a real
// API server's: managedFields, env, container statuses, many labels and
// annotations. It keeps only a small record per object and builds the
// object when serving it, so a 150,000-pod cluster fits in little memory
// (unless told to keep every object's protobuf, Shape.KeepEncoded).
//
// It is not an API server: no writes through the API, no selectors, and a
// continued list shows the objects as they are when the page is served.
package fakekubeapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Shape is the generated cluster.
type Shape struct {
	Nodes, Pods int
	// PodsPerApp is the replicas of each Deployment (default 20); every
	// third Deployment has a PodDisruptionBudget.
	PodsPerApp int
	Seed       uint64
	// JSONOnly answers in JSON whatever the client asks, as a server (or
	// proxy) without protobuf does.
	JSONOnly bool
	// NodeLabels are added to every node's labels (e.g. a kwok group's
	// label, so one group holds every node). The double ignores label
	// selectors: a LIST of the nodes with these labels is still right.
	NodeLabels map[string]string
	// KeepEncoded encodes every object as protobuf once, at Start and as
	// it changes, and serves lists from those bytes (as an API server's
	// watch cache holds its objects ready), so a client measured on the
	// same cores shares them less with the double. It costs the double
	// about 2.5 KB a pod.
	KeepEncoded bool
}

type kindName int

const (
	kindNode kindName = iota
	kindPod
	kindPDB
	kinds
)

// rec is what the double keeps of an object.
type rec struct {
	ns, name  string
	app, node int
	rv        uint64
	version   int // bumped by updates
}

type event struct {
	typ string
	rv  uint64
	r   rec
}

// Server is a running double.
type Server struct {
	URL   string
	shape Shape
	srv   *http.Server
	ln    net.Listener

	mu     sync.Mutex
	rv     uint64
	objs   [kinds][]rec // in key order
	events [kinds][]event
	// oldest is the lowest resource version a watch may start from.
	oldest [kinds]uint64
	rng    *rand.Rand
	next   int // names of created pods
	wake   chan struct{}

	// encoded holds each object's protobuf by resource version (unique
	// across kinds), when Shape.KeepEncoded. Those of versions no list
	// serves any more stay: churn is small next to the cluster.
	encMu   sync.Mutex
	encoded map[uint64][]byte
}

// Start generates the cluster and serves it on a loopback port.
func Start(shape Shape) (*Server, error) {
	if shape.PodsPerApp <= 0 {
		shape.PodsPerApp = 20
	}
	s := &Server{shape: shape, rng: rand.New(rand.NewPCG(shape.Seed, 7)), wake: make(chan struct{})}
	for i := range shape.Nodes {
		s.rv++
		s.objs[kindNode] = append(s.objs[kindNode], rec{name: fmt.Sprintf("node-%05d", i), node: i, rv: s.rv})
	}
	apps := apps(shape)
	for i := range shape.Pods {
		app := i / shape.PodsPerApp
		s.rv++
		s.objs[kindPod] = append(s.objs[kindPod], rec{
			ns: fmt.Sprintf("team-%03d", app%50), name: fmt.Sprintf("app-%05d-%05d", app, i),
			app: app, node: s.rng.IntN(max(shape.Nodes, 1)), rv: s.rv,
		})
	}
	for a := 0; a < apps; a += 3 {
		s.rv++
		s.objs[kindPDB] = append(s.objs[kindPDB], rec{ns: fmt.Sprintf("team-%03d", a%50), name: fmt.Sprintf("app-%05d", a), app: a, rv: s.rv})
	}
	for k := range kinds {
		slices.SortFunc(s.objs[k], byKey)
		s.oldest[k] = s.rv
	}
	if shape.KeepEncoded {
		if err := s.encodeAll(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("api double: %w", err)
	}
	s.ln, s.URL = ln, "http://"+ln.Addr().String()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Config is a client configuration for the double.
func (s *Server) Config() *rest.Config {
	return &rest.Config{Host: s.URL, QPS: -1}
}

// Close stops serving.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.mu.Lock()
	close(s.wake)
	s.wake = nil
	s.mu.Unlock()
	return s.srv.Shutdown(ctx)
}

func apps(shape Shape) int { return (shape.Pods + shape.PodsPerApp - 1) / shape.PodsPerApp }

func byKey(a, b rec) int {
	return strings.Compare(a.ns+"/"+a.name, b.ns+"/"+b.name)
}

// Churn makes n changes to pods, as a busy cluster does between two ticks:
// a third deleted, a third created, a third updated; and one node and one
// PDB updated.
func (s *Server) Churn(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range n {
		pods := s.objs[kindPod]
		switch i % 3 {
		case 0:
			j := s.rng.IntN(len(pods))
			s.record(kindPod, "DELETED", pods[j])
			s.objs[kindPod] = slices.Delete(pods, j, j+1)
		case 1:
			s.next++
			app := s.rng.IntN(max(apps(s.shape), 1))
			r := rec{ns: fmt.Sprintf("team-%03d", app%50), name: fmt.Sprintf("app-%05d-new-%06d", app, s.next),
				app: app, node: s.rng.IntN(max(s.shape.Nodes, 1))}
			j, _ := slices.BinarySearchFunc(pods, r, byKey)
			s.objs[kindPod] = slices.Insert(pods, j, s.record(kindPod, "ADDED", r))
		default:
			j := s.rng.IntN(len(pods))
			pods[j].version++
			pods[j] = s.record(kindPod, "MODIFIED", pods[j])
		}
	}
	for _, k := range []kindName{kindNode, kindPDB} {
		if l := s.objs[k]; len(l) > 0 {
			l[0].version++
			l[0] = s.record(k, "MODIFIED", l[0])
		}
	}
	if s.wake != nil {
		close(s.wake)
		s.wake = make(chan struct{})
	}
}

// Forget drops the event history, as a compaction does: a watch from before
// now is answered 410.
func (s *Server) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range kinds {
		s.events[k] = nil
		s.oldest[k] = s.rv
	}
}

func (s *Server) record(k kindName, typ string, r rec) rec {
	s.rv++
	r.rv = s.rv
	s.events[k] = append(s.events[k], event{typ: typ, rv: s.rv, r: r})
	return r
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var k kindName
	switch r.URL.Path {
	case "/api/v1/nodes":
		k = kindNode
	case "/api/v1/pods":
		k = kindPod
	case "/apis/policy/v1/poddisruptionbudgets":
		k = kindPDB
	default:
		http.NotFound(w, r)
		return
	}
	info := negotiate(r, s.shape.JSONOnly)
	q := r.URL.Query()
	if q.Get("watch") == "true" {
		s.watch(w, r, k, info)
		return
	}
	s.list(w, q, k, info)
}

func negotiate(r *http.Request, jsonOnly bool) runtime.SerializerInfo {
	want := "application/json"
	if !jsonOnly && strings.Contains(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
		want = "application/vnd.kubernetes.protobuf"
	}
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), want)
	return info
}

func gv(k kindName) schema.GroupVersion {
	if k == kindPDB {
		return policyv1.SchemeGroupVersion
	}
	return corev1.SchemeGroupVersion
}

func (s *Server) list(w http.ResponseWriter, q map[string][]string, k kindName, info runtime.SerializerInfo) {
	get := func(n string) string {
		if v := q[n]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	limit, _ := strconv.Atoi(get("limit"))
	start := 0
	if c := get("continue"); c != "" {
		start, _ = strconv.Atoi(c)
	}
	s.mu.Lock()
	all := s.objs[k]
	end := len(all)
	if limit > 0 && start+limit < end {
		end = start + limit
	}
	page := slices.Clone(all[start:min(end, len(all))])
	rv, remaining := s.rv, int64(len(all)-end)
	s.mu.Unlock()

	meta := metav1.ListMeta{ResourceVersion: strconv.FormatUint(rv, 10)}
	if remaining > 0 {
		meta.Continue = strconv.Itoa(end)
		meta.RemainingItemCount = &remaining
	}
	if s.shape.KeepEncoded && info.MediaType == protobufType {
		s.listEncoded(w, k, meta, page)
		return
	}
	var obj runtime.Object
	switch k {
	case kindNode:
		l := &corev1.NodeList{ListMeta: meta}
		for _, r := range page {
			l.Items = append(l.Items, *s.node(r))
		}
		obj = l
	case kindPod:
		l := &corev1.PodList{ListMeta: meta}
		for _, r := range page {
			l.Items = append(l.Items, *s.pod(r))
		}
		obj = l
	default:
		l := &policyv1.PodDisruptionBudgetList{ListMeta: meta}
		for _, r := range page {
			l.Items = append(l.Items, *s.pdb(r))
		}
		obj = l
	}
	w.Header().Set("Content-Type", info.MediaType)
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, gv(k))
	if err := enc.Encode(obj, w); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

const protobufType = "application/vnd.kubernetes.protobuf"

// protoMagic starts the API server's protobuf encoding of an object: a
// runtime.Unknown wrapping the object's own bytes follows.
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// encodeAll keeps the protobuf of every object, on every core.
func (s *Server) encodeAll() error {
	s.encoded = map[uint64][]byte{}
	var recs []struct {
		k kindName
		r rec
	}
	for k := range kinds {
		for _, r := range s.objs[k] {
			recs = append(recs, struct {
				k kindName
				r rec
			}{k, r})
		}
	}
	workers := max(goruntime.NumCPU(), 1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(recs); i += workers {
				if _, err := s.encodedObject(recs[i].k, recs[i].r); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// encodedObject is the protobuf of the object r is (its message alone, as
// in a list's items), encoded once per resource version.
func (s *Server) encodedObject(k kindName, r rec) ([]byte, error) {
	s.encMu.Lock()
	b, ok := s.encoded[r.rv]
	s.encMu.Unlock()
	if ok {
		return b, nil
	}
	b, err := s.object(k, r).(interface{ Marshal() ([]byte, error) }).Marshal()
	if err != nil {
		return nil, fmt.Errorf("api double: encode %s/%s: %w", r.ns, r.name, err)
	}
	s.encMu.Lock()
	s.encoded[r.rv] = b
	s.encMu.Unlock()
	return b, nil
}

// listEncoded writes a list from the kept encodings: the bytes the
// protobuf serializer writes for the list (its metadata, field 1, then
// each item, field 2, in a runtime.Unknown of the list's kind).
func (s *Server) listEncoded(w http.ResponseWriter, k kindName, meta metav1.ListMeta, page []rec) {
	mb, err := meta.Marshal()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	list := appendBytesField(nil, 1, mb)
	for _, r := range page {
		b, err := s.encodedObject(k, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		list = appendBytesField(list, 2, b)
	}
	kind := map[kindName]string{kindNode: "NodeList", kindPod: "PodList", kindPDB: "PodDisruptionBudgetList"}[k]
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: gv(k).String(), Kind: kind}, Raw: list}
	ub, err := u.Marshal()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", protobufType)
	w.Write(append(slices.Clone(protoMagic), ub...))
}

func appendBytesField(dst []byte, num int, data []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(num)<<3|2)
	dst = binary.AppendUvarint(dst, uint64(len(data)))
	return append(dst, data...)
}

func (s *Server) object(k kindName, r rec) runtime.Object {
	switch k {
	case kindNode:
		return s.node(r)
	case kindPod:
		return s.pod(r)
	}
	return s.pdb(r)
}

func empty(k kindName) runtime.Object {
	switch k {
	case kindNode:
		return &corev1.Node{}
	case kindPod:
		return &corev1.Pod{}
	}
	return &policyv1.PodDisruptionBudget{}
}

func (s *Server) watch(w http.ResponseWriter, r *http.Request, k kindName, info runtime.SerializerInfo) {
	q := r.URL.Query()
	from, err := strconv.ParseUint(q.Get("resourceVersion"), 10, 64)
	if err != nil {
		http.Error(w, "resourceVersion required", http.StatusBadRequest)
		return
	}
	timeout := time.Minute
	if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t > 0 {
		timeout = time.Duration(t) * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()

	w.Header().Set("Content-Type", info.MediaType)
	w.WriteHeader(http.StatusOK)
	sinfo := info.StreamSerializer
	fw := sinfo.Framer.NewFrameWriter(w)
	embedded := scheme.Codecs.EncoderForVersion(info.Serializer, gv(k))
	send := func(typ string, obj runtime.Object) error {
		raw, err := runtime.Encode(embedded, obj)
		if err != nil {
			return err
		}
		ev := &metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
		if err := sinfo.Serializer.Encode(ev, fw); err != nil {
			return err
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		return nil
	}
	for {
		s.mu.Lock()
		if from < s.oldest[k] {
			s.mu.Unlock()
			st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, s.oldest[k])).Status()
			send("ERROR", &st)
			return
		}
		var evs []event
		for _, e := range s.events[k] {
			if e.rv > from {
				evs = append(evs, e)
			}
		}
		now, wake := s.rv, s.wake
		s.mu.Unlock()
		for _, e := range evs {
			if err := send(e.typ, s.object(k, e.r)); err != nil {
				return
			}
			from = e.rv
		}
		if q.Get("allowWatchBookmarks") == "true" && now > from {
			bm := empty(k)
			bm.(metav1.Object).SetResourceVersion(strconv.FormatUint(now, 10))
			if err := send("BOOKMARK", bm); err != nil {
				return
			}
			from = now
		}
		if wake == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
	}
}

// The generated objects. Sizes follow what real API servers serve for
// Deployment pods: a few KB of JSON each, half of it managedFields.

var managedPod = []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:team":{},"f:tier":{},"f:version":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"x\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"LOG_LEVEL\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"PORT\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:readinessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}}},"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{},"f:volumeMounts":{".":{},"k:{\"mountPath\":\"/config\"}":{".":{},"f:mountPath":{},"f:name":{}}}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{".":{},"f:configMap":{".":{},"f:defaultMode":{},"f:name":{}},"f:name":{}}}}}`)
var managedStatus = []byte(`{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.0.0.1\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`)

var created = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

func uid(kind string, r rec) types.UID {
	return types.UID(fmt.Sprintf("%s-%s-%s", kind, r.ns, r.name))
}

// nameSuffix is five characters of the alphabet Kubernetes draws generated
// name suffixes from, the same for the same name.
func nameSuffix(name string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[v%uint32(len(alphabet))]
		v /= uint32(len(alphabet))
	}
	return string(b)
}

func (s *Server) pod(r rec) *corev1.Pod {
	app := fmt.Sprintf("app-%05d", r.app)
	labels := map[string]string{"app": app, "team": r.ns, "tier": "backend", "version": "v1.4.2",
		"pod-template-hash": "7d9f8c6b5", "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop",
		"app.kubernetes.io/managed-by": "helm"}
	ctrl := true
	cpu := resource.MustParse(fmt.Sprintf("%dm", 50+(r.app%8)*50))
	mem := resource.MustParse(fmt.Sprintf("%dMi", 64+(r.app%6)*64))
	env := []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "PORT", Value: "8080"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "DATABASE_URL", Value: "postgres://db.internal:5432/" + app}, {Name: "FEATURE_FLAGS", Value: "a,b,c,d,e,f"}}
	node := fmt.Sprintf("node-%05d", r.node)
	// The API server's ServiceAccount admission names the token volume
	// of each pod with a random suffix; the DefaultTolerationSeconds one
	// bounds the not-ready and unreachable tolerations.
	token := "kube-api-access-" + nameSuffix(r.name)
	tolerate := int64(300)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: r.name, Namespace: r.ns, UID: uid("pod", r), GenerateName: app + "-7d9f8c6b5-",
			ResourceVersion: strconv.FormatUint(r.rv, 10), CreationTimestamp: created, Labels: labels,
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
				"prometheus.io/scrape": "true", "prometheus.io/port": "9090", "checksum/config": "3f2a9c" + strconv.Itoa(r.version)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-7d9f8c6b5",
				UID: types.UID("rs-" + r.ns + "-" + app), Controller: &ctrl, BlockOwnerDeletion: &ctrl}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
					Time: &created, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: managedPod}},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created,
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: managedStatus}, Subresource: "status"},
			},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/shop/" + app + ":v1.4.2", Env: env,
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: mem}},
				VolumeMounts:           []corev1.VolumeMount{{Name: "config", MountPath: "/config"}, {Name: token, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
				ReadinessProbe:         &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
				TerminationMessagePath: "/dev/termination-log", ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}}}},
				{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}}},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerate},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerate}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler",
			ServiceAccountName: "default", EnableServiceLinks: new(bool), PreemptionPolicy: new(corev1.PreemptionPolicy),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.1.0.1", PodIP: "10.2.0.1", StartTime: &created, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example.com/shop/" + app + ":v1.4.2",
				ImageID:     "registry.example.com/shop/" + app + "@sha256:9b2a7c1d0e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b",
				ContainerID: "containerd://" + strings.Repeat("ab", 32),
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}}},
		},
	}
}

func (s *Server) node(r rec) *corev1.Node {
	cap := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	var images []corev1.ContainerImage
	for i := range 20 {
		images = append(images, corev1.ContainerImage{Names: []string{fmt.Sprintf("registry.example.com/shop/app-%05d:v1.4.2", i)}, SizeBytes: 123456789})
	}
	var conds []corev1.NodeCondition
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		conds = append(conds, corev1.NodeCondition{Type: c, Status: corev1.ConditionFalse, LastHeartbeatTime: created, LastTransitionTime: created, Reason: "KubeletHasSufficient" + string(c), Message: "kubelet has sufficient resources"})
	}
	conds = append(conds, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: created, LastTransitionTime: created, Reason: "KubeletReady", Message: "kubelet is posting ready status"})
	labels := map[string]string{"kubernetes.io/hostname": r.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64",
		"node.kubernetes.io/instance-type": "m7g.4xlarge", "topology.kubernetes.io/zone": fmt.Sprintf("eu-west-1%c", 'a'+r.node%3),
		"topology.kubernetes.io/region": "eu-west-1", "eks.amazonaws.com/nodegroup": "workers"}
	maps.Copy(labels, s.shape.NodeLabels)
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: r.name, UID: uid("node", r), ResourceVersion: strconv.FormatUint(r.rv, 10), CreationTimestamp: created,
			Labels:      labels,
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-" + fmt.Sprintf("%017x", r.node), PodCIDR: "10.2.0.0/24"},
		Status: corev1.NodeStatus{Capacity: cap, Allocatable: cap, Conditions: conds, Images: images,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.0.1"}, {Type: corev1.NodeHostName, Address: r.name}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Amazon Linux 2023", ContainerRuntimeVersion: "containerd://2.1.0", Architecture: "arm64", OperatingSystem: "linux"}},
	}
}

func (s *Server) pdb(r rec) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns, UID: uid("pdb", r), ResourceVersion: strconv.FormatUint(r.rv, 10),
			CreationTimestamp: created, Generation: int64(1 + r.version)},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%05d", r.app)}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 20, DesiredHealthy: 19, ExpectedPods: 20, ObservedGeneration: int64(1 + r.version)},
	}
}
