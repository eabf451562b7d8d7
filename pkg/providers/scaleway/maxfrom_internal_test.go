package scaleway

import (
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	k8s "github.com/scaleway/scaleway-sdk-go/api/k8s/v1"
)

// TestMaxFrom: a group's max is the config's when its maxSize replaced the
// pool's max_size (narrower, or wider with the pool's autoscaling off),
// else the pool's own.
func TestMaxFrom(t *testing.T) {
	pool := &k8s.Pool{ID: "p-1", Name: "p", MinSize: 1, MaxSize: 10}
	size := func(n int) *int { return &n }
	for _, tc := range []struct {
		name    string
		max     *int
		wantMax int
		want    snapshot.BoundSource
	}{
		{"the pool's", nil, 10, snapshot.BoundProvider},
		{"config equal to the pool's", size(10), 10, snapshot.BoundProvider},
		{"config narrower", size(6), 6, snapshot.BoundConfig},
		{"config wider", size(40), 40, snapshot.BoundConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := (&Provider{opts: Options{MaxSize: tc.max}}).group(pool)
			if err != nil {
				t.Fatal(err)
			}
			if g.MaxSize() != tc.wantMax || g.MaxFrom() != tc.want {
				t.Errorf("max %d from %q, want %d from %q", g.MaxSize(), g.MaxFrom(), tc.wantMax, tc.want)
			}
		})
	}
}
