package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/planner"
)

// TestKeptTableCapped: the KEPT section shows the first rows and counts the
// rest, those the plan listed and those it only counted.
func TestKeptTableCapped(t *testing.T) {
	var p planner.Plan
	for i := range maxKeptRows + 3 {
		p.Kept = append(p.Kept, planner.Kept{Node: fmt.Sprintf("w-%02d", i), NodeGroup: "workers", Code: planner.KeptNotUnderutilized, Reason: "busy"})
	}
	p.KeptOmitted = 4
	var b strings.Builder
	writeKeptTable(&b, p)
	out := b.String()
	if got := strings.Count(out, "NotUnderutilized"); got != maxKeptRows {
		t.Errorf("%d rows, want %d:\n%s", got, maxKeptRows, out)
	}
	if want := "... and 7 more kept nodes (-o json lists 23, keptCounts counts all)\n"; !strings.HasSuffix(out, want) {
		t.Errorf("table ends %q, want %q", out[max(0, len(out)-80):], want)
	}
	b.Reset()
	writeKeptTable(&b, planner.Plan{})
	if b.Len() != 0 {
		t.Errorf("no kept nodes printed %q", b.String())
	}
}
