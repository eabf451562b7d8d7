package k8s

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// fakeEKS serves DescribeCluster over the EKS wire protocol (REST JSON,
// GET /clusters/{name}) from clusters, keyed by name.
func fakeEKS(t *testing.T, clusters map[string]map[string]any) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		name, ok := strings.CutPrefix(r.URL.Path, "/clusters/")
		if r.Method != http.MethodGet || !ok || strings.Contains(name, "/") {
			w.Header().Set("X-Amzn-Errortype", "UnknownOperationException")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"unknown operation"}`))
			return
		}
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDTEST/") {
			w.Header().Set("X-Amzn-Errortype", "UnrecognizedClientException")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message":"unsigned request"}`))
			return
		}
		c, ok := clusters[name]
		if !ok {
			w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException:http://internal.amazon.com/coral/com.amazonaws.eks/")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"No cluster found for name: ` + name + `.","clusterName":"` + name + `"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"cluster": c})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fakeAPIServer stands for a cluster's API server over TLS: it records the
// Authorization header of each request and answers 401 while reject is set.
type fakeAPIServer struct {
	*httptest.Server
	mu     sync.Mutex
	auth   []string
	reject atomic.Bool
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer {
	f := &fakeAPIServer{}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if f.reject.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPIServer) lastAuth() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.auth) == 0 {
		return ""
	}
	return f.auth[len(f.auth)-1]
}

// countingPresigner counts the tokens made through the real STS presigner.
type countingPresigner struct {
	STSPresigner
	n atomic.Int32
}

func (p *countingPresigner) PresignGetCallerIdentity(ctx context.Context, in *sts.GetCallerIdentityInput, optFns ...func(*sts.PresignOptions)) (*v4.PresignedHTTPRequest, error) {
	p.n.Add(1)
	return p.STSPresigner.PresignGetCallerIdentity(ctx, in, optFns...)
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type eksFixture struct {
	api       *fakeAPIServer
	eks       *eks.Client
	presigner *countingPresigner
	clock     *fakeClock
}

func newEKSFixture(t *testing.T) *eksFixture {
	api := newFakeAPIServer(t)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})
	srv := fakeEKS(t, map[string]map[string]any{
		"prod": {
			"name": "prod", "arn": "arn:aws:eks:eu-west-1:123456789012:cluster/prod", "status": "ACTIVE",
			"endpoint":             api.URL,
			"certificateAuthority": map[string]string{"data": base64.StdEncoding.EncodeToString(caPEM)},
		},
		"creating": {"name": "creating", "status": "CREATING"},
		"bad-ca": {"name": "bad-ca", "status": "ACTIVE", "endpoint": "https://x.example",
			"certificateAuthority": map[string]string{"data": "%%%"}},
	})
	cfg := testAWSConfig()
	return &eksFixture{
		api: api,
		eks: eks.NewFromConfig(cfg, func(o *eks.Options) { o.BaseEndpoint = aws.String(srv.URL) }),
		// The presigner only signs, locally: no STS double is needed.
		presigner: &countingPresigner{STSPresigner: sts.NewPresignClient(sts.NewFromConfig(cfg))},
		clock:     &fakeClock{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)},
	}
}

func TestFromEKSErrors(t *testing.T) {
	f := newEKSFixture(t)
	tests := []struct {
		cluster  string
		wantErr  string
		notFound bool
	}{
		{cluster: "missing", wantErr: "eks cluster missing: not found", notFound: true},
		{cluster: "creating", wantErr: "no API endpoint yet (status CREATING)"},
		{cluster: "bad-ca", wantErr: "decode certificate authority data"},
		{cluster: "", wantErr: "no cluster name"},
	}
	for _, tc := range tests {
		t.Run(tc.cluster, func(t *testing.T) {
			_, err := FromEKS(t.Context(), f.eks, f.presigner, tc.cluster, f.clock.Now)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			var nf *ekstypes.ResourceNotFoundException
			if got := errors.As(err, &nf); got != tc.notFound {
				t.Errorf("errors.As(ResourceNotFoundException) = %v, want %v", got, tc.notFound)
			}
		})
	}
}

// decodeToken checks a token's envelope and returns the presigned URL in it.
func decodeToken(t *testing.T, token string) *url.URL {
	t.Helper()
	enc, ok := strings.CutPrefix(token, "k8s-aws-v1.")
	if !ok {
		t.Fatalf("token %.20q… lacks the k8s-aws-v1. prefix", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("token is not unpadded base64url: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestEKSToken(t *testing.T) {
	f := newEKSFixture(t)
	tok, err := presignEKSToken(t.Context(), f.presigner, "prod")
	if err != nil {
		t.Fatal(err)
	}
	u := decodeToken(t, tok)
	q := u.Query()
	checks := []struct{ what, got, want string }{
		{"scheme", u.Scheme, "https"},
		{"host", u.Host, "sts.eu-west-1.amazonaws.com"},
		{"Action", q.Get("Action"), "GetCallerIdentity"},
		{"Version", q.Get("Version"), "2011-06-15"},
		{"X-Amz-Expires", q.Get("X-Amz-Expires"), "60"},
		{"X-Amz-Algorithm", q.Get("X-Amz-Algorithm"), "AWS4-HMAC-SHA256"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";"); !slices.Contains(signed, "x-k8s-aws-id") || !slices.Contains(signed, "host") {
		t.Errorf("X-Amz-SignedHeaders = %v, want host and x-k8s-aws-id", signed)
	}
	if cred := q.Get("X-Amz-Credential"); !strings.HasPrefix(cred, "AKIDTEST/") || !strings.HasSuffix(cred, "/eu-west-1/sts/aws4_request") {
		t.Errorf("X-Amz-Credential = %q", cred)
	}

	// The signature must cover the cluster header: re-sign the same request
	// with the same key and time, the header set to the cluster name.
	signingTime, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	resign := func(cluster string) string {
		uq := u.Query()
		for _, k := range []string{"X-Amz-Signature", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders"} {
			uq.Del(k)
		}
		ru := *u
		ru.RawQuery = uq.Encode()
		req, err := http.NewRequest(http.MethodGet, ru.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-k8s-aws-id", cluster)
		creds := aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret-key-test"}
		const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
		signedURL, _, err := v4.NewSigner().PresignHTTP(t.Context(), creds, req, emptySHA256, "sts", "eu-west-1", signingTime)
		if err != nil {
			t.Fatal(err)
		}
		su, err := url.Parse(signedURL)
		if err != nil {
			t.Fatal(err)
		}
		return su.Query().Get("X-Amz-Signature")
	}
	if got := q.Get("X-Amz-Signature"); got == "" || got != resign("prod") {
		t.Error("the signature does not verify with x-k8s-aws-id: prod")
	}
	if q.Get("X-Amz-Signature") == resign("other") {
		t.Error("the signature does not depend on x-k8s-aws-id")
	}
}

func TestFromEKSBearerTokenAndRefresh(t *testing.T) {
	f := newEKSFixture(t)
	cfg, err := FromEKS(t.Context(), f.eks, f.presigner, "prod", f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != f.api.URL {
		t.Errorf("host %q, want %q", cfg.Host, f.api.URL)
	}
	if cfg.BearerToken != "" {
		t.Error("the token must come from the round tripper, not a fixed BearerToken")
	}
	if n := f.presigner.n.Load(); n != 1 {
		t.Errorf("FromEKS made %d tokens, want 1 (fail fast on credentials)", n)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	request := func() {
		t.Helper()
		_, _ = client.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
		auth, ok := strings.CutPrefix(f.api.lastAuth(), "Bearer ")
		if !ok {
			t.Fatal("request without a bearer token")
		}
		if u := decodeToken(t, auth); u.Query().Get("Action") != "GetCallerIdentity" {
			t.Fatalf("bearer token is not an EKS token")
		}
	}

	steps := []struct {
		name       string
		advance    time.Duration
		reject     bool // the API server answers 401
		wantTokens int32
	}{
		{name: "first request reuses the token made by FromEKS", wantTokens: 1},
		{name: "reused after 1m", advance: time.Minute, wantTokens: 1},
		{name: "reused just under 14m", advance: 13*time.Minute - time.Second, wantTokens: 1},
		{name: "refreshed at 14m", advance: time.Second, wantTokens: 2},
		{name: "reused after refresh", advance: 10 * time.Minute, wantTokens: 2},
		{name: "refreshed 14m after the refresh", advance: 4 * time.Minute, wantTokens: 3},
		{name: "rejected token is still sent once", reject: true, wantTokens: 3},
		{name: "replaced after a 401", wantTokens: 4},
	}
	for _, s := range steps {
		f.clock.Advance(s.advance)
		f.api.reject.Store(s.reject)
		request()
		if got := f.presigner.n.Load(); got != s.wantTokens {
			t.Errorf("%s: %d tokens made, want %d", s.name, got, s.wantTokens)
		}
	}
}

func TestFromEKSConcurrentRequestsShareOneToken(t *testing.T) {
	f := newEKSFixture(t)
	cfg, err := FromEKS(t.Context(), f.eks, f.presigner, "prod", f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(eksTokenRefresh) // every request now wants a new token
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := client.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := f.presigner.n.Load(); n != 2 {
		t.Errorf("%d tokens made, want 2: one by FromEKS, one refresh shared by all requests", n)
	}
}

// failingPresigner stands for missing credentials.
type failingPresigner struct{}

func (failingPresigner) PresignGetCallerIdentity(context.Context, *sts.GetCallerIdentityInput, ...func(*sts.PresignOptions)) (*v4.PresignedHTTPRequest, error) {
	return nil, errors.New("no credentials")
}

func TestFromEKSNoCredentials(t *testing.T) {
	f := newEKSFixture(t)
	_, err := FromEKS(t.Context(), f.eks, failingPresigner{}, "prod", f.clock.Now)
	if err == nil || !strings.Contains(err.Error(), "no credentials") || !strings.Contains(err.Error(), "prod") {
		t.Fatalf("error %v, want the presign failure for cluster prod", err)
	}
}
