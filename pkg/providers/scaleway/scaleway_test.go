package scaleway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	k8s "github.com/scaleway/scaleway-sdk-go/api/k8s/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodetide/nodetide/internal/fake/fakescaleway"
	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// bed is a double plus a provider pointed at it.
type bed struct {
	t   *testing.T
	scw *fakescaleway.Server
	// created collects the nodes size increases made (OnCreate).
	mu      sync.Mutex
	created []k8s.Node
}

func newBed(t *testing.T, dopts fakescaleway.Options) *bed {
	t.Helper()
	b := &bed{t: t}
	dopts.SecretKey = testKey
	dopts.OnCreate = func(n k8s.Node) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.created = append(b.created, n)
	}
	b.scw = fakescaleway.New(dopts)
	t.Cleanup(b.scw.Close)
	return b
}

func (b *bed) cloudConfig(key string) CloudConfig {
	return CloudConfig{ClusterID: b.scw.ClusterID(), SecretKey: key, Region: b.scw.Region().String(), APIURL: b.scw.URL()}
}

// provider builds a provider; edit adjusts the options (nil: none).
func (b *bed) provider(edit func(*Options)) *Provider {
	b.t.Helper()
	opts := Options{CloudConfig: b.cloudConfig(testKey), RetryDelay: time.Millisecond}
	if edit != nil {
		edit(&opts)
	}
	p, err := New(opts, b.scw.Client())
	if err != nil {
		b.t.Fatalf("New: %v", err)
	}
	return p
}

// group returns the one group a provider for pool yields.
func (b *bed) group(pool string, edit func(*Options)) *Group {
	b.t.Helper()
	p := b.provider(func(o *Options) {
		o.Pools = []string{pool}
		if edit != nil {
			edit(o)
		}
	})
	groups, err := p.NodeGroups(context.Background())
	if err != nil {
		b.t.Fatalf("NodeGroups: %v", err)
	}
	if len(groups) != 1 {
		b.t.Fatalf("got %d groups, want 1", len(groups))
	}
	return groups[0].(*Group)
}

func names(groups []providers.NodeGroup) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g.Name())
	}
	sort.Strings(out)
	return out
}

func mustErr(t *testing.T, err error, target error, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	assertNoSecret(t, err.Error())
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("error %q is not %v", err, target)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Fatalf("error %q does not contain %q", err, c)
		}
	}
}

func ptr(n int) *int { return &n }

func TestNodeGroupsByNameAndTag(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "workers", Size: 1, MaxSize: 5, Tags: []string{"env=prod", "nodetide"}})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "batch", Size: 0, MaxSize: 5, Tags: []string{"nodetide=yes"}})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "gpu", Size: 0, MaxSize: 2})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "nodetide-like", Size: 0, MaxSize: 2, Tags: []string{"nodetidex"}})

	tests := []struct {
		name string
		edit func(*Options)
		want []string
		err  []string
	}{
		{"discovered by tag", nil, []string{"batch", "workers"}, nil},
		{"by name", func(o *Options) { o.Pools = []string{"gpu"} }, []string{"gpu"}, nil},
		{"several names", func(o *Options) { o.Pools = []string{"gpu", "workers"} }, []string{"gpu", "workers"}, nil},
		{"renamed", func(o *Options) { o.Pools, o.Name = []string{"gpu"}, "accel" }, []string{"accel"}, nil},
		{"missing pool", func(o *Options) { o.Pools = []string{"gpu", "nope"} }, nil,
			[]string{"pool nope not found", "pools: workers, batch, gpu, nodetide-like"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			groups, err := b.provider(tt.edit).NodeGroups(context.Background())
			if tt.err != nil {
				mustErr(t, err, nil, tt.err...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(groups); !slices.Equal(got, tt.want) {
				t.Fatalf("groups %v, want %v", got, tt.want)
			}
			for _, g := range groups {
				if g.Provider() != "scaleway" {
					t.Errorf("provider %q", g.Provider())
				}
			}
		})
	}
}

func TestUnknownCluster(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	cfg := b.cloudConfig(testKey)
	cfg.ClusterID = "99999999-9999-4999-8999-999999999999"
	p, err := New(Options{CloudConfig: cfg}, b.scw.Client())
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.NodeGroups(context.Background())
	mustErr(t, err, nil, "scaleway cluster "+cfg.ClusterID+": list pools", "k8s_cluster", "not found")
}

func TestAutoscaledPool(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "auto", Size: 2, MinSize: 1, MaxSize: 4, Autoscaling: true})

	_, err := b.provider(func(o *Options) { o.Pools = []string{"auto"} }).NodeGroups(context.Background())
	mustErr(t, err, nil, "scaleway pool auto", "Scaleway's autoscaling is on", "two autoscalers would fight", "allowAutoscaledPool")

	g := b.group("auto", func(o *Options) { o.AllowAutoscaledPool = true })
	if g.Bounds().Min != 1 || g.Bounds().Max != 4 {
		t.Fatalf("bounds %d..%d, want 1..4", g.Bounds().Min, g.Bounds().Max)
	}
}

func TestBounds(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 3, MinSize: 1, MaxSize: 10})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "auto", Size: 3, MinSize: 1, MaxSize: 10, Autoscaling: true})
	tests := []struct {
		name     string
		pool     string
		min, max *int
		wantMin  int
		wantMax  int
		err      string
	}{
		{"the pool's", "p", nil, nil, 1, 10, ""},
		{"narrowed", "p", ptr(2), ptr(6), 2, 6, ""},
		{"max only", "p", nil, ptr(1), 1, 1, ""},
		// Autoscaling off: Kapsule ignores min_size/max_size; the config's win.
		{"min widened, autoscaling off", "p", ptr(0), nil, 0, 10, ""},
		{"max widened, autoscaling off", "p", nil, ptr(40), 1, 40, ""},
		{"narrowed past each other", "p", ptr(7), nil, 7, 10, ""},
		// Autoscaling on: Scaleway enforces them; the config can only narrow.
		{"narrowed, autoscaling on", "auto", ptr(2), ptr(6), 2, 6, ""},
		{"min widened, autoscaling on", "auto", ptr(0), nil, 0, 0, "minSize 0 would widen the pool's min_size 1, which Scaleway's autoscaling"},
		{"max widened, autoscaling on", "auto", nil, ptr(11), 0, 0, "maxSize 11 would widen the pool's max_size 10, which Scaleway's autoscaling"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := b.provider(func(o *Options) {
				o.Pools, o.MinSize, o.MaxSize, o.AllowAutoscaledPool = []string{tt.pool}, tt.min, tt.max, true
			})
			groups, err := p.NodeGroups(context.Background())
			if tt.err != "" {
				mustErr(t, err, nil, "scaleway pool "+tt.pool, tt.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := groups[0]
			if tt.wantMax == 0 && tt.wantMin == 0 {
				return
			}
			if g.Bounds().Min != tt.wantMin || g.Bounds().Max != tt.wantMax {
				t.Fatalf("bounds %d..%d, want %d..%d", g.Bounds().Min, g.Bounds().Max, tt.wantMin, tt.wantMax)
			}
		})
	}
	// A min above the max in effect can't be satisfied.
	_, err := b.provider(func(o *Options) { o.Pools, o.MinSize = []string{"p"}, ptr(11) }).NodeGroups(context.Background())
	mustErr(t, err, nil, "min size 11 is above max size 10")
}

// TestGrowPastAdvisoryMax: with Scaleway's autoscaling off, a pool grows past
// its (advisory) max_size up to the config's maxSize, through the real SDK.
func TestGrowPastAdvisoryMax(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 2, MinSize: 1, MaxSize: 2})
	g := b.group("p", func(o *Options) { o.MaxSize = ptr(5) })
	ctx := context.Background()
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatalf("IncreaseSize(3) to the config's max: %v", err)
	}
	if n, err := g.TargetSize(ctx); err != nil || n != 5 {
		t.Fatalf("size %d, %v; want 5", n, err)
	}
	mustErr(t, g.IncreaseSize(ctx, 1), providers.ErrAboveMax)
}

func TestNewRejectsBadOptions(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	tests := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"duplicate pool", func(o *Options) { o.Pools = []string{"a", "a"} }, `pools[1]: pool "a" is listed twice`},
		{"empty pool", func(o *Options) { o.Pools = []string{" "} }, "pools[0]: empty pool name"},
		{"name without one pool", func(o *Options) { o.Name = "x" }, `name "x" needs exactly one pool`},
		{"min above max", func(o *Options) { o.MinSize, o.MaxSize = ptr(3), ptr(2) }, "minSize 3 is greater than maxSize 2"},
		{"negative", func(o *Options) { o.MaxSize = ptr(-1) }, "maxSize must not be negative"},
		{"bad key", func(o *Options) { o.CloudConfig.SecretKey = "x" + testKey }, "secret_key: not a Scaleway secret key"},
		{"no cluster", func(o *Options) { o.CloudConfig.ClusterID = "" }, "cluster_id: is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{CloudConfig: b.cloudConfig(testKey)}
			tt.edit(&opts)
			_, err := New(opts, nil)
			mustErr(t, err, nil, tt.want)
		})
	}
}

func TestPagination(t *testing.T) {
	// The double serves 2 items a page whatever the client asks.
	b := newBed(t, fakescaleway.Options{PageSize: 2})
	for i := range 5 {
		b.scw.AddPool(fakescaleway.PoolSpec{Name: fmt.Sprintf("p%d", i), Size: 1, MaxSize: 9, Tags: []string{"nodetide"}})
	}
	big := b.scw.AddPool(fakescaleway.PoolSpec{Name: "big", Size: 7, MaxSize: 9, Tags: []string{"nodetide"}})

	groups, err := b.provider(nil).NodeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 6 {
		t.Fatalf("got %d groups, want 6: %v", len(groups), names(groups))
	}
	if n := b.scw.Count(fakescaleway.OpListPools); n != 3 {
		t.Errorf("%d pool pages fetched, want 3", n)
	}
	var g providers.NodeGroup
	for _, gg := range groups {
		if gg.Name() == "big" {
			g = gg
		}
	}
	inst, err := g.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range b.scw.Nodes(big.ID) {
		want[n.ProviderID] = true
	}
	if len(inst) != 7 || len(want) != 7 {
		t.Fatalf("got %d instances, want 7", len(inst))
	}
	for _, in := range inst {
		if !want[in.ProviderID] || in.State != providers.StateRunning {
			t.Errorf("unexpected instance %+v", in)
		}
	}
	var pages []string
	for _, r := range b.scw.Requests() {
		if r.Op == fakescaleway.OpListNodes {
			if r.Query.Get("pool_id") != big.ID || r.Query.Get("page_size") != "100" {
				t.Errorf("list nodes query %v", r.Query)
			}
			pages = append(pages, r.Query.Get("page"))
		}
	}
	if !slices.Equal(pages, []string{"1", "2", "3", "4"}) {
		t.Errorf("pages fetched %v, want 1..4", pages)
	}
}

func TestInstanceStates(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	pool := b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 1, MaxSize: 1})
	node := b.scw.Nodes(pool.ID)[0]
	g := b.group("p", nil)
	tests := []struct {
		status k8s.NodeStatus
		errMsg string
		want   providers.InstanceState
		errHas string
	}{
		{k8s.NodeStatusCreating, "", providers.StateCreating, ""},
		{k8s.NodeStatusStarting, "", providers.StateCreating, ""},
		{k8s.NodeStatusRegistering, "", providers.StateCreating, ""},
		{k8s.NodeStatusNotReady, "", providers.StateCreating, ""},
		{k8s.NodeStatusReady, "", providers.StateRunning, ""},
		{k8s.NodeStatusRebooting, "", providers.StateRunning, ""},
		{k8s.NodeStatusUpgrading, "", providers.StateRunning, ""},
		{k8s.NodeStatusLocked, "", providers.StateRunning, "is locked by Scaleway"},
		{k8s.NodeStatusDeleting, "", providers.StateDeleting, ""},
		{k8s.NodeStatusDeleted, "", providers.StateDeleting, ""},
		{k8s.NodeStatusCreationError, "out of stock", providers.StateCreating, "failed to come up (creation_error: out of stock)"},
		{k8s.NodeStatus("melting"), "", providers.StateCreating, `has status "melting"`},
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			if err := b.scw.SetNodeStatus(node.ID, tt.status, tt.errMsg); err != nil {
				t.Fatal(err)
			}
			inst, err := g.Instances(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(inst) != 1 || inst[0].ProviderID != node.ProviderID {
				t.Fatalf("instances %+v", inst)
			}
			if inst[0].State != tt.want {
				t.Errorf("state %s, want %s", inst[0].State, tt.want)
			}
			if (tt.errHas == "") != (inst[0].Error == "") || !strings.Contains(inst[0].Error, tt.errHas) {
				t.Errorf("error %q, want one containing %q", inst[0].Error, tt.errHas)
			}
		})
	}
}

func TestTemplateFromNodeType(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{
		Name: "workers", NodeType: "gp1_xs", Zone: scw.ZoneFrPar2, Size: 0, MaxSize: 3,
		Tags: []string{
			"nodetide", "env=prod", "noprefix=team=ml", "noprefix=example.com/tier=gold",
			"taint=dedicated=batch:NoSchedule", "taint=noprefix=spot=true:PreferNoSchedule",
			"taint=bad:Never", "a/b/c=1", "env 2", "node.kubernetes.io/exclude-from-external-load-balancers",
		},
		Labels:      map[string]string{"pool-label": "x"},
		Taints:      []k8s.CoreV1Taint{{Key: "native", Value: "1", Effect: k8s.CoreV1TaintEffectNoExecute}},
		KubeletArgs: map[string]string{"maxPods": "58"},
	})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "gpu", NodeType: "L4-1-24G", Size: 0, MaxSize: 1})

	tpl, err := b.group("workers", nil).Template(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cpu, mem := systemReserve(4000, 16<<30)
	wantAlloc := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
		corev1.ResourcePods:   resource.MustParse("58"),
	}
	for name, q := range wantAlloc {
		if got := tpl.Allocatable[name]; got.Cmp(q) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, got.String(), q.String())
		}
	}
	if _, ok := tpl.Allocatable[podfacts.ResourceGPU]; ok || len(tpl.Allocatable) != 3 {
		t.Errorf("allocatable %v", tpl.Allocatable)
	}
	wantLabels := map[string]string{
		"k8s.scaleway.com/pool-name":       "workers",
		"node.kubernetes.io/instance-type": "GP1-XS",
		"topology.kubernetes.io/zone":      "fr-par-2",
		"topology.kubernetes.io/region":    "fr-par",
		"kubernetes.io/os":                 "linux",
		"kubernetes.io/arch":               "amd64",
		"k8s.scaleway.com/nodetide":        "",
		"k8s.scaleway.com/env":             "2",
		"team":                             "ml",
		"example.com/tier":                 "gold",
		"pool-label":                       "x",
		"node.kubernetes.io/exclude-from-external-load-balancers": "managed-by-scaleway-ccm",
	}
	if fmt.Sprint(tpl.Labels) != fmt.Sprint(wantLabels) {
		t.Errorf("labels\n got %v\nwant %v", tpl.Labels, wantLabels)
	}
	wantTaints := []corev1.Taint{
		{Key: "k8s.scaleway.com/dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
		{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: "native", Value: "1", Effect: corev1.TaintEffectNoExecute},
	}
	if fmt.Sprint(tpl.Taints) != fmt.Sprint(wantTaints) {
		t.Errorf("taints\n got %v\nwant %v", tpl.Taints, wantTaints)
	}

	gpu, err := b.group("gpu", nil).Template(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if q := gpu.Allocatable[podfacts.ResourceGPU]; q.Value() != 1 {
		t.Errorf("gpu allocatable %v", gpu.Allocatable)
	}
	if q := gpu.Allocatable[corev1.ResourcePods]; q.Value() != 110 {
		t.Errorf("default pods %s", q.String())
	}
	// The catalogue is read once per zone.
	if _, err := b.group("workers", nil).Template(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := b.scw.Count(fakescaleway.OpListServersTypes); n > 3 {
		t.Errorf("catalogue read %d times", n)
	}
}

func TestSystemReserve(t *testing.T) {
	const gib = int64(1) << 30
	tests := []struct {
		cpu, mem         int64
		wantCPU, wantMem int64
	}{
		// 1 core: 6%; 4 GiB: 25% + 100 MiB.
		{1000, 4 * gib, 940, 3*gib - 100<<20},
		// 4 cores: 60 + 10 + 10 = 80m; 16 GiB: 1 + 0.8 + 0.8 GiB + 100 MiB.
		{4000, 16 * gib, 3920, 16*gib - gib - 858993459 - 858993459 - 100<<20},
		// 8 cores: 80 + 4000*0.25% = 90m.
		{8000, 0, 7910, 0},
		// Tiny machines never go negative.
		{10, 64 << 20, 10 - 0, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dm/%d", tt.cpu, tt.mem), func(t *testing.T) {
			cpu, mem := systemReserve(tt.cpu, tt.mem)
			if cpu != tt.wantCPU || mem != tt.wantMem {
				t.Fatalf("got %dm %d bytes, want %dm %d bytes", cpu, mem, tt.wantCPU, tt.wantMem)
			}
		})
	}
}

func TestTemplateFromHook(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "ext", NodeType: "external", Size: 0, MaxSize: 3})
	hookTpl := snapshot.Template{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Labels:      map[string]string{"from": "node"},
	}
	tests := []struct {
		name string
		hook func(ctx context.Context, pool string) (*snapshot.Template, error)
		err  []string
	}{
		{"no hook", nil, []string{`node type "external" is not in zone fr-par-1's Instance catalogue`}},
		{"hook", func(_ context.Context, pool string) (*snapshot.Template, error) {
			if pool != "ext" {
				return nil, fmt.Errorf("asked for %s", pool)
			}
			return &hookTpl, nil
		}, nil},
		{"no registered node", func(context.Context, string) (*snapshot.Template, error) { return nil, nil },
			[]string{"not in zone", "no registered node"}},
		{"hook fails", func(context.Context, string) (*snapshot.Template, error) { return nil, errors.New("apiserver down") },
			[]string{"not in zone", "from a registered node: apiserver down"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := b.group("ext", func(o *Options) { o.NodeTemplate = tt.hook })
			tpl, err := g.Template(context.Background())
			if tt.err != nil {
				mustErr(t, err, nil, tt.err...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tpl.Labels["from"] != "node" {
				t.Fatalf("template %+v", tpl)
			}
		})
	}
}

func TestIncreaseSize(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	pool := b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 1, MaxSize: 3})
	g := b.group("p", nil)
	ctx := context.Background()

	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if size, err := g.TargetSize(ctx); err != nil || size != 3 {
		t.Fatalf("target %d, %v; want 3", size, err)
	}
	if len(b.created) != 2 {
		t.Fatalf("OnCreate saw %d nodes, want 2", len(b.created))
	}
	states := map[string]providers.InstanceState{}
	inst, err := g.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inst {
		states[in.ProviderID] = in.State
	}
	for _, n := range b.created {
		if !strings.HasPrefix(n.ProviderID, "scaleway://instance/fr-par-1/") || states[n.ProviderID] != providers.StateCreating {
			t.Errorf("new node %s: state %q", n.ProviderID, states[n.ProviderID])
		}
	}
	b.scw.Boot(pool.ID)
	inst, _ = g.Instances(ctx)
	for _, in := range inst {
		if in.State != providers.StateRunning {
			t.Errorf("after boot %s is %s", in.ProviderID, in.State)
		}
	}

	updates := b.scw.Count(fakescaleway.OpUpdatePool)
	mustErr(t, g.IncreaseSize(ctx, 1), providers.ErrAboveMax, "scaleway pool p", "size 3 + 1 = 4", "(3)")
	if b.scw.Count(fakescaleway.OpUpdatePool) != updates {
		t.Error("an increase above max reached the API")
	}
	mustErr(t, g.IncreaseSize(ctx, 0), nil, "increase must be positive")

	// A max narrowed by the options stops earlier than the pool's.
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "q", Size: 0, MaxSize: 10})
	q := b.group("q", func(o *Options) { o.MaxSize = ptr(2) })
	mustErr(t, q.IncreaseSize(ctx, 3), providers.ErrAboveMax, "(2)")
}

func TestIncreaseSizeAPIRefusals(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	pool := b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 1, MaxSize: 5})
	g := b.group("p", nil)
	ctx := context.Background()

	b.scw.SetQuota(2)
	err := g.IncreaseSize(ctx, 2)
	mustErr(t, err, nil, "scaleway pool p: set size to 3", "quota exceeded", "instances has reached its quota (1/2)")
	var quota *scw.QuotasExceededError
	if !errors.As(err, &quota) {
		t.Errorf("error %T does not unwrap to a quota error", err)
	}
	if n := b.scw.Count(fakescaleway.OpUpdatePool); n != 1 {
		t.Errorf("a quota error was tried %d times", n)
	}
	b.scw.SetQuota(0)

	// The pool's autoscaling turned on, with a lower max, behind nodetide's
	// back: the API refuses.
	if err := b.scw.SetPool(pool.ID, func(p *k8s.Pool) { p.MaxSize, p.Autoscaling = 1, true }); err != nil {
		t.Fatal(err)
	}
	err = g.IncreaseSize(ctx, 1)
	var invalid *scw.InvalidArgumentsError
	if !errors.As(err, &invalid) {
		t.Fatalf("error %v is not invalid_arguments", err)
	}
	mustErr(t, err, nil, "size does not respect constraint")
}

func TestDeleteInstance(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	pool := b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 4, MinSize: 1, MaxSize: 5})
	other := b.scw.AddPool(fakescaleway.PoolSpec{Name: "other", Size: 1, MaxSize: 1})
	nodes := b.scw.Nodes(pool.ID)
	legacy := "scaleway://" + nodes[1].ProviderID[strings.LastIndex(nodes[1].ProviderID, "/")+1:]
	g := b.group("p", nil)
	ctx := context.Background()

	tests := []struct {
		name       string
		providerID string
		deletes    bool // reaches DeleteNode
		target     error
		err        string
	}{
		{"current form", nodes[0].ProviderID, true, nil, ""},
		{"legacy form", legacy, true, nil, ""},
		{"already deleting", nodes[0].ProviderID, false, nil, ""},
		{"other pool", b.scw.Nodes(other.ID)[0].ProviderID, false, providers.ErrUnknownInstance, "scaleway pool p"},
		{"unknown", "scaleway://instance/fr-par-1/00000000-0000-4000-8000-000000000000", false, providers.ErrUnknownInstance, ""},
		{"not scaleway", "aws:///eu-west-1a/i-0abc", false, providers.ErrUnknownInstance, "not a Scaleway provider ID"},
		{"malformed", "scaleway://instance/x", false, providers.ErrUnknownInstance, ""},
		{"third", nodes[2].ProviderID, true, nil, ""},
		{"below min", nodes[3].ProviderID, false, providers.ErrBelowMin, "size 1 - 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := b.scw.Count(fakescaleway.OpDeleteNode)
			err := g.DeleteInstance(ctx, tt.providerID)
			if tt.target != nil {
				mustErr(t, err, tt.target, tt.err)
			} else if err != nil {
				t.Fatal(err)
			}
			if got := b.scw.Count(fakescaleway.OpDeleteNode) - before; got != map[bool]int{true: 1, false: 0}[tt.deletes] {
				t.Errorf("%d DeleteNode calls", got)
			}
		})
	}
	if size, _ := g.TargetSize(ctx); size != 1 {
		t.Errorf("pool size %d after three deletions, want 1", size)
	}
	for _, r := range b.scw.Requests() {
		if r.Op == fakescaleway.OpDeleteNode && r.Query.Get("skip_drain") != "true" {
			t.Errorf("delete without skip_drain: %v", r.Query)
		}
	}
}

func TestDecreaseTargetSize(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	pool := b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 2, MinSize: 1, MaxSize: 6})
	g := b.group("p", nil)
	ctx := context.Background()

	mustErr(t, g.DecreaseTargetSize(ctx, -1), providers.ErrNothingToDecrease, "decrease by 1 with 0 node(s) not up")
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	// One of the new nodes failed; one is booting; one is still creating.
	if err := b.scw.SetNodeStatus(b.created[0].ID, k8s.NodeStatusCreationError, "no capacity"); err != nil {
		t.Fatal(err)
	}
	if err := b.scw.SetNodeStatus(b.created[1].ID, k8s.NodeStatusRegistering, ""); err != nil {
		t.Fatal(err)
	}
	mustErr(t, g.DecreaseTargetSize(ctx, -4), providers.ErrNothingToDecrease, "decrease by 4 with 3 node(s) not up")
	if err := g.DecreaseTargetSize(ctx, -2); err != nil {
		t.Fatal(err)
	}
	if size, _ := g.TargetSize(ctx); size != 3 {
		t.Fatalf("size %d, want 3", size)
	}
	for _, n := range b.scw.Nodes(pool.ID) {
		if n.Status == k8s.NodeStatusDeleting && n.CreatedAt.Before(*b.created[0].CreatedAt) {
			t.Errorf("a ready node was removed: %s", n.Name)
		}
	}
	// The failed node is still there to give back; nothing else is.
	b.scw.Boot(pool.ID)
	if err := g.DecreaseTargetSize(ctx, -1); err != nil {
		t.Fatal(err)
	}
	for _, n := range b.scw.Nodes(pool.ID) {
		if n.ID == b.created[0].ID && n.Status != k8s.NodeStatusDeleting {
			t.Errorf("the failed node is %s", n.Status)
		}
	}
	mustErr(t, g.DecreaseTargetSize(ctx, -1), providers.ErrNothingToDecrease)
	mustErr(t, g.DecreaseTargetSize(ctx, 1), nil, "decrease must be negative")

	// Capacity asked for but not listed yet counts too, within min (bounds
	// are read when the groups are listed).
	if err := b.scw.SetPool(pool.ID, func(p *k8s.Pool) { p.Size = 5; p.MinSize = 4 }); err != nil {
		t.Fatal(err)
	}
	g = b.group("p", nil)
	mustErr(t, g.DecreaseTargetSize(ctx, -2), providers.ErrBelowMin, "size 5 - 2")
	if err := g.DecreaseTargetSize(ctx, -1); err != nil {
		t.Fatal(err)
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name     string
		faults   []fakescaleway.Fault
		calls    int // GetPool requests
		err      []string
		retryHit bool
	}{
		{"503 then ok", []fakescaleway.Fault{{Op: fakescaleway.OpGetPool, Status: 503, Times: 2}}, 3, nil, true},
		{"429 then ok", []fakescaleway.Fault{{Op: fakescaleway.OpGetPool, Status: 429}}, 2, nil, true},
		{"500 every time", []fakescaleway.Fault{{Op: fakescaleway.OpGetPool, Status: 500, Times: 10}}, 4,
			[]string{"scaleway pool p: get pool (after 4 attempts)", "500"}, true},
		{"slow answer times out, then ok", []fakescaleway.Fault{{Op: fakescaleway.OpGetPool, Delay: 5 * time.Second}}, 2, nil, true},
		{"404 is not retried", []fakescaleway.Fault{{Op: fakescaleway.OpGetPool, Status: 404}}, 1, []string{"scaleway pool p: get pool:"}, false},
		{"502 with an unparseable body, then ok", []fakescaleway.Fault{{Op: fakescaleway.OpGetPool, Status: 502, RawBody: "<html><body>502 Bad Gateway</body></html>"}}, 2, nil, true},
		{"cut-off 500 body every time", []fakescaleway.Fault{{Op: fakescaleway.OpGetPool, Status: 500, RawBody: `{"message": "inter`, Times: 10}}, 4,
			[]string{"(after 4 attempts)", "HTTP 500 Internal Server Error with an unreadable body"}, true},
		{"429 asking for an hour is not waited for", []fakescaleway.Fault{{Op: fakescaleway.OpGetPool, Status: 429, RetryAfter: "3600"}}, 1,
			[]string{"Scaleway asks to retry after 1h0m0s", "429"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBed(t, fakescaleway.Options{})
			b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 2, MaxSize: 2})
			g := b.group("p", func(o *Options) { o.RequestTimeout = 200 * time.Millisecond })
			for _, f := range tt.faults {
				b.scw.Inject(f)
			}
			size, err := g.TargetSize(context.Background())
			if tt.err != nil {
				mustErr(t, err, nil, tt.err...)
			} else if err != nil || size != 2 {
				t.Fatalf("size %d, %v", size, err)
			}
			if got := b.scw.Count(fakescaleway.OpGetPool); got != tt.calls && !(tt.faults[0].Delay > 0 && got == tt.calls-1) {
				t.Errorf("%d GetPool requests, want %d", got, tt.calls)
			}
		})
	}
}

// TestRetryAfter: a 429 (or 503) naming Retry-After is retried no sooner,
// in seconds or as an HTTP date; the backoff alone would be milliseconds.
func TestRetryAfter(t *testing.T) {
	for name, after := range map[string]func() string{
		"seconds":   func() string { return "1" },
		"HTTP date": func() string { return time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat) },
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t, fakescaleway.Options{})
			b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 2, MaxSize: 2})
			g := b.group("p", nil)
			b.scw.Inject(fakescaleway.Fault{Op: fakescaleway.OpGetPool, Status: 429, RetryAfter: after()})
			start := time.Now()
			if size, err := g.TargetSize(context.Background()); err != nil || size != 2 {
				t.Fatalf("size %d, %v", size, err)
			}
			if waited := time.Since(start); waited < 900*time.Millisecond {
				t.Errorf("retried after %s, before Retry-After", waited)
			}
			if n := b.scw.Count(fakescaleway.OpGetPool); n != 2 {
				t.Errorf("%d GetPool requests, want 2", n)
			}
		})
	}
	// A Retry-After past the caller's deadline ends the call at once.
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 2, MaxSize: 2})
	g := b.group("p", nil)
	b.scw.Inject(fakescaleway.Fault{Op: fakescaleway.OpGetPool, Status: 429, RetryAfter: "20"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := g.TargetSize(ctx)
	mustErr(t, err, nil, "retry after 20s, past the deadline")
}

func TestRetriesStopWithContext(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 2, MaxSize: 2})
	g := b.group("p", func(o *Options) { o.RetryDelay = time.Hour })
	b.scw.Inject(fakescaleway.Fault{Op: fakescaleway.OpGetPool, Status: 503, Times: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := g.TargetSize(ctx)
	mustErr(t, err, nil, "503")
	if time.Since(start) > 5*time.Second {
		t.Fatal("backoff ignored the context")
	}
}

func TestDeniedKey(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 1, MaxSize: 1, Tags: []string{"nodetide"}})
	p, err := New(Options{CloudConfig: b.cloudConfig(otherKey), RetryDelay: time.Millisecond}, b.scw.Client())
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.NodeGroups(context.Background())
	mustErr(t, err, ErrDenied, "list pools", "scaleway refused the secret key", "check secret_key or SCW_SECRET_KEY", "API key does not exist")
	var denied *scw.DeniedAuthenticationError
	if !errors.As(err, &denied) || denied.Reason != "not_found" {
		t.Errorf("error does not unwrap to the SDK's denied-authentication error: %v", err)
	}
	if n := b.scw.Count(fakescaleway.OpListPools); n != 1 {
		t.Errorf("a 401 was tried %d times", n)
	}
	// Printing the provider shows no key either.
	assertNoSecret(t, fmt.Sprintf("%v %+v %#v %+v", p, p, p.opts, p.opts))
}

func TestConcurrentIncreases(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 0, MaxSize: 12})
	// Two groups, as two evaluation cycles would hold, share the pool's lock.
	p := b.provider(func(o *Options) { o.Pools = []string{"p"} })
	var groups []providers.NodeGroup
	for range 2 {
		gs, err := p.NodeGroups(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, gs[0])
	}
	var wg sync.WaitGroup
	errs := make(chan error, 14)
	for i := range 14 {
		wg.Go(func() { errs <- groups[i%2].IncreaseSize(context.Background(), 1) })
	}
	wg.Wait()
	close(errs)
	var ok, above int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, providers.ErrAboveMax):
			above++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 12 || above != 2 {
		t.Errorf("%d increases succeeded and %d were above max, want 12 and 2", ok, above)
	}
	if size, _ := groups[0].TargetSize(context.Background()); size != 12 {
		t.Errorf("size %d, want 12", size)
	}
	if len(b.created) != 12 {
		t.Errorf("%d nodes created, want 12", len(b.created))
	}
}

func TestHTTPClientNotModified(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	hc := &http.Client{Timeout: time.Second}
	if _, err := New(Options{CloudConfig: b.cloudConfig(testKey)}, hc); err != nil {
		t.Fatal(err)
	}
	if hc.Transport != nil || hc.Timeout != time.Second {
		t.Error("New changed the caller's HTTP client")
	}
}

// The SDK caches the API's metadata in its client on the first call; first
// calls running at once must not race on it (run with -race).
func TestConcurrentFirstCalls(t *testing.T) {
	b := newBed(t, fakescaleway.Options{})
	b.scw.AddPool(fakescaleway.PoolSpec{Name: "p", Size: 1, MaxSize: 3, Tags: []string{"nodetide"}})
	p := b.provider(nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := p.NodeGroups(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
