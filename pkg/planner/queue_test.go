package planner

import (
	"slices"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
	corev1 "k8s.io/api/core/v1"
)

// TestPromisesInQueueOrder: where pending pods compete for new nodes the
// plan cannot give them all (the group's max, the step's budget), the
// pods promised a node are those kube-scheduler's queue takes first:
// higher priority, then the older pod; pods that tie keep first-fit
// decreasing. Group g (4 CPU nodes) has room for two nodes; every pod
// takes a node of its own.
func TestPromisesInQueueOrder(t *testing.T) {
	prio := snapshottest.Priority
	age := func(d time.Duration) podOpt { return created(t0.Add(-d)) }
	port := hostPortOpt(8080, "", "")
	tests := []struct {
		name    string
		room    int
		budget  int
		pods    []corev1.Pod
		want    []string // promised
		note    bool     // the plan says the assignment is predicted
		reasons string   // in every unschedulable reason
	}{
		{
			name: "one workload: the higher priorities first, then the older",
			room: 2,
			pods: []corev1.Pod{
				pod("web-a", "3", "", pending(), age(time.Hour)),
				pod("web-b", "3", "", pending(), age(2*time.Hour)),
				pod("web-c", "3", "", pending(), prio(100), age(time.Minute)),
			},
			want: []string{"default/web-b", "default/web-c"}, note: true, reasons: "node group g at max size 2",
		},
		{
			name: "a smaller pod of higher priority wins over a bigger one",
			room: 1,
			pods: []corev1.Pod{
				pod("big-0", "3500m", "", pending(), podLabels("app", "big"), ownedBy("ReplicaSet", "big")),
				pod("small-0", "3", "", pending(), prio(1000)),
			},
			want: []string{"default/small-0"}, note: true,
		},
		{
			name: "the older pod wins at equal priority",
			room: 1,
			pods: []corev1.Pod{
				pod("big-0", "3500m", "", pending(), podLabels("app", "big"), ownedBy("ReplicaSet", "big"), age(time.Hour)),
				pod("small-0", "3", "", pending(), age(2*time.Hour)),
			},
			want: []string{"default/small-0"}, note: true,
		},
		{
			name: "pods alike in priority and age: first-fit decreasing, as before",
			room: 1,
			pods: []corev1.Pod{
				pod("big-0", "3500m", "", pending(), podLabels("app", "big"), ownedBy("ReplicaSet", "big")),
				pod("small-0", "3", "", pending()),
			},
			want: []string{"default/big-0"}, note: true,
		},
		{
			name:   "capped by the step's budget",
			room:   5,
			budget: 1,
			pods: []corev1.Pod{
				pod("big-0", "3500m", "", pending(), podLabels("app", "big"), ownedBy("ReplicaSet", "big")),
				pod("small-0", "3", "", pending(), prio(10)),
			},
			want: []string{"default/small-0"}, note: true, reasons: "max nodes per step (1) reached",
		},
		{
			name: "pod by pod (host ports): the queue's order too",
			room: 1,
			pods: []corev1.Pod{
				pod("big-0", "3500m", "", pending(), podLabels("app", "big"), ownedBy("ReplicaSet", "big"), port),
				pod("small-0", "3", "", pending(), prio(1000), port),
			},
			want: []string{"default/small-0"}, note: true,
		},
		{
			name: "room for all: no competition, no note",
			room: 2,
			pods: []corev1.Pod{
				pod("big-0", "3500m", "", pending(), podLabels("app", "big"), ownedBy("ReplicaSet", "big")),
				pod("small-0", "3", "", pending(), prio(1000)),
			},
			want: []string{"default/big-0", "default/small-0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := DefaultSettings()
			if tt.budget > 0 {
				set.ScaleUp.MaxNodesPerStep = tt.budget
			}
			g := group("g", 0, tt.room, 0, "4", "16Gi")
			p := Decide(clusterOf([]snapshot.NodeGroup{g}, nil, tt.pods), set, t0)
			var got []string
			for _, u := range p.ScaleUp {
				got = append(got, u.Pods...)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("promised %v, want %v (plan %+v)", got, tt.want, p.ScaleUp)
			}
			if len(got)+len(p.Unschedulable) != len(tt.pods) {
				t.Fatalf("%d promised, %d unschedulable, of %d", len(got), len(p.Unschedulable), len(tt.pods))
			}
			for _, u := range p.Unschedulable {
				if tt.reasons != "" && u.Reason != tt.reasons {
					t.Errorf("%s: reason %q, want %q", u.Pod, u.Reason, tt.reasons)
				}
			}
			if (p.Assignment != "") != tt.note {
				t.Errorf("assignment %q; want a note: %v", p.Assignment, tt.note)
			}
		})
	}
}
