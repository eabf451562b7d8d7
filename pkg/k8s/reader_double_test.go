package k8s

import (
	"reflect"
	"slices"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/k8s/apidouble"
)

func doubleClient(t testing.TB, s *apidouble.Server, protobuf bool) kubernetes.Interface {
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

func startDouble(t testing.TB, shape apidouble.Shape) *apidouble.Server {
	t.Helper()
	s, err := apidouble.Start(shape)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Against the double: a warm reader that catches up with churn holds what a
// fresh list reads, in JSON and protobuf; a forgotten history lists afresh.
func TestReaderCatchUpMatchesList(t *testing.T) {
	for _, protobuf := range []bool{false, true} {
		s := startDouble(t, apidouble.Shape{Nodes: 30, Pods: 900, Seed: 1})
		client := doubleClient(t, s, protobuf)
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
				t.Fatalf("protobuf %v round %d: caught-up read differs from a fresh list (%d/%d pods)", protobuf, round, len(got.Pods), len(want.Pods))
			}
			wantListed := []string(nil)
			if round == 2 {
				wantListed = []string{"nodes", "pods", "poddisruptionbudgets"}
			}
			if !slices.Equal(st.Listed, wantListed) {
				t.Errorf("protobuf %v round %d: listed %v, want %v", protobuf, round, st.Listed, wantListed)
			}
		}
	}
}

func BenchmarkListTrimmed(b *testing.B) {
	s := startDouble(b, apidouble.Shape{Nodes: 100, Pods: 3000, Seed: 1})
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
	s := startDouble(b, apidouble.Shape{Nodes: 100, Pods: 3000, Seed: 1})
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
