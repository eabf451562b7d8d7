package main

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestPlanStatusRBAC: the status Role and RoleBinding carrying
// deploy/rbac.yaml's label are removed; one without it is kept; a missing
// one is not listed.
func TestPlanStatusRBAC(t *testing.T) {
	ctx := context.Background()
	labelled := map[string]string{nameLabel: "nodetide"}
	client := fake.NewClientset(
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "nodetide-evaluate-status", Namespace: "kube-system", Labels: labelled}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nodetide-evaluate-status", Namespace: "kube-system"}},
	)
	var p uninstallPlan
	if err := planStatusRBAC(ctx, client, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Remove) != 1 || p.Remove[0].Kind != "Role" || p.Remove[0].Name != "kube-system/nodetide-evaluate-status" ||
		len(p.Keep) != 1 || p.Keep[0].Kind != "RoleBinding" {
		t.Fatalf("plan: remove %+v, keep %+v; want the Role removed and the unlabelled RoleBinding kept", p.Remove, p.Keep)
	}
	if msg, err := p.Remove[0].do(ctx); err != nil || msg == "" {
		t.Fatalf("remove: %q, %v", msg, err)
	}
	if _, err := client.RbacV1().Roles("kube-system").Get(ctx, "nodetide-evaluate-status", metav1.GetOptions{}); err == nil {
		t.Error("the Role is still there")
	}
	p = uninstallPlan{}
	if err := planStatusRBAC(ctx, client, &p); err != nil || len(p.Remove) != 0 {
		t.Errorf("after removal: %+v, %v", p.Remove, err)
	}
}
