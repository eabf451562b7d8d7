package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/providers/kwok"
)

// manyLabels is a config whose kwok template has n labels.
func manyLabels(n int) []byte {
	var b strings.Builder
	b.WriteString(kwokDoc("\n        allocatable: {cpu: 2, memory: 4Gi}\n        labels:", ""))
	for i := range n {
		fmt.Fprintf(&b, "          example.com/k%d: v%d\n", i, i)
	}
	return []byte(b.String())
}

// TestParseManyLabels: 40,000 labels parse, each kept. A mapping's keys were
// once compared pairwise and this took a minute; that the parse stays linear
// is BenchmarkParseLabels' to show (make bench), not a timed test's.
func TestParseManyLabels(t *testing.T) {
	cfg, err := Parse(manyLabels(40000), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	labels := kwok.BlockOf(cfg.NodeGroups[0].Entry()).Template.Labels
	if len(labels) != 40000 || labels["example.com/k0"] != "v0" || labels["example.com/k39999"] != "v39999" {
		t.Errorf("got %d labels", len(labels))
	}
}

// BenchmarkParseLabels shows parse time growing linearly with the labels:
// ns/op at 40000 about four times that at 10000 (a pairwise key check made it
// sixteen).
func BenchmarkParseLabels(b *testing.B) {
	for _, n := range []int{1000, 10000, 40000} {
		doc := manyLabels(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse(doc, "x.yaml"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
