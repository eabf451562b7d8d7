package scaleway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/scaleway/scaleway-sdk-go/scw"
)

// ErrDenied marks errors where Scaleway refused the secret key (401) or the
// key lacks a permission (403), so callers can point at the credentials.
var ErrDenied = errors.New("scaleway refused the secret key")

// Retry defaults. The SDK sends each request once, so transient failures
// (5xx, 429, timeouts, dropped connections) are retried here.
const (
	defaultAttempts       = 4
	defaultBaseDelay      = 250 * time.Millisecond
	defaultMaxDelay       = 4 * time.Second
	defaultRequestTimeout = 30 * time.Second
)

type retryPolicy struct {
	attempts       int
	base, max      time.Duration
	requestTimeout time.Duration
}

// caller runs SDK calls with retries and a per-attempt timeout.
type caller struct {
	client *scw.Client
	retry  retryPolicy

	// The SDK fetches the API's metadata on its first call and stores it in
	// the client without a lock, so two first calls running at once race.
	// Until it is cached, calls are run one at a time.
	metaMu    sync.Mutex
	metaReady atomic.Bool
}

// maxRetryAfter is the longest Retry-After honoured by waiting; a longer
// one ends the call (the next evaluation tries again).
const maxRetryAfter = 30 * time.Second

// do runs fn, retrying transient failures with exponential backoff and
// jitter, or after the Retry-After a 429 or 503 names. what names the call
// for errors ("pool gpu: update size").
func (c *caller) do(ctx context.Context, what string, fn func(opts ...scw.RequestOption) error) error {
	delay := c.retry.base
	for attempt := 1; ; attempt++ {
		release := c.enter()
		var ans answer
		actx, cancel := context.WithTimeout(context.WithValue(ctx, answerKey{}, &ans), c.retry.requestTimeout)
		err := fn(scw.WithContext(actx))
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		release()
		if err == nil {
			return nil
		}
		err = ans.explain(err)
		if ctx.Err() != nil || attempt >= c.retry.attempts || !(timedOut || transient(err) || ans.transient()) {
			return describe(what, attempt, err)
		}
		// Jitter keeps several evaluators from retrying in step.
		wait := delay/2 + rand.N(delay/2+1)
		if after, ok := ans.retryAfter(time.Now()); ok {
			if after > maxRetryAfter {
				return describe(what, attempt, fmt.Errorf("%w (Scaleway asks to retry after %s)", err, after.Round(time.Second)))
			}
			if dl, ok := ctx.Deadline(); ok && time.Now().Add(after).After(dl) {
				return describe(what, attempt, fmt.Errorf("%w (Scaleway asks to retry after %s, past the deadline)", err, after.Round(time.Second)))
			}
			wait = max(after, wait)
		}
		select {
		case <-ctx.Done():
			return describe(what, attempt, err)
		case <-time.After(wait):
		}
		delay = min(delay*2, c.retry.max)
	}
}

// answerKey carries an *answer through a request's context, for the
// recording transport to fill.
type answerKey struct{}

// answer is what the HTTP layer saw of an attempt's last response: the SDK
// keeps neither the headers nor, when it cannot parse an error body, the
// status.
type answer struct {
	mu     sync.Mutex
	status int
	after  string // Retry-After
}

// recordingTransport notes each response's status and Retry-After in the
// request's answer.
type recordingTransport struct{ next http.RoundTripper }

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if a, ok := req.Context().Value(answerKey{}).(*answer); ok && err == nil {
		a.mu.Lock()
		a.status, a.after = resp.StatusCode, resp.Header.Get("Retry-After")
		a.mu.Unlock()
	}
	return resp, err
}

// transient: the last answer was a 5xx or 429, whatever its body.
func (a *answer) transient() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status >= 500 || a.status == http.StatusTooManyRequests
}

// explain adds the status to an error the SDK made without it (an error
// body it could not parse).
func (a *answer) explain(err error) error {
	a.mu.Lock()
	status := a.status
	a.mu.Unlock()
	var re *scw.ResponseError
	if status < 400 || errors.As(err, &re) {
		return err
	}
	return fmt.Errorf("HTTP %d %s with an unreadable body: %w", status, http.StatusText(status), err)
}

// retryAfter reads Retry-After (seconds, or an HTTP date) of a 429 or 503.
func (a *answer) retryAfter(now time.Time) (time.Duration, bool) {
	a.mu.Lock()
	status, v := a.status, a.after
	a.mu.Unlock()
	if v == "" || (status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable) {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

func (c *caller) enter() (release func()) {
	if c.metaReady.Load() {
		return func() {}
	}
	c.metaMu.Lock()
	if !c.metaReady.Load() {
		if _, err := c.client.GetAPIMetadata(); err != nil {
			return c.metaMu.Unlock
		}
		c.metaReady.Store(true)
	}
	c.metaMu.Unlock()
	return func() {}
}

// transient tells errors worth another attempt: server errors, throttling,
// timeouts and connections dropped mid-way.
func transient(err error) bool {
	var re *scw.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode >= 500 || re.StatusCode == http.StatusTooManyRequests
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// describe wraps an SDK error with what was being done, and says plainly when
// the key was refused. The SDK's messages never carry the key.
func describe(what string, attempts int, err error) error {
	tries := ""
	if attempts > 1 {
		tries = fmt.Sprintf(" (after %d attempts)", attempts)
	}
	var denied *scw.DeniedAuthenticationError
	if errors.As(err, &denied) {
		return fmt.Errorf("%s: %w: check secret_key or %s (%w)", what, ErrDenied, EnvSecretKey, err)
	}
	var perm *scw.PermissionsDeniedError
	if errors.As(err, &perm) {
		return fmt.Errorf("%s: %w: the key lacks a permission (%w)", what, ErrDenied, err)
	}
	var re *scw.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusForbidden {
		return fmt.Errorf("%s: %w: the key lacks a permission (%w)", what, ErrDenied, err)
	}
	return fmt.Errorf("%s%s: %w", what, tries, err)
}
