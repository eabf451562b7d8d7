package k8s

import (
	"context"
	"fmt"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultPageSize is the number of objects asked for per LIST request. It
// bounds the size of one response, and so the API server's and our memory
// spikes, without making many round trips on big clusters.
const DefaultPageSize = 500

// Objects are the live objects a snapshot is made of, across all namespaces.
// Every object has its TypeMeta (apiVersion, kind) set, so it serialises as
// the API serves it. Unless read WithFull, the objects are trimmed to what the
// planner reads (snapshot.Trimmer) and share memory with each other: treat
// them as read-only.
type Objects struct {
	Nodes                []corev1.Node
	Pods                 []corev1.Pod
	PodDisruptionBudgets []policyv1.PodDisruptionBudget
	// The volume objects whose topology restricts where pods with claims
	// fit.
	PersistentVolumeClaims []corev1.PersistentVolumeClaim
	PersistentVolumes      []corev1.PersistentVolume
	StorageClasses         []storagev1.StorageClass
	// VolumesSkipped, when set, says why there are no volume objects: the
	// API server refused one of their kinds (RBAC that predates them, or a
	// server without the resource). The plan then ignores volume topology,
	// as before the kinds were read, rather than fail every cycle.
	VolumesSkipped string
}

// volumeKindRefused reports an error that makes the volume kinds optional:
// forbidden, or not served.
func volumeKindRefused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err)
}

// ListOption adjusts List and NewReader.
type ListOption func(*listOptions)

type listOptions struct {
	pageSize int64
	full     bool
}

// WithPageSize sets the number of objects per LIST request (default
// DefaultPageSize); values below 1 keep the default.
func WithPageSize(n int64) ListOption {
	return func(o *listOptions) {
		if n > 0 {
			o.pageSize = n
		}
	}
}

// WithFull keeps every object whole, as the API served it, instead of
// trimming each page to what the planner reads. A full read of a large
// cluster costs many times the memory of a trimmed one.
func WithFull() ListOption {
	return func(o *listOptions) { o.full = true }
}

// trimmer is a new Trimmer, or nil when objects are kept whole.
func (o listOptions) trimmer() *snapshot.Trimmer {
	if o.full {
		return nil
	}
	return snapshot.NewTrimmer()
}

func newListOptions(opts []ListOption) listOptions {
	o := listOptions{pageSize: DefaultPageSize}
	for _, fn := range opts {
		fn(&o)
	}
	return o
}

// List reads every node, pod, PodDisruptionBudget, PersistentVolumeClaim,
// PersistentVolume and StorageClass, in pages, trimming each
// page as it arrives (unless WithFull), so that at most one page of whole
// objects is held at a time. Each kind is a consistent list at its own
// resource version, which reflects every change made before List began. A
// page continuation that expired on the server (HTTP 410, when paging takes
// longer than the server keeps the list's revision) restarts that list once
// from the beginning.
func List(ctx context.Context, client kubernetes.Interface, opts ...ListOption) (Objects, error) {
	o := newListOptions(opts)
	var (
		objs Objects
		err  error
	)
	// One Trimmer per read, shared by the kinds: node names, namespaces and
	// label keys are interned once.
	t := o.trimmer()
	if objs.Nodes, _, err = listAll(ctx, o.pageSize, nodeKind(client), t); err != nil {
		return Objects{}, err
	}
	if objs.Pods, _, err = listAll(ctx, o.pageSize, podKind(client), t); err != nil {
		return Objects{}, err
	}
	if objs.PodDisruptionBudgets, _, err = listAll(ctx, o.pageSize, pdbKind(client), t); err != nil {
		return Objects{}, err
	}
	if err := listVolumes(ctx, o.pageSize, client, t, &objs); err != nil {
		return Objects{}, err
	}
	return objs, nil
}

// listVolumes reads the volume kinds into objs; when the server refuses one,
// it keeps none of them (a claim without its volume would look missing).
func listVolumes(ctx context.Context, pageSize int64, client kubernetes.Interface, t *snapshot.Trimmer, objs *Objects) error {
	var err error
	if objs.PersistentVolumeClaims, _, err = listAll(ctx, pageSize, claimKind(client), t); err == nil {
		if objs.PersistentVolumes, _, err = listAll(ctx, pageSize, volumeKind(client), t); err == nil {
			objs.StorageClasses, _, err = listAll(ctx, pageSize, storageClassKind(client), t)
		}
	}
	switch {
	case err == nil:
		return nil
	case volumeKindRefused(err):
		objs.PersistentVolumeClaims, objs.PersistentVolumes, objs.StorageClasses = nil, nil, nil
		objs.VolumesSkipped = err.Error()
		return nil
	}
	return err
}

// listAll pages through one resource and returns its items and the list's
// resource version.
func listAll[T any](ctx context.Context, pageSize int64, k *kind[T], t *snapshot.Trimmer) ([]T, string, error) {
	restarted := false
	for {
		items, rv, err := listPages(ctx, pageSize, k, t)
		if err == nil {
			return items, rv, nil
		}
		if errContinueExpired(err) && !restarted {
			restarted = true
			continue
		}
		return nil, "", fmt.Errorf("list %s: %w", k.resource, err)
	}
}

// continueExpiredError marks a 410 on a continued page, as opposed to one on
// the first page, which a restart would not cure.
type continueExpiredError struct{ err error }

func (e continueExpiredError) Error() string { return "continue token expired: " + e.err.Error() }
func (e continueExpiredError) Unwrap() error { return e.err }

func errContinueExpired(err error) bool {
	_, ok := err.(continueExpiredError)
	return ok
}

// listPages turns each page into kept objects as it arrives and drops the
// page. The result is sized from the first page's remaining-item count, so a
// list of any length costs one result slice and no regrowth.
func listPages[T any](ctx context.Context, pageSize int64, k *kind[T], t *snapshot.Trimmer) ([]T, string, error) {
	lo := metav1.ListOptions{Limit: pageSize}
	list := k.list
	if t != nil && k.listTrimmed != nil {
		list = k.listTrimmed()
	}
	var all []T
	for {
		page, meta, err := list(ctx, lo)
		if err != nil {
			if lo.Continue != "" && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
				return nil, "", continueExpiredError{err}
			}
			return nil, "", err
		}
		if all == nil {
			size := len(page)
			if meta.RemainingItemCount != nil && *meta.RemainingItemCount > 0 {
				size += int(*meta.RemainingItemCount)
			}
			// A little room to spare: a Reader adds the objects created
			// later in place instead of copying the whole slice.
			all = make([]T, 0, size+size/16)
		}
		for i := range page {
			all = append(all, k.keep(t, &page[i]))
		}
		if meta.Continue == "" {
			return all, meta.ResourceVersion, nil
		}
		lo.Continue = meta.Continue
	}
}
