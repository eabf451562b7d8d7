package planner

import (
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// TestProvisionTimeBoundary pins which side of maxNodeProvisionTime a
// scale-up (and a booting node) of exactly that age is on: still in time.
// Only older ones are given up.
func TestProvisionTimeBoundary(t *testing.T) {
	limit := DefaultSettings().ScaleUp.MaxNodeProvisionTime
	two := []corev1.Pod{pod("p1", "1", "1Gi", pending()), pod("p2", "1", "1Gi", pending())}
	spare := group("spare", 0, 5, 0, "4", "16Gi")
	var cases []planCase
	for _, age := range []struct {
		name   string
		age    time.Duration
		inTime bool
	}{
		{"one nanosecond before the limit", limit - time.Nanosecond, true},
		{"exactly at the limit", limit, true},
		{"one nanosecond past the limit", limit + time.Nanosecond, false},
	} {
		scaleUp := clusterOf([]snapshot.NodeGroup{workers(2), spare}, nil, two)
		scaleUp.State.LastScaleUp = map[string]time.Time{"workers": t0.Add(-age.age)}
		booting := clusterOf([]snapshot.NodeGroup{workers(1, "n1")},
			[]corev1.Node{node("n1", "workers", "4", "16Gi", notReady(t0.Add(-age.age)))}, two)
		if age.inTime {
			cases = append(cases,
				planCase{name: "scale-up " + age.name + " still counts its nodes", snap: scaleUp},
				planCase{name: "node created " + age.name + " is booting", snap: booting})
			continue
		}
		cases = append(cases,
			planCase{name: "scale-up " + age.name + " is given back", snap: scaleUp, want: want{
				decrease: []string{"workers -2 =0"},
				up:       []string{"spare +1 =1 [default/p1 default/p2]"},
				check: func(t *testing.T, p Plan) {
					if got, w := p.State.BackoffUntil["workers"], t0.Add(DefaultSettings().ScaleUp.Backoff); !got.Equal(w) {
						t.Errorf("backoffUntil %v, want workers=%v", p.State.BackoffUntil, w)
					}
				},
			}},
			planCase{name: "node created " + age.name + " is not booting", snap: booting, want: want{
				up: []string{"workers +1 =2 [default/p1 default/p2]"},
			}})
	}
	runCases(t, cases)
}
