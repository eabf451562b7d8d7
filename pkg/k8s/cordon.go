package k8s

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Cordon marks node unschedulable and gives it the NoSchedule taint taintKey
// (none when taintKey is empty). The taint says who cordoned the node and why,
// which spec.unschedulable alone cannot; other schedulers that ignore
// unschedulable still honour it. Cordoning a cordoned node changes nothing.
func Cordon(ctx context.Context, client kubernetes.Interface, node, taintKey string) error {
	return updateNode(ctx, client, node, "cordon", func(n *corev1.Node) bool {
		changed := false
		if !n.Spec.Unschedulable {
			n.Spec.Unschedulable = true
			changed = true
		}
		if taintKey != "" && !slices.ContainsFunc(n.Spec.Taints, isTaint(taintKey)) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: taintKey, Effect: corev1.TaintEffectNoSchedule})
			changed = true
		}
		return changed
	})
}

// Uncordon reverses Cordon: node becomes schedulable and loses the NoSchedule
// taint taintKey. Other taints are kept. Uncordoning a schedulable node
// changes nothing.
func Uncordon(ctx context.Context, client kubernetes.Interface, node, taintKey string) error {
	return updateNode(ctx, client, node, "uncordon", func(n *corev1.Node) bool {
		changed := false
		if n.Spec.Unschedulable {
			n.Spec.Unschedulable = false
			changed = true
		}
		if taintKey != "" {
			before := len(n.Spec.Taints)
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, isTaint(taintKey))
			changed = changed || len(n.Spec.Taints) != before
		}
		return changed
	})
}

// RemoveTaint takes the NoSchedule taint taintKey off node and leaves
// spec.unschedulable as it is: undoing a drain of a node a person had
// cordoned before must not make it schedulable.
func RemoveTaint(ctx context.Context, client kubernetes.Interface, node, taintKey string) error {
	return updateNode(ctx, client, node, "untaint", func(n *corev1.Node) bool {
		before := len(n.Spec.Taints)
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, isTaint(taintKey))
		return len(n.Spec.Taints) != before
	})
}

func isTaint(key string) func(corev1.Taint) bool {
	return func(t corev1.Taint) bool {
		return t.Key == key && t.Effect == corev1.TaintEffectNoSchedule
	}
}

// updateNode applies mutate to the node's latest version and writes it back,
// retrying when another writer (kubelet status, controllers) updated the node
// in between. No write is made when mutate reports no change.
func updateNode(ctx context.Context, client kubernetes.Interface, name, op string, mutate func(*corev1.Node) bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !mutate(n) {
			return nil
		}
		_, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("%s node %s: %w", op, name, err)
	}
	return nil
}
