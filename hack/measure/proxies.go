package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The functions reach the Kubernetes API and DynamoDB through these proxies,
// which count requests and bytes, so each invocation's traffic is known: the
// network allowance of the Lambda model is computed from it.

// kubeCounts is the Kubernetes API traffic so far.
type kubeCounts struct {
	requests int
	bytes    int64
}

func (a kubeCounts) minus(b kubeCounts) kubeCounts {
	return kubeCounts{requests: a.requests - b.requests, bytes: a.bytes - b.bytes}
}

// kubeProxy is a TLS reverse proxy in front of the API server. It serves its
// own certificate (CAPEM), so a kubeconfig can point at it; the bearer token
// passes through unchanged.
type kubeProxy struct {
	URL   string // https://127.0.0.1:PORT
	CAPEM []byte

	srv      *http.Server
	requests atomic.Int64
	bytes    atomic.Int64
}

func (p *kubeProxy) counts() kubeCounts {
	if p == nil {
		return kubeCounts{}
	}
	return kubeCounts{requests: int(p.requests.Load()), bytes: p.bytes.Load()}
}

// startKubeProxy proxies to the API server at upstream, trusting caPEM.
func startKubeProxy(upstream string, caPEM []byte) (*kubeProxy, error) {
	target, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("kube proxy: upstream %q: %w", upstream, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("kube proxy: the API server's CA is not PEM")
	}
	caPEMOut, cert, err := selfSignedLoopback()
	if err != nil {
		return nil, fmt.Errorf("kube proxy: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("kube proxy: listen: %w", err)
	}
	p := &kubeProxy{URL: "https://" + ln.Addr().String(), CAPEM: caPEMOut}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
			// Pass on only the compression the client asked for, so the
			// bytes counted are those it would get.
			DisableCompression:  true,
			MaxIdleConnsPerHost: 16,
		},
		// Watches stream.
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &p.bytes}
			return nil
		},
	}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.requests.Add(1)
			if r.Body != nil {
				r.Body = &countingBody{ReadCloser: r.Body, n: &p.bytes}
			}
			rp.ServeHTTP(w, r)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.srv.ServeTLS(ln, "", "") }()
	return p, nil
}

func (p *kubeProxy) close() error { return closeServer(p.srv) }

// ddbCounts is the DynamoDB traffic so far, split as DynamoDB bills it.
type ddbCounts struct{ reads, writes, other int }

func (a ddbCounts) minus(b ddbCounts) ddbCounts {
	return ddbCounts{reads: a.reads - b.reads, writes: a.writes - b.writes, other: a.other - b.other}
}

// ddbProxy is an HTTP reverse proxy in front of dynalite.
type ddbProxy struct {
	URL string

	srv                  *http.Server
	reads, writes, other atomic.Int64
}

func (p *ddbProxy) counts() ddbCounts {
	if p == nil {
		return ddbCounts{}
	}
	return ddbCounts{reads: int(p.reads.Load()), writes: int(p.writes.Load()), other: int(p.other.Load())}
}

// ddbKind sorts a DynamoDB operation (the X-Amz-Target header,
// "DynamoDB_20120810.PutItem") into reads and writes.
func ddbKind(target string) string {
	_, op, _ := strings.Cut(target, ".")
	switch op {
	case "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems":
		return "read"
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return "write"
	}
	return "other"
}

func startDDBProxy(upstream string) (*ddbProxy, error) {
	target, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("dynamodb proxy: upstream %q: %w", upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("dynamodb proxy: listen: %w", err)
	}
	p := &ddbProxy{URL: "http://" + ln.Addr().String()}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch ddbKind(r.Header.Get("X-Amz-Target")) {
			case "read":
				p.reads.Add(1)
			case "write":
				p.writes.Add(1)
			default:
				p.other.Add(1)
			}
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *ddbProxy) close() error { return closeServer(p.srv) }

func closeServer(srv *http.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return srv.Close()
	}
	return nil
}

// countingBody adds what is read through it to n.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// selfSignedLoopback makes a certificate for 127.0.0.1 that is its own CA.
func selfSignedLoopback() (caPEM []byte, cert tls.Certificate, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("serial: %w", err)
	}
	now := time.Now()
	tpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "nodetide measure proxy"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("create certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// proxies are one function's counting proxies.
type proxies struct {
	kube *kubeProxy
	ddb  *ddbProxy
	once sync.Once
}

func (p *proxies) close() error {
	var err error
	p.once.Do(func() { err = errors.Join(p.kube.close(), p.ddb.close()) })
	return err
}
