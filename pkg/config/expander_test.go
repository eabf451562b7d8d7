package config

import (
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodetide/nodetide/pkg/planner"
)

// TestExpanders: scaleUp.expander is a name or a list of names, in the
// order they apply; left out it is least-waste.
func TestExpanders(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		want        []string
	}{
		{"left out", "", []string{planner.ExpanderLeastWaste}},
		{"empty name", "scaleUp: {expander: \"\"}\n", []string{planner.ExpanderLeastWaste}},
		{"a name", "scaleUp: {expander: price}\n", []string{planner.ExpanderPrice}},
		{"a flow list", "scaleUp: {expander: [priority, price]}\n", []string{planner.ExpanderPriority, planner.ExpanderPrice}},
		{"a block list", "scaleUp:\n  expander:\n    - price\n    - least-waste\n", []string{planner.ExpanderPrice, planner.ExpanderLeastWaste}},
		{"a list of one", "scaleUp: {expander: [priority]}\n", []string{planner.ExpanderPriority}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(kwokDoc(okTemplate, tc.extra)), "x.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Settings().ScaleUp.Expanders; !slices.Equal(got, tc.want) {
				t.Errorf("expanders %q, want %q", got, tc.want)
			}
			// Written back, it reads the same.
			out, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Parse(out, "again.yaml")
			if err != nil {
				t.Fatalf("written config refused: %v", err)
			}
			if got := again.Settings().ScaleUp.Expanders; !slices.Equal(got, tc.want) {
				t.Errorf("written back: expanders %q, want %q", got, tc.want)
			}
		})
	}
}

// TestExpandersRefused: each problem is named with the file, the line of
// the item and its path, and nothing is accepted.
func TestExpandersRefused(t *testing.T) {
	known := "use least-waste, price or priority"
	for _, tc := range []struct {
		name, extra string
		want        []string
	}{
		{"unknown name", "scaleUp: {expander: random}\n",
			[]string{`x.yaml:10: scaleUp.expander: unknown expander "random" (` + known + `)`}},
		{"unknown in a list", "scaleUp:\n  expander:\n    - priority\n    - cheapest\n",
			[]string{`x.yaml:13: scaleUp.expander[1]: unknown expander "cheapest" (` + known + `)`}},
		{"listed twice", "scaleUp:\n  expander:\n    - price\n    - priority\n    - price\n",
			[]string{`x.yaml:14: scaleUp.expander[2]: expander "price" is listed twice (also line 12): each may be listed once`}},
		{"empty list", "scaleUp: {expander: []}\n",
			[]string{`x.yaml:10: scaleUp.expander: must list at least one expander (` + known + `), or be left out for least-waste`}},
		{"not a name in a list", "scaleUp: {expander: [price, {a: b}, 3]}\n",
			[]string{`x.yaml:10: scaleUp.expander[1]: must be an expander's name, got a mapping`,
				`x.yaml:10: scaleUp.expander[2]: must be an expander's name, got "3"`}},
		{"a mapping", "scaleUp: {expander: {price: true}}\n",
			[]string{`x.yaml:10: scaleUp.expander: must be an expander's name or a list of them, got a mapping`}},
		{"a number", "scaleUp: {expander: 1}\n",
			[]string{`x.yaml:10: scaleUp.expander: must be an expander's name or a list of them, got "1"`}},
		{"with other problems", "scaleUp: {expander: [price, price], maxNodesPerStep: 0}\n",
			[]string{`x.yaml:10: scaleUp.expander[1]: expander "price" is listed twice (also line 10): each may be listed once`,
				`x.yaml:10: scaleUp.maxNodesPerStep: must be at least 1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(kwokDoc(okTemplate, tc.extra)), "x.yaml")
			if err == nil {
				t.Fatalf("accepted: %+v", cfg.ScaleUp)
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}
