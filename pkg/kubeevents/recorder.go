// Package kubeevents writes nodetide's Kubernetes Events (core/v1, source
// and reporting controller "nodetide"), the ones cluster-autoscaler users
// look for with `kubectl describe pod|node`: TriggeredScaleUp and
// NotTriggerScaleUp on pods, ScaleDown and the Drain* reasons on nodes.
//
// Events are a courtesy, never part of a decision: a write that fails is
// logged and dropped, and no caller ever sees an error. Writes are
// synchronous, each bounded by a short timeout, so nothing is left in
// flight when a Lambda invocation ends.
//
// An event's name is derived from its object, reason and message, so the
// same event repeated is one object whose count and lastTimestamp are
// patched (what `kubectl describe` shows as "x3 over 10m"), not a new
// object per cycle.
package kubeevents

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Component is the events' source and reporting controller.
const Component = "nodetide"

// Reasons nodetide records.
const (
	ReasonTriggeredScaleUp  = "TriggeredScaleUp"
	ReasonNotTriggerScaleUp = "NotTriggerScaleUp"
	ReasonScaleDown         = "ScaleDown"
	ReasonDrainStarted      = "DrainStarted"
	ReasonDrainRolledBack   = "DrainRolledBack"
	ReasonDrainFailed       = "DrainFailed"
	// ReasonSurgeLeft: a drain left a Deployment's replica count as it
	// found it, not surged or not taken back (someone else sets it).
	ReasonSurgeLeft = "SurgeLeft"
	// ReasonScaleDownBlocked: an under-used node scale-down would remove
	// is kept by a pod, a budget or pods that fit nowhere else.
	ReasonScaleDownBlocked = "ScaleDownBlocked"
)

// maxMessage is events.k8s.io's limit on an event's note (in bytes); core/v1
// takes longer messages, but they read the same in both APIs only up to it.
const maxMessage = 1024

// Object is what an event is about.
type Object struct {
	Kind      string // Pod, Node or Deployment
	Namespace string // empty for a Node
	Name      string
	UID       types.UID
	// APIVersion is the object's group and version; empty for v1.
	APIVersion string
}

// Pod names a pod.
func Pod(namespace, name string, uid types.UID) Object {
	return Object{Kind: "Pod", Namespace: namespace, Name: name, UID: uid}
}

// Deployment names a Deployment.
func Deployment(namespace, name string, uid types.UID) Object {
	return Object{Kind: "Deployment", Namespace: namespace, Name: name, UID: uid, APIVersion: "apps/v1"}
}

// Node names a node; the UID is optional (kubectl matches node events by
// name).
func Node(name string, uid types.UID) Object { return Object{Kind: "Node", Name: name, UID: uid} }

// Event is one event to record.
type Event struct {
	Object  Object
	Type    string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason  string
	Message string
}

// Recorder writes events. A nil Recorder records nothing.
type Recorder struct {
	Client kubernetes.Interface
	// Instance is the reporting instance (the function, the CLI).
	Instance string
	Log      *slog.Logger
	Now      func() time.Time
	// Timeout bounds one write; zero means 5 s.
	Timeout time.Duration

	mu     sync.Mutex
	counts map[string]int32 // event name → count written, to patch it
}

func (r *Recorder) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

func (r *Recorder) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

// Record writes one event; a failure is logged, never returned.
func (r *Recorder) Record(ctx context.Context, ev Event) {
	if r == nil || r.Client == nil {
		return
	}
	if err := r.write(ctx, ev); err != nil {
		r.log().Warn("kubernetes event not recorded", "reason", ev.Reason, "kind", ev.Object.Kind,
			"namespace", ev.Object.Namespace, "name", ev.Object.Name, "error", err.Error())
	}
}

// RecordAll writes events in order and reports how many were written. A
// refusal that would refuse every other write too (Forbidden, the context
// ending) stops the batch; failures are logged once, with the first error.
func (r *Recorder) RecordAll(ctx context.Context, evs []Event) int {
	if r == nil || r.Client == nil || len(evs) == 0 {
		return 0
	}
	written, failed := 0, 0
	var first error
	for _, ev := range evs {
		err := r.write(ctx, ev)
		if err == nil {
			written++
			continue
		}
		failed++
		if first == nil {
			first = err
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || ctx.Err() != nil {
			failed = len(evs) - written
			break
		}
	}
	if first != nil {
		r.log().Warn("kubernetes events not recorded", "failed", failed, "of", len(evs), "error", first.Error())
	}
	return written
}

func (r *Recorder) write(ctx context.Context, ev Event) error {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	ns := ev.Object.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // where cluster-scoped objects' events go, as the kubelet's
	}
	msg := truncate(ev.Message, maxMessage)
	name := eventName(ev.Object, ev.Reason, msg)
	now := metav1.NewTime(r.now())
	events := r.Client.CoreV1().Events(ns)

	r.mu.Lock()
	count, seen := r.counts[name]
	r.mu.Unlock()
	if !seen {
		_, err := events.Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			InvolvedObject: corev1.ObjectReference{
				Kind: ev.Object.Kind, APIVersion: cmp.Or(ev.Object.APIVersion, "v1"), Namespace: ev.Object.Namespace,
				Name: ev.Object.Name, UID: ev.Object.UID,
			},
			Reason: ev.Reason, Message: msg, Type: ev.Type,
			Source:         corev1.EventSource{Component: Component},
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
			ReportingController: Component, ReportingInstance: r.Instance,
		}, metav1.CreateOptions{})
		switch {
		case err == nil:
			r.remember(name, 1)
			return nil
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("create event %s/%s: %w", ns, name, err)
		}
		// Written by an earlier process: its count is unknown here, so
		// the patch below moves lastTimestamp and counts from 1 again.
		count = 1
	}
	count++
	patch, err := json.Marshal(map[string]any{"count": count, "lastTimestamp": now})
	if err != nil {
		return err
	}
	if _, err := events.Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			// Expired (the API server keeps events for an hour): write
			// it anew next time.
			r.forget(name)
		}
		return fmt.Errorf("patch event %s/%s: %w", ns, name, err)
	}
	r.remember(name, count)
	return nil
}

// maxRemembered bounds the counts kept; past it they are dropped, and
// repeats patch from 1 again.
const maxRemembered = 20000

func (r *Recorder) remember(name string, count int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil || len(r.counts) >= maxRemembered {
		r.counts = map[string]int32{}
	}
	r.counts[name] = count
}

func (r *Recorder) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.counts, name)
}

// eventName is the object's name and a hash of what makes the event
// distinct, kept within 253 characters like other object names.
func eventName(o Object, reason, msg string) string {
	h := fnv.New64a()
	for _, s := range []string{o.Kind, o.Namespace, o.Name, string(o.UID), reason, msg} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	base := o.Name
	if len(base) > 200 {
		base = base[:200]
	}
	return fmt.Sprintf("%s.%016x", base, h.Sum64())
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "..."
	cut := n - len(more)
	for cut > 0 && !startOfRune(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

func startOfRune(b byte) bool { return b&0xC0 != 0x80 }
