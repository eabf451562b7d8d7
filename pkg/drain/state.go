// Package drain removes one node without costing availability. Each Task
// step of the drain state machine (functions/drain/statemachine.asl.json) is
// an entry of the step table (run.go) over the execution's typed State:
// Prepare, ReleaseHook, Cordon, Surge, Evict, ForceDelete, WaitReplacements,
// Terminate, RemoveNode, Finish and Rollback. The runner reads the drain
// record once and checks it, then the step acts on what it decides from it.
// Every step is idempotent, since Step Functions may run one again after a
// timeout; the durable facts (which node is being drained, the replica counts
// a surge changed) live in the drain record, written before the cluster is
// changed.
package drain

import (
	"errors"
	"fmt"
	"time"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/state"
)

// TaintKey is the NoSchedule taint a draining node carries.
const TaintKey = podfacts.TaintDraining

// DeletionCostAnnotation steers which pod a ReplicaSet removes when scaled
// down: the lowest cost goes first.
const DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// Policies at the deadline.
const (
	PolicyAbort = "abort"
	PolicyForce = "force"
)

// State is the execution's state: the state machine's JSON document, passed
// to every step and replaced by what the step returns.
type State struct {
	Node       string    `json:"node"`
	NodeGroup  string    `json:"nodeGroup,omitempty"`
	ProviderID string    `json:"providerID,omitempty"`
	DrainID    string    `json:"drainId"`
	Deadline   time.Time `json:"deadline"`
	Policy     string    `json:"policy"`
	Surge      bool      `json:"surge"`
	BelowMin   bool      `json:"belowMin,omitempty"`
	// Force drains a node that must not be disrupted (a bare pod, a
	// do-not-disrupt annotation, ...), which Prepare otherwise refuses.
	Force  bool   `json:"force,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Interruption is set when the cloud takes the machine (see
	// state.Interruption); the later steps read it from the drain record.
	Interruption *state.Interruption `json:"interruption,omitempty"`
	// HeartbeatAt is when the lifecycle hook holding the machine was last
	// told the drain is still going.
	HeartbeatAt time.Time `json:"heartbeatAt,omitzero"`

	// Progress, set by the steps; the Choice states read the booleans.
	SurgeDone    bool       `json:"surgeDone"`
	Evicted      bool       `json:"evicted"`
	Replaced     bool       `json:"replaced"`
	PastDeadline bool       `json:"pastDeadline"`
	Remaining    []string   `json:"remaining,omitempty"`
	Workloads    []Workload `json:"workloads,omitempty"`
	Terminated   bool       `json:"terminated,omitempty"`

	// Error is what a Catch put there (ResultPath $.error).
	Error *ErrorInfo `json:"error,omitempty"`
}

// Workload is a controller whose pods left the node; the drain waits until
// it is back at its desired ready replicas.
type Workload struct {
	Kind      string `json:"kind"` // Deployment, StatefulSet, ReplicaSet
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (w Workload) String() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

// ErrorInfo is Step Functions' error object.
type ErrorInfo struct {
	Error string `json:"Error"`
	Cause string `json:"Cause"`
}

// Validate checks what every step needs; Prepare fills in the rest.
func (s *State) Validate() error {
	var errs []error
	if s.Node == "" {
		errs = append(errs, errors.New(`"node" is required`))
	}
	if s.DrainID == "" {
		errs = append(errs, errors.New(`"drainId" is required`))
	}
	if s.Deadline.IsZero() {
		errs = append(errs, errors.New(`"deadline" is required`))
	}
	switch s.Policy {
	case PolicyAbort, PolicyForce:
	default:
		errs = append(errs, fmt.Errorf(`"policy" must be abort or force, got %q`, s.Policy))
	}
	return errors.Join(errs...)
}

// Error names: the state machine retries Transient and catches the rest.
const (
	ErrNameTransient       = "Transient"
	ErrNameInvalidInput    = "InvalidInput"
	ErrNameNodeNotFound    = "NodeNotFound"
	ErrNameNotManaged      = "NotManaged"
	ErrNameAlreadyDraining = "AlreadyDraining"
	ErrNameBelowMinSize    = "BelowMinSize"
	ErrNameNotDisruptable  = "NotDisruptable"
	ErrNameForbidden       = "Forbidden"
	ErrNameFailed          = "StepFailed"
)

// StepError is a step failure with the name the state machine matches on.
type StepError struct {
	Name string
	Err  error
}

func (e *StepError) Error() string { return e.Name + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

func stepErr(name string, format string, args ...any) error {
	return &StepError{Name: name, Err: fmt.Errorf(format, args...)}
}
