package k8s

import (
	"net/http"
	"reflect"
	"slices"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/internal/fake/fakekubeapi"
)

func doubleClient(t testing.TB, s *fakekubeapi.Server, protobuf bool) kubernetes.Interface {
	t.Helper()
	cfg := s.Config()
	if protobuf {
		cfg = ReadConfig(cfg)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func startDouble(t testing.TB, shape fakekubeapi.Shape) *fakekubeapi.Server {
	t.Helper()
	s, err := fakekubeapi.Start(shape)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Against the double: a warm reader that catches up with churn holds what a
// fresh list reads, over JSON, over protobuf, and asking for protobuf from a
// server that answers JSON; a forgotten history lists afresh.
func TestReaderCatchUpMatchesList(t *testing.T) {
	tests := []struct {
		name               string
		protobuf, jsonOnly bool
		wantContentType    string
	}{
		{name: "json", wantContentType: "application/json"},
		{name: "protobuf", protobuf: true, wantContentType: Protobuf},
		{name: "protobuf asked, json served", protobuf: true, jsonOnly: true, wantContentType: "application/json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := startDouble(t, fakekubeapi.Shape{Nodes: 30, Pods: 900, Seed: 1, JSONOnly: tc.jsonOnly})
			var mu sync.Mutex
			types := map[string]bool{}
			cfg := s.Config()
			if tc.protobuf {
				cfg = ReadConfig(cfg)
			} else {
				cfg.ContentType = "application/json"
			}
			cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(r *http.Request) (*http.Response, error) {
					resp, err := rt.RoundTrip(r)
					// The double does not serve the volume kinds: its 404s
					// are plain text.
					if err == nil && resp.StatusCode < 300 {
						mu.Lock()
						types[resp.Header.Get("Content-Type")] = true
						mu.Unlock()
					}
					return resp, err
				})
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := NewReader(client, nil, WithPageSize(100))
			if _, _, err := r.Read(t.Context()); err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				s.Churn(60)
				if round == 2 {
					s.Forget()
					s.Churn(3)
				}
				got, st, err := r.Read(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				want, err := List(t.Context(), client, WithPageSize(100))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d: caught-up read differs from a fresh list (%d/%d pods)", round, len(got.Pods), len(want.Pods))
				}
				// A server that refuses the volume kinds leaves them out
				// and says so, and the read goes on.
				if got.VolumesSkipped == "" || got.PersistentVolumeClaims != nil {
					t.Fatalf("round %d: volumes skipped %q, %d claims: want skipped", round, got.VolumesSkipped, len(got.PersistentVolumeClaims))
				}
				wantListed := []string(nil)
				if round == 2 {
					wantListed = []string{"nodes", "pods", "poddisruptionbudgets"}
				}
				if !slices.Equal(st.Listed, wantListed) {
					t.Errorf("round %d: listed %v, want %v", round, st.Listed, wantListed)
				}
			}
			if len(types) != 1 || !types[tc.wantContentType] {
				t.Errorf("served %v, want only %s", types, tc.wantContentType)
			}
		})
	}
}

func BenchmarkListTrimmed(b *testing.B) {
	s := startDouble(b, fakekubeapi.Shape{Nodes: 100, Pods: 3000, Seed: 1})
	client := doubleClient(b, s, true)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := List(b.Context(), client); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(3000, "pods/op")
}

func BenchmarkCatchUp1000Changes(b *testing.B) {
	s := startDouble(b, fakekubeapi.Shape{Nodes: 100, Pods: 3000, Seed: 1})
	client := doubleClient(b, s, true)
	r := NewReader(client, nil)
	if _, _, err := r.Read(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		s.Churn(1000)
		b.StartTimer()
		if _, st, err := r.Read(b.Context()); err != nil || len(st.Listed) > 0 {
			b.Fatalf("read: %v, listed %v", err, st.Listed)
		}
	}
}
