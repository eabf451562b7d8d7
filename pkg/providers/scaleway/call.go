package scaleway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
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

// do runs fn, retrying transient failures with exponential backoff and
// jitter. what names the call for errors ("pool gpu: update size").
func (c *caller) do(ctx context.Context, what string, fn func(opts ...scw.RequestOption) error) error {
	delay := c.retry.base
	for attempt := 1; ; attempt++ {
		release := c.enter()
		actx, cancel := context.WithTimeout(ctx, c.retry.requestTimeout)
		err := fn(scw.WithContext(actx))
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		release()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || attempt >= c.retry.attempts || !(timedOut || transient(err)) {
			return describe(what, attempt, err)
		}
		// Jitter keeps several evaluators from retrying in step.
		wait := delay/2 + rand.N(delay/2+1)
		select {
		case <-ctx.Done():
			return describe(what, attempt, err)
		case <-time.After(wait):
		}
		delay = min(delay*2, c.retry.max)
	}
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
