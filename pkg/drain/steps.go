package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// Store is what the steps keep in the state table: the drain records and
// the group locks that make a drain's claim against the minimum atomic.
type Store interface {
	state.DrainStore
	state.Leaser
}

// Steps runs the drain steps against a cluster, its node groups and the
// drain records.
type Steps struct {
	Client kubernetes.Interface
	Groups func(ctx context.Context) ([]providers.NodeGroup, error)
	Store  Store
	Now    func() time.Time
	Log    *slog.Logger
	// Lifecycle completes and heartbeats Auto Scaling lifecycle actions
	// (drains of machines an ASG terminates); nil without AWS groups.
	Lifecycle LifecycleAPI
	// Machines asks EC2 whether what an event or a drain record says of a
	// machine is so; nil without AWS groups.
	Machines InstancesAPI
	// Hook is this deployment's termination lifecycle hook
	// (config.LifecycleHookName); a lifecycle action of another hook is
	// not acted on. Empty: any hook of a managed group.
	Hook string
	// HeartbeatEvery: see DefaultHeartbeatEvery (used when zero).
	HeartbeatEvery time.Duration
	// StepWait is how long a step keeps checking for progress it can expect
	// within seconds (an evicted pod going away, a replacement turning
	// Ready) before handing back to the state machine's Wait loop; it saves
	// a 10 s round in most drains. Zero means 5 s; negative, no waiting.
	StepWait time.Duration
	// Events, when set, records DrainStarted, ScaleDown, DrainRolledBack and
	// DrainFailed on the node; a failed write never fails a step.
	Events *kubeevents.Recorder
}

// nodeEvent records one event on a drain's node.
func (d *Steps) nodeEvent(ctx context.Context, node, typ, reason, msg string) {
	d.Events.Record(ctx, kubeevents.Event{Object: kubeevents.Node(node, ""), Type: typ, Reason: reason, Message: msg})
}

func (d *Steps) stepWait() time.Duration {
	switch {
	case d.StepWait < 0:
		return 0
	case d.StepWait == 0:
		return 5 * time.Second
	}
	return d.StepWait
}

// settle calls once until it reports done or the step wait runs out.
func (d *Steps) settle(ctx context.Context, once func() (done bool, err error)) error {
	until := time.Now().Add(d.stepWait())
	for {
		done, err := once()
		if err != nil || done || !time.Now().Before(until) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (d *Steps) now() time.Time {
	if d.Now != nil {
		return d.Now().UTC()
	}
	return time.Now().UTC()
}

func (d *Steps) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

// ErrorName is the name the state machine sees for err: Transient for what a
// retry can fix, a specific name for what it cannot.
func ErrorName(err error) string {
	var se *StepError
	var netErr net.Error
	switch {
	case errors.As(err, &se):
		return se.Name
	case errors.Is(err, state.ErrDraining):
		return ErrNameAlreadyDraining
	case errors.Is(err, providers.ErrBelowMin):
		return ErrNameBelowMinSize
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return ErrNameForbidden
	case apierrors.IsConflict(err), apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err),
		apierrors.IsTimeout(err), apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsUnexpectedServerError(err), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr), cloudTransient(err):
		return ErrNameTransient
	}
	return ErrNameFailed
}

// cloudTransient reports an AWS API error (DynamoDB, a provider's cloud)
// that a later try can get past: throttling, or the service failing.
func cloudTransient(err error) bool {
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && (status.HTTPStatusCode() >= 500 || status.HTTPStatusCode() == 429) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ThrottlingException", "Throttling", "ProvisionedThroughputExceededException",
			"RequestLimitExceeded", "TooManyRequestsException", "InternalServerError", "ServiceUnavailable":
			return true
		}
	}
	return false
}

func (d *Steps) groupOf(ctx context.Context, providerID string) (providers.NodeGroup, error) {
	if providerID == "" {
		return nil, nil
	}
	groups, err := d.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("node groups: %w", err)
	}
	for _, g := range groups {
		insts, err := g.Instances(ctx)
		if err != nil {
			return nil, fmt.Errorf("node group %s: instances: %w", g.Name(), err)
		}
		for _, in := range insts {
			if in.ProviderID == providerID {
				return g, nil
			}
		}
	}
	return nil, nil
}

func (d *Steps) group(ctx context.Context, name string) (providers.NodeGroup, error) {
	groups, err := d.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("node groups: %w", err)
	}
	for _, g := range groups {
		if g.Name() == name {
			return g, nil
		}
	}
	return nil, stepErr(ErrNameNotManaged, "node group %s is not managed", name)
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// podsOn lists the pods bound to a node.
func (d *Steps) podsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := d.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	return list.Items, nil
}

// movable reports whether a drain moves the pod: DaemonSet and mirror pods
// stay with the node, terminal pods are done.
func movable(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if podfacts.IsMirrorPod(p) {
		return false
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
		return false
	}
	return true
}

// rejected tells a Prepare refusal (the drain never began, nothing
// changed) from a failure.
func rejected(err error) bool {
	switch ErrorName(err) {
	case ErrNameNodeNotFound, ErrNameNotManaged, ErrNameAlreadyDraining, ErrNameBelowMinSize, ErrNameNotDisruptable, ErrNameForbidden:
		return true
	}
	return false
}
