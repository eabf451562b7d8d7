package main

import (
	"errors"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nodetide/nodetide/infra/stack"
)

// TestRBAC checks deploy/rbac.yaml: one ClusterRole per function with
// exactly the calls it makes, bound to the group the stack maps its role to.
func TestRBAC(t *testing.T) {
	f, err := os.Open("../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	roles := map[string]rbacv1.ClusterRole{}
	bindings := map[string]rbacv1.ClusterRoleBinding{}
	nsRoles := map[string]rbacv1.Role{}
	nsBindings := map[string]rbacv1.RoleBinding{}
	configMaps := map[string]bool{}
	for {
		var obj struct {
			Kind string `json:"kind"`
			rbacv1.ClusterRole
			Subjects []rbacv1.Subject `json:"subjects"`
			RoleRef  rbacv1.RoleRef   `json:"roleRef"`
		}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "":
			continue // an empty document
		case "ClusterRole":
			roles[obj.Name] = obj.ClusterRole
		case "ClusterRoleBinding":
			bindings[obj.Name] = rbacv1.ClusterRoleBinding{ObjectMeta: obj.ObjectMeta, Subjects: obj.Subjects, RoleRef: obj.RoleRef}
		case "Role":
			nsRoles[obj.Namespace+"/"+obj.Name] = rbacv1.Role{ObjectMeta: obj.ObjectMeta, Rules: obj.Rules}
		case "RoleBinding":
			nsBindings[obj.Namespace+"/"+obj.Name] = rbacv1.RoleBinding{ObjectMeta: obj.ObjectMeta, Subjects: obj.Subjects, RoleRef: obj.RoleRef}
		case "ConfigMap":
			configMaps[obj.Namespace+"/"+obj.Name] = true
		default:
			t.Errorf("unexpected kind %s", obj.Kind)
		}
	}

	// resource -> verbs, as "group/resource".
	want := map[string]map[string][]string{
		"evaluate": {
			"/nodes": {"list", "watch"}, "/pods": {"list", "watch"}, "policy/poddisruptionbudgets": {"list", "watch"},
			"/persistentvolumeclaims": {"list", "watch"}, "/persistentvolumes": {"list", "watch"},
			"storage.k8s.io/storageclasses": {"list", "watch"}, "/events": {"create", "list", "patch"},
		},
		"drain": {
			"/nodes": {"delete", "get", "list", "update"}, "/pods": {"delete", "list", "patch"},
			"/pods/eviction": {"create"}, "apps/deployments": {"get"}, "apps/replicasets": {"get"},
			"apps/statefulsets": {"get"}, "apps/deployments/scale": {"get", "update"},
			"policy/poddisruptionbudgets": {"list"}, "autoscaling/horizontalpodautoscalers": {"list"},
			"/events": {"create", "patch"},
		},
		"schedule": {
			"apps/deployments":       {"list"},
			"apps/deployments/scale": {"get", "update"}, "apps/statefulsets/scale": {"get", "update"},
			"/nodes": {"list", "watch"}, "/pods": {"list", "watch"}, "policy/poddisruptionbudgets": {"list", "watch"},
			"/persistentvolumeclaims": {"list", "watch"}, "/persistentvolumes": {"list", "watch"},
			"storage.k8s.io/storageclasses": {"list", "watch"},
		},
	}
	if len(roles) != len(want) || len(bindings) != len(want) {
		t.Errorf("%d ClusterRoles and %d bindings, want %d of each", len(roles), len(bindings), len(want))
	}
	for fn, wantRules := range want {
		name := "nodetide-" + fn
		role, ok := roles[name]
		if !ok {
			t.Errorf("no ClusterRole %s", name)
			continue
		}
		got := map[string][]string{}
		for _, r := range role.Rules {
			if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
				t.Errorf("%s: unexpected rule %+v", name, r)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if strings.Contains(g+res+v, "*") {
							t.Errorf("%s: wildcard in %q %q %q", name, g, res, v)
						}
						got[g+"/"+res] = append(got[g+"/"+res], v)
					}
				}
			}
		}
		for k := range got {
			sort.Strings(got[k])
		}
		for k, v := range wantRules {
			if !slices.Equal(got[k], v) {
				t.Errorf("%s: %s: verbs %v, want %v", name, k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := wantRules[k]; !ok {
				t.Errorf("%s: grants %s %v, which the function does not call", name, k, got[k])
			}
		}

		b, ok := bindings[name]
		if !ok {
			t.Errorf("no ClusterRoleBinding %s", name)
			continue
		}
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != name {
			t.Errorf("binding %s refers to %+v", name, b.RoleRef)
		}
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "Group" || b.Subjects[0].Name != stack.KubernetesGroup(fn) {
			t.Errorf("binding %s: subjects %+v, want the group %s", name, b.Subjects, stack.KubernetesGroup(fn))
		}
	}
	checkStatusRole(t, nsRoles, nsBindings, configMaps)
}

// checkStatusRole: evaluate gets and updates the one status ConfigMap, which
// the manifest creates (create cannot be scoped to a name), in its namespace
// only, and gets cluster-autoscaler's status ConfigMap there (shadow mode's
// comparison), nothing more.
func checkStatusRole(t *testing.T, roles map[string]rbacv1.Role, bindings map[string]rbacv1.RoleBinding, configMaps map[string]bool) {
	t.Helper()
	const name = "kube-system/nodetide-evaluate-status"
	if len(roles) != 1 || len(bindings) != 1 || len(configMaps) != 1 || !configMaps["kube-system/nodetide-status"] {
		t.Fatalf("Roles %v, RoleBindings %v, ConfigMaps %v: want only %s and the ConfigMap kube-system/nodetide-status", roles, bindings, configMaps, name)
	}
	role, ok := roles[name]
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"nodetide-status"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"cluster-autoscaler-status"}, Verbs: []string{"get"}},
	}
	same := ok && len(role.Rules) == len(want)
	for i := 0; same && i < len(want); i++ {
		r := role.Rules[i]
		same = slices.Equal(r.APIGroups, want[i].APIGroups) && slices.Equal(r.Resources, want[i].Resources) &&
			slices.Equal(r.ResourceNames, want[i].ResourceNames) && slices.Equal(r.Verbs, want[i].Verbs)
	}
	if !same {
		t.Errorf("Role %s: %+v, want the rules %+v", name, role.Rules, want)
	}
	b, ok := bindings[name]
	if !ok || b.RoleRef.Kind != "Role" || b.RoleRef.Name != "nodetide-evaluate-status" ||
		len(b.Subjects) != 1 || b.Subjects[0].Kind != "Group" || b.Subjects[0].Name != stack.KubernetesGroup("evaluate") {
		t.Errorf("RoleBinding %s: %+v", name, b)
	}
}
