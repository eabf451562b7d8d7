package config

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodetide/nodetide/pkg/planner"
)

// Expanders are scaleUp.expander: one expander's name, or a list of them
// applied in order, each breaking the ties of the one before
// (cluster-autoscaler's --expander=priority,least-waste).
type Expanders []string

// UnmarshalYAML reads a name or a list of names; an empty name is unset.
func (x *Expanders) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*x = nil
		if s != "" {
			*x = Expanders{s}
		}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*x = Expanders(list)
	if *x == nil {
		*x = Expanders{}
	}
	return nil
}

// MarshalYAML writes one expander as its name, more as a list, none as
// unset.
func (x Expanders) MarshalYAML() (any, error) {
	switch len(x) {
	case 0:
		return nil, nil
	case 1:
		return x[0], nil
	}
	return []string(x), nil
}

// checkExpanders refuses, with the item's path and line, a value that is
// neither a name nor a list of names, an empty list, an unknown name and a
// name listed twice (cluster-autoscaler refuses it too: the second could
// never break a tie).
func checkExpanders(n *yaml.Node, path string, errs *fieldErrors) {
	known := fmt.Sprintf("use %s", orList(planner.ExpanderNames))
	switch {
	case isNull(n):
	case n.Kind == yaml.ScalarNode:
		if n.ShortTag() != "!!str" {
			errs.refuse(n, path, fmt.Sprintf("must be an expander's name or a list of them, got %s", kindName(n)))
		} else if n.Value != "" && !slices.Contains(planner.ExpanderNames, n.Value) {
			errs.refuse(n, path, fmt.Sprintf("unknown expander %q (%s)", n.Value, known))
		}
	case n.Kind != yaml.SequenceNode:
		errs.refuse(n, path, fmt.Sprintf("must be an expander's name or a list of them, got %s", kindName(n)))
	case len(n.Content) == 0:
		errs.refuse(n, path, fmt.Sprintf("must list at least one expander (%s), or be left out for least-waste", known))
	default:
		seen := map[string]int{}
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			errs.lines[p] = item.Line
			switch {
			case item.Kind != yaml.ScalarNode || item.ShortTag() != "!!str":
				errs.refuse(item, p, fmt.Sprintf("must be an expander's name, got %s", kindName(item)))
			case !slices.Contains(planner.ExpanderNames, item.Value):
				errs.refuse(item, p, fmt.Sprintf("unknown expander %q (%s)", item.Value, known))
			case seen[item.Value] > 0:
				errs.refuse(item, p, fmt.Sprintf("expander %q is listed twice (also line %d): each may be listed once", item.Value, seen[item.Value]))
			default:
				seen[item.Value] = item.Line
			}
		}
	}
}

// orList is "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
