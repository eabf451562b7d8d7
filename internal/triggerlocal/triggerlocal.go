// Package triggerlocal runs the webhook trigger on this machine as Lambda
// runs it, for tests and `make measure`: the evaluate function's bootstrap
// under the Lambda Runtime Interface Emulator, behind
//
//   - an HTTPS endpoint (a CA of its own, for the webhook's caBundle) that
//     turns each request into a function URL event (payload format 2.0) and
//     the function's answer back into the HTTP response, as a function URL
//     does; and
//   - the Lambda Invoke API (POST /2015-03-31/functions/NAME/invocations),
//     which the function's asynchronous self-invocation reaches through
//     AWS_ENDPOINT_URL_LAMBDA: an Event invocation is answered 202 and run
//     on the first of two instances of their own to be free.
//
// Where it differs from Lambda: three function instances, fixed (one serves
// the URL, two the queued invocations: the stack's reserved concurrency is
// 3, but Lambda shares it among all three uses), and concurrent URL calls
// wait for each other (Lambda would run them on more instances); queued invocations are not
// retried on error and have no maximum age; the URL accepts any request without Lambda's own limits
// (payload size, throttling); request IDs and source addresses are made up.
package triggerlocal

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodetide/nodetide/internal/childproc"
)

// FunctionName is the evaluate function's name here.
const FunctionName = "nodetide-local-evaluate"

const (
	invocations    = "/2015-03-31/functions/function/invocations"
	cycleInstances = 2
)

// Options configures Start.
type Options struct {
	// RIE is the aws-lambda-rie binary; Bootstrap the evaluate function
	// built for this machine.
	RIE, Bootstrap string
	// ConfigYAML is given to the function as NODETIDE_CONFIG.
	ConfigYAML string
	// Dir holds the instances' logs.
	Dir string
	// Timeout is the function's (AWS_LAMBDA_FUNCTION_TIMEOUT); 60 s if zero.
	Timeout time.Duration
}

// Mode is how the HTTPS endpoint behaves, for fault tests.
type Mode int32

const (
	Serving Mode = iota
	Down         // every connection is closed at once, unanswered
	Hanging      // requests are held until the caller gives up
)

// Service is the running trigger.
type Service struct {
	// URL is the HTTPS endpoint (the webhook's clientConfig.url); CAPEM the
	// certificate that signed it (its caBundle).
	URL   string
	CAPEM []byte

	urlFn         string     // the URL instance's RIE invocation URL
	urlMu         sync.Mutex // one invocation at a time: the RIE cannot take two
	cycleFns      []string   // the cycle instances'
	procs         []*childproc.Process
	https, lambda *http.Server
	queue         chan []byte
	queued        atomic.Int64
	mode          atomic.Int32
	calls         atomic.Int64
	stopOnce      sync.Once
}

// Start starts the instances and both servers.
func Start(ctx context.Context, o Options) (_ *Service, err error) {
	if o.Timeout == 0 {
		o.Timeout = time.Minute
	}
	s := &Service{queue: make(chan []byte, 1024)}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	lambdaLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lambda API: %w", err)
	}
	s.lambda = &http.Server{Handler: http.HandlerFunc(s.invoke), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.lambda.Serve(lambdaLn) }()
	env := []string{
		"PATH=" + os.Getenv("PATH"), "TZ=:UTC",
		"AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_LAMBDA_FUNCTION_NAME=" + FunctionName,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(int(o.Timeout.Seconds())),
		"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"AWS_ENDPOINT_URL_LAMBDA=http://" + lambdaLn.Addr().String(),
		"NODETIDE_CONFIG=" + o.ConfigYAML,
		"_HANDLER=bootstrap",
	}
	for i := range cycleInstances + 1 {
		p, base, err := startRIE(ctx, o, i, env)
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, p)
		if i == 0 {
			s.urlFn = base + invocations
		} else {
			s.cycleFns = append(s.cycleFns, base+invocations)
		}
	}
	for _, fn := range s.cycleFns {
		go s.worker(fn)
	}

	cert, caPEM, err := selfSigned()
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, fmt.Errorf("https endpoint: %w", err)
	}
	s.https = &http.Server{Handler: http.HandlerFunc(s.serveURL), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.https.Serve(ln) }()
	s.URL = "https://" + ln.Addr().String() + "/"
	s.CAPEM = caPEM
	return s, nil
}

func startRIE(ctx context.Context, o Options, i int, env []string) (*childproc.Process, string, error) {
	name := fmt.Sprintf("evaluate-%d", i)
	for attempt := 1; ; attempt++ {
		ports, err := childproc.FreePorts(2)
		if err != nil {
			return nil, "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(ports[0])
		cmd := exec.Command(o.RIE, "--runtime-interface-emulator-address", addr,
			"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(ports[1]), o.Bootstrap)
		cmd.Dir = filepath.Dir(o.Bootstrap)
		cmd.Env = append(env, "AWS_LAMBDA_LOG_STREAM_NAME=local/"+name)
		p, err := childproc.Start(ctx, "aws-lambda-rie "+name, cmd, childproc.Options{Log: filepath.Join(o.Dir, name+".log")})
		if err != nil {
			return nil, "", err
		}
		if err = p.WaitListening(ctx, addr); err == nil {
			return p, "http://" + addr, nil
		}
		_ = p.Stop(context.Background(), 5*time.Second)
		if attempt < 3 && strings.Contains(p.LogTail(20), "address already in use") {
			continue
		}
		return nil, "", fmt.Errorf("function instance %s: %w", name, err)
	}
}

// SetMode switches the HTTPS endpoint between serving, down and hanging.
func (s *Service) SetMode(m Mode) { s.mode.Store(int32(m)) }

// Calls counts the requests the HTTPS endpoint received.
func (s *Service) Calls() int64 { return s.calls.Load() }

// Queued counts the asynchronous invocations the Lambda API accepted.
func (s *Service) Queued() int64 { return s.queued.Load() }

// Logs returns the instances' logs.
func (s *Service) Logs() string {
	var b strings.Builder
	for _, p := range s.procs {
		data, _ := os.ReadFile(p.LogPath())
		fmt.Fprintf(&b, "== %s\n%s\n", p.Name(), data)
	}
	return b.String()
}

// Stop stops the servers and the instances.
func (s *Service) Stop() error {
	var errs []error
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, srv := range []*http.Server{s.https, s.lambda} {
			if srv != nil {
				_ = srv.Close()
			}
		}
		close(s.queue)
		errs = append(errs, childproc.StopAll(ctx, 5*time.Second, s.procs...))
	})
	return errors.Join(errs...)
}

// serveURL is the function URL: request → payload format 2.0 event → the
// URL instance → the function's answer as the HTTP response.
func (s *Service) serveURL(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	switch Mode(s.mode.Load()) {
	case Down:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	case Hanging:
		<-r.Context().Done()
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ev, err := urlEvent(r, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// Lambda would give a concurrent call an instance of its own; the RIE
	// serves one invocation at a time (a second one at once crashes it).
	s.urlMu.Lock()
	out, err := post(r.Context(), s.urlFn, ev)
	s.urlMu.Unlock()
	if err != nil {
		http.Error(w, "function: "+err.Error(), http.StatusBadGateway)
		return
	}
	var resp struct {
		StatusCode      *int              `json:"statusCode"`
		Headers         map[string]string `json:"headers"`
		Body            string            `json:"body"`
		IsBase64Encoded bool              `json:"isBase64Encoded"`
		ErrorType       string            `json:"errorType"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.ErrorType != "" {
		// A function error is a 502 at a function URL.
		http.Error(w, "Internal Server Error", http.StatusBadGateway)
		return
	}
	if resp.StatusCode == nil { // any other JSON is the body of a 200
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	payload := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if payload, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			http.Error(w, "Internal Server Error", http.StatusBadGateway)
			return
		}
	}
	w.WriteHeader(*resp.StatusCode)
	_, _ = w.Write(payload)
}

// urlEvent is the event a function URL makes of a request.
func urlEvent(r *http.Request, body []byte) ([]byte, error) {
	headers := map[string]string{}
	for k, v := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	text := strings.HasPrefix(ct, "text/") || strings.Contains(ct, "json") || strings.Contains(ct, "xml")
	b := string(body)
	if !text && len(body) > 0 {
		b = base64.StdEncoding.EncodeToString(body)
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	now := time.Now().UTC()
	ev := map[string]any{
		"version": "2.0", "routeKey": "$default", "rawPath": r.URL.Path, "rawQueryString": r.URL.RawQuery,
		"headers": headers,
		"requestContext": map[string]any{
			"accountId": "anonymous", "apiId": "local", "domainName": r.Host, "domainPrefix": "local",
			"http": map[string]any{"method": r.Method, "path": r.URL.Path, "protocol": r.Proto,
				"sourceIp": host, "userAgent": r.UserAgent()},
			"requestId": hex.EncodeToString(id), "routeKey": "$default", "stage": "$default",
			"time": now.Format("02/Jan/2006:15:04:05 -0700"), "timeEpoch": now.UnixMilli(),
		},
		"body": b, "isBase64Encoded": !text && len(body) > 0,
	}
	return json.Marshal(ev)
}

// invoke is Lambda's Invoke API, for the function's own name only.
func (s *Service) invoke(w http.ResponseWriter, r *http.Request) {
	const prefix = "/2015-03-31/functions/"
	name, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, prefix), "/invocations")
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, prefix) || !ok {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "unknown operation "+r.Method+" "+r.URL.Path)
		return
	}
	if name != FunctionName && !strings.HasSuffix(name, ":function:"+FunctionName) {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	if t := r.Header.Get("X-Amz-Invocation-Type"); t != "Event" {
		lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException", "only InvocationType Event is served here, got "+strconv.Quote(t))
		return
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, 256<<10))
	if err != nil {
		lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
		return
	}
	select {
	case s.queue <- payload:
		s.queued.Add(1)
		w.WriteHeader(http.StatusAccepted)
	default:
		lambdaError(w, http.StatusTooManyRequests, "TooManyRequestsException", "queue full")
	}
}

func lambdaError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
}

// worker runs queued invocations one after another on one instance.
func (s *Service) worker(fn string) {
	for payload := range s.queue {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, _ = post(ctx, fn, payload)
		cancel()
	}
}

func post(ctx context.Context, url string, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// selfSigned makes a CA and a serving certificate for 127.0.0.1 signed by it.
func selfSigned() (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	caTpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nodetide trigger local CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
