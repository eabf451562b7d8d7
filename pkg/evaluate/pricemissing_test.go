package evaluate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// TestPriceMissing: with price in the expander chain, a cycle's status
// names the groups that may grow without a price (not the priced one, not
// one held at max 0); without price in the chain it names none.
func TestPriceMissing(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	tpl := snapshot.Template{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}}
	price := &snapshot.Price{PerHour: 0.1, Currency: "USD", Source: snapshot.PriceConfig}
	groups := []providers.NodeGroup{
		providers.Priced(kwok.New(cp.Client, ns+"-priced", 0, 3, tpl), price),
		kwok.New(cp.Client, ns+"-b", 0, 3, tpl),
		kwok.New(cp.Client, ns+"-a", 0, 3, tpl),
		kwok.New(cp.Client, ns+"-off", 0, 0, tpl),
	}
	for _, tc := range []struct {
		name      string
		expanders []string
		want      string // the detail's names; empty: no problem
	}{
		{"price in the chain", []string{planner.ExpanderPriority, planner.ExpanderPrice}, ns + "-a, " + ns + "-b; "},
		{"price alone", []string{planner.ExpanderPrice}, ns + "-a, " + ns + "-b; "},
		{"no price in the chain", []string{planner.ExpanderPriority}, ""},
		{"the default", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := state.NewMemory(ns)
			s := planner.DefaultSettings()
			s.ScaleUp.Expanders = tc.expanders
			e := &evaluate.Evaluator{
				Client:   cp.Client,
				Groups:   func(context.Context) ([]providers.NodeGroup, error) { return groups, nil },
				Store:    store,
				Settings: s,
				Holder:   "test",
				LeaseTTL: time.Minute,
				Now:      func() time.Time { return time.Now().UTC() },
			}
			ctx := context.Background()
			if _, err := e.Run(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := evaluate.ReadStatus(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			var got *evaluate.Problem
			for i, p := range st.Problems {
				if p.Kind == evaluate.ProblemPriceMissing {
					got = &st.Problems[i]
				}
			}
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("problem %+v, want none", *got)
			case tc.want != "" && (got == nil || got.Count != 2 || !strings.HasPrefix(got.Detail, tc.want)):
				t.Errorf("problem %+v, want %s for 2 groups: %s...", got, evaluate.ProblemPriceMissing, tc.want)
			}
		})
	}
}
