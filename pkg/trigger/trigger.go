// Package trigger turns the API server's calls of a validating admission
// webhook into evaluate cycles, so a pod the scheduler cannot place starts a
// scale-up within seconds instead of at the next scheduled tick.
//
// The webhook (see Webhook) is registered on Events whose reason is
// FailedScheduling: the scheduler writes one when it marks a pod
// Unschedulable, and again on its later retries. The API server posts an
// AdmissionReview to the evaluate function's URL; Serve answers allowed at
// once, whatever the body, and treats the call only as a hint: the endpoint
// cannot authenticate the API server (a function URL with auth NONE), so
// anyone can post anything. A hint counts only when it names a
// FailedScheduling event written, not dry-run, by the scheduler's user.
//
// Hints are rate-limited with two leases in the state store, each taken by
// a conditional write (so concurrent calls, in any number of instances,
// agree): the first hint of a window of MinGap starts a cycle at once; the
// first hint after it in that window starts one that waits for the window
// to end, and the other hints of the window are covered by that trailing
// cycle, which begins after all of them. So every hint is followed by a
// cycle that starts after it, within MinGap plus a second, and a stream of
// forged calls costs at most two cycles (and one wait of up to MinGap) per
// MinGap. Cycles re-read the cluster; nothing in a call is acted on.
//
// The scheduler writes a pod's FailedScheduling Event again on each retry,
// often a second later; a repeat hint for the same pod (regarding.uid)
// within MinGap is dropped before the rate limit (a third lease, per pod):
// the cycle that followed its first hint began after the pod was marked.
package trigger

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nodetide/nodetide/pkg/state"
)

const (
	// LeaseName and TrailingLeaseName are the state-store leases that space
	// hint-started cycles: the leading one and the trailing one of a window.
	LeaseName         = "trigger"
	TrailingLeaseName = "trigger-trailing"
	// PodLeasePrefix + the pod's uid is the lease that drops repeat hints.
	PodLeasePrefix = "trigger-pod/"
	// DefaultMinGap is the least time between two hint-started cycles.
	DefaultMinGap = 5 * time.Second
	// SchedulerUser is the user kube-scheduler writes its Events as.
	SchedulerUser = "system:kube-scheduler"
	// MaxBody bounds the request body read; an Event's review is a few KB.
	MaxBody = 256 << 10
	// hintTimeout bounds the lease write and the invocation, under the API
	// server's TimeoutSeconds.
	hintTimeout = 1500 * time.Millisecond
	// maxUID bounds the uid echoed back (the API server's are 36 characters).
	maxUID = 128
)

// Starter starts an evaluate cycle without waiting for it; the cycle
// begins no earlier than notBefore (zero: at once).
type Starter interface {
	StartCycle(ctx context.Context, notBefore time.Time) error
}

// Leaser takes a lease until it expires (state.Store has it).
type Leaser interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (state.Lease, error)
}

// Trigger serves the webhook calls.
type Trigger struct {
	Lease Leaser
	Start Starter
	// MinGap between hint-started cycles; DefaultMinGap when zero.
	MinGap time.Duration
	// Users whose Events count as hints; SchedulerUser when empty.
	Users []string
	Now   func() time.Time
	Log   *slog.Logger
}

// Outcome is what Serve made of one call, for its log line and tests.
type Outcome string

const (
	Repeat      Outcome = "repeat" // the same pod's hint again within MinGap
	Started     Outcome = "started"
	Trailing    Outcome = "started-trailing" // a cycle that waits for the window's end
	RateLimited Outcome = "rate-limited"     // the window's trailing cycle covers it
	Ignored     Outcome = "ignored"
	Refused     Outcome = "refused" // a malformed request: 4xx, nothing done
	Failed      Outcome = "failed"  // a hint whose cycle could not be started
)

// IsURLEvent reports whether a Lambda payload is a function URL request
// (payload format 2.0). Only the URL's envelope is looked at: a hand-made
// invocation cannot pass for a URL request by its body.
func IsURLEvent(obj []byte) bool {
	var probe struct {
		Version        string          `json:"version"`
		RawPath        *string         `json:"rawPath"`
		RequestContext json.RawMessage `json:"requestContext"`
	}
	if err := json.Unmarshal(obj, &probe); err != nil {
		return false
	}
	return probe.Version == "2.0" && probe.RawPath != nil && len(probe.RequestContext) > 0
}

// review is the part of an admission.k8s.io/v1 AdmissionReview read here.
// It is decoded leniently (the API server sends many more fields) and what
// is read is checked.
type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID       string `json:"uid"`
		Operation string `json:"operation"`
		UserInfo  struct {
			Username string `json:"username"`
		} `json:"userInfo"`
		DryRun *bool           `json:"dryRun"`
		Object json.RawMessage `json:"object"`
	} `json:"request"`
}

// event is what a hint needs of an Event, in either API: events.k8s.io/v1
// names the pod in regarding, core/v1 in involvedObject.
type event struct {
	Reason         string    `json:"reason"`
	Regarding      objectRef `json:"regarding"`
	InvolvedObject objectRef `json:"involvedObject"`
}

type objectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// uidPattern is what a Kubernetes uid looks like (a UUID); anything else is
// not used as a lease name.
var uidPattern = regexp.MustCompile(`^[0-9a-fA-F-]{1,64}$`)

// Serve answers one function URL request. The answer is always 200 with
// allowed true for a readable AdmissionReview, and a 4xx naming the problem
// otherwise; neither can stop the API server's write (the webhook's
// failurePolicy is Ignore, and the answer never denies).
func (t *Trigger) Serve(ctx context.Context, payload []byte) (events.LambdaFunctionURLResponse, Outcome) {
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return t.refuse(400, fmt.Sprintf("not a function URL request: %v", err))
	}
	if m := req.RequestContext.HTTP.Method; m != "POST" {
		return t.refuse(405, fmt.Sprintf("method %s: only POST (an AdmissionReview) is served", m))
	}
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(req.Body); err != nil {
			return t.refuse(400, "body: bad base64 encoding")
		}
	}
	if len(body) > MaxBody {
		return t.refuse(413, fmt.Sprintf("body: %d bytes, more than %d", len(body), MaxBody))
	}
	var rv review
	if err := decodeObject(body, &rv); err != nil {
		return t.refuse(400, fmt.Sprintf("body is not an AdmissionReview: %v", err))
	}
	if err := rv.check(); err != nil {
		return t.refuse(400, err.Error())
	}
	uid := rv.Request.UID
	outcome, why, pod := t.hint(ctx, rv)
	t.log().Info("webhook call", "outcome", string(outcome), "why", why, "pod", pod,
		"user", rv.Request.UserInfo.Username, "operation", rv.Request.Operation)
	return allowed(uid), outcome
}

// decodeObject reads a JSON object leniently (unknown fields are allowed:
// the API server sends many) but refuses a field given twice, which
// encoding/json would settle silently by taking the last.
func decodeObject(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("not a JSON object")
	}
	if err := checkNoDuplicates(json.NewDecoder(bytes.NewReader(trimmed))); err != nil {
		return err
	}
	return json.Unmarshal(trimmed, v)
}

func (rv review) check() error {
	switch {
	case rv.APIVersion != "admission.k8s.io/v1":
		return fmt.Errorf("apiVersion: %q, want admission.k8s.io/v1", rv.APIVersion)
	case rv.Kind != "AdmissionReview":
		return fmt.Errorf("kind: %q, want AdmissionReview", rv.Kind)
	case rv.Request == nil:
		return errors.New("request: missing")
	case rv.Request.UID == "":
		return errors.New("request.uid: missing")
	case len(rv.Request.UID) > maxUID:
		return fmt.Errorf("request.uid: %d characters, at most %d", len(rv.Request.UID), maxUID)
	}
	for _, r := range rv.Request.UID {
		if r < 0x21 || r > 0x7e {
			return errors.New("request.uid: only printable ASCII is accepted")
		}
	}
	return nil
}

// hint decides whether a valid review starts a cycle, and does it.
func (t *Trigger) hint(ctx context.Context, rv review) (Outcome, string, string) {
	r := rv.Request
	if r.Operation != "CREATE" && r.Operation != "UPDATE" {
		return Ignored, "operation " + r.Operation, ""
	}
	if r.DryRun != nil && *r.DryRun {
		return Ignored, "dry run", ""
	}
	users := t.Users
	if len(users) == 0 {
		users = []string{SchedulerUser}
	}
	if !slices.Contains(users, r.UserInfo.Username) {
		return Ignored, "not written by the scheduler", ""
	}
	var ev event
	if err := decodeObject(r.Object, &ev); err != nil {
		return Ignored, "object is not an Event: " + err.Error(), ""
	}
	ref := ev.Regarding
	if ref.Kind == "" {
		ref = ev.InvolvedObject
	}
	if ev.Reason != "FailedScheduling" || ref.Kind != "Pod" {
		return Ignored, "not a pod's FailedScheduling event", ""
	}
	pod := ref.Namespace + "/" + ref.Name
	ctx, cancel := context.WithTimeout(ctx, hintTimeout)
	defer cancel()
	now := time.Now()
	if t.Now != nil {
		now = t.Now()
	}
	gap := t.MinGap
	if gap <= 0 {
		gap = DefaultMinGap
	}
	// Unique per call: the same holder would only extend its own lease.
	holder := "hint-" + randomID()
	if id, ok := lambdaRequestID(ctx); ok {
		holder = "hint-" + id
	}
	if uidPattern.MatchString(ref.UID) {
		_, err := t.Lease.AcquireLease(ctx, PodLeasePrefix+ref.UID, holder, gap, now)
		if errors.Is(err, state.ErrLeaseHeld) {
			return Repeat, "this pod's hint came less than " + gap.String() + " ago", pod
		}
		if err != nil {
			t.log().Error("webhook: pod lease", "error", err.Error())
			return Failed, "pod lease: " + err.Error(), pod
		}
	}
	// Never released: the leases lapsing after gap are the rate limit.
	outcome, why := Started, "FailedScheduling"
	var notBefore time.Time
	_, err := t.Lease.AcquireLease(ctx, LeaseName, holder, gap, now)
	if errors.Is(err, state.ErrLeaseHeld) {
		// A cycle started less than gap ago may have read the cluster before
		// this pod was marked: one more, after the window, for every hint
		// in it. Its lease is held until then, so it starts after them all.
		var l state.Lease
		l, err = t.Lease.AcquireLease(ctx, TrailingLeaseName, holder, gap, now)
		if errors.Is(err, state.ErrLeaseHeld) {
			return RateLimited, "a cycle is due after this call (less than " + gap.String() + " since the last)", pod
		}
		outcome, why, notBefore = Trailing, "FailedScheduling, after a cycle less than "+gap.String()+" ago", l.ExpiresAt
	}
	if err != nil {
		t.log().Error("webhook: rate-limit lease", "error", err.Error())
		return Failed, "rate-limit lease: " + err.Error(), pod
	}
	if err := t.Start.StartCycle(ctx, notBefore); err != nil {
		t.log().Error("webhook: start cycle", "error", err.Error())
		return Failed, "start cycle: " + err.Error(), pod
	}
	return outcome, why, pod
}

func (t *Trigger) log() *slog.Logger {
	if t.Log != nil {
		return t.Log
	}
	return slog.Default()
}

func (t *Trigger) refuse(status int, msg string) (events.LambdaFunctionURLResponse, Outcome) {
	t.log().Warn("webhook call refused", "status", status, "error", msg)
	body, _ := json.Marshal(map[string]string{"error": msg})
	return events.LambdaFunctionURLResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(body),
	}, Refused
}

// allowed is the AdmissionReview answer: allowed, uid echoed, nothing else.
func allowed(uid string) events.LambdaFunctionURLResponse {
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1",
		"kind":       "AdmissionReview",
		"response":   map[string]any{"uid": uid, "allowed": true},
	})
	return events.LambdaFunctionURLResponse{
		StatusCode: 200,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(body),
	}
}
