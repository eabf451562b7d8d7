package kamatera

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrUnauthorized is matched (errors.Is) by an APIError for a rejected API key.
var ErrUnauthorized = errors.New("the Kamatera API rejected the API key")

// APIError is a failure the Kamatera API answered: a non-2xx status, or a
// 200 whose body is `{"message": …}` in place of the result (Kamatera answers
// some failures, a rejected key among them, that way). Message is the API's
// own message, with any secret removed.
type APIError struct {
	Method     string
	Path       string
	StatusCode int
	Message    string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("kamatera API %s %s: %d %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.unauthorized() {
		msg += " (check the API key: KAMATERA_API_CLIENT_ID / KAMATERA_API_SECRET, or kamatera-api-client-id / kamatera-api-secret in the cloud config, and its permissions)"
	}
	return msg
}

// Is makes a 401 or 403, or any answer whose message says the key was
// refused, match ErrUnauthorized.
func (e *APIError) Is(target error) bool {
	return target == ErrUnauthorized && e.unauthorized()
}

func (e *APIError) unauthorized() bool {
	if e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden {
		return true
	}
	m := strings.ToLower(e.Message)
	for _, w := range []string{"authenticat", "unauthori", "auth client", "authclientid", "authsecret", "api key", "credential"} {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// errOutcomeUnknown marks a failed create that may have reached Kamatera
// all the same (a timeout, a 5xx other than 503, an unreadable answer): its
// server may still appear.
var errOutcomeUnknown = errors.New("the server may have been created all the same")

type outcomeUnknownError struct{ err error }

func (e *outcomeUnknownError) Error() string {
	return e.err.Error() + " (" + errOutcomeUnknown.Error() + ")"
}
func (e *outcomeUnknownError) Unwrap() []error { return []error{e.err, errOutcomeUnknown} }

// retryPolicy says which failures may be retried: reads and terminations can
// be repeated, but a create that may have reached Kamatera must not be, or
// two servers would be made.
type retryPolicy int

const (
	retryIdempotent retryPolicy = iota
	retryCreate
)

// apiClient speaks the cloudcli server API (https://cloudcli.cloudwm.com),
// the one cluster-autoscaler uses.
type apiClient struct {
	baseURL string
	http    *http.Client
	// auth sets the AuthClientId / AuthSecret headers. It is a closure so
	// the secret lives in no struct field that fmt could print.
	auth func(http.Header)
	// redact removes secrets from text that comes back from the API.
	redact   func(string) string
	attempts int
	backoff  time.Duration
	timeout  time.Duration
	log      *slog.Logger
}

// maxResponse bounds what is read of an answer.
const maxResponse = 16 << 20

// call sends one request, retrying with exponential backoff as policy
// allows, and decodes a 2xx JSON answer into out (when not nil).
func (c *apiClient) call(ctx context.Context, method, path string, query url.Values, body any, policy retryPolicy, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("kamatera API %s %s: encode request: %w", method, path, err)
		}
	}
	u := c.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var lastErr error
	for attempt := 1; attempt <= c.attempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, c.delay(attempt)); err != nil {
				return fmt.Errorf("kamatera API %s %s: %w (last error: %w)", method, path, err, lastErr)
			}
		}
		retry, ambiguous, err := c.once(ctx, method, path, u, payload, policy, out)
		if err == nil {
			return nil
		}
		if ambiguous && policy == retryCreate {
			err = &outcomeUnknownError{err: err}
		}
		lastErr = err
		if !retry || ctx.Err() != nil {
			return err
		}
		c.log.DebugContext(ctx, "kamatera API call failed, retrying", "method", method, "path", path, "attempt", attempt, "error", err.Error())
	}
	return fmt.Errorf("gave up after %d attempts: %w", c.attempts, lastErr)
}

// delay is the wait before an attempt: backoff, 2×backoff, 4×… (at most 30 s),
// with some jitter so that several callers don't retry in step.
func (c *apiClient) delay(attempt int) time.Duration {
	d := c.backoff << (attempt - 2)
	if d > 30*time.Second || d <= 0 {
		d = 30 * time.Second
	}
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// once makes one attempt. retry reports whether the failure may be retried;
// ambiguous, whether the request may have been carried out anyway.
func (c *apiClient) once(ctx context.Context, method, path, u string, payload []byte, policy retryPolicy, out any) (retry, ambiguous bool, err error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, method, u, rd)
	if err != nil {
		return false, false, fmt.Errorf("kamatera API %s %s: %w", method, path, err)
	}
	c.auth(req.Header)
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Only a refused connection surely never reached Kamatera; a create
		// is repeated in that case only.
		sent := !isDialError(err)
		retry := policy == retryIdempotent || !sent
		switch {
		case ctx.Err() != nil:
			return false, sent, fmt.Errorf("kamatera API %s %s: %w", method, path, ctx.Err())
		case actx.Err() != nil:
			return retry, sent, fmt.Errorf("kamatera API %s %s: no answer within %s", method, path, c.timeout)
		}
		return retry, sent, fmt.Errorf("kamatera API %s %s: %s", method, path, c.redact(transportMessage(err)))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return policy == retryIdempotent, true, fmt.Errorf("kamatera API %s %s: read answer: %s", method, path, c.redact(transportMessage(err)))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		apiErr := &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Message: c.redact(errorMessage(data))}
		ambiguous := resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable
		return retryStatus(resp.StatusCode, policy), ambiguous, apiErr
	}
	if msg, failed := errorIn2xx(data); failed {
		// Refused, not carried out: retrying would get the same answer.
		return false, false, &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Message: c.redact(msg)}
	}
	if out == nil {
		return false, false, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return policy == retryIdempotent, true, fmt.Errorf("kamatera API %s %s: unexpected answer (%d bytes): %w", method, path, len(data), err)
	}
	return false, false, nil
}

// retryStatus: 5xx and 429 are worth another try; 4xx never (the request
// itself is wrong). For a create only the answers that say nothing was done
// (429, 503) are retried: a 500 or 504 may come after the server was queued.
func retryStatus(code int, policy retryPolicy) bool {
	if policy == retryCreate {
		return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
	}
	return code == http.StatusTooManyRequests || code >= 500
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// transportMessage drops the URL that net/http puts in its errors: it is
// noise here (method and path are already named).
func transportMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// errorIn2xx reads a 2xx answer that is an error: a JSON object holding a
// message or error and nothing a result holds (results are lists, or the
// {"password", "commandIds"} of a create).
func errorIn2xx(data []byte) (string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return "", false
	}
	if _, ok := obj["commandIds"]; ok {
		return "", false
	}
	_, hasMsg := obj["message"]
	_, hasErr := obj["error"]
	_, hasErrs := obj["errors"]
	if !hasMsg && !hasErr && !hasErrs {
		return "", false
	}
	msg := errorMessage(data)
	if msg == "" {
		msg = "an error in place of the result"
	}
	return msg, true
}

// errorMessage extracts Kamatera's `{"message": "…"}`, or a short excerpt of
// whatever else came back.
func errorMessage(data []byte) string {
	var body struct {
		Message string `json:"message"`
		Error   any    `json:"error"`
		Errors  any    `json:"errors"`
	}
	if json.Unmarshal(data, &body) == nil {
		if body.Message != "" {
			return body.Message
		}
		if body.Error != nil {
			return fmt.Sprint(body.Error)
		}
		if body.Errors != nil {
			return fmt.Sprint(body.Errors)
		}
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// apiServer is one row of GET /service/servers.
type apiServer struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Datacenter string `json:"datacenter"`
	Power      string `json:"power"`
}

func (c *apiClient) listServers(ctx context.Context) ([]apiServer, error) {
	var out []apiServer
	if err := c.call(ctx, http.MethodGet, "/service/servers", nil, nil, retryIdempotent, &out); err != nil {
		return nil, err
	}
	return out, nil
}

type nameRequest struct {
	Name string `json:"name"`
}

func (c *apiClient) serverTags(ctx context.Context, name string) ([]string, error) {
	var rows []struct {
		TagName string `json:"tagName"`
	}
	if err := c.call(ctx, http.MethodPost, "/server/tags", nil, nameRequest{Name: name}, retryIdempotent, &rows); err != nil {
		return nil, err
	}
	tags := make([]string, 0, len(rows))
	for _, r := range rows {
		tags = append(tags, r.TagName)
	}
	return tags, nil
}

// createRequest is the body of POST /service/server: cloudcli's `server
// create` flags, under the names the API reads (all lower case but
// passwordValidate: a "billingCycle" is not the billing cycle). Lists (disks,
// networks, tags) are space-separated.
type createRequest struct {
	Name               string `json:"name"`
	Password           string `json:"password"`
	PasswordValidate   string `json:"passwordValidate"`
	SSHKey             string `json:"ssh-key"`
	Datacenter         string `json:"datacenter"`
	Image              string `json:"image"`
	CPU                string `json:"cpu"`
	RAM                string `json:"ram"`
	Disk               string `json:"disk"`
	DailyBackup        string `json:"dailybackup"`
	Managed            string `json:"managed"`
	Network            string `json:"network"`
	Quantity           int    `json:"quantity"`
	BillingCycle       string `json:"billingcycle"`
	MonthlyPackage     string `json:"monthlypackage"`
	PowerOnAfterCreate string `json:"poweronaftercreate"`
	ScriptFile         string `json:"script-file"`
	UserdataFile       string `json:"userdata-file"`
	Tag                string `json:"tag"`
}

// generatePassword asks Kamatera to pick the root password.
const generatePassword = "__generate__"

// createServer queues the creation of one server and returns the queue
// command ID.
func (c *apiClient) createServer(ctx context.Context, req createRequest) (string, error) {
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodPost, "/service/server", nil, req, retryCreate, &raw); err != nil {
		return "", err
	}
	ids, err := commandIDs(raw)
	if err != nil || len(ids) == 0 {
		// accepted, most likely, but there is nothing to follow
		return "", &outcomeUnknownError{err: errors.New("kamatera API POST /service/server: no command ID in the answer")}
	}
	return ids[0], nil
}

// commandIDs reads the IDs of queued commands. Kamatera answers with a list
// of IDs (strings or numbers), or, when it generated the password, with
// {"password": …, "commandIds": [...]} (the password is dropped here).
func commandIDs(raw json.RawMessage) ([]string, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		var obj struct {
			CommandIDs []json.RawMessage `json:"commandIds"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			var one json.RawMessage
			if json.Unmarshal(raw, &one) != nil {
				return nil, err
			}
			list = []json.RawMessage{one}
		} else {
			list = obj.CommandIDs
		}
	}
	ids := make([]string, 0, len(list))
	for _, r := range list {
		id, err := scalarString(r)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func scalarString(r json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(r, &s); err == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(r, &n); err != nil {
		return "", fmt.Errorf("command ID %s is neither a string nor a number", r)
	}
	return n.String(), nil
}

type terminateRequest struct {
	Name  string `json:"name"`
	Force bool   `json:"force"`
}

// terminateServer asks Kamatera to delete a server, powered on or not, and
// returns the queue command that does it ("" when the answer names none).
// Kamatera takes the name as a regular expression; names are restricted (see
// namePrefixRE) so that each matches only itself.
func (c *apiClient) terminateServer(ctx context.Context, name string) (string, error) {
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodPost, "/service/server/terminate", nil, terminateRequest{Name: name, Force: true}, retryIdempotent, &raw); err != nil {
		return "", err
	}
	return firstCommandID(raw), nil
}

// powerServer queues a power on or off and returns its command ("" when the
// answer names none).
func (c *apiClient) powerServer(ctx context.Context, name string, on bool) (string, error) {
	path := "/service/server/poweroff"
	if on {
		path = "/service/server/poweron"
	}
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodPost, path, nil, nameRequest{Name: name}, retryIdempotent, &raw); err != nil {
		return "", err
	}
	return firstCommandID(raw), nil
}

func firstCommandID(raw json.RawMessage) string {
	ids, err := commandIDs(raw)
	if err != nil || len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// Queue command states. Anything else (pending, running, …) is in progress.
const (
	queueComplete  = "complete"
	queueError     = "error"
	queueCancelled = "cancelled"
)

// queueCommand is a row of GET /service/queue?id=.
type queueCommand struct {
	ID     json.RawMessage `json:"id"`
	Status string          `json:"status"`
	Log    string          `json:"log"`
}

// errUnknownCommand means the queue does not know the command ID.
var errUnknownCommand = errors.New("the Kamatera queue does not know this command")

func (c *apiClient) queueStatus(ctx context.Context, id string) (queueCommand, error) {
	var rows []queueCommand
	if err := c.call(ctx, http.MethodGet, "/service/queue", url.Values{"id": {id}}, nil, retryIdempotent, &rows); err != nil {
		return queueCommand{}, err
	}
	if len(rows) != 1 {
		return queueCommand{}, fmt.Errorf("kamatera queue command %s: %d rows in the answer: %w", id, len(rows), errUnknownCommand)
	}
	rows[0].Log = c.redact(rows[0].Log)
	return rows[0], nil
}

// redactor replaces every non-empty secret in s.
func redactor(secrets ...string) func(string) string {
	var keep []string
	for _, s := range secrets {
		if s != "" && s != generatePassword {
			keep = append(keep, s)
		}
	}
	return func(s string) string {
		for _, sec := range keep {
			s = strings.ReplaceAll(s, sec, redacted)
		}
		return s
	}
}

// boolFlag is how the API spells booleans.
func boolFlag(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
