// Package fakescaleway is a stand-in for the parts of the Scaleway API that the
// scaleway node-group provider calls: Kapsule pools and nodes (k8s/v1) and the
// Instance server-type catalogue (instance/v1). It is an httptest server that
// speaks the real paths and the JSON shapes of scaleway-sdk-go, so the real SDK
// client is what talks to it (point scw.WithAPIURL at URL()).
//
// Nodes a size increase creates start "creating" and stay so until the test
// says otherwise (Boot, SetNodeStatus); OnCreate lets a test bed register a
// Kubernetes Node with the same provider ID. Faults (5xx, 429, slow answers)
// are injected with Inject; quotas with SetQuota.
//
// Where it may differ from Scaleway:
//   - Which nodes a size decrease removes: the double takes nodes that are not
//     ready first (newest first), then ready ones; Kapsule does not document
//     its choice.
//   - The double rejects a size outside [min_size, max_size] only when the
//     pool autoscales, as the API documents min/max ("only used when
//     autoscaling is enabled"); whether Kapsule caps a pool's size otherwise
//     (a per-cluster node limit, say) is not modelled.
//   - Nodes get their provider_id at once; Kapsule can leave it empty while
//     the Instance is being created.
//   - Deleted nodes stay listed as "deleting" until Reap; Kapsule removes them
//     on its own schedule. Deleting a node twice answers 409 transient_state.
//   - Error bodies for 5xx and 429 are guesses ({"message": ...}); the SDK
//     treats any such body as a plain ResponseError, as it would the real one.
//     A fault can instead send a raw body the SDK cannot parse (a load
//     balancer's page, a cut-off document) and a Retry-After header; when
//     and with what value Scaleway sends Retry-After is not documented.
//   - The name filter of list calls is a substring match; order_by is ignored
//     (creation order); default page sizes (20, and 50 for server types) and
//     the 100 cap are assumed.
//   - The server-type catalogue is a small fixed sample with plausible specs
//     and prices (hourly_price in EUR, 0.01 per vCPU, and the deprecated
//     monthly_price at 730 hours), the same in every zone of the region, not
//     Scaleway's price list; AddServerType sets a type's own.
//   - Quotas count the cluster's nodes only, not the project's other Instances.
package fakescaleway

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scaleway/scaleway-sdk-go/api/instance/v1"
	k8s "github.com/scaleway/scaleway-sdk-go/api/k8s/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
)

// Operations, as the SDK methods that call them are named. Faults and the
// request log use them.
const (
	OpMetadata         = "GetAPIMetadata"
	OpListPools        = "ListPools"
	OpGetPool          = "GetPool"
	OpUpdatePool       = "UpdatePool"
	OpListNodes        = "ListNodes"
	OpGetNode          = "GetNode"
	OpDeleteNode       = "DeleteNode"
	OpListServersTypes = "ListServersTypes"
)

// MaxPageSize is the largest page_size (per_page) the API accepts.
const MaxPageSize = 100

// Options configure a double.
type Options struct {
	// SecretKey is the only X-Auth-Token accepted (required).
	SecretKey string
	// Region defaults to fr-par; ClusterID to a fresh UUID.
	Region    scw.Region
	ClusterID string
	// PageSize caps the items per page below what the client asks, so tests
	// can exercise pagination with a few items; 0 means no cap.
	PageSize int
	// OnCreate is called for each node a size increase creates, before the
	// API call answers (outside the double's lock).
	OnCreate func(k8s.Node)
	// OnDelete is called for each node that starts deleting.
	OnDelete func(k8s.Node)
}

// PoolSpec describes a pool added with AddPool. Size nodes are created ready.
type PoolSpec struct {
	Name        string
	NodeType    string   // default "DEV1-M"
	Zone        scw.Zone // default the region's first zone
	Size        int
	MinSize     int
	MaxSize     int // default Size
	Autoscaling bool
	Tags        []string
	Labels      map[string]string
	Taints      []k8s.CoreV1Taint
	KubeletArgs map[string]string
}

// Fault makes matching requests fail or stall.
type Fault struct {
	// Op is the operation to hit (Op* constants); "" hits any but metadata.
	Op string
	// Status is the HTTP status to answer, e.g. 500, 503, 429; 0 answers
	// normally after Delay.
	Status int
	// Times is how many matching requests the fault hits; 0 means 1.
	Times int
	// Delay is waited before answering (or until the client gives up).
	Delay time.Duration
	// RetryAfter, when set, is sent as the Retry-After header (seconds or an
	// HTTP date), as Scaleway's rate limiter does on 429.
	RetryAfter string
	// RawBody, when set, is the answer's body as is, under Content-Type
	// application/json: e.g. a proxy's HTML page or a cut-off document, which
	// the SDK cannot parse.
	RawBody string
}

// Request is one request the double answered.
type Request struct {
	Op     string
	Method string
	Path   string
	Query  url.Values
	Status int
}

// Server is the double. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	srv  *httptest.Server

	mu          sync.Mutex
	pools       map[string]*k8s.Pool
	poolOrder   []string
	nodes       map[string]*k8s.Node
	nodeOrder   []string
	serverTypes map[scw.Zone]map[string]*instance.ServerType
	faults      []Fault
	quota       int // max live nodes in the cluster; 0 = none
	log         []Request
}

// New starts a double; Close stops it.
func New(opts Options) *Server {
	if opts.SecretKey == "" {
		panic("fakescaleway: Options.SecretKey is required")
	}
	if opts.Region == "" {
		opts.Region = scw.RegionFrPar
	}
	if opts.ClusterID == "" {
		opts.ClusterID = newUUID()
	}
	s := &Server{
		opts:        opts,
		pools:       map[string]*k8s.Pool{},
		nodes:       map[string]*k8s.Node{},
		serverTypes: map[scw.Zone]map[string]*instance.ServerType{},
	}
	for _, z := range opts.Region.GetZones() {
		s.serverTypes[z] = defaultCatalogue()
	}
	s.srv = httptest.NewServer(s.routes())
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// URL is the API URL to give scw.WithAPIURL (no trailing slash).
func (s *Server) URL() string { return s.srv.URL }

// Client is an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// ClusterID is the only cluster the double knows.
func (s *Server) ClusterID() string { return s.opts.ClusterID }

// Region is the only region the double serves.
func (s *Server) Region() scw.Region { return s.opts.Region }

// AddPool creates a pool with spec.Size ready nodes and returns it.
func (s *Server) AddPool(spec PoolSpec) k8s.Pool {
	if spec.NodeType == "" {
		spec.NodeType = "DEV1-M"
	}
	if spec.Zone == "" {
		spec.Zone = s.opts.Region.GetZones()[0]
	}
	if spec.MaxSize == 0 {
		spec.MaxSize = spec.Size
	}
	now := time.Now().UTC()
	p := &k8s.Pool{
		ID:               newUUID(),
		ClusterID:        s.opts.ClusterID,
		CreatedAt:        &now,
		UpdatedAt:        &now,
		Name:             spec.Name,
		Status:           k8s.PoolStatusReady,
		Version:          "1.32.3",
		NodeType:         spec.NodeType,
		Autoscaling:      spec.Autoscaling,
		Size:             uint32(spec.Size),
		MinSize:          uint32(spec.MinSize),
		MaxSize:          uint32(spec.MaxSize),
		ContainerRuntime: k8s.RuntimeContainerd,
		Autohealing:      true,
		Tags:             append([]string{}, spec.Tags...),
		KubeletArgs:      spec.KubeletArgs,
		UpgradePolicy:    &k8s.PoolUpgradePolicy{MaxUnavailable: 1},
		Zone:             spec.Zone,
		RootVolumeType:   k8s.PoolVolumeTypeSbs5k,
		Labels:           spec.Labels,
		Region:           s.opts.Region,
	}
	if p.KubeletArgs == nil {
		p.KubeletArgs = map[string]string{}
	}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Taints = []*k8s.CoreV1Taint{}
	for i := range spec.Taints {
		t := spec.Taints[i]
		p.Taints = append(p.Taints, &t)
	}
	p.StartupTaints = []*k8s.CoreV1Taint{}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pools[p.ID] = p
	s.poolOrder = append(s.poolOrder, p.ID)
	for range spec.Size {
		s.newNodeLocked(p, k8s.NodeStatusReady)
	}
	return s.poolViewLocked(p)
}

// AddServerType adds (or replaces) a server type in zone's catalogue.
func (s *Server) AddServerType(zone scw.Zone, name string, st instance.ServerType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serverTypes[zone] == nil {
		s.serverTypes[zone] = map[string]*instance.ServerType{}
	}
	s.serverTypes[zone][name] = &st
}

// Pool returns the pool with that ID.
func (s *Server) Pool(id string) (k8s.Pool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pools[id]
	if !ok {
		return k8s.Pool{}, false
	}
	return s.poolViewLocked(p), true
}

// SetPool changes a pool's settings in place (as someone editing it in the
// console would); it does not create or remove nodes.
func (s *Server) SetPool(id string, edit func(*k8s.Pool)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pools[id]
	if !ok {
		return fmt.Errorf("fakescaleway: no pool %s", id)
	}
	edit(p)
	return nil
}

// Nodes returns the pool's nodes (all pools when poolID is empty), in creation
// order.
func (s *Server) Nodes(poolID string) []k8s.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []k8s.Node
	for _, id := range s.nodeOrder {
		if n := s.nodes[id]; poolID == "" || n.PoolID == poolID {
			out = append(out, *n)
		}
	}
	return out
}

// Boot makes every node of the pool that is being created ready, as Kapsule
// does once the Instance has joined; it returns them.
func (s *Server) Boot(poolID string) []k8s.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []k8s.Node
	for _, id := range s.nodeOrder {
		n := s.nodes[id]
		if n.PoolID != poolID || !creating(n.Status) {
			continue
		}
		s.setStatusLocked(n, k8s.NodeStatusReady, "")
		out = append(out, *n)
	}
	return out
}

// SetNodeStatus sets one node's status (and error message, for
// creation_error).
func (s *Server) SetNodeStatus(nodeID string, status k8s.NodeStatus, errMsg string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[nodeID]
	if !ok {
		return fmt.Errorf("fakescaleway: no node %s", nodeID)
	}
	s.setStatusLocked(n, status, errMsg)
	return nil
}

// Reap removes the nodes that are deleting, as Kapsule does once their
// Instances are gone; it returns how many.
func (s *Server) Reap() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	s.nodeOrder = slices.DeleteFunc(s.nodeOrder, func(id string) bool {
		if s.nodes[id].Status == k8s.NodeStatusDeleting {
			delete(s.nodes, id)
			n++
			return true
		}
		return false
	})
	return n
}

// Inject queues a fault; faults are used in the order they were injected.
func (s *Server) Inject(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// SetQuota limits the cluster to n live nodes (0: no limit); growing past it
// answers quotas_exceeded.
func (s *Server) SetQuota(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quota = n
}

// Requests returns the requests answered so far, metadata ones excluded.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Count is how many requests for op were answered (any status).
func (s *Server) Count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.log {
		if r.Op == op {
			n++
		}
	}
	return n
}

// ---- HTTP ----

type handler func(w http.ResponseWriter, r *http.Request) (status int, body any)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	const k = "/k8s/v1/regions/{region}"
	mux.Handle("GET /metadata", s.wrap(OpMetadata, false, s.metadata))
	mux.Handle("GET "+k+"/clusters/{cluster}/pools", s.wrap(OpListPools, true, s.listPools))
	mux.Handle("GET "+k+"/pools/{pool}", s.wrap(OpGetPool, true, s.getPool))
	mux.Handle("PATCH "+k+"/pools/{pool}", s.wrap(OpUpdatePool, true, s.updatePool))
	mux.Handle("GET "+k+"/clusters/{cluster}/nodes", s.wrap(OpListNodes, true, s.listNodes))
	mux.Handle("GET "+k+"/nodes/{node}", s.wrap(OpGetNode, true, s.getNode))
	mux.Handle("DELETE "+k+"/nodes/{node}", s.wrap(OpDeleteNode, true, s.deleteNode))
	mux.Handle("GET /instance/v1/zones/{zone}/products/servers", s.wrap(OpListServersTypes, true, s.listServersTypes))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "no such route: " + r.Method + " " + r.URL.Path})
	})
	return mux
}

// wrap checks the token, applies faults, answers and logs.
func (s *Server) wrap(op string, auth bool, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body := s.serve(op, auth, h, w, r)
		if status == 0 {
			return // the client went away
		}
		written := status < 0 // a raw fault body, already sent
		if written {
			status = -status
		}
		if op != OpMetadata {
			s.mu.Lock()
			s.log = append(s.log, Request{Op: op, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Status: status})
			s.mu.Unlock()
		}
		if !written {
			writeJSON(w, status, body)
		}
	})
}

func (s *Server) serve(op string, auth bool, h handler, w http.ResponseWriter, r *http.Request) (int, any) {
	if auth {
		token := r.Header.Get("X-Auth-Token")
		switch {
		case token == "":
			return deniedAuth("invalid_argument")
		case token != s.opts.SecretKey:
			return deniedAuth("not_found")
		}
	}
	if f, ok := s.takeFault(op); ok {
		if f.Delay > 0 {
			select {
			case <-time.After(f.Delay):
			case <-r.Context().Done():
				return 0, nil
			}
		}
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		if f.Status != 0 && f.RawBody != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.Status)
			_, _ = w.Write([]byte(f.RawBody))
			return -f.Status, nil // answered here
		}
		if f.Status != 0 {
			return f.Status, faultBody(f.Status)
		}
	}
	if region := r.PathValue("region"); region != "" && region != s.opts.Region.String() {
		return notFound("region", region)
	}
	if cluster := r.PathValue("cluster"); cluster != "" && cluster != s.opts.ClusterID {
		return notFound("k8s_cluster", cluster)
	}
	return h(w, r)
}

func (s *Server) takeFault(op string) (Fault, bool) {
	if op == OpMetadata {
		return Fault{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		f := &s.faults[i]
		if f.Op != "" && f.Op != op {
			continue
		}
		got := *f
		f.Times--
		if f.Times == 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		return got, true
	}
	return Fault{}, false
}

func (s *Server) metadata(http.ResponseWriter, *http.Request) (int, any) {
	return http.StatusOK, map[string]string{"platform": "external", "partition": "scw", "domain": "scw.eu"}
}

func (s *Server) listPools(_ http.ResponseWriter, r *http.Request) (int, any) {
	q := r.URL.Query()
	page, size, status, body := s.paging(q, "page_size")
	if status != 0 {
		return status, body
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*k8s.Pool
	for _, id := range s.poolOrder {
		p := s.pools[id]
		view := s.poolViewLocked(p)
		if name := q.Get("name"); name != "" && !strings.Contains(p.Name, name) {
			continue
		}
		if st := q.Get("status"); st != "" && st != "unknown" && string(view.Status) != st {
			continue
		}
		all = append(all, &view)
	}
	return http.StatusOK, k8s.ListPoolsResponse{TotalCount: uint64(len(all)), Pools: pageOf(all, page, size)}
}

func (s *Server) getPool(_ http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pools[r.PathValue("pool")]
	if !ok {
		return notFound("k8s_pool", r.PathValue("pool"))
	}
	return http.StatusOK, s.poolViewLocked(p)
}

func (s *Server) updatePool(_ http.ResponseWriter, r *http.Request) (int, any) {
	var req k8s.UpdatePoolRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return invalidArgument("body", "format", "not valid JSON")
	}
	var created, deleted []k8s.Node
	status, body := func() (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p, ok := s.pools[r.PathValue("pool")]
		if !ok {
			return notFound("k8s_pool", r.PathValue("pool"))
		}
		minSize, maxSize, size := p.MinSize, p.MaxSize, p.Size
		if req.MinSize != nil {
			minSize = *req.MinSize
		}
		if req.MaxSize != nil {
			maxSize = *req.MaxSize
		}
		if req.Size != nil {
			size = *req.Size
		}
		if minSize > maxSize {
			return invalidArgument("min_size", "constraint", "min_size must be lower or equal to max_size")
		}
		autoscaling := p.Autoscaling
		if req.Autoscaling != nil {
			autoscaling = *req.Autoscaling
		}
		// min_size and max_size are documented as used only when the pool
		// autoscales.
		if autoscaling && size > maxSize {
			return invalidArgument("size", "constraint", fmt.Sprintf("size must be lower or equal to max_size (%d)", maxSize))
		}
		if autoscaling && size < minSize {
			return invalidArgument("size", "constraint", fmt.Sprintf("size must be greater or equal to min_size (%d)", minSize))
		}
		if size > p.Size && s.quota > 0 {
			if live := s.liveNodesLocked(""); live+int(size-p.Size) > s.quota {
				return http.StatusForbidden, map[string]any{
					"type":    "quotas_exceeded",
					"message": "quota(s) exceeded for this resource",
					"details": []map[string]any{{"resource": "instances", "quota": s.quota, "current": live}},
				}
			}
		}
		p.MinSize, p.MaxSize = minSize, maxSize
		if req.Autoscaling != nil {
			p.Autoscaling = *req.Autoscaling
		}
		if req.Autohealing != nil {
			p.Autohealing = *req.Autohealing
		}
		if req.Tags != nil {
			p.Tags = append([]string{}, *req.Tags...)
		}
		if req.KubeletArgs != nil {
			p.KubeletArgs = *req.KubeletArgs
		}
		for ; p.Size < size; p.Size++ {
			created = append(created, *s.newNodeLocked(p, k8s.NodeStatusCreating))
		}
		if p.Size > size {
			deleted = s.shrinkLocked(p, int(p.Size-size))
			p.Size = size
		}
		now := time.Now().UTC()
		p.UpdatedAt = &now
		return http.StatusOK, s.poolViewLocked(p)
	}()
	for _, n := range created {
		if s.opts.OnCreate != nil {
			s.opts.OnCreate(n)
		}
	}
	for _, n := range deleted {
		if s.opts.OnDelete != nil {
			s.opts.OnDelete(n)
		}
	}
	return status, body
}

func (s *Server) listNodes(_ http.ResponseWriter, r *http.Request) (int, any) {
	q := r.URL.Query()
	page, size, status, body := s.paging(q, "page_size")
	if status != 0 {
		return status, body
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*k8s.Node
	for _, id := range s.nodeOrder {
		n := *s.nodes[id]
		if pool := q.Get("pool_id"); pool != "" && n.PoolID != pool {
			continue
		}
		if name := q.Get("name"); name != "" && !strings.Contains(n.Name, name) {
			continue
		}
		if st := q.Get("status"); st != "" && st != "unknown" && string(n.Status) != st {
			continue
		}
		all = append(all, &n)
	}
	return http.StatusOK, k8s.ListNodesResponse{TotalCount: uint64(len(all)), Nodes: pageOf(all, page, size)}
}

func (s *Server) getNode(_ http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[r.PathValue("node")]
	if !ok {
		return notFound("k8s_node", r.PathValue("node"))
	}
	return http.StatusOK, *n
}

// deleteNode removes the node and lowers its pool's size by one, as the SDK
// documents DeleteNode.
func (s *Server) deleteNode(_ http.ResponseWriter, r *http.Request) (int, any) {
	var deleted k8s.Node
	status, body := func() (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		id := r.PathValue("node")
		n, ok := s.nodes[id]
		if !ok {
			return notFound("k8s_node", id)
		}
		if n.Status == k8s.NodeStatusDeleting || n.Status == k8s.NodeStatusDeleted {
			return http.StatusConflict, map[string]any{
				"type": "transient_state", "message": "resource is in a transient state",
				"resource": "k8s_node", "resource_id": id, "current_state": string(n.Status),
			}
		}
		p := s.pools[n.PoolID]
		s.setStatusLocked(n, k8s.NodeStatusDeleting, "")
		if p.Size > 0 {
			p.Size--
		}
		deleted = *n
		return http.StatusOK, *n
	}()
	if status == http.StatusOK && s.opts.OnDelete != nil {
		s.opts.OnDelete(deleted)
	}
	return status, body
}

func (s *Server) listServersTypes(w http.ResponseWriter, r *http.Request) (int, any) {
	q := r.URL.Query()
	page, size, status, body := s.paging(q, "per_page")
	if status != 0 {
		return status, body
	}
	zone := scw.Zone(r.PathValue("zone"))
	s.mu.Lock()
	defer s.mu.Unlock()
	types, ok := s.serverTypes[zone]
	if !ok {
		return notFound("zone", zone.String())
	}
	names := make([]string, 0, len(types))
	for name := range types {
		names = append(names, name)
	}
	sort.Strings(names)
	out := map[string]*instance.ServerType{}
	for _, name := range pageOf(names, page, size) {
		st := *types[name]
		out[name] = &st
	}
	// The Instance API also gives the total in a header; the SDK reads both.
	w.Header().Set("X-Total-Count", strconv.Itoa(len(names)))
	return http.StatusOK, instance.ListServersTypesResponse{TotalCount: uint32(len(names)), Servers: out}
}

// ---- state helpers (s.mu held) ----

func (s *Server) poolViewLocked(p *k8s.Pool) k8s.Pool {
	v := *p
	v.Tags = slices.Clone(p.Tags)
	v.Status = k8s.PoolStatusReady
	for _, id := range s.nodeOrder {
		n := s.nodes[id]
		if n.PoolID == p.ID && (creating(n.Status) || n.Status == k8s.NodeStatusDeleting) {
			v.Status = k8s.PoolStatusScaling
			break
		}
	}
	return v
}

func (s *Server) newNodeLocked(p *k8s.Pool, status k8s.NodeStatus) *k8s.Node {
	now := time.Now().UTC()
	suffix := make([]byte, 16)
	_, _ = rand.Read(suffix)
	n := &k8s.Node{
		ID:         newUUID(),
		PoolID:     p.ID,
		ClusterID:  p.ClusterID,
		ProviderID: "scaleway://instance/" + p.Zone.String() + "/" + newUUID(),
		Region:     s.opts.Region,
		Name:       "scw-nodetide-" + p.Name + "-" + hex.EncodeToString(suffix),
		Status:     status,
		Conditions: map[string]string{},
		CreatedAt:  &now,
		UpdatedAt:  &now,
	}
	s.nodes[n.ID] = n
	s.nodeOrder = append(s.nodeOrder, n.ID)
	return n
}

func (s *Server) setStatusLocked(n *k8s.Node, status k8s.NodeStatus, errMsg string) {
	now := time.Now().UTC()
	n.Status = status
	n.UpdatedAt = &now
	n.ErrorMessage = nil
	if errMsg != "" {
		n.ErrorMessage = &errMsg
	}
	if status == k8s.NodeStatusReady {
		n.Conditions = map[string]string{"Ready": "True"}
	}
}

// shrinkLocked marks count nodes of p deleting: nodes not yet ready first,
// newest first.
func (s *Server) shrinkLocked(p *k8s.Pool, count int) []k8s.Node {
	var pending, ready []*k8s.Node
	for _, id := range slices.Backward(s.nodeOrder) {
		n := s.nodes[id]
		switch {
		case n.PoolID != p.ID || n.Status == k8s.NodeStatusDeleting || n.Status == k8s.NodeStatusDeleted:
		case n.Status == k8s.NodeStatusReady:
			ready = append(ready, n)
		default:
			pending = append(pending, n)
		}
	}
	var out []k8s.Node
	for _, n := range append(pending, ready...) {
		if len(out) == count {
			break
		}
		s.setStatusLocked(n, k8s.NodeStatusDeleting, "")
		out = append(out, *n)
	}
	return out
}

func (s *Server) liveNodesLocked(poolID string) int {
	n := 0
	for _, node := range s.nodes {
		if (poolID == "" || node.PoolID == poolID) && node.Status != k8s.NodeStatusDeleting && node.Status != k8s.NodeStatusDeleted {
			n++
		}
	}
	return n
}

func creating(st k8s.NodeStatus) bool {
	switch st {
	case k8s.NodeStatusCreating, k8s.NodeStatusStarting, k8s.NodeStatusRegistering:
		return true
	}
	return false
}

// paging reads page and the page-size parameter as Scaleway does: page from 1,
// size up to MaxPageSize (default 20 for k8s, 50 for instance), capped by
// Options.PageSize.
func (s *Server) paging(q url.Values, sizeParam string) (page, size, status int, body any) {
	page, size = 1, 20
	if sizeParam == "per_page" {
		size = 50
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			status, body = invalidArgument("page", "constraint", "page must be greater or equal to 1")
			return
		}
		page = n
	}
	if v := q.Get(sizeParam); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			status, body = invalidArgument(sizeParam, "constraint", fmt.Sprintf("%s must be between 1 and %d", sizeParam, MaxPageSize))
			return
		}
		size = n
	}
	if s.opts.PageSize > 0 && size > s.opts.PageSize {
		size = s.opts.PageSize
	}
	return page, size, 0, nil
}

func pageOf[T any](all []T, page, size int) []T {
	start := (page - 1) * size
	if start >= len(all) {
		return []T{}
	}
	return all[start:min(start+size, len(all))]
}

// ---- bodies, in the shapes scw/errors.go parses ----

func deniedAuth(reason string) (int, any) {
	return http.StatusUnauthorized, map[string]string{
		"message": "authentication is denied", "method": "api_key", "reason": reason, "type": "denied_authentication",
	}
}

func notFound(resource, id string) (int, any) {
	return http.StatusNotFound, map[string]string{
		"message": "resource is not found", "resource": resource, "resource_id": id, "type": "not_found",
	}
}

func invalidArgument(name, reason, help string) (int, any) {
	return http.StatusBadRequest, map[string]any{
		"type": "invalid_arguments", "message": "invalid argument(s)",
		"details": []map[string]string{{"argument_name": name, "reason": reason, "help_message": help}},
	}
}

func faultBody(status int) map[string]string {
	if status == http.StatusTooManyRequests {
		return map[string]string{"message": "rate limit exceeded"}
	}
	return map[string]string{"message": http.StatusText(status)}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// defaultCatalogue is a sample of Instance types with plausible specs.
func defaultCatalogue() map[string]*instance.ServerType {
	const gib = 1 << 30
	gpu := func(n uint64) *uint64 { return &n }
	t := func(cpus uint32, ram uint64, arch instance.Arch, gpus *uint64) *instance.ServerType {
		hourly := 0.01 * float32(cpus)
		monthly := hourly * 730 // the API's estimate for a 730-hour month
		return &instance.ServerType{Ncpus: cpus, RAM: ram, Arch: arch, Gpu: gpus, HourlyPrice: hourly, MonthlyPrice: &monthly}
	}
	return map[string]*instance.ServerType{
		"DEV1-M":         t(3, 4*gib, instance.ArchX86_64, gpu(0)),
		"DEV1-L":         t(4, 8*gib, instance.ArchX86_64, gpu(0)),
		"DEV1-XL":        t(4, 12*gib, instance.ArchX86_64, gpu(0)),
		"GP1-XS":         t(4, 16*gib, instance.ArchX86_64, gpu(0)),
		"GP1-S":          t(8, 32*gib, instance.ArchX86_64, gpu(0)),
		"PRO2-XXS":       t(2, 8*gib, instance.ArchX86_64, gpu(0)),
		"PRO2-S":         t(8, 32*gib, instance.ArchX86_64, gpu(0)),
		"COPARM1-4C-16G": t(4, 16*gib, instance.ArchArm64, gpu(0)),
		"GPU-3070-S":     t(8, 16*gib, instance.ArchX86_64, gpu(1)),
		"L4-1-24G":       t(8, 48*gib, instance.ArchX86_64, gpu(1)),
	}
}
