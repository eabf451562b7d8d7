// Package scaleway is the node-group provider for Scaleway Kapsule: each
// managed pool of one cluster is a node group. It talks to the Kapsule API
// (k8s/v1) through scaleway-sdk-go, and reads node-type specs from the
// Instance API's server-type catalogue to build templates. Its configuration
// is cluster-autoscaler's Scaleway cloud config, read unchanged (CloudConfig).
//
// Pool sizes: IncreaseSize and DecreaseTargetSize set the pool's size
// (UpdatePool); DeleteInstance deletes one node, which Kapsule counts as a
// size decrease of one. Bounds: with Scaleway's autoscaling off (the usual
// case), Kapsule ignores the pool's min_size and max_size, so they are only
// the default bounds: Options.MinSize / MaxSize replace them, wider or
// narrower. A pool with Scaleway's autoscaling on is refused unless
// AllowAutoscaledPool, since two scalers would fight over its size; its
// min_size and max_size then hold, and Options can only narrow them.
//
// Size changes are serialised per pool within a process; Kapsule has no
// conditional update, so separate processes rely on the evaluate lease.
//
// The secret key goes only into the SDK client; it is never logged, printed
// (CloudConfig redacts itself) or put in an error.
package scaleway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scaleway/scaleway-sdk-go/api/instance/v1"
	k8s "github.com/scaleway/scaleway-sdk-go/api/k8s/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// ProviderName is what Provider() returns for every group.
const ProviderName = "scaleway"

// DiscoveryTag marks the pools nodetide manages when Options.Pools is empty.
// A tag "nodetide" or "nodetide=<anything>" counts.
const DiscoveryTag = "nodetide"

// pageSize is the largest page the Kapsule and Instance APIs serve.
const pageSize = 100

// placeholderAccessKey satisfies the SDK, which wants an access key next to
// the secret. The API authenticates with the secret alone (X-Auth-Token);
// cluster-autoscaler's config has no access key to give.
const placeholderAccessKey = "SCWXXXXXXXXXXXXXXXXX"

// Options configure a Provider.
type Options struct {
	// CloudConfig is cluster-autoscaler's Scaleway cloud config
	// (LoadCloudConfig reads it with the environment's overrides).
	CloudConfig CloudConfig
	// Pools names the Kapsule pools to manage. Empty means every pool of the
	// cluster carrying the "nodetide" tag (DiscoveryTag).
	Pools []string
	// Name is the node group's name when Pools names exactly one pool; empty
	// means the pool's name.
	Name string
	// AllowAutoscaledPool lets nodetide manage a pool whose Scaleway
	// autoscaling is on. Off, such a pool is refused.
	AllowAutoscaledPool bool
	// MinSize and MaxSize are the group's bounds. Unset, the pool's
	// min_size / max_size are used. With Scaleway's autoscaling off they may
	// be wider (Kapsule then ignores the pool's); with it on they may only
	// narrow the pool's.
	MinSize, MaxSize *int
	// NodeTemplate, when set, describes a pool's node when its node type is
	// not in the Instance catalogue (or the catalogue can't be read), e.g.
	// from a registered node of the pool. pool is the pool's name.
	NodeTemplate func(ctx context.Context, pool string) (*snapshot.Template, error)

	// MaxAttempts is how many times a call is tried on transient failures
	// (0: 4). RetryDelay is the first backoff (0: 250ms), doubling up to 4s.
	// RequestTimeout bounds each attempt (0: 30s).
	MaxAttempts    int
	RetryDelay     time.Duration
	RequestTimeout time.Duration
}

// Provider lists a Kapsule cluster's managed pools as node groups. It is
// safe for concurrent use.
type Provider struct {
	call      *caller
	k8s       *k8s.API
	instance  *instance.API
	clusterID string
	region    scw.Region
	opts      Options // CloudConfig.SecretKey cleared: the client holds it

	mu      sync.Mutex
	locks   map[string]chan struct{}         // per pool ID
	catalog map[scw.Zone]map[string]nodeType // by zone, then normalised name
}

// nodeType is an Instance type as the catalogue lists it.
type nodeType struct {
	name string // the catalogue's spelling, e.g. GP1-XS
	spec instance.ServerType
}

var _ providers.Provider = (*Provider)(nil)

// New checks opts and builds the Scaleway client; it makes no API call.
// httpClient nil means a client with a 30s timeout.
func New(opts Options, httpClient *http.Client) (*Provider, error) {
	cfg, err := opts.CloudConfig.normalize(nil)
	if err != nil {
		return nil, fmt.Errorf("scaleway: cloud config: %w", err)
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("scaleway cluster %s: %w", cfg.ClusterID, err)
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: defaultRequestTimeout}
	} else {
		// The SDK may wrap the client's transport (debug logging); keep the
		// caller's client untouched.
		c := *httpClient
		httpClient = &c
	}
	next := httpClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	httpClient.Transport = recordingTransport{next: next}
	region := scw.Region(cfg.Region)
	client, err := scw.NewClient(
		scw.WithAPIURL(cfg.APIURL),
		scw.WithAuth(placeholderAccessKey, cfg.SecretKey),
		scw.WithDefaultRegion(region),
		scw.WithHTTPClient(httpClient),
		scw.WithUserAgent("nodetide"),
	)
	if err != nil {
		// Validation above makes this unreachable for the key; still, the
		// SDK quotes a malformed key, so its message is not passed on.
		return nil, fmt.Errorf("scaleway cluster %s: cannot build the API client (check region and api_url)", cfg.ClusterID)
	}
	retry := retryPolicy{attempts: defaultAttempts, base: defaultBaseDelay, max: defaultMaxDelay, requestTimeout: defaultRequestTimeout}
	if opts.MaxAttempts > 0 {
		retry.attempts = opts.MaxAttempts
	}
	if opts.RetryDelay > 0 {
		retry.base = opts.RetryDelay
		retry.max = max(retry.max, opts.RetryDelay)
	}
	if opts.RequestTimeout > 0 {
		retry.requestTimeout = opts.RequestTimeout
	}
	opts.CloudConfig = cfg
	opts.CloudConfig.SecretKey = ""
	opts.Pools = slices.Clone(opts.Pools)
	return &Provider{
		call:      &caller{client: client, retry: retry},
		k8s:       k8s.NewAPI(client),
		instance:  instance.NewAPI(client),
		clusterID: cfg.ClusterID,
		region:    region,
		opts:      opts,
		locks:     map[string]chan struct{}{},
		catalog:   map[scw.Zone]map[string]nodeType{},
	}, nil
}

func (o Options) validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, p := range o.Pools {
		switch {
		case strings.TrimSpace(p) == "":
			errs = append(errs, fmt.Errorf("pools[%d]: empty pool name", i))
		case seen[p]:
			errs = append(errs, fmt.Errorf("pools[%d]: pool %q is listed twice", i, p))
		}
		seen[p] = true
	}
	if o.Name != "" && len(o.Pools) != 1 {
		errs = append(errs, fmt.Errorf("name %q needs exactly one pool; discovered or several pools take their own names", o.Name))
	}
	if o.MinSize != nil && *o.MinSize < 0 {
		errs = append(errs, fmt.Errorf("minSize must not be negative, got %d", *o.MinSize))
	}
	if o.MaxSize != nil && *o.MaxSize < 0 {
		errs = append(errs, fmt.Errorf("maxSize must not be negative, got %d", *o.MaxSize))
	}
	if o.MinSize != nil && o.MaxSize != nil && *o.MinSize > *o.MaxSize {
		errs = append(errs, fmt.Errorf("minSize %d is greater than maxSize %d", *o.MinSize, *o.MaxSize))
	}
	return errors.Join(errs...)
}

// NodeGroups implements providers.Provider: it lists the cluster's pools and
// returns the managed ones, named or tagged. A named pool that is missing, a
// pool with Scaleway's autoscaling on (unless allowed) and bounds that would
// widen the pool's are errors.
func (p *Provider) NodeGroups(ctx context.Context) ([]providers.NodeGroup, error) {
	pools, err := p.listPools(ctx)
	if err != nil {
		return nil, err
	}
	var picked []*k8s.Pool
	if len(p.opts.Pools) > 0 {
		byName := map[string]*k8s.Pool{}
		for _, pool := range pools {
			byName[pool.Name] = pool
		}
		var missing []string
		for _, name := range p.opts.Pools {
			pool, ok := byName[name]
			if !ok {
				missing = append(missing, name)
				continue
			}
			picked = append(picked, pool)
		}
		if len(missing) > 0 {
			names := make([]string, 0, len(pools))
			for _, pool := range pools {
				names = append(names, pool.Name)
			}
			return nil, fmt.Errorf("scaleway cluster %s: pool %s not found (pools: %s)",
				p.clusterID, strings.Join(missing, ", "), strings.Join(names, ", "))
		}
	} else {
		for _, pool := range pools {
			if tagged(pool.Tags) {
				picked = append(picked, pool)
			}
		}
	}
	groups := make([]providers.NodeGroup, 0, len(picked))
	var errs []error
	for _, pool := range picked {
		g, err := p.group(pool)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		groups = append(groups, g)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return groups, nil
}

func tagged(tags []string) bool {
	for _, t := range tags {
		if t == DiscoveryTag || strings.HasPrefix(t, DiscoveryTag+"=") {
			return true
		}
	}
	return false
}

func (p *Provider) group(pool *k8s.Pool) (*Group, error) {
	if pool.Autoscaling && !p.opts.AllowAutoscaledPool {
		return nil, fmt.Errorf("scaleway pool %s: Scaleway's autoscaling is on for this pool, and two autoscalers would fight over its size; "+
			"turn it off on the pool (autoscaling=false) or set allowAutoscaledPool", pool.Name)
	}
	// With Scaleway's autoscaling off, Kapsule ignores min_size and max_size
	// (the API documents them as used only by its autoscaler): they are the
	// bounds nodetide keeps unless the config gives its own, which may be
	// wider. With it on, Kapsule's autoscaler holds the pool to them, so the
	// config can only narrow them.
	minSize, maxSize := int(pool.MinSize), int(pool.MaxSize)
	if m := p.opts.MinSize; m != nil {
		if pool.Autoscaling && *m < minSize {
			return nil, fmt.Errorf("scaleway pool %s: minSize %d would widen the pool's min_size %d, which Scaleway's autoscaling (on for this pool) enforces; lower min_size on the pool instead", pool.Name, *m, minSize)
		}
		minSize = *m
	}
	if m := p.opts.MaxSize; m != nil {
		if pool.Autoscaling && *m > maxSize {
			return nil, fmt.Errorf("scaleway pool %s: maxSize %d would widen the pool's max_size %d, which Scaleway's autoscaling (on for this pool) enforces; raise max_size on the pool instead", pool.Name, *m, maxSize)
		}
		maxSize = *m
	}
	if minSize > maxSize {
		return nil, fmt.Errorf("scaleway pool %s: min size %d is above max size %d", pool.Name, minSize, maxSize)
	}
	name := pool.Name
	if p.opts.Name != "" {
		name = p.opts.Name
	}
	g := &Group{p: p, name: name, pool: *pool, min: minSize, max: maxSize}
	if minSize != int(pool.MinSize) {
		g.minFrom = snapshot.BoundConfig // it replaced the pool's min_size
	}
	if maxSize != int(pool.MaxSize) {
		g.maxFrom = snapshot.BoundConfig // it replaced the pool's max_size
	}
	return g, nil
}

// ---- API calls ----

func (p *Provider) listPools(ctx context.Context) ([]*k8s.Pool, error) {
	var resp *k8s.ListPoolsResponse
	err := p.call.do(ctx, fmt.Sprintf("scaleway cluster %s: list pools", p.clusterID), func(opts ...scw.RequestOption) error {
		var err error
		resp, err = p.k8s.ListPools(&k8s.ListPoolsRequest{
			Region: p.region, ClusterID: p.clusterID, PageSize: scw.Uint32Ptr(pageSize),
		}, append(opts, scw.WithAllPages())...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.Pools, nil
}

func (p *Provider) getPool(ctx context.Context, pool, id string) (*k8s.Pool, error) {
	var out *k8s.Pool
	err := p.call.do(ctx, "scaleway pool "+pool+": get pool", func(opts ...scw.RequestOption) error {
		var err error
		out, err = p.k8s.GetPool(&k8s.GetPoolRequest{Region: p.region, PoolID: id}, opts...)
		return err
	})
	return out, err
}

func (p *Provider) listNodes(ctx context.Context, pool, id string) ([]*k8s.Node, error) {
	var resp *k8s.ListNodesResponse
	err := p.call.do(ctx, "scaleway pool "+pool+": list nodes", func(opts ...scw.RequestOption) error {
		var err error
		resp, err = p.k8s.ListNodes(&k8s.ListNodesRequest{
			Region: p.region, ClusterID: p.clusterID, PoolID: &id, PageSize: scw.Uint32Ptr(pageSize),
		}, append(opts, scw.WithAllPages())...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.Nodes, nil
}

func (p *Provider) setSize(ctx context.Context, pool, id string, size int) (*k8s.Pool, error) {
	var out *k8s.Pool
	// Size is absolute, so a retry after a lost answer sets the same size.
	err := p.call.do(ctx, fmt.Sprintf("scaleway pool %s: set size to %d", pool, size), func(opts ...scw.RequestOption) error {
		var err error
		out, err = p.k8s.UpdatePool(&k8s.UpdatePoolRequest{Region: p.region, PoolID: id, Size: scw.Uint32Ptr(uint32(size))}, opts...)
		return err
	})
	return out, err
}

func (p *Provider) deleteNode(ctx context.Context, pool string, node *k8s.Node) error {
	return p.call.do(ctx, fmt.Sprintf("scaleway pool %s: delete node %s (%s)", pool, node.Name, node.ProviderID), func(opts ...scw.RequestOption) error {
		// nodetide drains the node itself before removing it.
		_, err := p.k8s.DeleteNode(&k8s.DeleteNodeRequest{Region: p.region, NodeID: node.ID, SkipDrain: true}, opts...)
		return err
	})
}

// serverTypes is the zone's Instance catalogue, keyed by normalised name
// (see normaliseType); it is read once per zone, since types don't change.
func (p *Provider) serverTypes(ctx context.Context, zone scw.Zone) (map[string]nodeType, error) {
	p.mu.Lock()
	cached, ok := p.catalog[zone]
	p.mu.Unlock()
	if ok {
		return cached, nil
	}
	var resp *instance.ListServersTypesResponse
	err := p.call.do(ctx, "scaleway zone "+zone.String()+": list server types", func(opts ...scw.RequestOption) error {
		var err error
		resp, err = p.instance.ListServersTypes(&instance.ListServersTypesRequest{Zone: zone, PerPage: scw.Uint32Ptr(pageSize)},
			append(opts, scw.WithAllPages())...)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]nodeType, len(resp.Servers))
	for name, st := range resp.Servers {
		if st != nil {
			out[normaliseType(name)] = nodeType{name: name, spec: *st}
		}
	}
	p.mu.Lock()
	p.catalog[zone] = out
	p.mu.Unlock()
	return out, nil
}

// lock serialises size changes of one pool within this process; it gives up
// when ctx ends.
func (p *Provider) lock(ctx context.Context, poolID string) (unlock func(), err error) {
	p.mu.Lock()
	ch, ok := p.locks[poolID]
	if !ok {
		ch = make(chan struct{}, 1)
		p.locks[poolID] = ch
	}
	p.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
