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

	"github.com/nodetide/nodetide/pkg/snapshot"
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
//
// The contract every provider keeps (internal/providertest checks it
// against each one, through its real client and the cloud's HTTP double):
// errors are wrapped with the group's name and the call that failed, limits
// wrap the Err* values below with the numbers, and a call that returns an
// error has changed nothing it could have avoided changing (a cloud call
// that timed out may still have taken effect; callers re-read before
// retrying). Secrets never appear in errors. A NodeGroup is safe for
// concurrent use within one process; writers in different processes are
// kept apart by Guarded (a per-group lock) above it.
type NodeGroup interface {
	// Name is the group's name, unique in the cluster's config; stable.
	Name() string
	// Provider names the cloud: "aws", "scaleway", "kamatera" or "kwok".
	Provider() string
	// Bounds are the effective min and max (the provider's, narrowed by
	// the config and a schedule) and what set each, read when the group was
	// listed; no I/O.
	Bounds() Bounds
	// TargetSize is the number of machines the provider is asked to run:
	// running ones plus those it is still creating, not those being deleted.
	TargetSize(ctx context.Context) (int, error)
	// Instances lists the group's machines by provider ID (the form nodes
	// carry in spec.providerID), each with its state; a machine that failed
	// to come up carries Error. The order is unspecified.
	Instances(ctx context.Context) ([]Instance, error)
	// Template describes a new node (allocatable, labels, taints), so pods
	// can be packed onto a group at zero. An error means the group cannot be
	// grown by the planner this cycle; nothing else.
	Template(ctx context.Context) (snapshot.Template, error)
	// IncreaseSize raises the target by delta > 0. A target above Bounds().Max
	// is ErrAboveMax and nothing is asked (see CheckIncrease: no overflow).
	// It returns once the cloud accepted the new target, not when machines
	// run.
	IncreaseSize(ctx context.Context, delta int) error
	// DeleteInstance removes one machine, named by provider ID, and lowers
	// the target by one, so it is not replaced. A target below Bounds().Min is
	// ErrBelowMin, a machine not in the group ErrUnknownInstance; in both
	// cases nothing is removed. Deleting a machine already going is a
	// no-op; deleting one still being created gives it up for good.
	DeleteInstance(ctx context.Context, providerID string) error
	// DecreaseTargetSize lowers the target by -delta (delta < 0) over
	// capacity that has not registered yet; it never removes a running
	// machine: with none to give back it is ErrNothingToDecrease. A delta
	// of zero or more is refused.
	DecreaseTargetSize(ctx context.Context, delta int) error
}

// Bounds are a group's effective size bounds and what set each, and what
// one of its nodes costs: one value, so a wrapper (a narrowing, a price, a
// guard) passes them on by embedding alone.
type Bounds struct {
	Min, Max int
	// MinFrom and MaxFrom are what set Min and Max: the provider (the zero
	// value), the config or a schedule.
	MinFrom, MaxFrom snapshot.BoundSource
	// MinSchedule and MaxSchedule name the schedule ("schedule night")
	// that set Min or Max, when MinFrom or MaxFrom is snapshot.BoundSchedule.
	MinSchedule, MaxSchedule string
	// Price is what one new node of the group costs per hour, and where
	// that figure came from; nil when unknown (never read as zero).
	//
	// A provider that knows its price sets it with its own Source
	// (snapshot.PriceAWSPriceList, PriceScaleway, ...), read when the group
	// is listed like the rest of Bounds: Bounds does no I/O, so a price
	// catalogue is read (and cached) by NodeGroups, and a failed read leaves
	// Price nil rather than failing the listing. The config entry's price
	// (Source snapshot.PriceConfig) replaces the provider's; setup applies
	// it once per group with the narrowings (see Priced).
	Price *snapshot.Price
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
