package planner

import (
	"slices"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBudgetMatching checks the budget index against each kind of selector:
// a pod is covered by exactly the budgets whose selectors match its labels
// in its namespace, listed in snapshot order.
func TestBudgetMatching(t *testing.T) {
	withSelector := func(key string, sel *metav1.LabelSelector) policyv1.PodDisruptionBudget {
		b := pdb(key, 1)
		b.Spec.Selector = sel
		return b
	}
	expr := func(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	budgets := []policyv1.PodDisruptionBudget{
		0:  pdb("shop/web", 1, "app", "web"),
		1:  pdb("shop/web-tier", 1, "app", "web", "tier", "front"),
		2:  withSelector("shop/in", expr("app", metav1.LabelSelectorOpIn, "web", "api", "web")),
		3:  withSelector("shop/notin", expr("app", metav1.LabelSelectorOpNotIn, "web")),
		4:  withSelector("shop/exists", expr("tier", metav1.LabelSelectorOpExists)),
		5:  withSelector("shop/absent", expr("tier", metav1.LabelSelectorOpDoesNotExist)),
		6:  withSelector("shop/everything", &metav1.LabelSelector{}),
		7:  withSelector("shop/null", nil),
		8:  withSelector("shop/invalid", expr("app", metav1.LabelSelectorOpIn)), // In without values
		9:  pdb("other/web", 1, "app", "web"),
		10: pdb("shop/empty-value", 1, "app", ""),
		11: pdb("shop/by-team", 1, "team", "a"),
		12: withSelector("shop/both", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"api"}}}}),
	}
	tests := []struct {
		name   string
		key    string
		labels []string
		want   []int32
	}{
		{"web front", "shop/a", []string{"app", "web", "tier", "front"}, []int32{0, 1, 2, 4, 6}},
		{"web back", "shop/b", []string{"app", "web", "tier", "back"}, []int32{0, 2, 4, 6}},
		{"api of team a", "shop/c", []string{"app", "api", "team", "a"}, []int32{2, 3, 5, 6, 11, 12}},
		{"no labels", "shop/d", nil, []int32{3, 5, 6}},
		{"empty app value", "shop/e", []string{"app", ""}, []int32{3, 5, 6, 10}},
		{"other namespace", "other/f", []string{"app", "web"}, []int32{9}},
		{"namespace without budgets", "else/g", []string{"app", "web"}, nil},
	}
	set := (&model{snap: &snapshot.Snapshot{PodDisruptionBudgets: budgets}}).pdbSet()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod(tt.key, "100m", "100Mi", podLabels(tt.labels...))
			if tt.labels == nil {
				p.Labels = nil
			}
			// Appends after what out already holds.
			got := set.matching(&p, []int32{-1})
			if want := append([]int32{-1}, tt.want...); !slices.Equal(got, want) {
				t.Errorf("matching = %v, want %v", got[1:], tt.want)
			}
		})
	}
}
