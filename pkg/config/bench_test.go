package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

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

// TestParseManyLabelsIsLinear: a mapping's keys were once compared pairwise,
// and 40,000 labels took a minute. The bound is generous for slow machines;
// the quadratic parse missed it by two orders of magnitude.
func TestParseManyLabelsIsLinear(t *testing.T) {
	doc := manyLabels(40000)
	start := time.Now()
	cfg, err := Parse(doc, "x.yaml")
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	labels := kwok.BlockOf(cfg.NodeGroups[0].Entry()).Template.Labels
	if len(labels) != 40000 || labels["example.com/k0"] != "v0" || labels["example.com/k39999"] != "v39999" {
		t.Errorf("got %d labels", len(labels))
	}
	if elapsed > 3*time.Second {
		t.Errorf("parsing 40,000 labels took %s", elapsed)
	}
}

// BenchmarkParseLabels shows parse time growing linearly with the labels.
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
