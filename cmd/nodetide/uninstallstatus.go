package main

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// statusRBACObjects are deploy/rbac.yaml's namespaced objects: the Role and
// RoleBinding that let evaluate write the status ConfigMap (the ConfigMap
// itself is managed-by nodetide, removed by planConfigMaps).
var statusRBACObjects = []struct{ Kind, Namespace, Name string }{
	{"Role", "kube-system", "nodetide-evaluate-status"}, {"RoleBinding", "kube-system", "nodetide-evaluate-status"},
}

// planStatusRBAC lists statusRBACObjects that carry deploy/rbac.yaml's
// label; one of the same name without it is a person's and kept.
func planStatusRBAC(ctx context.Context, client kubernetes.Interface, p *uninstallPlan) error {
	rbac := client.RbacV1()
	for _, o := range statusRBACObjects {
		var meta metav1.ObjectMeta
		var err error
		var del func(context.Context, string, metav1.DeleteOptions) error
		if o.Kind == "Role" {
			r, gerr := rbac.Roles(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
			if err = gerr; err == nil {
				meta = r.ObjectMeta
			}
			del = rbac.Roles(o.Namespace).Delete
		} else {
			b, gerr := rbac.RoleBindings(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
			if err = gerr; err == nil {
				meta = b.ObjectMeta
			}
			del = rbac.RoleBindings(o.Namespace).Delete
		}
		full := o.Namespace + "/" + o.Name
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("get %s %s: %w", o.Kind, full, err)
		case meta.Labels[nameLabel] != "nodetide":
			p.Keep = append(p.Keep, uninstallItem{Kind: o.Kind, Name: full, Detail: "not deploy/rbac.yaml's (no label " + nameLabel + "=nodetide)"})
			continue
		}
		what, name, uid := fmt.Sprintf("%s %s", map[string]string{"Role": "role", "RoleBinding": "rolebinding"}[o.Kind], full), o.Name, meta.UID
		p.Remove = append(p.Remove, uninstallItem{Kind: o.Kind, Name: full, Detail: "deploy/rbac.yaml",
			do: func(ctx context.Context) (string, error) { return deleted(what, del(ctx, name, uidPrecondition(uid))) }})
	}
	return nil
}
