package k8s

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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
// the API serves it.
type Objects struct {
	Nodes                []corev1.Node
	Pods                 []corev1.Pod
	PodDisruptionBudgets []policyv1.PodDisruptionBudget
}

// ListOption adjusts List.
type ListOption func(*listOptions)

type listOptions struct {
	pageSize int64
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

// List reads every node, pod and PodDisruptionBudget, in pages. A page
// continuation that expired on the server (HTTP 410, when paging takes longer
// than the server keeps the list's revision) restarts that list once from the
// beginning.
func List(ctx context.Context, client kubernetes.Interface, opts ...ListOption) (Objects, error) {
	o := listOptions{pageSize: DefaultPageSize}
	for _, fn := range opts {
		fn(&o)
	}
	var (
		objs Objects
		err  error
	)
	objs.Nodes, err = listAll(ctx, o.pageSize, "nodes",
		func(ctx context.Context, lo metav1.ListOptions) ([]corev1.Node, metav1.ListMeta, error) {
			l, err := client.CoreV1().Nodes().List(ctx, lo)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			for i := range l.Items {
				l.Items[i].APIVersion, l.Items[i].Kind = "v1", "Node"
			}
			return l.Items, l.ListMeta, nil
		})
	if err != nil {
		return Objects{}, err
	}
	objs.Pods, err = listAll(ctx, o.pageSize, "pods",
		func(ctx context.Context, lo metav1.ListOptions) ([]corev1.Pod, metav1.ListMeta, error) {
			l, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, lo)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			for i := range l.Items {
				l.Items[i].APIVersion, l.Items[i].Kind = "v1", "Pod"
			}
			return l.Items, l.ListMeta, nil
		})
	if err != nil {
		return Objects{}, err
	}
	objs.PodDisruptionBudgets, err = listAll(ctx, o.pageSize, "poddisruptionbudgets",
		func(ctx context.Context, lo metav1.ListOptions) ([]policyv1.PodDisruptionBudget, metav1.ListMeta, error) {
			l, err := client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, lo)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			for i := range l.Items {
				l.Items[i].APIVersion, l.Items[i].Kind = "policy/v1", "PodDisruptionBudget"
			}
			return l.Items, l.ListMeta, nil
		})
	if err != nil {
		return Objects{}, err
	}
	return objs, nil
}

// listAll pages through one resource. The first page's slice is returned as
// is when it is the only one, and otherwise sized from the server's
// remaining-item count, so a list of any length costs one result slice and no
// regrowth.
func listAll[T any](ctx context.Context, pageSize int64, resource string,
	page func(context.Context, metav1.ListOptions) ([]T, metav1.ListMeta, error)) ([]T, error) {
	restarted := false
	for {
		items, err := listPages(ctx, pageSize, page)
		if err == nil {
			return items, nil
		}
		if errContinueExpired(err) && !restarted {
			restarted = true
			continue
		}
		return nil, fmt.Errorf("list %s: %w", resource, err)
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

func listPages[T any](ctx context.Context, pageSize int64,
	page func(context.Context, metav1.ListOptions) ([]T, metav1.ListMeta, error)) ([]T, error) {
	lo := metav1.ListOptions{Limit: pageSize}
	items, meta, err := page(ctx, lo)
	if err != nil {
		return nil, err
	}
	if meta.Continue == "" {
		return items, nil
	}
	size := len(items)
	if meta.RemainingItemCount != nil && *meta.RemainingItemCount > 0 {
		size += int(*meta.RemainingItemCount)
	} else {
		size *= 2
	}
	all := make([]T, 0, size)
	all = append(all, items...)
	for meta.Continue != "" {
		lo.Continue = meta.Continue
		items, meta, err = page(ctx, lo)
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return nil, continueExpiredError{err}
			}
			return nil, err
		}
		all = append(all, items...)
	}
	return all, nil
}
