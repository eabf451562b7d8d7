package k8s

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// kind is how one resource is listed, watched and kept.
type kind[T any] struct {
	resource string
	// list reads one page, whole.
	list func(ctx context.Context, lo metav1.ListOptions) ([]T, metav1.ListMeta, error)
	// listTrimmed, when set, returns for one list the function that reads
	// its pages for trimming: without some of what the Trimmer drops (see
	// prune.go). A page is valid until the next is read.
	listTrimmed func() func(ctx context.Context, lo metav1.ListOptions) ([]T, metav1.ListMeta, error)
	watch       func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error)
	// keep sets the object's TypeMeta and returns what is kept of it: the
	// trimmed object, or the whole one when t is nil.
	keep func(t *snapshot.Trimmer, obj *T) T
	key  func(obj *T) objKey
}

// objKey names an object; kept objects are in the order of their keys, the
// order in which the API server lists them.
type objKey struct{ namespace, name string }

// compareKeys orders keys as the API server's storage does: by
// "namespace/name", byte by byte.
func compareKeys(a, b objKey) int {
	if a.namespace == b.namespace {
		return strings.Compare(a.name, b.name)
	}
	// The namespaces differ: the first byte where "a.namespace/" and
	// "b.namespace/" differ decides.
	an, bn := a.namespace, b.namespace
	n := min(len(an), len(bn))
	for i := range n {
		if an[i] != bn[i] {
			return cmp.Compare(an[i], bn[i])
		}
	}
	if len(an) < len(bn) {
		return cmp.Compare('/', bn[n])
	}
	return cmp.Compare(an[n], '/')
}

func nodeKind(client kubernetes.Interface) *kind[corev1.Node] {
	nodes := client.CoreV1().Nodes()
	return &kind[corev1.Node]{
		resource: "nodes",
		list: func(ctx context.Context, lo metav1.ListOptions) ([]corev1.Node, metav1.ListMeta, error) {
			l, err := nodes.List(ctx, lo)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			return l.Items, l.ListMeta, nil
		},
		watch: nodes.Watch,
		keep: func(t *snapshot.Trimmer, n *corev1.Node) corev1.Node {
			n.APIVersion, n.Kind = "v1", "Node"
			if t == nil {
				return *n
			}
			return t.Node(n)
		},
		key: func(n *corev1.Node) objKey { return objKey{name: n.Name} },
	}
}

func podKind(client kubernetes.Interface) *kind[corev1.Pod] {
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	return &kind[corev1.Pod]{
		resource: "pods",
		list: func(ctx context.Context, lo metav1.ListOptions) ([]corev1.Pod, metav1.ListMeta, error) {
			l, err := pods.List(ctx, lo)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			return l.Items, l.ListMeta, nil
		},
		listTrimmed: prunedPodLister(client),
		watch:       pods.Watch,
		keep: func(t *snapshot.Trimmer, p *corev1.Pod) corev1.Pod {
			p.APIVersion, p.Kind = "v1", "Pod"
			if t == nil {
				return *p
			}
			return t.Pod(p)
		},
		key: func(p *corev1.Pod) objKey { return objKey{p.Namespace, p.Name} },
	}
}

// prunedPodLister returns, for each list, the function that lists a page
// of pods for trimming: pruned on the wire when the server answers in
// protobuf (a body starting with its magic number), else decoded whole. The
// body's buffer and the page's pods are reused from page to page of one
// list. A client without a REST client (client-go's fake) lists through
// the typed client instead.
func prunedPodLister(client kubernetes.Interface) func() func(context.Context, metav1.ListOptions) ([]corev1.Pod, metav1.ListMeta, error) {
	rc, ok := client.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return nil
	}
	return func() func(context.Context, metav1.ListOptions) ([]corev1.Pod, metav1.ListMeta, error) {
		var (
			body bytes.Buffer
			p    podPruner
			page []corev1.Pod
		)
		return func(ctx context.Context, lo metav1.ListOptions) ([]corev1.Pod, metav1.ListMeta, error) {
			// As the typed client asks: protobuf unless the configuration
			// names a content type. Stream turns a failed request into
			// the API's error, as Do does.
			stream, err := rc.Get().UseProtobufAsDefault().Resource("pods").VersionedParams(&lo, scheme.ParameterCodec).Stream(ctx)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			body.Reset()
			_, err = body.ReadFrom(stream)
			stream.Close()
			if err != nil {
				return nil, metav1.ListMeta{}, fmt.Errorf("read pods: %w", err)
			}
			if bytes.HasPrefix(body.Bytes(), protoMagic) {
				var meta metav1.ListMeta
				page, meta, err = decodePrunedPods(body.Bytes(), &p, page)
				return page, meta, err
			}
			var l corev1.PodList
			if err := runtime.DecodeInto(scheme.Codecs.UniversalDeserializer(), body.Bytes(), &l); err != nil {
				return nil, metav1.ListMeta{}, fmt.Errorf("decode pods: %w", err)
			}
			return l.Items, l.ListMeta, nil
		}
	}
}

func pdbKind(client kubernetes.Interface) *kind[policyv1.PodDisruptionBudget] {
	pdbs := client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll)
	return &kind[policyv1.PodDisruptionBudget]{
		resource: "poddisruptionbudgets",
		list: func(ctx context.Context, lo metav1.ListOptions) ([]policyv1.PodDisruptionBudget, metav1.ListMeta, error) {
			l, err := pdbs.List(ctx, lo)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			return l.Items, l.ListMeta, nil
		},
		watch: pdbs.Watch,
		keep: func(t *snapshot.Trimmer, b *policyv1.PodDisruptionBudget) policyv1.PodDisruptionBudget {
			b.APIVersion, b.Kind = "policy/v1", "PodDisruptionBudget"
			if t == nil {
				return *b
			}
			return t.PDB(b)
		},
		key: func(b *policyv1.PodDisruptionBudget) objKey { return objKey{b.Namespace, b.Name} },
	}
}

func claimKind(client kubernetes.Interface) *kind[corev1.PersistentVolumeClaim] {
	claims := client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll)
	return &kind[corev1.PersistentVolumeClaim]{
		resource: "persistentvolumeclaims",
		list: func(ctx context.Context, lo metav1.ListOptions) ([]corev1.PersistentVolumeClaim, metav1.ListMeta, error) {
			l, err := claims.List(ctx, lo)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			return l.Items, l.ListMeta, nil
		},
		watch: claims.Watch,
		keep: func(t *snapshot.Trimmer, c *corev1.PersistentVolumeClaim) corev1.PersistentVolumeClaim {
			c.APIVersion, c.Kind = "v1", "PersistentVolumeClaim"
			if t == nil {
				return *c
			}
			return t.PersistentVolumeClaim(c)
		},
		key: func(c *corev1.PersistentVolumeClaim) objKey { return objKey{c.Namespace, c.Name} },
	}
}

func volumeKind(client kubernetes.Interface) *kind[corev1.PersistentVolume] {
	volumes := client.CoreV1().PersistentVolumes()
	return &kind[corev1.PersistentVolume]{
		resource: "persistentvolumes",
		list: func(ctx context.Context, lo metav1.ListOptions) ([]corev1.PersistentVolume, metav1.ListMeta, error) {
			l, err := volumes.List(ctx, lo)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			return l.Items, l.ListMeta, nil
		},
		watch: volumes.Watch,
		keep: func(t *snapshot.Trimmer, v *corev1.PersistentVolume) corev1.PersistentVolume {
			v.APIVersion, v.Kind = "v1", "PersistentVolume"
			if t == nil {
				return *v
			}
			return t.PersistentVolume(v)
		},
		key: func(v *corev1.PersistentVolume) objKey { return objKey{name: v.Name} },
	}
}

func storageClassKind(client kubernetes.Interface) *kind[storagev1.StorageClass] {
	classes := client.StorageV1().StorageClasses()
	return &kind[storagev1.StorageClass]{
		resource: "storageclasses",
		list: func(ctx context.Context, lo metav1.ListOptions) ([]storagev1.StorageClass, metav1.ListMeta, error) {
			l, err := classes.List(ctx, lo)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			return l.Items, l.ListMeta, nil
		},
		watch: classes.Watch,
		keep: func(t *snapshot.Trimmer, sc *storagev1.StorageClass) storagev1.StorageClass {
			sc.APIVersion, sc.Kind = "storage.k8s.io/v1", "StorageClass"
			if t == nil {
				return *sc
			}
			return t.StorageClass(sc)
		},
		key: func(sc *storagev1.StorageClass) objKey { return objKey{name: sc.Name} },
	}
}
