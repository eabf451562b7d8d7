package evaluate

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// A group's template is taken from one of its running nodes when it has
// one, as cluster-autoscaler does: the provider's description of a new node
// (tags, the instance type, the pool's API) lacks what the node's bootstrap
// adds (kubernetes.io/os, labels set by the kubelet's flags, taints of the
// image), and a pod selecting such a label would otherwise be called
// unschedulable. Only with no such node (at zero, or all still starting)
// is the provider's template used.
//
// This is done where the snapshot is built, not in the planner: the
// snapshot then says which template the decision used (templateFrom), a
// recorded snapshot replays with the same template, and the planner keeps a
// single meaning of a group's template, the new node.

// Taints that belong to one node's moment, never to a new node: its
// conditions (the node lifecycle controller's), nodetide's draining taint
// and cluster-autoscaler's own marks.
var nodeOnlyTaints = map[string]bool{
	corev1.TaintNodeNotReady:               true,
	corev1.TaintNodeUnreachable:            true,
	corev1.TaintNodeUnschedulable:          true,
	corev1.TaintNodeMemoryPressure:         true,
	corev1.TaintNodeDiskPressure:           true,
	corev1.TaintNodePIDPressure:            true,
	corev1.TaintNodeNetworkUnavailable:     true,
	corev1.TaintNodeOutOfService:           true,
	podfacts.TaintDraining:                 true,
	"ToBeDeletedByClusterAutoscaler":       true,
	"DeletionCandidateOfClusterAutoscaler": true,
}

// zoneLabels are the labels naming a node's zone (the CSI drivers' and the
// clouds' too). A new node's zone is the group's (the planner sets it from
// the group's zones), not the one node's.
var zoneLabels = [...]string{
	corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone,
	"topology.ebs.csi.aws.com/zone", "topology.k8s.aws/zone-id", "topology.gke.io/zone",
	"topology.disk.csi.azure.com/zone", "topology.csi.scaleway.com/zone",
}

// nodeIndex finds nodes by provider ID.
type nodeIndex map[string]*corev1.Node

func indexNodes(nodes []corev1.Node) nodeIndex {
	idx := make(nodeIndex, len(nodes))
	for i := range nodes {
		if id := nodes[i].Spec.ProviderID; id != "" {
			idx[id] = &nodes[i]
		}
	}
	return idx
}

// templateNode is the node a group's template is taken from: of its running
// instances' nodes, those Ready, not cordoned, not being deleted and not
// carrying a startup taint (a node still starting may not have its labels
// and taints yet), the oldest (ties: the first name), so successive cycles
// keep the same one. Nil when there is none.
func templateNode(idx nodeIndex, insts []providers.Instance, ignored podfacts.IgnoredTaints) *corev1.Node {
	var best *corev1.Node
	for _, in := range insts {
		if in.State != providers.StateRunning && in.State != "" {
			continue
		}
		n := idx[in.ProviderID]
		if n == nil || !templateCandidate(n, ignored) {
			continue
		}
		if best == nil || older(n, best) {
			best = n
		}
	}
	return best
}

func templateCandidate(n *corev1.Node, ignored podfacts.IgnoredTaints) bool {
	if n.DeletionTimestamp != nil || n.Spec.Unschedulable || !ready(n) {
		return false
	}
	if _, starting := ignored.Starting(n); starting {
		return false
	}
	for i := range n.Spec.Taints {
		if k := n.Spec.Taints[i].Key; k == podfacts.TaintDraining || k == "ToBeDeletedByClusterAutoscaler" {
			return false
		}
	}
	return true
}

func ready(n *corev1.Node) bool {
	for i := range n.Status.Conditions {
		if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func older(a, b *corev1.Node) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// nodeTemplate is n sanitised into a new node of its group: n's labels,
// taints and allocatable, less what names n itself (its hostname, labels
// whose value is its name or instance ID), its zone labels unless the
// group has the one zone n is in (else the provider's stand: the group's
// zones decide a new node's), and the taints of n's moment and the ignored
// ones. Labels the provider's template has and n lacks are left out, as
// cluster-autoscaler leaves them: n shows what a new node really carries.
func nodeTemplate(n *corev1.Node, provider snapshot.Template, zones []string, ignored podfacts.IgnoredTaints) snapshot.Template {
	instance := path.Base(n.Spec.ProviderID) // the ID's last part: aws:///zone/i-0abc, kwok://name
	labels := make(map[string]string, len(n.Labels))
	for k, v := range n.Labels {
		if k == corev1.LabelHostname || v == n.Name || v == instance {
			continue
		}
		labels[k] = v
	}
	if !(len(zones) == 1 && n.Labels[corev1.LabelTopologyZone] == zones[0]) {
		for _, k := range zoneLabels {
			delete(labels, k)
			if v, ok := provider.Labels[k]; ok {
				labels[k] = v
			}
		}
	}
	taints := []corev1.Taint{}
	for _, t := range ignored.Without(n.Spec.Taints) {
		if nodeOnlyTaints[t.Key] {
			continue
		}
		t.TimeAdded = nil // when n got it, not a new node
		taints = append(taints, t)
	}
	return snapshot.Template{Allocatable: n.Status.Allocatable.DeepCopy(), Labels: labels, Taints: taints}
}

// groupTemplate is a group's template and where it came from: a running
// node's when idx (the cycle's nodes) has one (zones: the group's), else the provider's,
// either way less the ignored taints.
func groupTemplate(provider snapshot.Template, zones []string, idx nodeIndex, insts []providers.Instance, ignored podfacts.IgnoredTaints) (snapshot.Template, string) {
	if n := templateNode(idx, insts, ignored); n != nil {
		return nodeTemplate(n, provider, zones, ignored), snapshot.TemplateFromNode(n.Name)
	}
	provider.Taints = ignored.Without(provider.Taints) // a new slice when it drops any
	return provider, snapshot.TemplateFromProvider
}
