package scaleway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	k8s "github.com/scaleway/scaleway-sdk-go/api/k8s/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Group is one Kapsule pool. Its bounds are those the pool had when
// NodeGroups listed it (narrowed by Options); sizes and nodes are read fresh
// on each call.
type Group struct {
	p        *Provider
	name     string
	pool     k8s.Pool
	min, max int
	// minFrom and maxFrom: the config where its bound replaced the pool's.
	minFrom, maxFrom snapshot.BoundSource
}

var _ providers.NodeGroup = (*Group)(nil)

// Name implements providers.NodeGroup.
func (g *Group) Name() string { return g.name }

// Provider implements providers.NodeGroup.
func (g *Group) Provider() string { return ProviderName }

// Bounds implements providers.NodeGroup: the pool's min_size and max_size,
// each replaced by the config's when it gives one (then it set that bound).
func (g *Group) Bounds() providers.Bounds {
	return providers.Bounds{Min: g.min, Max: g.max, MinFrom: g.minFrom, MaxFrom: g.maxFrom}
}

// PoolID is the Kapsule pool's ID.
func (g *Group) PoolID() string { return g.pool.ID }

// PoolName is the Kapsule pool's name (the group's name unless Options.Name).
func (g *Group) PoolName() string { return g.pool.Name }

// TargetSize implements providers.NodeGroup: the pool's size.
func (g *Group) TargetSize(ctx context.Context) (int, error) {
	pool, err := g.p.getPool(ctx, g.pool.Name, g.pool.ID)
	if err != nil {
		return 0, err
	}
	return int(pool.Size), nil
}

// Instances implements providers.NodeGroup: the pool's nodes, by the provider
// ID the API gives them. A node whose Instance does not exist yet has no
// provider ID; it is left out (TargetSize still counts it).
func (g *Group) Instances(ctx context.Context) ([]providers.Instance, error) {
	nodes, err := g.p.listNodes(ctx, g.pool.Name, g.pool.ID)
	if err != nil {
		return nil, err
	}
	out := make([]providers.Instance, 0, len(nodes))
	for _, n := range nodes {
		if n.ProviderID == "" {
			continue
		}
		st, msg := instanceState(n)
		out = append(out, providers.Instance{ProviderID: n.ProviderID, State: st, Error: msg})
	}
	return out, nil
}

// instanceState maps a Kapsule node status:
//
//	creating, starting, registering, not_ready -> creating (no usable node yet)
//	creation_error                             -> creating, with Error
//	ready                                      -> running
//	rebooting, upgrading                       -> running: a registered node
//	                                              that stays in the pool
//	locked                                     -> running, with Error (Scaleway
//	                                              locked the Instance)
//	deleting, deleted                          -> deleting
//	anything else                              -> creating, with Error
func instanceState(n *k8s.Node) (providers.InstanceState, string) {
	detail := ""
	if n.ErrorMessage != nil && *n.ErrorMessage != "" {
		detail = ": " + *n.ErrorMessage
	}
	switch n.Status {
	case k8s.NodeStatusCreating, k8s.NodeStatusStarting, k8s.NodeStatusRegistering, k8s.NodeStatusNotReady:
		return providers.StateCreating, ""
	case k8s.NodeStatusCreationError:
		return providers.StateCreating, fmt.Sprintf("node %s failed to come up (creation_error%s)", n.Name, detail)
	case k8s.NodeStatusReady, k8s.NodeStatusRebooting, k8s.NodeStatusUpgrading:
		return providers.StateRunning, ""
	case k8s.NodeStatusLocked:
		return providers.StateRunning, fmt.Sprintf("node %s is locked by Scaleway%s", n.Name, detail)
	case k8s.NodeStatusDeleting, k8s.NodeStatusDeleted:
		return providers.StateDeleting, ""
	default:
		return providers.StateCreating, fmt.Sprintf("node %s has status %q%s", n.Name, n.Status, detail)
	}
}

// unregistered tells nodes that never became usable: a size decrease may
// give them back.
func unregistered(st k8s.NodeStatus) bool {
	switch st {
	case k8s.NodeStatusCreating, k8s.NodeStatusStarting, k8s.NodeStatusRegistering, k8s.NodeStatusCreationError:
		return true
	}
	return false
}

func gone(st k8s.NodeStatus) bool {
	return st == k8s.NodeStatusDeleting || st == k8s.NodeStatusDeleted
}

// IncreaseSize implements providers.NodeGroup: it raises the pool's size by
// delta, within MaxSize.
func (g *Group) IncreaseSize(ctx context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("scaleway pool %s: increase must be positive, got %d", g.pool.Name, delta)
	}
	unlock, err := g.p.lock(ctx, g.pool.ID)
	if err != nil {
		return fmt.Errorf("scaleway pool %s: increase by %d: %w", g.pool.Name, delta, err)
	}
	defer unlock()
	pool, err := g.p.getPool(ctx, g.pool.Name, g.pool.ID)
	if err != nil {
		return err
	}
	size := int(pool.Size)
	if err := providers.CheckIncrease("size", size, delta, g.max); err != nil {
		return fmt.Errorf("scaleway pool %s: %w", g.pool.Name, err)
	}
	got, err := g.p.setSize(ctx, g.pool.Name, g.pool.ID, size+delta)
	if err != nil {
		return err
	}
	if int(got.Size) != size+delta {
		return fmt.Errorf("scaleway pool %s: asked for size %d, the pool reports %d", g.pool.Name, size+delta, got.Size)
	}
	return nil
}

// DeleteInstance implements providers.NodeGroup: it deletes the node, which
// lowers the pool's size by one. providerID may be the current form
// scaleway://instance/<zone>/<uuid> or the legacy scaleway://<uuid>. A node
// already deleting is left alone.
func (g *Group) DeleteInstance(ctx context.Context, providerID string) error {
	want, ok := instanceUUID(providerID)
	if !ok {
		return fmt.Errorf("scaleway pool %s: %q is not a Scaleway provider ID: %w", g.pool.Name, providerID, providers.ErrUnknownInstance)
	}
	unlock, err := g.p.lock(ctx, g.pool.ID)
	if err != nil {
		return fmt.Errorf("scaleway pool %s: delete %s: %w", g.pool.Name, providerID, err)
	}
	defer unlock()
	nodes, err := g.p.listNodes(ctx, g.pool.Name, g.pool.ID)
	if err != nil {
		return err
	}
	var node *k8s.Node
	for _, n := range nodes {
		if id, ok := instanceUUID(n.ProviderID); ok && strings.EqualFold(id, want) {
			node = n
			break
		}
	}
	if node == nil {
		return fmt.Errorf("scaleway pool %s: %s: %w", g.pool.Name, providerID, providers.ErrUnknownInstance)
	}
	if gone(node.Status) {
		return nil
	}
	pool, err := g.p.getPool(ctx, g.pool.Name, g.pool.ID)
	if err != nil {
		return err
	}
	if int(pool.Size)-1 < g.min {
		return fmt.Errorf("scaleway pool %s: delete %s: size %d - 1: %w (%d)", g.pool.Name, providerID, pool.Size, providers.ErrBelowMin, g.min)
	}
	err = g.p.deleteNode(ctx, g.pool.Name, node)
	// A retry after a lost answer finds the node deleting or gone: done.
	var transientState *scw.TransientStateError
	if errors.As(err, &transientState) && gone(k8s.NodeStatus(transientState.CurrentState)) {
		return nil
	}
	var notFound *scw.ResourceNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	return err
}

// instanceUUID is the Instance's UUID in a Scaleway provider ID, the last
// path element of scaleway://instance/<zone>/<uuid> or scaleway://<uuid>.
func instanceUUID(providerID string) (string, bool) {
	rest, ok := strings.CutPrefix(providerID, "scaleway://")
	if !ok || rest == "" {
		return "", false
	}
	parts := strings.Split(rest, "/")
	switch len(parts) {
	case 1, 3:
		id := parts[len(parts)-1]
		return id, id != ""
	}
	return "", false
}

// DecreaseTargetSize implements providers.NodeGroup: it lowers the pool's
// size by -delta, as long as that many nodes were asked for and never came
// up (still creating, or failed). Kapsule picks the nodes a size decrease
// removes and does not document how; nodetide only asks when the decrease is
// covered by nodes that are not ready.
func (g *Group) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("scaleway pool %s: decrease must be negative, got %d", g.pool.Name, delta)
	}
	unlock, err := g.p.lock(ctx, g.pool.ID)
	if err != nil {
		return fmt.Errorf("scaleway pool %s: decrease by %d: %w", g.pool.Name, -delta, err)
	}
	defer unlock()
	pool, err := g.p.getPool(ctx, g.pool.Name, g.pool.ID)
	if err != nil {
		return err
	}
	nodes, err := g.p.listNodes(ctx, g.pool.Name, g.pool.ID)
	if err != nil {
		return err
	}
	live, pending := 0, 0
	for _, n := range nodes {
		if gone(n.Status) {
			continue
		}
		live++
		if unregistered(n.Status) {
			pending++
		}
	}
	size := int(pool.Size)
	// Nodes asked for but not listed yet count as pending too.
	pending += max(size-live, 0)
	if -delta > pending {
		return fmt.Errorf("scaleway pool %s: decrease by %d with %d node(s) not up: %w", g.pool.Name, -delta, pending, providers.ErrNothingToDecrease)
	}
	if size+delta < g.min {
		return fmt.Errorf("scaleway pool %s: size %d - %d: %w (%d)", g.pool.Name, size, -delta, providers.ErrBelowMin, g.min)
	}
	got, err := g.p.setSize(ctx, g.pool.Name, g.pool.ID, size+delta)
	if err != nil {
		return err
	}
	if int(got.Size) != size+delta {
		return fmt.Errorf("scaleway pool %s: asked for size %d, the pool reports %d", g.pool.Name, size+delta, got.Size)
	}
	return nil
}

// Template implements providers.NodeGroup: a node of the pool's node type
// (cpu, memory and GPUs from the Instance catalogue less a system reserve;
// labels and taints from the pool), else Options.NodeTemplate's answer.
func (g *Group) Template(ctx context.Context) (snapshot.Template, error) {
	t, err := g.p.typeTemplate(ctx, &g.pool)
	if err == nil {
		return t, nil
	}
	hook := g.p.opts.NodeTemplate
	if hook == nil {
		return snapshot.Template{}, err
	}
	ht, herr := hook(ctx, g.pool.Name)
	switch {
	case herr != nil:
		return snapshot.Template{}, fmt.Errorf("%w; from a registered node: %w", err, herr)
	case ht == nil:
		return snapshot.Template{}, fmt.Errorf("%w; and the pool has no registered node to copy", err)
	}
	return *ht, nil
}
