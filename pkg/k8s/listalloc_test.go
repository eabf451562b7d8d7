package k8s

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/internal/fake/fakekubeapi"
)

// replay answers each request the way the double first answered it, from
// memory: a read measured through it pays for the read alone, not for the
// double building and encoding the objects in the same process.
type replay struct {
	mu    sync.Mutex
	seen  map[string]recorded
	proxy *httputil.ReverseProxy
}

type recorded struct {
	status      int
	contentType string
	body        []byte
}

func newReplay(t testing.TB, s *fakekubeapi.Server) *httptest.Server {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := &replay{seen: map[string]recorded{}, proxy: httputil.NewSingleHostReverseProxy(u)}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func (r *replay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	key := req.Header.Get("Accept") + " " + req.URL.String()
	r.mu.Lock()
	rec, ok := r.seen[key]
	r.mu.Unlock()
	if !ok {
		rw := httptest.NewRecorder()
		r.proxy.ServeHTTP(rw, req)
		res := rw.Result()
		body, _ := io.ReadAll(res.Body)
		rec = recorded{status: res.StatusCode, contentType: res.Header.Get("Content-Type"), body: body}
		r.mu.Lock()
		r.seen[key] = rec
		r.mu.Unlock()
	}
	w.Header().Set("Content-Type", rec.contentType)
	w.WriteHeader(rec.status)
	// Chunked, as an API server sends a long list: the client cannot size
	// its buffer from a Content-Length.
	io.Copy(w, bytes.NewReader(rec.body))
}

// replayClient reads the double's cluster through a replay, as the read
// path asks (protobuf, else JSON).
func replayClient(t testing.TB, shape fakekubeapi.Shape) kubernetes.Interface {
	t.Helper()
	s := startDouble(t, shape)
	srv := newReplay(t, s)
	cfg := s.Config()
	cfg.Host = srv.URL
	client, err := kubernetes.NewForConfig(ReadConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	// The first read records every page.
	if _, err := List(t.Context(), client); err != nil {
		t.Fatal(err)
	}
	return client
}

// maxAllocPerPod bounds what a trimmed List allocates per pod, the pod kept
// included (about 1.3 KB). Decoding each pod whole, then trimming it, took
// about 29 KB a pod here, most of it garbage at once; pruned on the wire,
// about 8 KB.
const maxAllocPerPod = 10000

// A trimmed cold List allocates little per pod beyond what it keeps: the
// garbage of decoding whole pods is what made a cold read at scale costly.
func TestTrimmedListAllocatesLittlePerPod(t *testing.T) {
	client := replayClient(t, fakekubeapi.Shape{Nodes: 100, Pods: 3000, Seed: 1})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	objs, err := List(t.Context(), client)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	perPod := int(after.TotalAlloc-before.TotalAlloc) / len(objs.Pods)
	t.Logf("%d pods: %d bytes allocated per pod", len(objs.Pods), perPod)
	if perPod > maxAllocPerPod {
		t.Errorf("a trimmed List allocates %d bytes per pod, want at most %d", perPod, maxAllocPerPod)
	}
}

// BenchmarkColdReadPods is a cold read's client side at 3,000 pods shaped
// like a real API server's, served from memory (the double's own cost left
// out): B/op and allocs/op are stable on a loaded machine, ns/op less so.
func BenchmarkColdReadPods(b *testing.B) {
	client := replayClient(b, fakekubeapi.Shape{Nodes: 100, Pods: 3000, Seed: 1})
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := NewReader(client, nil).Read(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(3000, "pods/op")
}
