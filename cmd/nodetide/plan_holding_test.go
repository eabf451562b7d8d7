package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestPlanShowsAHoldingReplacement: the worked example's replacement five
// minutes after its drain (the large node gone, both pods on the small one
// that came for them twelve minutes ago) is Holding: by creation alone the
// small node is old enough to go, but it received the pods within the
// window and is kept (ReceivedMovedPods), and no other replacement takes
// it. The snapshot document carries the drained replacement.
func TestPlanShowsAHoldingReplacement(t *testing.T) {
	f, err := os.Open("../../examples/consolidation/snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.ReadSnapshot(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	const id = "r-694a7a41707e3d88"
	at := s.CapturedAt
	old := s.Nodes[0].Name
	n := *s.Nodes[0].DeepCopy()
	n.Name = "ip-10-0-1-42.eu-west-1.compute.internal"
	n.Labels["kubernetes.io/hostname"] = n.Name
	n.Labels["node.kubernetes.io/instance-type"] = "m5.large"
	n.Spec.ProviderID = "aws:///eu-west-1a/i-0a1b2c3d4e5f60042"
	n.CreationTimestamp.Time = at.Add(-12 * time.Minute)
	n.Status.Allocatable = s.NodeGroups[1].Template.Allocatable.DeepCopy()
	n.Status.Capacity = n.Status.Allocatable.DeepCopy()
	s.Nodes = append(s.Nodes[:0], n)
	for i := range s.Pods {
		s.Pods[i].Spec.NodeName = n.Name
	}
	s.NodeGroups[0].Instances, s.NodeGroups[0].TargetSize = nil, 0
	s.NodeGroups[1].Instances, s.NodeGroups[1].TargetSize = []string{n.Spec.ProviderID}, 1
	s.State.UnneededSince = nil
	s.State.LastScaleUp = map[string]time.Time{"small": at.Add(-14 * time.Minute)}
	s.State.Replacing = map[string]snapshot.Replacement{id: {NodeGroup: "small", Delta: 1, Nodes: []string{old},
		Since: at.Add(-14 * time.Minute), Drained: at.Add(-5 * time.Minute), Receivers: []string{n.Name}}}
	path := filepath.Join(t.TempDir(), "snapshot.json")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.WriteSnapshot(out, s); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}

	plan, errOut, code := nodetide(t, "plan", "--snapshot", path, "--config", "../../examples/consolidation/nodetide.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"Scale up: none\n",
		"Scale down: none\n",
		"REPLACE             PHASE    NEW NODES   OLD NODES                                SAVING  REASON\n" +
			"r-694a7a41707e3d88  Holding  1 of small  ip-10-0-1-17.eu-west-1.compute.internal  -       its old nodes drained at 2026-12-04T09:55:00Z; " +
			"until 2026-12-04T10:05:00Z, the longer of delayAfterAdd and unneededTime after, it holds from scale-down and replacement " +
			"the 1 node that received their pods (its new nodes of group small and the others they moved onto)\n",
		"ip-10-0-1-42.eu-west-1.compute.internal  small       ReceivedMovedPods  replacement r-694a7a41707e3d88 drained its old nodes at 2026-12-04T09:55:00Z " +
			"onto its new nodes and the nodes that stay: held until 2026-12-04T10:05:00Z",
		"NoCandidate  no candidate among its 1 node: 1 held by a replacement or a pending pod (see kept)\n",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan does not show %q:\n%s", want, plan)
		}
	}
}
