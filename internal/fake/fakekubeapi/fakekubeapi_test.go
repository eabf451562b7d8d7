package fakekubeapi

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// get is the body of a GET of path asking for accept.
func get(t *testing.T, s *Server, path, accept string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, res.StatusCode, err)
	}
	if got := res.Header.Get("Content-Type"); accept == protobufType && got != protobufType {
		t.Fatalf("GET %s: content type %q", path, got)
	}
	return b
}

// Lists served from kept encodings are byte for byte what the protobuf
// serializer writes for the same objects, before and after churn; JSON is
// served as ever.
func TestKeepEncodedServesTheSerializersBytes(t *testing.T) {
	shape := Shape{Nodes: 20, Pods: 300, Seed: 3}
	plain, err := Start(shape)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	shape.KeepEncoded = true
	kept, err := Start(shape)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	paths := []string{"/api/v1/nodes?limit=7", "/api/v1/pods?limit=100", "/api/v1/pods?limit=100&continue=200",
		"/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets?limit=2"}
	for round := range 2 {
		if round == 1 {
			plain.Churn(30)
			kept.Churn(30)
		}
		for _, p := range paths {
			for _, accept := range []string{protobufType, "application/json"} {
				if want, got := get(t, plain, p, accept), get(t, kept, p, accept); !bytes.Equal(got, want) {
					t.Errorf("round %d: GET %s as %s: %d bytes kept encoded, want the serializer's %d", round, p, accept, len(got), len(want))
				}
			}
		}
	}
}
