package drain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/state"
)

// SFNAPI is the part of the Step Functions client that starts drains (and
// recovers them).
type SFNAPI interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
	ExecutionAPI
}

// Starter starts drain executions of the state machine.
type Starter struct {
	SFN             SFNAPI
	StateMachineArn string
	Store           state.DrainStore
	Timeout         time.Duration
	Policy          string
	Surge           bool
	Now             func() time.Time
}

// Execution is a started (or already running) drain.
type Execution struct {
	ExecutionArn string `json:"executionArn"`
	Name         string `json:"name"`
	Node         string `json:"node"`
	// AlreadyStarted is set when an identical request had started it.
	AlreadyStarted bool `json:"alreadyStarted,omitempty"`
}

func (st *Starter) now() time.Time {
	if st.Now != nil {
		return st.Now().UTC()
	}
	return time.Now().UTC()
}

// StartDrain starts the removal of a node the plan chose; the execution is
// named from the node and the time it became unneeded, so a retried evaluate
// run cannot start a second drain of it.
func (st *Starter) StartDrain(ctx context.Context, d planner.ScaleDown, unneededSince time.Time) error {
	name := executionName("scaledown", d.Node, fmt.Sprint(unneededSince.Unix()))
	_, err := st.start(ctx, name, State{
		Node: d.Node, NodeGroup: d.NodeGroup, DrainID: name, Policy: st.Policy, Surge: st.Surge,
		Deadline: st.now().Add(st.Timeout), Reason: d.Reason,
	})
	return err
}

// ShutdownRequest is a graceful removal asked for by hand.
type ShutdownRequest struct {
	Node     string
	Policy   string
	Timeout  time.Duration
	BelowMin bool
	// Force drains a node that must not be disrupted.
	Force bool
}

// Shutdown starts the graceful removal of one node. The execution is named
// from the node, the request and how many drains of the node have ended, so
// a duplicate request returns the running execution while a later one, after
// it ended, starts anew.
func (st *Starter) Shutdown(ctx context.Context, r ShutdownRequest) (Execution, error) {
	if r.Policy == "" {
		r.Policy = st.Policy
	}
	if r.Timeout == 0 {
		r.Timeout = st.Timeout
	}
	_, ended, err := st.Store.NodeDrain(ctx, r.Node)
	if err != nil {
		return Execution{}, err
	}
	req := fmt.Sprintf("%s|%s|%t", r.Policy, r.Timeout, r.BelowMin)
	if r.Force { // only then, so unforced requests keep their names
		req += "|force"
	}
	name := executionName("shutdown", r.Node, shortHash(req)+"-"+fmt.Sprint(ended))
	return st.start(ctx, name, State{
		Node: r.Node, DrainID: name, Policy: r.Policy, Surge: st.Surge, BelowMin: r.BelowMin, Force: r.Force,
		Deadline: st.now().Add(r.Timeout), Reason: "shutdown requested",
	})
}

// maxStartAttempts bounds the names tried after ended executions; starting
// at it returns an existing execution of the name whatever its status.
const maxStartAttempts = 3

func (st *Starter) start(ctx context.Context, name string, s State) (Execution, error) {
	return st.startAttempt(ctx, name, s, 0)
}

func (st *Starter) startAttempt(ctx context.Context, name string, s State, attempt int) (Execution, error) {
	if err := s.Validate(); err != nil {
		return Execution{}, fmt.Errorf("drain of node %s: %w", s.Node, err)
	}
	input, err := json.Marshal(s)
	if err != nil {
		return Execution{}, fmt.Errorf("drain of node %s: %w", s.Node, err)
	}
	out, err := st.SFN.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(st.StateMachineArn), Name: aws.String(name), Input: aws.String(string(input)),
	})
	var exists *sfntypes.ExecutionAlreadyExists
	if errors.As(err, &exists) {
		// Same name, other input (its deadline differs): the drain this
		// request names was started already.
		arn := executionArn(st.StateMachineArn, name)
		prev, derr := st.SFN.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
		if derr != nil {
			return Execution{}, fmt.Errorf("drain of node %s: execution %s exists but cannot be read: %w", s.Node, name, derr)
		}
		if prev.Status == sfntypes.ExecutionStatusRunning || attempt >= maxStartAttempts {
			return Execution{ExecutionArn: arn, Name: name, Node: s.Node, AlreadyStarted: true}, nil
		}
		// It ended without beginning a drain (Prepare refused it: the
		// node's count of ended drains, which names the next one, did not
		// move). A request now is a new one: named from the old one's end,
		// so identical requests racing still start one execution.
		next := retryName(name, aws.ToTime(prev.StopDate).UTC().Format(time.RFC3339Nano))
		s.DrainID = next
		return st.startAttempt(ctx, next, s, attempt+1)
	}
	if err != nil {
		return Execution{}, fmt.Errorf("start drain of node %s: %w", s.Node, err)
	}
	return Execution{ExecutionArn: aws.ToString(out.ExecutionArn), Name: name, Node: s.Node}, nil
}

// executionArn derives an execution's ARN from its state machine's.
func executionArn(stateMachineArn, name string) string {
	return strings.Replace(stateMachineArn, ":stateMachine:", ":execution:", 1) + ":" + name
}

// executionName makes a valid, deterministic execution name (at most 80 of
// [A-Za-z0-9-_]); long or unusual node names keep a hash of the original.
func executionName(kind, node, suffix string) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, node)
	name := kind + "-" + clean + "-" + suffix
	if len(name) <= 80 && clean == node {
		return name
	}
	keep := 80 - len(kind) - len(suffix) - 3 - 9
	if keep > len(clean) {
		keep = len(clean)
	}
	return kind + "-" + clean[:keep] + "-" + shortHash(node) + "-" + suffix
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// retryName names the execution that follows an ended one of the same
// request, within the 80 characters Step Functions allows.
func retryName(name, after string) string {
	suffix := "-" + shortHash(after)
	if len(name)+len(suffix) > 80 {
		name = name[:80-len(suffix)]
	}
	return name + suffix
}
