package planner

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// WritePlan writes p as the indented `nodetide plan -o json` document.
func WritePlan(w io.Writer, p Plan) error {
	p.ScaleUp = slices.Clone(orEmpty(p.ScaleUp))
	for i := range p.ScaleUp {
		p.ScaleUp[i].Pods = orEmpty(p.ScaleUp[i].Pods)
	}
	p.ScaleDown = orEmpty(p.ScaleDown)
	p.Unschedulable = orEmpty(p.Unschedulable)
	p.NodeGroups = orEmpty(p.NodeGroups)
	p.State = p.State.Normal()
	return writeJSON(w, "plan", p)
}

func writeJSON(w io.Writer, what string, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
