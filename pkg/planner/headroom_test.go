package planner

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

func TestHeadroom(t *testing.T) {
	// A DaemonSet pod leaves a node empty; a ReplicaSet pod does not.
	ds := func(key, node string) corev1.Pod { return pod(key, "100m", "128Mi", on(node), daemon("ds-agent")) }
	longUnneeded := func(nodes ...string) snapshot.State {
		s := snapshot.State{UnneededSince: map[string]time.Time{}}
		for _, n := range nodes {
			s.UnneededSince[n] = t0.Add(-time.Hour)
		}
		return s
	}
	withState := func(s snapshot.Snapshot, st snapshot.State) snapshot.Snapshot { s.State = st; return s }
	cases := []struct {
		name     string
		snap     snapshot.Snapshot
		headroom snapshot.Headroom
		set      func(*Settings)
		up       []string
		down     []string
		reason   string
	}{
		{
			name:     "nodes: one empty node of two wanted",
			snap:     clusterOf([]snapshot.NodeGroup{workers(2, "n1", "n2")}, []corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1")), ds("d1", "n1"), ds("d2", "n2")}),
			headroom: snapshot.Headroom{Nodes: 2},
			up:       []string{"workers +1 =3 []"},
			reason:   "headroom: 2 spare nodes wanted, 1 free",
		},
		{
			name:     "nodes: enough empty nodes",
			snap:     clusterOf([]snapshot.NodeGroup{workers(2, "n1", "n2")}, []corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi")}, []corev1.Pod{ds("d1", "n1")}),
			headroom: snapshot.Headroom{Nodes: 2},
		},
		{
			name:     "nodes: a pending pod takes the empty node first",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("p", "1", "1Gi", pending())}),
			headroom: snapshot.Headroom{Nodes: 1},
			up:       []string{"workers +1 =2 []"},
			reason:   "headroom: 1 spare node wanted, 0 free",
		},
		{
			name:     "nodes: upcoming empty nodes count",
			snap:     withState(clusterOf([]snapshot.NodeGroup{workers(2, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1"))}), snapshot.State{LastScaleUp: map[string]time.Time{"workers": t0.Add(-time.Minute)}}),
			headroom: snapshot.Headroom{Nodes: 1},
		},
		{
			name:     "nodes: joins the scale-up for pending pods",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "3", "1Gi", on("n1")), pod("p", "3", "1Gi", pending())}),
			headroom: snapshot.Headroom{Nodes: 1},
			up:       []string{"workers +2 =3 [default/p]"},
			reason:   "1 pending pod needs 1 node (least waste 59%); headroom: 1 spare node wanted, 0 free: 1 node more",
		},
		{
			name:     "cpu and memory: short of cpu",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "3", "1Gi", on("n1"))}),
			headroom: snapshot.Headroom{CPUMillis: 6000, MemoryBytes: 8 << 30},
			up:       []string{"workers +2 =3 []"},
			reason:   "headroom: 6 cpu, 8Gi memory spare wanted, 1 cpu, 15Gi memory free",
		},
		{
			name:     "cpu and memory: the largest headroom grows to max size",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1"), bare())}),
			headroom: snapshot.Headroom{CPUMillis: math.MaxInt64},
			up:       []string{"workers +9 =10 []"},
		},
		{
			name:     "cpu and memory: out of reach when DaemonSets take a new node's cpu",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("d", "4", "1Gi", on("n1"), daemon("ds-big"))}),
			headroom: snapshot.Headroom{CPUMillis: 1000},
		},
		{
			name:     "cpu and memory: enough free",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1"))}),
			headroom: snapshot.Headroom{CPUMillis: 3000, MemoryBytes: 8 << 30},
		},
		{
			name:     "utilization: at the threshold grows",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "3", "1Gi", on("n1"))}),
			headroom: snapshot.Headroom{Utilization: 0.5},
			up:       []string{"workers +1 =2 []"},
			reason:   "headroom: utilisation 75% at or above 50%",
		},
		{
			name:     "utilization: two nodes to get below",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "3", "1Gi", on("n1"))}),
			headroom: snapshot.Headroom{Utilization: 0.3},
			up:       []string{"workers +2 =3 []"},
			reason:   "headroom: utilisation 75% at or above 30%",
		},
		{
			name:     "utilization: capped by max nodes per step",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "3", "1Gi", on("n1"))}),
			headroom: snapshot.Headroom{Utilization: 0.3},
			set:      func(s *Settings) { s.ScaleUp.MaxNodesPerStep = 1 },
			up:       []string{"workers +1 =2 []"},
			reason:   "headroom: utilisation 75% at or above 30% (capped by max nodes per step 1)",
		},
		{
			name:     "utilization: out of reach when DaemonSets alone take it",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("d", "3", "1Gi", on("n1"), daemon("ds-big"))}),
			headroom: snapshot.Headroom{Utilization: 0.5},
		},
		{
			name:     "utilization: below the threshold",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1"))}),
			headroom: snapshot.Headroom{Utilization: 0.5},
		},
		{
			name:     "at max size: nothing",
			snap:     clusterOf([]snapshot.NodeGroup{group("workers", 0, 1, 1, "4", "16Gi", "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1"))}),
			headroom: snapshot.Headroom{Nodes: 1},
		},
		{
			name:     "capped at max size",
			snap:     clusterOf([]snapshot.NodeGroup{group("workers", 0, 2, 1, "4", "16Gi", "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1"))}),
			headroom: snapshot.Headroom{Nodes: 3},
			up:       []string{"workers +1 =2 []"},
			reason:   "headroom: 3 spare nodes wanted, 0 free (capped at max size 2)",
		},
		{
			name:     "capped by max nodes per step after pending pods",
			snap:     clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "3", "1Gi", on("n1")), pod("p", "3", "1Gi", pending())}),
			headroom: snapshot.Headroom{Nodes: 2},
			set:      func(s *Settings) { s.ScaleUp.MaxNodesPerStep = 1 },
			up:       []string{"workers +1 =2 [default/p]"},
			reason:   "1 pending pod needs 1 node (least waste 59%)",
		},
		{
			name:     "backed off: nothing",
			snap:     withState(clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1"))}), snapshot.State{BackoffUntil: map[string]time.Time{"workers": t0.Add(time.Minute)}}),
			headroom: snapshot.Headroom{Nodes: 1},
		},
		{
			name:     "scale-down keeps the spare nodes",
			snap:     withState(clusterOf([]snapshot.NodeGroup{workers(2, "n1", "n2")}, []corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi")}, nil), longUnneeded("n1", "n2")),
			headroom: snapshot.Headroom{Nodes: 2},
		},
		{
			name:     "scale-down removes beyond the spare nodes",
			snap:     withState(clusterOf([]snapshot.NodeGroup{workers(2, "n1", "n2")}, []corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi")}, nil), longUnneeded("n1", "n2")),
			headroom: snapshot.Headroom{Nodes: 1},
			down:     []string{"workers/n1"},
		},
		{
			name:     "scale-down keeps the spare cpu",
			snap:     withState(clusterOf([]snapshot.NodeGroup{workers(2, "n1", "n2")}, []corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1"))}), longUnneeded("n1", "n2")),
			headroom: snapshot.Headroom{CPUMillis: 4000},
		},
		{
			name:     "scale-down keeps utilisation below the threshold",
			snap:     withState(clusterOf([]snapshot.NodeGroup{workers(2, "n1", "n2")}, []corev1.Node{node("n1", "workers", "4", "16Gi"), node("n2", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1")), pod("b", "1", "1Gi", on("n2"))}), longUnneeded("n1", "n2")),
			headroom: snapshot.Headroom{Utilization: 0.5},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := DefaultSettings()
			h := tc.headroom
			tc.snap.NodeGroups[0].Headroom = &h
			if tc.set != nil {
				tc.set(&set)
			}
			p := Decide(tc.snap, set, t0)
			assertPlan(t, p, want{up: tc.up, down: tc.down})
			if tc.reason != "" && len(p.ScaleUp) > 0 && p.ScaleUp[0].Reason != tc.reason {
				t.Errorf("reason %q, want %q", p.ScaleUp[0].Reason, tc.reason)
			}
		})
	}
}

func TestHeadroomInSnapshot(t *testing.T) {
	doc := func(headroom string) string {
		return `{"capturedAt": "2026-11-30T10:00:00Z", "nodeGroups": [{"name": "workers", "provider": "kwok", "minSize": 0, "maxSize": 3, "targetSize": 0,` +
			` "template": {"allocatable": {"cpu": "4", "memory": "16Gi"}}, "headroom": ` + headroom + `}], "nodes": [], "pods": []}`
	}
	for _, tc := range []struct {
		headroom, err string
	}{
		{`{"nodes": 2}`, ""},
		{`{"cpuMillis": 2000, "memoryBytes": 1024}`, ""},
		{`{"utilization": 0.8}`, ""},
		{`{"nodes": 1, "utilization": 0.5}`, "nodeGroups[0].headroom: set exactly one of"},
		{`{}`, "nodeGroups[0].headroom: set exactly one of"},
		{`{"nodes": -1}`, "nodeGroups[0].headroom: nodes must be at least 1"},
		{`{"utilization": 1.5}`, "nodeGroups[0].headroom: utilization must be in (0, 1]"},
		{`{"cpuMillis": -5}`, "nodeGroups[0].headroom: cpu and memory must not be negative"},
		{`{"cpu": "4"}`, "nodeGroups[0].headroom"},
	} {
		t.Run(tc.headroom, func(t *testing.T) {
			s, err := snapshot.ReadSnapshot(strings.NewReader(doc(tc.headroom)))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			case tc.err == "" && s.NodeGroups[0].Headroom == nil:
				t.Fatal("headroom not read")
			}
		})
	}
}

// TestHeadroomRoundTrip: both snapshot forms keep a group's headroom.
func TestHeadroomRoundTrip(t *testing.T) {
	g := workers(0)
	g.Headroom = &snapshot.Headroom{CPUMillis: 1500, MemoryBytes: 1 << 30}
	s := clusterOf([]snapshot.NodeGroup{g}, nil, nil)
	for name, write := range map[string]func(*bytes.Buffer) error{
		"full":    func(b *bytes.Buffer) error { return snapshot.WriteSnapshot(b, s) },
		"compact": func(b *bytes.Buffer) error { return snapshot.WriteCompactSnapshot(b, s) },
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := write(&b); err != nil {
				t.Fatal(err)
			}
			got, err := snapshot.ReadSnapshot(&b)
			if err != nil {
				t.Fatal(err)
			}
			if h := got.NodeGroups[0].Headroom; h == nil || *h != *g.Headroom {
				t.Errorf("headroom read back %+v, want %+v", h, g.Headroom)
			}
		})
	}
}

// TestHeadroomStatus: the plan's group status says the headroom's rule,
// what the group has, and what this plan does about it.
func TestHeadroomStatus(t *testing.T) {
	one := func(pods ...corev1.Pod) snapshot.Snapshot {
		return clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, pods)
	}
	cases := []struct {
		name     string
		snap     snapshot.Snapshot
		headroom snapshot.Headroom
		set      func(*Settings)
		want     HeadroomStatus
	}{
		{"nodes: short, grows", one(pod("a", "1", "1Gi", on("n1"))), snapshot.Headroom{Nodes: 2}, nil,
			HeadroomStatus{Rule: "2 spare nodes", Free: "0 free", Need: 2, Adding: 2, FreeCPUMillis: 3000, FreeMemoryBytes: 15 << 30, Utilization: 0.25}},
		{"nodes: met", one(), snapshot.Headroom{Nodes: 1}, nil,
			HeadroomStatus{Rule: "1 spare node", Free: "1 free", Met: true, FreeNodes: 1, FreeCPUMillis: 4000, FreeMemoryBytes: 16 << 30}},
		{"cpu and memory: short of cpu", one(pod("a", "3", "1Gi", on("n1"))), snapshot.Headroom{CPUMillis: 6000, MemoryBytes: 8 << 30}, nil,
			HeadroomStatus{Rule: "6 cpu, 8Gi memory spare", Free: "1 cpu, 15Gi memory free", Need: 2, Adding: 2, FreeCPUMillis: 1000, FreeMemoryBytes: 15 << 30, Utilization: 0.75}},
		{"utilization: capped by the step", one(pod("a", "3", "1Gi", on("n1"))), snapshot.Headroom{Utilization: 0.3}, func(s *Settings) { s.ScaleUp.MaxNodesPerStep = 1 },
			HeadroomStatus{Rule: "utilisation below 30%", Free: "at 75%", Need: 2, Adding: 1, Blocked: "max nodes per step 1", FreeCPUMillis: 1000, FreeMemoryBytes: 15 << 30, Utilization: 0.75}},
		{"at max size", clusterOf([]snapshot.NodeGroup{group("workers", 0, 1, 1, "4", "16Gi", "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{pod("a", "1", "1Gi", on("n1"))}), snapshot.Headroom{Nodes: 1}, nil,
			HeadroomStatus{Rule: "1 spare node", Free: "0 free", Need: 1, Blocked: "max size 1", FreeCPUMillis: 3000, FreeMemoryBytes: 15 << 30, Utilization: 0.25}},
		{"backed off", func() snapshot.Snapshot {
			s := one(pod("a", "1", "1Gi", on("n1")))
			s.State.BackoffUntil = map[string]time.Time{"workers": t0.Add(time.Minute)}
			return s
		}(), snapshot.Headroom{Nodes: 1}, nil,
			HeadroomStatus{Rule: "1 spare node", Free: "0 free", Need: 1, Blocked: "backed off until 2026-11-30T10:01:00Z", FreeCPUMillis: 3000, FreeMemoryBytes: 15 << 30, Utilization: 0.25}},
		{"out of reach", one(pod("d", "3", "1Gi", on("n1"), daemon("ds-big"))), snapshot.Headroom{Utilization: 0.5}, nil,
			HeadroomStatus{Rule: "utilisation below 50%", Free: "at 75%", Blocked: "out of reach: a new node's DaemonSets take what it would add", FreeNodes: 1, FreeCPUMillis: 1000, FreeMemoryBytes: 15 << 30, Utilization: 0.75}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := DefaultSettings()
			if tc.set != nil {
				tc.set(&set)
			}
			h := tc.headroom
			tc.snap.NodeGroups[0].Headroom = &h
			p := Decide(tc.snap, set, t0)
			if len(p.NodeGroups) != 1 || p.NodeGroups[0].Headroom == nil {
				t.Fatalf("group status %+v, want one with a headroom", p.NodeGroups)
			}
			if got := *p.NodeGroups[0].Headroom; got != tc.want {
				t.Errorf("headroom status\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
	p := Decide(one(), DefaultSettings(), t0)
	if p.NodeGroups[0].Headroom != nil {
		t.Errorf("a group without headroom has a headroom status: %+v", p.NodeGroups[0].Headroom)
	}
}
