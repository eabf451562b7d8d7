package k8s

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// pagedPods makes the fake clientset page pod LISTs as an API server does
// (Limit, Continue, RemainingItemCount) and answers 410 Gone to the first
// `expire` continued requests.
func pagedPods(client *fake.Clientset, pods []corev1.Pod, expire int, calls *int) {
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*calls++
		lo := a.(k8stesting.ListActionImpl).GetListOptions()
		start := 0
		if lo.Continue != "" {
			if expire > 0 {
				expire--
				return true, nil, apierrors.NewResourceExpired("The provided continue parameter is too old")
			}
			start, _ = strconv.Atoi(lo.Continue)
		}
		end := len(pods)
		if lo.Limit > 0 && start+int(lo.Limit) < end {
			end = start + int(lo.Limit)
		}
		l := &corev1.PodList{Items: append([]corev1.Pod(nil), pods[start:end]...)}
		if end < len(pods) {
			l.Continue = strconv.Itoa(end)
			remaining := int64(len(pods) - end)
			l.RemainingItemCount = &remaining
		}
		return true, l, nil
	})
}

func TestListPaging(t *testing.T) {
	var pods []corev1.Pod
	for i := range 5 {
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i)}})
	}
	tests := []struct {
		name      string
		pageSize  int64
		expire    int
		wantCalls int
		wantErr   string
	}{
		{name: "one page", pageSize: 500, wantCalls: 1},
		{name: "default page size", pageSize: 0, wantCalls: 1},
		{name: "pages of 2", pageSize: 2, wantCalls: 3},
		{name: "exact pages", pageSize: 5, wantCalls: 1},
		{name: "expired continue restarts once", pageSize: 2, expire: 1, wantCalls: 2 + 3},
		{name: "expired twice fails", pageSize: 2, expire: 2, wantCalls: 2 + 2, wantErr: "list pods: continue token expired"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
				&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pdb"}},
			)
			calls := 0
			pagedPods(client, pods, tc.expire, &calls)
			objs, err := List(t.Context(), client, WithPageSize(tc.pageSize))
			if calls != tc.wantCalls {
				t.Errorf("%d pod LIST calls, want %d", calls, tc.wantCalls)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if !apierrors.IsResourceExpired(err) {
					t.Errorf("error %v does not keep the API status", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range objs.Pods {
				names = append(names, p.Name)
				if p.APIVersion != "v1" || p.Kind != "Pod" {
					t.Errorf("pod %s TypeMeta %+v", p.Name, p.TypeMeta)
				}
			}
			if got := strings.Join(names, ","); got != "p0,p1,p2,p3,p4" {
				t.Errorf("pods %s", got)
			}
			if len(objs.Nodes) != 1 || objs.Nodes[0].APIVersion != "v1" || objs.Nodes[0].Kind != "Node" {
				t.Errorf("nodes %+v", objs.Nodes)
			}
			if len(objs.PodDisruptionBudgets) != 1 || objs.PodDisruptionBudgets[0].APIVersion != "policy/v1" ||
				objs.PodDisruptionBudgets[0].Kind != "PodDisruptionBudget" {
				t.Errorf("pdbs %+v", objs.PodDisruptionBudgets)
			}
		})
	}
}

func TestListFirstPageErrorNotRetried(t *testing.T) {
	client := fake.NewClientset()
	calls := 0
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		return true, nil, apierrors.NewResourceExpired("too old resource version")
	})
	_, err := List(t.Context(), client)
	if err == nil || !strings.Contains(err.Error(), "list nodes") || calls != 1 {
		t.Fatalf("error %v after %d calls, want one failed list nodes", err, calls)
	}
}
