// Package kwok is a node-group provider whose machines are Node objects that
// kwok (sigs.k8s.io/kwok) keeps Ready: a local stand-in for a cloud, used by
// `make demo` and the integration tests. A group's target is the number of its
// Node objects, so there is never unregistered capacity.
package kwok

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// ProviderName is the provider's name in nodetide.yaml and snapshots.
const ProviderName = "kwok"

// Labels and annotations on the Nodes this provider makes.
const (
	GroupLabel       = "nodetide.io/node-group"
	ManagedLabel     = "type"
	ManagedValue     = "kwok"
	KwokAnnotation   = "kwok.x-k8s.io/node"
	KwokManagedValue = "fake"
	ProviderIDPrefix = "kwok://"
)

// Group is one kwok node group.
type Group struct {
	client   kubernetes.Interface
	name     string
	min, max int
	template snapshot.Template
	// zones, when set, are spread over as an Auto Scaling Group spreads
	// over its Availability Zones (WithZones).
	zones []string

	// mu serialises size changes made through this process; runs in several
	// processes are kept apart by the evaluate lease.
	mu sync.Mutex
	// removed remembers the machines this group deleted, so removing one
	// again is a no-op while an ID it never had is an error, as a cloud
	// remembers terminated machines for a while.
	removed map[string]bool
}

var _ providers.NodeGroup = (*Group)(nil)

// New returns a kwok group.
func New(client kubernetes.Interface, name string, minSize, maxSize int, template snapshot.Template) *Group {
	return &Group{client: client, name: name, min: minSize, max: maxSize, template: template}
}

// WithZones makes g a group over several zones: each new Node goes to the
// zone with the fewest of the group's Nodes, ties broken at random, as an
// Auto Scaling Group balances its Availability Zones. The template's zone
// label, if any, is overridden.
func (g *Group) WithZones(zones []string) *Group {
	g.zones = slices.Clone(zones)
	return g
}

// Zones implements providers.Zoner: the configured zones, or the template's
// zone label.
func (g *Group) Zones() []string {
	if len(g.zones) > 0 {
		return g.zones
	}
	if z := g.template.Labels[corev1.LabelTopologyZone]; z != "" {
		return []string{z}
	}
	return nil
}

// Name implements providers.NodeGroup.
func (g *Group) Name() string { return g.name }

// Provider implements providers.NodeGroup.
func (g *Group) Provider() string { return ProviderName }

// Bounds implements providers.NodeGroup: the configured min and max are
// the group's own.
func (g *Group) Bounds() providers.Bounds { return providers.Bounds{Min: g.min, Max: g.max} }

// Template implements providers.NodeGroup.
func (g *Group) Template(context.Context) (snapshot.Template, error) { return g.template, nil }

func (g *Group) nodes(ctx context.Context) ([]corev1.Node, error) {
	list, err := g.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: GroupLabel + "=" + g.name})
	if err != nil {
		return nil, fmt.Errorf("kwok group %s: list nodes: %w", g.name, err)
	}
	return list.Items, nil
}

// TargetSize implements providers.NodeGroup: the group's Node objects that are
// not being deleted.
func (g *Group) TargetSize(ctx context.Context) (int, error) {
	nodes, err := g.nodes(ctx)
	if err != nil {
		return 0, err
	}
	target, _ := g.FromNodes(nodes)
	return target, nil
}

// Instances implements providers.NodeGroup.
func (g *Group) Instances(ctx context.Context) ([]providers.Instance, error) {
	nodes, err := g.nodes(ctx)
	if err != nil {
		return nil, err
	}
	_, insts := g.FromNodes(nodes)
	return insts, nil
}

// FromNodes is what TargetSize and Instances return, read from nodes (the
// group's own among them, by its label) instead of a list of the group's
// Nodes: an evaluate cycle that has just read every Node passes them, so a
// tick does not read the group's Nodes again (at 5,000 nodes, two lists of
// every Node a tick). IncreaseSize and DeleteInstance still list them, under
// the group's lock: their bounds checks must see what other writers did
// since that read.
func (g *Group) FromNodes(nodes []corev1.Node) (target int, instances []providers.Instance) {
	for i := range nodes {
		node := &nodes[i]
		if node.Labels[GroupLabel] != g.name {
			continue
		}
		st := providers.StateCreating
		switch {
		case node.DeletionTimestamp != nil:
			st = providers.StateDeleting
		case isReady(node):
			st = providers.StateRunning
		}
		if st != providers.StateDeleting {
			target++
		}
		instances = append(instances, providers.Instance{ProviderID: node.Spec.ProviderID, State: st})
	}
	if instances == nil {
		instances = []providers.Instance{}
	}
	return target, instances
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// IncreaseSize implements providers.NodeGroup: it creates delta Nodes.
func (g *Group) IncreaseSize(ctx context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("kwok group %s: increase must be positive, got %d", g.name, delta)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	nodes, err := g.nodes(ctx)
	if err != nil {
		return err
	}
	size := 0
	inZone := map[string]int{}
	for _, n := range nodes {
		if n.DeletionTimestamp == nil {
			size++
			inZone[n.Labels[corev1.LabelTopologyZone]]++
		}
	}
	if err := providers.CheckIncrease("size", size, delta, g.max); err != nil {
		return fmt.Errorf("kwok group %s: %w", g.name, err)
	}
	for range delta {
		node, err := g.newNode()
		if err != nil {
			return err
		}
		if len(g.zones) > 0 {
			z := fewest(g.zones, inZone)
			node.Labels[corev1.LabelTopologyZone] = z
			inZone[z]++
		}
		if _, err := g.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kwok group %s: create node %s: %w", g.name, node.Name, err)
		}
	}
	return nil
}

// fewest picks the zone with the fewest nodes, at random among equals: the
// planner cannot know in advance which one a new node lands in.
func fewest(zones []string, inZone map[string]int) string {
	var best []string
	for _, z := range zones {
		switch {
		case len(best) == 0 || inZone[z] < inZone[best[0]]:
			best = []string{z}
		case inZone[z] == inZone[best[0]]:
			best = append(best, z)
		}
	}
	return best[mrand.IntN(len(best))]
}

// NodeObject is the Node a kwok group creates, with the given name.
func NodeObject(group, name string, t snapshot.Template) *corev1.Node {
	labels := map[string]string{
		GroupLabel:                group,
		ManagedLabel:              ManagedValue,
		corev1.LabelHostname:      name,
		corev1.LabelOSStable:      "linux",
		corev1.LabelArchStable:    "amd64",
		"node.kubernetes.io/role": "agent",
	}
	for k, v := range t.Labels {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{KwokAnnotation: KwokManagedValue},
		},
		Spec: corev1.NodeSpec{
			ProviderID: ProviderIDPrefix + name,
			Taints:     append([]corev1.Taint(nil), t.Taints...),
		},
		Status: corev1.NodeStatus{
			Capacity:    t.Allocatable.DeepCopy(),
			Allocatable: t.Allocatable.DeepCopy(),
		},
	}
}

func (g *Group) newNode() (*corev1.Node, error) {
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		return nil, fmt.Errorf("kwok group %s: node name: %w", g.name, err)
	}
	return NodeObject(g.name, g.name+"-"+hex.EncodeToString(suffix), g.template), nil
}

// DeleteInstance implements providers.NodeGroup: it deletes the Node.
func (g *Group) DeleteInstance(ctx context.Context, providerID string) error {
	name, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok || name == "" {
		return fmt.Errorf("kwok group %s: %q is not a kwok provider ID: %w", g.name, providerID, providers.ErrUnknownInstance)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	node, err := g.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if g.removed[name] {
			return nil
		}
		return fmt.Errorf("kwok group %s: node %s: %w", g.name, name, providers.ErrUnknownInstance)
	}
	if err != nil {
		return fmt.Errorf("kwok group %s: get node %s: %w", g.name, name, err)
	}
	if node.Labels[GroupLabel] != g.name {
		return fmt.Errorf("kwok group %s: node %s: %w", g.name, name, providers.ErrUnknownInstance)
	}
	if node.DeletionTimestamp != nil {
		return nil
	}
	size, err := g.TargetSize(ctx)
	if err != nil {
		return err
	}
	if size-1 < g.min {
		return fmt.Errorf("kwok group %s: size %d - 1: %w (%d)", g.name, size, providers.ErrBelowMin, g.min)
	}
	err = g.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kwok group %s: delete node %s: %w", g.name, name, err)
	}
	if g.removed == nil {
		g.removed = map[string]bool{}
	}
	g.removed[name] = true
	return nil
}

// DecreaseTargetSize implements providers.NodeGroup. Every kwok machine is a
// registered Node, so there is never unregistered capacity to give back.
func (g *Group) DecreaseTargetSize(_ context.Context, delta int) error {
	return fmt.Errorf("kwok group %s: decrease by %d: %w", g.name, -delta, providers.ErrNothingToDecrease)
}
