package trigger_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/trigger"
)

func TestMain(m *testing.M) { testbed.Main(m) }

type countStarter struct {
	n, delayed atomic.Int32
	mu         sync.Mutex
	notBefore  []time.Time
	err        error
}

func (c *countStarter) StartCycle(_ context.Context, notBefore time.Time) error {
	c.n.Add(1)
	if !notBefore.IsZero() {
		c.delayed.Add(1)
	}
	c.mu.Lock()
	c.notBefore = append(c.notBefore, notBefore)
	c.mu.Unlock()
	return c.err
}

// urlEvent wraps body as a function URL request (payload format 2.0).
func urlEvent(t testing.TB, method, body string, b64 bool) []byte {
	t.Helper()
	if b64 {
		body = base64.StdEncoding.EncodeToString([]byte(body))
	}
	ev, err := json.Marshal(map[string]any{
		"version": "2.0", "routeKey": "$default", "rawPath": "/", "rawQueryString": "",
		"headers": map[string]string{"content-type": "application/json"},
		"requestContext": map[string]any{
			"accountId": "anonymous", "apiId": "x", "domainName": "x.lambda-url.us-east-1.on.aws",
			"http":      map[string]any{"method": method, "path": "/", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.9", "userAgent": "kube-apiserver-admission"},
			"requestId": "r", "routeKey": "$default", "stage": "$default", "time": "01/Dec/2026:10:00:00 +0000", "timeEpoch": 1,
		},
		"body": body, "isBase64Encoded": b64,
	})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// review builds an AdmissionReview of an Event as the API server sends it.
func review(uid, op, user string, dryRun bool, object string) string {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid": uid, "kind": map[string]any{"group": "events.k8s.io", "version": "v1", "kind": "Event"},
			"resource":  map[string]any{"group": "events.k8s.io", "version": "v1", "resource": "events"},
			"namespace": "ns", "operation": op, "dryRun": dryRun,
			"userInfo": map[string]any{"username": user, "groups": []string{"system:authenticated"}},
			"object":   json.RawMessage(object),
		},
	})
	return string(b)
}

const (
	failedSched = `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"p.1","namespace":"ns"},"reason":"FailedScheduling","type":"Warning","regarding":{"kind":"Pod","namespace":"ns","name":"p","uid":"u1"},"note":"0/3 nodes are available"}`
	coreFailed  = `{"apiVersion":"v1","kind":"Event","metadata":{"name":"p.1","namespace":"ns"},"reason":"FailedScheduling","involvedObject":{"kind":"Pod","namespace":"ns","name":"p"}}`
	scheduled   = `{"apiVersion":"events.k8s.io/v1","kind":"Event","reason":"Scheduled","regarding":{"kind":"Pod","namespace":"ns","name":"p"}}`
)

func TestServe(t *testing.T) {
	sched := trigger.SchedulerUser
	cases := []struct {
		name    string
		event   []byte
		status  int
		outcome trigger.Outcome
		msg     string // in the body of a refusal
	}{
		{"hint", urlEvent(t, "POST", review("u-1", "CREATE", sched, false, failedSched), false), 200, trigger.Started, ""},
		{"hint, base64 body", urlEvent(t, "POST", review("u-1", "UPDATE", sched, false, failedSched), true), 200, trigger.Started, ""},
		{"core/v1 event", urlEvent(t, "POST", review("u-1", "CREATE", sched, false, coreFailed), false), 200, trigger.Started, ""},
		{"dry run", urlEvent(t, "POST", review("u-1", "CREATE", sched, true, failedSched), false), 200, trigger.Ignored, ""},
		{"another user", urlEvent(t, "POST", review("u-1", "CREATE", "alice", false, failedSched), false), 200, trigger.Ignored, ""},
		{"delete", urlEvent(t, "POST", review("u-1", "DELETE", sched, false, failedSched), false), 200, trigger.Ignored, ""},
		{"other reason", urlEvent(t, "POST", review("u-1", "CREATE", sched, false, scheduled), false), 200, trigger.Ignored, ""},
		{"object not an event", urlEvent(t, "POST", review("u-1", "CREATE", sched, false, `[1]`), false), 200, trigger.Ignored, ""},
		{"object with a field twice", urlEvent(t, "POST", review("u-1", "CREATE", sched, false,
			`{"reason":"Scheduled","reason":"FailedScheduling","regarding":{"kind":"Pod"}}`), false), 400, trigger.Refused, "$.request.object.reason: field given twice"},
		{"GET", urlEvent(t, "GET", "", false), 405, trigger.Refused, "only POST"},
		{"empty body", urlEvent(t, "POST", "", false), 400, trigger.Refused, "not a JSON object"},
		{"not JSON", urlEvent(t, "POST", "{x", false), 400, trigger.Refused, "not valid JSON"},
		{"trailing data", urlEvent(t, "POST", review("u-1", "CREATE", sched, false, failedSched)+" {}", false), 400, trigger.Refused, "after the JSON value"},
		{"bad base64", func() []byte {
			ev := urlEvent(t, "POST", "x", true)
			return []byte(strings.Replace(string(ev), `"eA=="`, `"!!"`, 1))
		}(), 400, trigger.Refused, "bad base64"},
		{"wrong apiVersion", urlEvent(t, "POST", strings.Replace(review("u-1", "CREATE", sched, false, failedSched), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1), false), 400, trigger.Refused, "apiVersion"},
		{"no request", urlEvent(t, "POST", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, false), 400, trigger.Refused, "request: missing"},
		{"no uid", urlEvent(t, "POST", review("", "CREATE", sched, false, failedSched), false), 400, trigger.Refused, "request.uid: missing"},
		{"long uid", urlEvent(t, "POST", review(strings.Repeat("u", 129), "CREATE", sched, false, failedSched), false), 400, trigger.Refused, "request.uid: 129 characters"},
		{"uid with a newline", urlEvent(t, "POST", review("u\n1", "CREATE", sched, false, failedSched), false), 400, trigger.Refused, "printable ASCII"},
		{"uid twice", urlEvent(t, "POST", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","uid":"b"}}`, false), 400, trigger.Refused, "$.request.uid: field given twice"},
		{"too large", urlEvent(t, "POST", `{"pad":"`+strings.Repeat("x", trigger.MaxBody)+`"}`, false), 413, trigger.Refused, "more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &countStarter{}
			tr := &trigger.Trigger{Lease: state.NewMemory("c"), Start: st}
			resp, out := tr.Serve(context.Background(), tc.event)
			if resp.StatusCode != tc.status || out != tc.outcome {
				t.Fatalf("status %d, outcome %s; want %d, %s (body %s)", resp.StatusCode, out, tc.status, tc.outcome, resp.Body)
			}
			wantStarts := int32(0)
			if tc.outcome == trigger.Started {
				wantStarts = 1
			}
			if n := st.n.Load(); n != wantStarts {
				t.Errorf("%d cycles started, want %d", n, wantStarts)
			}
			if tc.status != 200 {
				if !strings.Contains(resp.Body, tc.msg) {
					t.Errorf("body %s, want it to name %q", resp.Body, tc.msg)
				}
				return
			}
			var rv struct {
				APIVersion, Kind string
				Response         struct {
					UID     string `json:"uid"`
					Allowed bool   `json:"allowed"`
				}
			}
			if err := json.Unmarshal([]byte(resp.Body), &rv); err != nil {
				t.Fatal(err)
			}
			if rv.APIVersion != "admission.k8s.io/v1" || rv.Kind != "AdmissionReview" || rv.Response.UID != "u-1" || !rv.Response.Allowed {
				t.Errorf("answer %s, want allowed with uid u-1", resp.Body)
			}
		})
	}
}

// A hint whose cycle cannot be started is still allowed: the write it
// reviews must never be held up.
func TestServeAllowsWhenStartFails(t *testing.T) {
	tr := &trigger.Trigger{Lease: state.NewMemory("c"), Start: &countStarter{err: errors.New("throttled")}}
	resp, out := tr.Serve(context.Background(), urlEvent(t, "POST", review("u-1", "CREATE", trigger.SchedulerUser, false, failedSched), false))
	if resp.StatusCode != 200 || out != trigger.Failed || !strings.Contains(resp.Body, `"allowed":true`) {
		t.Fatalf("status %d, outcome %s, body %s; want 200, failed, allowed", resp.StatusCode, out, resp.Body)
	}
}

// A pod's hint again within the window is dropped before the rate limit:
// the cycle that followed its first hint read the cluster after the pod was
// marked. Another pod's hint is not.
func TestRepeatHintsForAPod(t *testing.T) {
	st := &countStarter{}
	now := time.Now()
	tr := &trigger.Trigger{Lease: state.NewMemory("c"), Start: st, Now: func() time.Time { return now }}
	call := func(pod, uid string) trigger.Outcome {
		obj := strings.NewReplacer("\"name\":\"p\"", "\"name\":\""+pod+"\"", "\"uid\":\"u1\"", "\"uid\":\""+uid+"\"").Replace(failedSched)
		_, out := tr.Serve(context.Background(), urlEvent(t, "POST", review("r", "UPDATE", trigger.SchedulerUser, false, obj), false))
		return out
	}
	steps := []struct {
		pod, uid string
		after    time.Duration
		want     trigger.Outcome
	}{
		{"a", "0f6d1a52-3c1e-4c7b-a7b5-1e2d3c4b5a69", 0, trigger.Started},
		{"a", "0f6d1a52-3c1e-4c7b-a7b5-1e2d3c4b5a69", time.Second, trigger.Repeat},
		{"b", "1a2b3c4d-0000-4000-8000-000000000002", 0, trigger.Trailing},
		{"b", "1a2b3c4d-0000-4000-8000-000000000002", time.Second, trigger.Repeat},
		{"c", "1a2b3c4d-0000-4000-8000-000000000003", 0, trigger.RateLimited},
		{"a", "0f6d1a52-3c1e-4c7b-a7b5-1e2d3c4b5a69", 5 * time.Second, trigger.Started}, // the window has passed
	}
	for i, s := range steps {
		now = now.Add(s.after)
		if got := call(s.pod, s.uid); got != s.want {
			t.Errorf("step %d (pod %s): %s, want %s", i, s.pod, got, s.want)
		}
	}
	if st.n.Load() != 3 {
		t.Errorf("%d cycles started, want 3", st.n.Load())
	}
}

// Concurrent hints on the same table start one cycle at once and one
// trailing cycle after the window, whatever their number: the rate limit is
// a conditional write in DynamoDB (dynalite here), not a process's memory,
// since each call may run in another Lambda instance.
func TestHintsStartOneCyclePerGap(t *testing.T) {
	db := testbed.DynamoDB(t)
	ctx := context.Background()
	if err := state.CreateTable(ctx, db.Client(t), "trigger"); err != nil {
		t.Fatal(err)
	}
	st := &countStarter{}
	now := time.Now()
	clock := func() time.Time { return now }
	var outcomes sync.Map
	var wg sync.WaitGroup
	const calls = 12
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each call its own store, as each Lambda instance has.
			tr := &trigger.Trigger{Lease: state.NewDynamoDB(db.Client(t), "trigger", "c"), Start: st, MinGap: 5 * time.Second, Now: clock}
			_, out := tr.Serve(ctx, urlEvent(t, "POST", review("u", "UPDATE", trigger.SchedulerUser, false, failedSched), false))
			outcomes.Store(i, out)
		}()
	}
	wg.Wait()
	counts := map[trigger.Outcome]int{}
	outcomes.Range(func(_, v any) bool { counts[v.(trigger.Outcome)]++; return true })
	if st.n.Load() != 2 || st.delayed.Load() != 1 || counts[trigger.Started] != 1 || counts[trigger.Trailing] != 1 || counts[trigger.RateLimited] != calls-2 {
		t.Fatalf("%d cycles started (%d delayed), outcomes %v; want 1 started at once, 1 trailing and %d rate-limited", st.n.Load(), st.delayed.Load(), counts, calls-2)
	}
	// The trailing cycle starts after every hint of the window: at its end.
	for _, nb := range st.notBefore {
		if !nb.IsZero() && nb.Before(now.Add(5*time.Second)) {
			t.Errorf("trailing cycle not before %s, want at least %s", nb, now.Add(5*time.Second))
		}
	}
	// Once the gap has passed, the next hint starts a cycle at once again.
	now = now.Add(7 * time.Second)
	tr := &trigger.Trigger{Lease: state.NewDynamoDB(db.Client(t), "trigger", "c"), Start: st, MinGap: 5 * time.Second, Now: clock}
	if _, out := tr.Serve(ctx, urlEvent(t, "POST", review("u", "UPDATE", trigger.SchedulerUser, false, failedSched), false)); out != trigger.Started {
		t.Fatalf("after the gap: %s, want started", out)
	}
}

func TestIsURLEvent(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    bool
	}{
		{string(urlEvent(t, "POST", "{}", false)), true},
		{`{"action":"run"}`, false},
		{`{"version":"2.0","action":"run"}`, false},
		{`{"version":"0","detail-type":"Scheduled Event","source":"aws.events"}`, false},
		{`{"version":"1.0","rawPath":"/","requestContext":{}}`, false},
	} {
		if got := trigger.IsURLEvent([]byte(tc.payload)); got != tc.want {
			t.Errorf("IsURLEvent(%s) = %v, want %v", tc.payload, got, tc.want)
		}
	}
}
