package k8s

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const testTaint = "nodetide.io/draining"

func TestCordonUncordonFake(t *testing.T) {
	other := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	ours := corev1.Taint{Key: testTaint, Effect: corev1.TaintEffectNoSchedule}
	oursNoExecute := corev1.Taint{Key: testTaint, Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name          string
		op            func(context.Context, kubernetes.Interface, string, string) error
		unschedulable bool
		taints        []corev1.Taint
		conflicts     int
		wantUnsched   bool
		wantTaints    []corev1.Taint
		wantUpdates   int
	}{
		{name: "cordon", op: Cordon, taints: []corev1.Taint{other},
			wantUnsched: true, wantTaints: []corev1.Taint{other, ours}, wantUpdates: 1},
		{name: "cordon cordoned", op: Cordon, unschedulable: true, taints: []corev1.Taint{ours},
			wantUnsched: true, wantTaints: []corev1.Taint{ours}, wantUpdates: 0},
		{name: "cordon adds missing taint", op: Cordon, unschedulable: true,
			wantUnsched: true, wantTaints: []corev1.Taint{ours}, wantUpdates: 1},
		{name: "cordon after conflicts", op: Cordon, conflicts: 2,
			wantUnsched: true, wantTaints: []corev1.Taint{ours}, wantUpdates: 3},
		{name: "uncordon", op: Uncordon, unschedulable: true, taints: []corev1.Taint{other, ours, oursNoExecute},
			wantTaints: []corev1.Taint{other, oursNoExecute}, wantUpdates: 1},
		{name: "uncordon schedulable", op: Uncordon, taints: []corev1.Taint{other},
			wantTaints: []corev1.Taint{other}, wantUpdates: 0},
		{name: "uncordon kubectl-cordoned", op: Uncordon, unschedulable: true,
			wantUpdates: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(&corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1"},
				Spec:       corev1.NodeSpec{Unschedulable: tc.unschedulable, Taints: tc.taints},
			})
			updates, conflicts := 0, tc.conflicts
			client.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				updates++
				if conflicts > 0 {
					conflicts--
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", nil)
				}
				return false, nil, nil // fall through to the tracker
			})
			if err := tc.op(t.Context(), client, "n1", testTaint); err != nil {
				t.Fatal(err)
			}
			n, err := client.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n.Spec.Unschedulable != tc.wantUnsched {
				t.Errorf("unschedulable %v, want %v", n.Spec.Unschedulable, tc.wantUnsched)
			}
			if !slices.Equal(n.Spec.Taints, tc.wantTaints) {
				t.Errorf("taints %+v, want %+v", n.Spec.Taints, tc.wantTaints)
			}
			if updates != tc.wantUpdates {
				t.Errorf("%d updates, want %d", updates, tc.wantUpdates)
			}
		})
	}
}

func TestCordonMissingNode(t *testing.T) {
	err := Cordon(t.Context(), fake.NewClientset(), "ghost", testTaint)
	if err == nil || !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "cordon node ghost") {
		t.Fatalf("error %v, want a not-found naming the node", err)
	}
}
