package fakescaleway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/scaleway/scaleway-sdk-go/api/instance/v1"
	k8s "github.com/scaleway/scaleway-sdk-go/api/k8s/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

const key = "3b0c9a2e-5d41-4f6a-8e7b-9c0d1e2f3a4b"

// sdk returns the real SDK's APIs pointed at the double, authenticated with
// secret ("" for none).
func sdk(t *testing.T, s *Server, secret string) (*k8s.API, *instance.API) {
	t.Helper()
	opts := []scw.ClientOption{scw.WithAPIURL(s.URL()), scw.WithDefaultRegion(s.Region()), scw.WithHTTPClient(s.Client())}
	if secret != "" {
		opts = append(opts, scw.WithAuth("SCWXXXXXXXXXXXXXXXXX", secret))
	}
	c, err := scw.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return k8s.NewAPI(c), instance.NewAPI(c)
}

func newDouble(t *testing.T, opts Options) *Server {
	t.Helper()
	opts.SecretKey = key
	s := New(opts)
	t.Cleanup(s.Close)
	return s
}

func TestAuthentication(t *testing.T) {
	s := newDouble(t, Options{})
	for _, tt := range []struct {
		name, secret, reason string
	}{
		{"no token", "", "invalid_argument"},
		{"wrong token", "00000000-0000-4000-8000-000000000000", "not_found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api, _ := sdk(t, s, tt.secret)
			_, err := api.ListPools(&k8s.ListPoolsRequest{ClusterID: s.ClusterID()})
			var denied *scw.DeniedAuthenticationError
			if !errors.As(err, &denied) || denied.Method != "api_key" || denied.Reason != tt.reason {
				t.Fatalf("got %v (%T), want denied_authentication %s", err, err, tt.reason)
			}
		})
	}
}

func TestPoolsAndNodesThroughTheSDK(t *testing.T) {
	var mu sync.Mutex
	var created, deleted []k8s.Node
	s := newDouble(t, Options{
		PageSize: 2,
		OnCreate: func(n k8s.Node) { mu.Lock(); created = append(created, n); mu.Unlock() },
		OnDelete: func(n k8s.Node) { mu.Lock(); deleted = append(deleted, n); mu.Unlock() },
	})
	pool := s.AddPool(PoolSpec{Name: "workers", Size: 3, MinSize: 1, MaxSize: 5, Tags: []string{"nodetide"}})
	s.AddPool(PoolSpec{Name: "other", Size: 0})
	api, _ := sdk(t, s, key)

	pools, err := api.ListPools(&k8s.ListPoolsRequest{ClusterID: s.ClusterID()}, scw.WithAllPages())
	if err != nil || len(pools.Pools) != 2 || pools.TotalCount != 2 {
		t.Fatalf("ListPools: %+v, %v", pools, err)
	}
	nodes, err := api.ListNodes(&k8s.ListNodesRequest{ClusterID: s.ClusterID(), PoolID: &pool.ID}, scw.WithAllPages())
	if err != nil || len(nodes.Nodes) != 3 {
		t.Fatalf("ListNodes: %+v, %v", nodes, err)
	}
	if s.Count(OpListNodes) != 2 {
		t.Errorf("%d node pages, want 2", s.Count(OpListNodes))
	}

	// Growing creates nodes that wait for Boot.
	got, err := api.UpdatePool(&k8s.UpdatePoolRequest{PoolID: pool.ID, Size: scw.Uint32Ptr(5)})
	if err != nil || got.Size != 5 || got.Status != k8s.PoolStatusScaling {
		t.Fatalf("UpdatePool: %+v, %v", got, err)
	}
	if len(created) != 2 || created[0].Status != k8s.NodeStatusCreating {
		t.Fatalf("OnCreate saw %+v", created)
	}
	if booted := s.Boot(pool.ID); len(booted) != 2 {
		t.Fatalf("booted %d", len(booted))
	}
	if p, _ := s.Pool(pool.ID); p.Status != k8s.PoolStatusReady {
		t.Errorf("pool %s after boot", p.Status)
	}

	// Above max and below min are invalid arguments when the pool
	// autoscales (min/max are autoscaler settings).
	for _, size := range []uint32{6, 0} {
		_, err = api.UpdatePool(&k8s.UpdatePoolRequest{PoolID: pool.ID, Size: scw.Uint32Ptr(size), Autoscaling: scw.BoolPtr(true)})
		var invalid *scw.InvalidArgumentsError
		if !errors.As(err, &invalid) || invalid.Details[0].ArgumentName != "size" {
			t.Errorf("size %d: got %v", size, err)
		}
	}

	// Deleting a node shrinks the pool; a second delete is a transient state.
	n := created[0]
	if _, err := api.DeleteNode(&k8s.DeleteNodeRequest{NodeID: n.ID}); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Pool(pool.ID); p.Size != 4 {
		t.Errorf("size %d after delete, want 4", p.Size)
	}
	_, err = api.DeleteNode(&k8s.DeleteNodeRequest{NodeID: n.ID})
	var transient *scw.TransientStateError
	if !errors.As(err, &transient) || transient.CurrentState != "deleting" {
		t.Errorf("second delete: %v", err)
	}
	if len(deleted) != 1 || deleted[0].ID != n.ID {
		t.Errorf("OnDelete saw %+v", deleted)
	}
	if s.Reap() != 1 {
		t.Error("nothing reaped")
	}
	_, err = api.GetNode(&k8s.GetNodeRequest{NodeID: n.ID})
	var notFound *scw.ResourceNotFoundError
	if !errors.As(err, &notFound) || notFound.Resource != "k8s_node" || notFound.ResourceID != n.ID {
		t.Errorf("get reaped node: %v", err)
	}
	// Shrinking by size removes nodes too.
	if _, err := api.UpdatePool(&k8s.UpdatePoolRequest{PoolID: pool.ID, Size: scw.Uint32Ptr(3)}); err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 2 {
		t.Errorf("OnDelete saw %d nodes, want 2", len(deleted))
	}
}

func TestQuotaAndFaults(t *testing.T) {
	s := newDouble(t, Options{})
	pool := s.AddPool(PoolSpec{Name: "p", Size: 1, MaxSize: 10})
	api, _ := sdk(t, s, key)

	s.SetQuota(3)
	_, err := api.UpdatePool(&k8s.UpdatePoolRequest{PoolID: pool.ID, Size: scw.Uint32Ptr(4)})
	var quota *scw.QuotasExceededError
	if !errors.As(err, &quota) || quota.Details[0].Quota != 3 || quota.Details[0].Current != 1 {
		t.Fatalf("got %v", err)
	}

	s.Inject(Fault{Op: OpGetPool, Status: 503, Times: 2})
	s.Inject(Fault{Status: 429})
	for i, want := range []int{503, 503, 429} {
		_, err := api.GetPool(&k8s.GetPoolRequest{PoolID: pool.ID})
		var re *scw.ResponseError
		if !errors.As(err, &re) || re.StatusCode != want {
			t.Fatalf("call %d: got %v, want %d", i, err, want)
		}
	}
	if _, err := api.GetPool(&k8s.GetPoolRequest{PoolID: pool.ID}); err != nil {
		t.Fatalf("faults outlived their count: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := api.GetPool(&k8s.GetPoolRequest{PoolID: pool.ID}, scw.WithContext(ctx)); err == nil {
		t.Error("a cancelled call succeeded")
	}
}

func TestServerTypes(t *testing.T) {
	s := newDouble(t, Options{PageSize: 3})
	_, api := sdk(t, s, key)
	s.AddServerType(scw.ZoneFrPar2, "TINY-1", instance.ServerType{Ncpus: 1, RAM: 1 << 30})
	resp, err := api.ListServersTypes(&instance.ListServersTypesRequest{Zone: scw.ZoneFrPar2}, scw.WithAllPages())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Servers) != len(defaultCatalogue())+1 || resp.Servers["GP1-XS"].Ncpus != 4 || resp.Servers["TINY-1"] == nil {
		t.Fatalf("got %d types", len(resp.Servers))
	}
	if _, err := api.ListServersTypes(&instance.ListServersTypesRequest{Zone: scw.ZoneNlAms1}); err == nil {
		t.Error("a zone outside the region answered")
	}
}

func TestRawFaultsAndRetryAfter(t *testing.T) {
	s := newDouble(t, Options{})
	pool := s.AddPool(PoolSpec{Name: "p", Size: 1, MaxSize: 10})
	s.Inject(Fault{Op: OpGetPool, Status: 502, RawBody: "<html>502 Bad Gateway</html>"})
	s.Inject(Fault{Op: OpGetPool, Status: 429, RetryAfter: "7"})
	get := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/k8s/v1/regions/"+s.Region().String()+"/pools/"+pool.ID, nil)
		req.Header.Set("X-Auth-Token", key)
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := get()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || string(body) != "<html>502 Bad Gateway</html>" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("raw fault: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp = get()
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("429: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Through the SDK, the raw body is an error it cannot parse.
	api, _ := sdk(t, s, key)
	s.Inject(Fault{Op: OpGetPool, Status: 500, RawBody: `{"message": "cut`})
	_, err := api.GetPool(&k8s.GetPoolRequest{PoolID: pool.ID})
	var re *scw.ResponseError
	if err == nil || errors.As(err, &re) {
		t.Errorf("SDK on a cut-off body: %v", err)
	}
	if n := len(s.Requests()); n < 3 {
		t.Errorf("%d requests logged", n)
	}
}
