package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A function's bootstrap talks to the emulator through the Lambda Runtime
// API (GET .../invocation/next, then POST .../invocation/<id>/response or
// /error). runtimeTap sits between them: the bootstrap is idle while it
// waits for its next invocation and while it hands back a result, so the
// process's CPU time, peak memory and traffic counters read at those two
// moments belong to exactly one invocation. The bootstrap reaches the tap
// through a wrapper script that records its process id and the emulator's
// Runtime API address and then execs the real bootstrap with
// AWS_LAMBDA_RUNTIME_API pointing at the tap.

// phaseMark is a reading of the function process and its traffic counters.
type phaseMark struct {
	at   time.Time
	cpu  cpuSample
	hwm  int64
	kube kubeCounts
	ddb  ddbCounts
}

// tapped is one invocation seen through the tap.
type tapped struct {
	RequestID  string
	Payload    []byte
	start, end phaseMark
	done       bool
}

// runtimeTap is the Runtime API proxy of one function.
type runtimeTap struct {
	fn       string
	infoPath string // the wrapper writes "<pid> <runtime API address>" here
	kube     *kubeProxy
	ddb      *ddbProxy
	log      *slog.Logger

	srv  *http.Server
	addr string

	mu       sync.Mutex
	pid      int
	execAt   time.Time // when the wrapper exec'd the bootstrap
	proxy    *httputil.ReverseProxy
	initMark *phaseMark // at the first GET .../next: the end of init
	calls    []*tapped
	byID     map[string]*tapped
	errs     []error
}

// startRuntimeTap listens on a free loopback port and writes, into dir, the
// wrapper script to give the emulator as the function's bootstrap.
func startRuntimeTap(fn, dir, bootstrap string, kube *kubeProxy, ddb *ddbProxy, log *slog.Logger) (t *runtimeTap, wrapper string, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("%s runtime tap: listen: %w", fn, err)
	}
	t = &runtimeTap{
		fn:       fn,
		infoPath: filepath.Join(dir, fn+".runtime"),
		kube:     kube,
		ddb:      ddb,
		log:      log,
		addr:     ln.Addr().String(),
		byID:     map[string]*tapped{},
	}
	wrapper = filepath.Join(dir, fn+"-bootstrap.sh")
	// exec keeps the process id: the one written is the bootstrap's.
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s %%s\\n' \"$$\" \"$AWS_LAMBDA_RUNTIME_API\" > %s\nAWS_LAMBDA_RUNTIME_API=%s\nexport AWS_LAMBDA_RUNTIME_API\nexec %s\n",
		shellQuote(t.infoPath), t.addr, shellQuote(bootstrap))
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		ln.Close()
		return nil, "", fmt.Errorf("%s runtime tap: write wrapper: %w", fn, err)
	}
	t.srv = &http.Server{Handler: http.HandlerFunc(t.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := t.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.fail(fmt.Errorf("serve: %w", err))
		}
	}()
	return t, wrapper, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (t *runtimeTap) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := t.srv.Shutdown(ctx); err != nil {
		// A long poll for the next invocation never ends on its own.
		return t.srv.Close()
	}
	return nil
}

func (t *runtimeTap) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, fmt.Errorf("%s runtime tap: %w", t.fn, err))
}

// attach reads what the wrapper wrote, once the bootstrap's first request
// shows it has run.
func (t *runtimeTap) attach() error {
	if t.proxy != nil {
		return nil
	}
	b, err := os.ReadFile(t.infoPath)
	if err != nil {
		return fmt.Errorf("read the bootstrap's runtime info: %w", err)
	}
	// Written just before the exec: its time is the start of the init.
	st, err := os.Stat(t.infoPath)
	if err != nil {
		return fmt.Errorf("read the bootstrap's runtime info: %w", err)
	}
	t.execAt = st.ModTime()
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return fmt.Errorf("malformed runtime info %q", b)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return fmt.Errorf("malformed bootstrap pid %q: %w", f[0], err)
	}
	upstream := &url.URL{Scheme: "http", Host: f[1]}
	t.pid = pid
	t.proxy = &httputil.ReverseProxy{
		Rewrite:        func(r *httputil.ProxyRequest) { r.SetURL(upstream) },
		ModifyResponse: t.onResponse,
		FlushInterval:  -1,
		Transport: &http.Transport{
			// The next-invocation request is a long poll: no timeouts.
			MaxIdleConnsPerHost: 4,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t.fail(fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, err))
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return nil
}

// mark reads the process and the counters. The caller holds t.mu.
func (t *runtimeTap) mark() (phaseMark, error) {
	m := phaseMark{at: time.Now(), kube: t.kube.counts(), ddb: t.ddb.counts()}
	var err error
	if m.cpu, err = readCPU(t.pid); err != nil {
		return m, err
	}
	if m.hwm, err = readHWM(t.pid); err != nil {
		return m, err
	}
	return m, nil
}

func (t *runtimeTap) serve(w http.ResponseWriter, r *http.Request) {
	t.mu.Lock()
	if err := t.attach(); err != nil {
		t.mu.Unlock()
		t.fail(err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/runtime/invocation/next"):
		if t.initMark == nil {
			// The first request for work ends the start-up.
			m, err := t.mark()
			if err != nil {
				t.errs = append(t.errs, err)
			}
			t.initMark = &m
		}
	case r.Method == http.MethodPost && (strings.HasSuffix(path, "/response") || strings.HasSuffix(path, "/error")):
		// .../invocation/<id>/response: the invocation's work is done.
		id := strings.TrimSuffix(strings.TrimSuffix(path, "/response"), "/error")
		id = id[strings.LastIndexByte(id, '/')+1:]
		if c, ok := t.byID[id]; ok && !c.done {
			m, err := t.mark()
			if err != nil {
				t.errs = append(t.errs, err)
			}
			c.end, c.done = m, true
		}
	}
	proxy := t.proxy
	t.mu.Unlock()
	proxy.ServeHTTP(w, r)
}

// onResponse sees the emulator hand the bootstrap its next invocation: the
// invocation starts once the bootstrap has it.
func (t *runtimeTap) onResponse(resp *http.Response) error {
	if resp.Request.Method != http.MethodGet || !strings.HasSuffix(resp.Request.URL.Path, "/runtime/invocation/next") ||
		resp.StatusCode != http.StatusOK {
		return nil
	}
	id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
	payload, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read invocation payload: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(payload))
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := resetHWM(t.pid); err != nil {
		t.errs = append(t.errs, err)
	}
	m, err := t.mark()
	if err != nil {
		t.errs = append(t.errs, err)
	}
	c := &tapped{RequestID: id, Payload: payload, start: m}
	t.calls = append(t.calls, c)
	t.byID[id] = c
	return nil
}

// started is the start-up of the bootstrap: when it was exec'd and the
// reading at its first request for work.
type started struct {
	execAt time.Time
	mark   phaseMark
}

// phases returns the start-up (nil before the first request for work) and
// every completed invocation, in order, and the errors the tap met.
func (t *runtimeTap) phases() (*started, []tapped, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var calls []tapped
	for _, c := range t.calls {
		if c.done {
			calls = append(calls, *c)
		}
	}
	var st *started
	if t.initMark != nil {
		st = &started{execAt: t.execAt, mark: *t.initMark}
	}
	return st, calls, errors.Join(t.errs...)
}

// sampleOf turns a tapped invocation and its emulator REPORT into a sample.
func sampleOf(fn, action string, cold bool, c tapped, rep report, logBytes int64) sample {
	k, d := c.end.kube.minus(c.start.kube), c.end.ddb.minus(c.start.ddb)
	return sample{
		Function: fn, Action: action, Cold: cold,
		Wall:         rep.Duration,
		CPU:          c.end.cpu.since(c.start.cpu),
		PeakRSS:      c.end.hwm,
		KubeRequests: k.requests, KubeBytes: k.bytes,
		DDBReads: d.reads, DDBWrites: d.writes,
		LogBytes: logBytes,
	}
}

// initSample is the start-up phase: from the bootstrap's exec to its first
// request for work. (The emulator's Init Duration does not cover it: the
// emulator reports its own set-up only.)
func initSample(fn string, st started) sample {
	m := st.mark
	return sample{
		Function: fn, Action: actionInit,
		Wall:         m.at.Sub(st.execAt),
		CPU:          m.cpu.since(cpuSample{}),
		PeakRSS:      m.hwm,
		KubeRequests: m.kube.requests, KubeBytes: m.kube.bytes,
		DDBReads: m.ddb.reads, DDBWrites: m.ddb.writes,
	}
}
