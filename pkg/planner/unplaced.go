package planner

import (
	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// UnplacedPods returns the indices of the pods bound to a node that is not
// among nodes. A live read can hold such pods for a while: nodes and pods are
// read at different resource versions, and the pods of a deleted Node linger
// until the pod garbage collector removes them (about a minute). The planner
// plans as if they were not there; a snapshot file holding one is refused.
func UnplacedPods(nodes []corev1.Node, pods []corev1.Pod) []int {
	names := make(map[string]struct{}, len(nodes))
	for i := range nodes {
		names[nodes[i].Name] = struct{}{}
	}
	var out []int
	for i := range pods {
		if n := pods[i].Spec.NodeName; n != "" {
			if _, ok := names[n]; !ok {
				out = append(out, i)
			}
		}
	}
	return out
}

// DropUnplacedPods returns s without its UnplacedPods, and their names
// (namespace/name), so that s is a snapshot WriteSnapshot takes; it plans the
// same. s's own pod list is not changed: a new one is made only when a pod is
// left out.
func DropUnplacedPods(s snapshot.Snapshot) (snapshot.Snapshot, []string) {
	drop := UnplacedPods(s.Nodes, s.Pods)
	if len(drop) == 0 {
		return s, nil
	}
	names := make([]string, 0, len(drop))
	kept := make([]corev1.Pod, 0, len(s.Pods)-len(drop))
	next := 0
	for i := range s.Pods {
		if next < len(drop) && drop[next] == i {
			names = append(names, s.Pods[i].Namespace+"/"+s.Pods[i].Name)
			next++
			continue
		}
		kept = append(kept, s.Pods[i])
	}
	s.Pods = kept
	return s, names
}
