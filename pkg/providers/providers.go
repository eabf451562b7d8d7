// Package providers defines the one interface every cloud's node groups
// implement (close to cluster-autoscaler's NodeGroup). Each cloud lives in a
// folder of its own; nodes are matched to groups only through
// node.spec.providerID.
package providers

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/nodetide/nodetide/pkg/planner"
)

// InstanceState is where a machine is in its life.
type InstanceState string

// Instance states.
const (
	StateCreating InstanceState = "creating"
	StateRunning  InstanceState = "running"
	StateDeleting InstanceState = "deleting"
)

// Instance is one machine of a group.
type Instance struct {
	ProviderID string        `json:"providerID"`
	State      InstanceState `json:"state"`
	// Error is set when the provider reports the machine failed to come up.
	Error string `json:"error,omitempty"`
}

// NodeGroup is a set of identical machines whose size the provider controls.
type NodeGroup interface {
	Name() string
	Provider() string
	MinSize() int
	MaxSize() int
	TargetSize(ctx context.Context) (int, error)
	Instances(ctx context.Context) ([]Instance, error)
	// Template describes a new node, so a group can grow from zero.
	Template(ctx context.Context) (planner.Template, error)
	// IncreaseSize raises the target by delta; above MaxSize is ErrAboveMax.
	IncreaseSize(ctx context.Context, delta int) error
	// DeleteInstance removes one machine and lowers the target by one; below
	// MinSize is ErrBelowMin.
	DeleteInstance(ctx context.Context, providerID string) error
	// DecreaseTargetSize lowers the target by delta (negative) over capacity
	// that has not registered yet; it never removes a running machine.
	DecreaseTargetSize(ctx context.Context, delta int) error
}

// Provider lists the node groups one config entry manages (a discovery-based
// entry can yield several).
type Provider interface {
	NodeGroups(ctx context.Context) ([]NodeGroup, error)
}

// CheckIncrease is what every IncreaseSize checks before changing anything:
// delta is positive and size+delta stays within max. It compares delta with
// max-size: size+delta would wrap for a huge delta to a small (even
// negative) number that passes a plain comparison and shrinks the group.
// The error names what (e.g. "size") and wraps ErrAboveMax above max.
func CheckIncrease(what string, size, delta, max int) error {
	if delta <= 0 {
		return fmt.Errorf("increase must be positive, got %d", delta)
	}
	if delta <= max-size {
		return nil
	}
	if size >= 0 && delta <= math.MaxInt-size {
		return fmt.Errorf("%s %d + %d = %d: %w (%d)", what, size, delta, size+delta, ErrAboveMax, max)
	}
	return fmt.Errorf("%s %d + %d: %w (%d)", what, size, delta, ErrAboveMax, max)
}

// Errors every provider returns (wrapped, with the numbers) so callers can
// tell a limit from a failure.
var (
	ErrAboveMax          = errors.New("above the node group's maximum size")
	ErrBelowMin          = errors.New("below the node group's minimum size")
	ErrUnknownInstance   = errors.New("instance is not in the node group")
	ErrNothingToDecrease = errors.New("no unregistered capacity to decrease")
)
