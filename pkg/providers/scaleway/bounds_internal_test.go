package scaleway

import (
	"testing"

	k8s "github.com/scaleway/scaleway-sdk-go/api/k8s/v1"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestBoundsFrom: a group's bound is the config's when its minSize or
// maxSize replaced the pool's min_size or max_size (narrower, or wider with
// the pool's autoscaling off), else the pool's own.
func TestBoundsFrom(t *testing.T) {
	pool := &k8s.Pool{ID: "p-1", Name: "p", MinSize: 1, MaxSize: 10}
	size := func(n int) *int { return &n }
	for _, tc := range []struct {
		name     string
		min, max *int
		want     providers.Bounds
	}{
		{"the pool's", nil, nil, providers.Bounds{Min: 1, Max: 10}},
		{"config equal to the pool's", size(1), size(10), providers.Bounds{Min: 1, Max: 10}},
		{"config narrower", nil, size(6), providers.Bounds{Min: 1, Max: 6, MaxFrom: snapshot.BoundConfig}},
		{"config wider", nil, size(40), providers.Bounds{Min: 1, Max: 40, MaxFrom: snapshot.BoundConfig}},
		{"config's min", size(0), nil, providers.Bounds{Min: 0, Max: 10, MinFrom: snapshot.BoundConfig}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := (&Provider{opts: Options{MinSize: tc.min, MaxSize: tc.max}}).group(pool)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Bounds(); got != tc.want {
				t.Errorf("Bounds = %+v, want %+v", got, tc.want)
			}
		})
	}
}
