package kamatera

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodetide/nodetide/internal/fake/fakekamatera"
	"github.com/nodetide/nodetide/pkg/providers"
)

const testScript = "#!/bin/bash\nkubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef\n"

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type bed struct {
	t     *testing.T
	d     *fakekamatera.Double
	p     *Provider
	clock *clock
}

// baseINI is a complete config for the double at url; groups are appended.
func baseINI(url string) string {
	return fmt.Sprintf(`[global]
kamatera-api-url = %s
cluster-name = test
default-min-size = 0
default-max-size = 5
default-datacenter = EU
default-image = ubuntu_server_22.04_64-bit
default-cpu = 2A
default-ram = 4096
default-disk = "size=50"
default-network = "name=wan,ip=auto"
default-script-base64 = %s
`, url, base64.StdEncoding.EncodeToString([]byte(testScript)))
}

const twoGroups = `
[nodegroup "workers"]
name-prefix = w
[nodegroup "other"]
name-prefix = o
`

// newBed starts a double and a provider on it; env holds the environment the
// provider sees (nil: the double's credentials).
func newBed(t *testing.T, groups string, env map[string]string, opts ...Option) *bed {
	t.Helper()
	d := fakekamatera.New()
	t.Cleanup(d.Close)
	return newBedOn(t, d, baseINI(d.URL())+groups, env, opts...)
}

func newBedOn(t *testing.T, d *fakekamatera.Double, ini string, env map[string]string, opts ...Option) *bed {
	t.Helper()
	if env == nil {
		env = map[string]string{EnvAPIClientID: d.ClientID(), EnvAPISecret: d.Secret()}
	}
	cfg, err := ParseCloudConfig(strings.NewReader(ini), "kamatera.ini")
	if err != nil {
		t.Fatalf("ParseCloudConfig: %v", err)
	}
	c := &clock{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	all := append([]Option{
		WithLookupEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }),
		WithRetry(3, time.Millisecond),
		WithRequestTimeout(2 * time.Second),
		WithCacheTTL(0),
		WithClock(c.Now),
	}, opts...)
	p, err := New(cfg, nil, all...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &bed{t: t, d: d, p: p, clock: c}
}

func (b *bed) group(name string) *NodeGroup {
	b.t.Helper()
	g, ok := b.p.NodeGroup(name)
	if !ok {
		b.t.Fatalf("no group %s", name)
	}
	return g
}

// state returns "providerID=state[!error]" of a group's instances, sorted.
func (b *bed) state(group string) []string {
	b.t.Helper()
	ins, err := b.group(group).Instances(context.Background())
	if err != nil {
		b.t.Fatalf("Instances: %v", err)
	}
	var out []string
	for _, in := range ins {
		s := in.ProviderID + "=" + string(in.State)
		if in.Error != "" {
			s += "!" + in.Error
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func (b *bed) target(group string) int {
	b.t.Helper()
	n, err := b.group(group).TargetSize(context.Background())
	if err != nil {
		b.t.Fatalf("TargetSize: %v", err)
	}
	return n
}

func tagged(group string) []string { return []string{"k8sca-test", "k8scang-" + group} }

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestNodeGroups(t *testing.T) {
	b := newBed(t, twoGroups+"[nodegroup \"big\"]\nmin-size = 1\nmax-size = 7\n", nil)
	groups, err := b.p.NodeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range groups {
		got = append(got, fmt.Sprintf("%s %s %d..%d", g.Name(), g.Provider(), g.Bounds().Min, g.Bounds().Max))
	}
	equal(t, "groups", got, []string{"workers kamatera 0..5", "other kamatera 0..5", "big kamatera 1..7"})
}

func TestMembershipByTagsAndPrefix(t *testing.T) {
	d := fakekamatera.New()
	t.Cleanup(d.Close)
	for _, s := range []fakekamatera.Server{
		{Name: "w-run", Power: true, Tags: tagged("workers")},
		{Name: "w-off", Power: false, Tags: tagged("workers")},
		{Name: "w-clusteronly", Power: true, Tags: []string{"k8sca-test"}},
		{Name: "w-grouponly", Power: true, Tags: []string{"k8scang-workers"}},
		{Name: "w-othercluster", Power: true, Tags: []string{"k8sca-prod", "k8scang-workers"}},
		{Name: "w-extra", Power: true, Tags: append(tagged("workers"), "team-a")},
		{Name: "x-noprefix", Power: true, Tags: tagged("workers")},
	} {
		d.AddServer(s)
	}
	b := newBedOn(t, d, baseINI(d.URL())+"filter-name-prefix = w-\n[nodegroup \"workers\"]\nname-prefix = w\n", nil)
	equal(t, "instances", b.state("workers"), []string{
		"kamatera://w-extra=running",
		"kamatera://w-off=deleting",
		"kamatera://w-run=running",
	})
	if n := b.target("workers"); n != 2 {
		t.Errorf("target %d, want 2 (powered-off servers don't count)", n)
	}
	for _, r := range d.Requests() {
		if r.Path == "/server/tags" && strings.Contains(r.Body, "x-noprefix") {
			t.Errorf("tags read for a server outside filter-name-prefix")
		}
	}
	// Tags are read once per server, not on every refresh.
	before := d.RequestCount(http.MethodPost, "/server/tags")
	b.state("workers")
	if after := d.RequestCount(http.MethodPost, "/server/tags"); after != before {
		t.Errorf("tags read again: %d → %d", before, after)
	}
}

func TestScaleUpThroughTheQueue(t *testing.T) {
	b := newBed(t, twoGroups, nil)
	ctx := context.Background()
	g := b.group("workers")
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatalf("IncreaseSize: %v", err)
	}
	reqs := b.d.CreateRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d creates", len(reqs))
	}
	nameRE := regexp.MustCompile(`^w-[0-9a-f]{11}$`)
	for _, r := range reqs {
		if !nameRE.MatchString(r.Name) {
			t.Errorf("server name %q is not <name-prefix>-<11 hex>", r.Name)
		}
		want := fakekamatera.CreateRequest{
			Name: r.Name, Password: "__generate__", PasswordValidate: "__generate__",
			Datacenter: "EU", Image: "ubuntu_server_22.04_64-bit", CPU: "2A", RAM: "4096",
			Disk: "size=50", DailyBackup: "no", Managed: "no", Network: "name=wan,ip=auto", Quantity: 1,
			BillingCycle: "hourly", PowerOnAfterCreate: "yes", ScriptFile: testScript, Tag: "k8sca-test k8scang-workers",
		}
		if r != want {
			t.Errorf("create request\n got %+v\nwant %+v", r, want)
		}
	}
	if n := b.target("workers"); n != 2 {
		t.Errorf("target %d after the increase, want 2", n)
	}
	first, second := "kamatera://"+reqs[0].Name, "kamatera://"+reqs[1].Name
	want := []string{first + "=creating", second + "=creating"}
	sort.Strings(want)
	equal(t, "queued", b.state("workers"), want)

	cmds := b.d.PendingCreates()
	if err := b.d.Complete(cmds[0].ID); err != nil {
		t.Fatal(err)
	}
	want = []string{first + "=running", second + "=creating"}
	sort.Strings(want)
	equal(t, "one complete", b.state("workers"), want)
	b.d.CompleteAll()
	want = []string{first + "=running", second + "=running"}
	sort.Strings(want)
	equal(t, "all complete", b.state("workers"), want)
	if n := b.target("workers"); n != 2 {
		t.Errorf("target %d, want 2", n)
	}
	if n := b.target("other"); n != 0 {
		t.Errorf("other group target %d", n)
	}
}

func TestCreateRequestCarriesEveryServerKey(t *testing.T) {
	b := newBed(t, `
[nodegroup "full"]
name-prefix = full
password = "Secr3tPassw0rd"
ssh-key = ssh-ed25519 AAAAC3Nza ops@example.com
datacenter = US-NY2
image = ubuntu_server_24.04_64-bit
cpu = 4B
ram = 8192
disk = "size=100"
disk = "size=200"
dailybackup = yes
managed = yes
network = "name=wan,ip=auto"
network = "name=lan-1,ip=auto"
billingcycle = monthly
monthlypackage = t5000
`, nil)
	if err := b.group("full").IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	r := b.d.CreateRequests()[0]
	want := fakekamatera.CreateRequest{
		Name: r.Name, Password: "Secr3tPassw0rd", PasswordValidate: "Secr3tPassw0rd",
		SSHKey: "ssh-ed25519 AAAAC3Nza ops@example.com", Datacenter: "US-NY2", Image: "ubuntu_server_24.04_64-bit",
		CPU: "4B", RAM: "8192", Disk: "size=100 size=200", DailyBackup: "yes", Managed: "yes",
		Network: "name=wan,ip=auto name=lan-1,ip=auto", Quantity: 1, BillingCycle: "monthly", MonthlyPackage: "t5000",
		PowerOnAfterCreate: "yes", ScriptFile: testScript, Tag: "k8sca-test k8scang-full",
	}
	if r != want {
		t.Errorf("\n got %+v\nwant %+v", r, want)
	}
}

func TestFailedCreateFreesCapacity(t *testing.T) {
	b := newBed(t, twoGroups, nil)
	ctx := context.Background()
	g := b.group("workers")
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	cmds := b.d.PendingCreates()
	if err := b.d.Fail(cmds[0].ID, "Insufficient account balance"); err != nil {
		t.Fatal(err)
	}
	ins, err := g.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var failed []providers.Instance
	for _, in := range ins {
		if in.Error != "" {
			failed = append(failed, in)
		}
	}
	if len(failed) != 1 || failed[0].ProviderID != "kamatera://"+cmds[0].ServerName ||
		failed[0].State != providers.StateCreating || !strings.Contains(failed[0].Error, "Insufficient account balance") {
		t.Fatalf("instances %+v", ins)
	}
	if n := b.target("workers"); n != 1 {
		t.Errorf("target %d, want 1: the failed create no longer counts", n)
	}
	// The freed capacity can be asked for again, up to max.
	if err := g.IncreaseSize(ctx, 4); err != nil {
		t.Errorf("IncreaseSize to max after a failure: %v", err)
	}
	// The failure is shown for a while, then dropped.
	b.clock.Advance(16 * time.Minute)
	for _, s := range b.state("workers") {
		if strings.Contains(s, "!") {
			t.Errorf("failed instance still listed: %s", s)
		}
	}
}

func TestCreateTimeout(t *testing.T) {
	b := newBed(t, twoGroups, nil, WithCreateTimeout(10*time.Minute))
	if err := b.group("workers").IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(11 * time.Minute)
	st := b.state("workers")
	if len(st) != 1 || !strings.Contains(st[0], "still not complete after 10m0s") {
		t.Errorf("instances %q", st)
	}
	if n := b.target("workers"); n != 0 {
		t.Errorf("target %d", n)
	}
}

func TestUnknownCommandWaitsThenTimesOut(t *testing.T) {
	b := newBed(t, twoGroups, nil, WithCreateTimeout(10*time.Minute))
	g := b.group("workers")
	if err := g.IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	b.p.mu.Lock()
	for _, c := range b.p.creates {
		c.commandID = "999999" // not in the queue (yet)
	}
	b.p.mu.Unlock()
	if n := b.target("workers"); n != 1 {
		t.Errorf("target %d: an unknown command is waited for", n)
	}
	b.clock.Advance(11 * time.Minute)
	if n := b.target("workers"); n != 0 {
		t.Errorf("target %d after the timeout", n)
	}
}

func TestDeleteInstance(t *testing.T) {
	d := fakekamatera.New()
	t.Cleanup(d.Close)
	d.AddServer(fakekamatera.Server{Name: "w-one", Power: true, Tags: tagged("workers")})
	d.AddServer(fakekamatera.Server{Name: "w-two", Power: true, Tags: tagged("workers")})
	d.AddServer(fakekamatera.Server{Name: "w-off", Power: false, Tags: tagged("workers")})
	d.AddServer(fakekamatera.Server{Name: "o-one", Power: true, Tags: tagged("other")})
	var terminated []string
	d.OnTerminate(func(name string) { terminated = append(terminated, name) })
	b := newBedOn(t, d, baseINI(d.URL())+"[nodegroup \"workers\"]\nmin-size = 1\n[nodegroup \"other\"]\n", nil)
	ctx := context.Background()
	g := b.group("workers")

	if err := g.DeleteInstance(ctx, "kamatera://w-one"); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	if _, ok := d.Server("w-one"); ok {
		t.Error("w-one not terminated")
	}
	if n := b.target("workers"); n != 1 {
		t.Errorf("target %d, want 1", n)
	}
	if err := g.DeleteInstance(ctx, "kamatera://w-one"); err != nil {
		t.Errorf("deleting again: %v (want nil: removal is idempotent)", err)
	}
	tests := []struct {
		id   string
		want error
	}{
		{"kamatera://w-two", providers.ErrBelowMin},
		{"kamatera://o-one", providers.ErrUnknownInstance},
		{"kamatera://nope", providers.ErrUnknownInstance},
		{"aws:///eu-west-1a/i-0abc", providers.ErrUnknownInstance},
		{"kamatera://", providers.ErrUnknownInstance},
	}
	for _, tt := range tests {
		err := g.DeleteInstance(ctx, tt.id)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), "kamatera group workers") {
			t.Errorf("DeleteInstance(%s) = %v, want %v", tt.id, err, tt.want)
		}
	}
	// A powered-off server does not count, so removing it ignores min size.
	if err := g.DeleteInstance(ctx, "kamatera://w-off"); err != nil {
		t.Errorf("delete powered-off server: %v", err)
	}
	equal(t, "terminated", terminated, []string{"w-one", "w-off"})
	for _, r := range d.Requests() {
		if r.Path == "/service/server/terminate" && !strings.Contains(r.Body, `"force":true`) {
			t.Errorf("terminate without force: %s", r.Body)
		}
	}
}

func TestDeleteInstanceWhileCreating(t *testing.T) {
	b := newBed(t, twoGroups, nil)
	ctx := context.Background()
	g := b.group("workers")
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cmd := b.d.PendingCreates()[0]
	id := "kamatera://" + cmd.ServerName
	if err := g.DeleteInstance(ctx, id); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	equal(t, "cancelled", b.state("workers"), []string{id + "=deleting"})
	if n := b.target("workers"); n != 0 {
		t.Errorf("target %d", n)
	}
	if err := b.d.Complete(cmd.ID); err != nil {
		t.Fatal(err)
	}
	b.state("workers") // the refresh terminates it
	if _, ok := b.d.Server(cmd.ServerName); ok {
		t.Error("cancelled server not terminated once created")
	}
}

func TestDecreaseTargetSize(t *testing.T) {
	b := newBed(t, twoGroups, nil)
	ctx := context.Background()
	g := b.group("workers")
	if err := g.DecreaseTargetSize(ctx, -1); !errors.Is(err, providers.ErrNothingToDecrease) {
		t.Errorf("nothing in progress: %v", err)
	}
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	cmds := b.d.PendingCreates()
	if err := b.d.Complete(cmds[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := g.DecreaseTargetSize(ctx, -3); !errors.Is(err, providers.ErrNothingToDecrease) {
		t.Errorf("decrease beyond the creates in progress: %v", err)
	}
	if err := g.DecreaseTargetSize(ctx, 1); err == nil {
		t.Error("positive delta accepted")
	}
	if err := g.DecreaseTargetSize(ctx, -2); err != nil {
		t.Fatalf("DecreaseTargetSize: %v", err)
	}
	if n := b.target("workers"); n != 1 {
		t.Errorf("target %d, want 1 (the created server stays)", n)
	}
	if err := g.DecreaseTargetSize(ctx, -1); !errors.Is(err, providers.ErrNothingToDecrease) {
		t.Errorf("a created server is not decreasable: %v", err)
	}
	// Given-up creates: one completes (terminated), one fails (dropped).
	if err := b.d.Complete(cmds[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := b.d.Fail(cmds[2].ID, "boom"); err != nil {
		t.Fatal(err)
	}
	want := []string{"kamatera://" + cmds[0].ServerName + "=running", "kamatera://" + cmds[1].ServerName + "=deleting"}
	sort.Strings(want)
	equal(t, "terminating", b.state("workers"), want)
	if _, ok := b.d.Server(cmds[1].ServerName); ok {
		t.Error("given-up server not terminated")
	}
	equal(t, "after", b.state("workers"), []string{"kamatera://" + cmds[0].ServerName + "=running"})
}

func TestIncreaseSizeLimits(t *testing.T) {
	b := newBed(t, twoGroups, nil)
	ctx := context.Background()
	g := b.group("workers")
	if err := g.IncreaseSize(ctx, 0); err == nil {
		t.Error("zero delta accepted")
	}
	if err := g.IncreaseSize(ctx, 6); !errors.Is(err, providers.ErrAboveMax) || !strings.Contains(err.Error(), "0 + 6 = 6") {
		t.Errorf("IncreaseSize(6): %v", err)
	}
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := g.IncreaseSize(ctx, 3); !errors.Is(err, providers.ErrAboveMax) {
		t.Errorf("second IncreaseSize(3): %v", err)
	}
	if len(b.d.CreateRequests()) != 3 {
		t.Errorf("%d creates", len(b.d.CreateRequests()))
	}
}

func TestNoScriptGroupCanShrinkButNotGrow(t *testing.T) {
	d := fakekamatera.New()
	t.Cleanup(d.Close)
	d.AddServer(fakekamatera.Server{Name: "n-one", Power: true, Tags: tagged("noscript")})
	ini := strings.Replace(baseINI(d.URL()), "default-script-base64", "; default-script-base64", 1) + "[nodegroup \"noscript\"]\n"
	b := newBedOn(t, d, ini, nil)
	ctx := context.Background()
	g := b.group("noscript")
	err := g.IncreaseSize(ctx, 1)
	if !errors.Is(err, ErrNoInitScript) || !strings.Contains(err.Error(), "script-base64") || !strings.Contains(err.Error(), "noscript") {
		t.Errorf("IncreaseSize: %v", err)
	}
	equal(t, "listed", b.state("noscript"), []string{"kamatera://n-one=running"})
	if err := g.DeleteInstance(ctx, "kamatera://n-one"); err != nil {
		t.Errorf("DeleteInstance: %v", err)
	}
	if len(d.CreateRequests()) != 0 {
		t.Error("a server was created")
	}
}

func TestConcurrentIncreases(t *testing.T) {
	b := newBed(t, twoGroups, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			g := b.group("workers")
			if len(errs)%2 == 0 {
				_, _ = g.Instances(ctx) // reads interleave with the writes
			}
			errs <- g.IncreaseSize(ctx, 1)
		})
	}
	wg.Wait()
	close(errs)
	ok, above := 0, 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, providers.ErrAboveMax):
			above++
		default:
			t.Errorf("unexpected: %v", err)
		}
	}
	if ok != 5 || above != 15 || len(b.d.CreateRequests()) != 5 || b.target("workers") != 5 {
		t.Errorf("ok %d, above max %d, creates %d, target %d; want 5, 15, 5, 5", ok, above, len(b.d.CreateRequests()), b.target("workers"))
	}
}

func TestRetries(t *testing.T) {
	ctx := context.Background()
	t.Run("5xx on a read is retried", func(t *testing.T) {
		b := newBed(t, twoGroups, nil)
		b.d.InjectStatus("/service/servers", http.StatusBadGateway, 2)
		if _, err := b.group("workers").Instances(ctx); err != nil {
			t.Fatalf("Instances: %v", err)
		}
		if n := b.d.RequestCount(http.MethodGet, "/service/servers"); n != 3 {
			t.Errorf("%d list requests, want 3", n)
		}
	})
	t.Run("4xx is not retried", func(t *testing.T) {
		b := newBed(t, twoGroups, nil)
		b.d.InjectStatus("/service/servers", http.StatusBadRequest, 1)
		err := b.group("workers").IncreaseSize(ctx, 1)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(err.Error(), "kamatera group workers") {
			t.Errorf("error %v", err)
		}
		if n := b.d.RequestCount(http.MethodGet, "/service/servers"); n != 1 {
			t.Errorf("%d list requests, want 1", n)
		}
	})
	t.Run("timeouts are retried", func(t *testing.T) {
		b := newBed(t, twoGroups, nil, WithRequestTimeout(50*time.Millisecond))
		b.d.InjectDelay("/service/servers", 150*time.Millisecond, 1)
		if _, err := b.group("workers").TargetSize(ctx); err != nil {
			t.Fatalf("TargetSize: %v", err)
		}
		if n := b.d.RequestCount(http.MethodGet, "/service/servers"); n != 2 {
			t.Errorf("%d list requests, want 2", n)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		b := newBed(t, twoGroups, nil)
		b.d.InjectStatus("/service/servers", http.StatusInternalServerError, 10)
		_, err := b.group("workers").TargetSize(ctx)
		if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") || !strings.Contains(err.Error(), "500") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("a create is not repeated after a 500, and counts a while", func(t *testing.T) {
		b := newBed(t, twoGroups, nil)
		b.d.InjectStatus("/service/server", http.StatusInternalServerError, 1)
		err := b.group("workers").IncreaseSize(ctx, 1)
		if err == nil || !strings.Contains(err.Error(), "create server w-") || !strings.Contains(err.Error(), "counts as creating") {
			t.Errorf("error %v", err)
		}
		if n := b.d.RequestCount(http.MethodPost, "/service/server"); n != 1 {
			t.Errorf("%d create requests, want 1", n)
		}
		if n := b.target("workers"); n != 1 {
			t.Errorf("target %d: a create of unknown outcome counts until it shows up", n)
		}
		b.clock.Advance(6 * time.Minute)
		if st := b.state("workers"); len(st) != 1 || !strings.Contains(st[0], "no such server appeared") {
			t.Errorf("instances %q", st)
		}
		if n := b.target("workers"); n != 0 {
			t.Errorf("target %d after it never appeared", n)
		}
	})
	t.Run("a create is not repeated after a 4xx, nor counted", func(t *testing.T) {
		b := newBed(t, twoGroups, nil)
		b.d.InjectStatus("/service/server", http.StatusBadRequest, 1)
		if err := b.group("workers").IncreaseSize(ctx, 1); err == nil || strings.Contains(err.Error(), "counts as creating") {
			t.Errorf("error %v", err)
		}
		if n := b.target("workers"); n != 0 {
			t.Errorf("target %d", n)
		}
	})
	t.Run("a timed-out create that went through is followed", func(t *testing.T) {
		b := newBed(t, twoGroups, nil, WithRequestTimeout(50*time.Millisecond))
		b.d.InjectDelay("/service/server", 100*time.Millisecond, 1)
		created := make(chan string, 1)
		b.d.OnCreate(func(req fakekamatera.CreateRequest, _ string) { created <- req.Name })
		if err := b.group("workers").IncreaseSize(ctx, 1); err == nil || !strings.Contains(err.Error(), "no answer within") {
			t.Errorf("error %v", err)
		}
		if n := b.d.RequestCount(http.MethodPost, "/service/server"); n != 1 {
			t.Errorf("%d create requests, want 1", n)
		}
		var name string
		select { // the double finishes the create after the client gave up
		case name = <-created:
		case <-time.After(10 * time.Second):
			t.Fatal("the timed-out create never went through")
		}
		equal(t, "appeared", b.state("workers"), []string{"kamatera://" + name + "=creating"})
		b.d.CompleteAll()
		equal(t, "running", b.state("workers"), []string{"kamatera://" + name + "=running"})
	})
	t.Run("a create is repeated after a 503", func(t *testing.T) {
		b := newBed(t, twoGroups, nil)
		b.d.InjectStatus("/service/server", http.StatusServiceUnavailable, 1)
		if err := b.group("workers").IncreaseSize(ctx, 1); err != nil {
			t.Errorf("IncreaseSize: %v", err)
		}
		if n := len(b.d.CreateRequests()); n != 1 {
			t.Errorf("%d servers created", n)
		}
	})
	t.Run("a lost terminate answer still succeeds", func(t *testing.T) {
		d := fakekamatera.New()
		t.Cleanup(d.Close)
		d.AddServer(fakekamatera.Server{Name: "w-one", Power: true, Tags: tagged("workers")})
		b := newBedOn(t, d, baseINI(d.URL())+twoGroups, nil, WithRequestTimeout(100*time.Millisecond), WithRetry(3, 100*time.Millisecond))
		// The first attempt is served after the client gave up on it; the
		// retries then find no server.
		d.InjectDelay("/service/server/terminate", 150*time.Millisecond, 1)
		d.InjectStatus("/service/server/terminate", http.StatusGatewayTimeout, 5)
		if err := b.group("workers").DeleteInstance(ctx, "kamatera://w-one"); err != nil {
			t.Errorf("DeleteInstance: %v", err)
		}
	})
}

func TestUnauthorized(t *testing.T) {
	const wrong = "WrongSecretValue77"
	// Kamatera may answer a rejected key with 401, or with 200 and the same
	// error body: both are a rejected key, not an empty listing.
	for _, status := range []int{http.StatusUnauthorized, http.StatusOK} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			d := fakekamatera.New(fakekamatera.WithAuthFailureStatus(status))
			t.Cleanup(d.Close)
			b := newBedOn(t, d, baseINI(d.URL())+twoGroups, map[string]string{EnvAPIClientID: d.ClientID(), EnvAPISecret: wrong})
			_, err := b.p.NodeGroups(context.Background())
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("NodeGroups: %v", err)
			}
			msg := err.Error()
			for _, want := range []string{strconv.Itoa(status), "Authentication failed", "KAMATERA_API_SECRET", "list servers"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%q lacks %q", msg, want)
				}
			}
			if strings.Contains(msg, wrong) || strings.Contains(msg, d.Secret()) {
				t.Errorf("error shows the secret: %s", msg)
			}
			if n := d.RequestCount(http.MethodGet, "/service/servers"); n != 1 {
				t.Errorf("rejected key retried: %d requests", n)
			}
			for _, s := range []string{fmt.Sprint(b.p), fmt.Sprintf("%+v", b.p), fmt.Sprintf("%#v", b.p), fmt.Sprintf("%+v", *b.p.api)} {
				if strings.Contains(s, wrong) {
					t.Errorf("provider printout shows the secret: %s", s)
				}
			}
			// A create refused that way is no create: nothing counts as
			// creating.
			g := b.group("workers")
			if err := g.IncreaseSize(context.Background(), 1); !errors.Is(err, ErrUnauthorized) {
				t.Errorf("IncreaseSize: %v", err)
			}
			if len(d.Servers()) != 0 || len(b.p.creates) != 0 {
				t.Errorf("servers %v, creates %v", d.Servers(), b.p.creates)
			}
		})
	}
}

func TestCredentialsPrecedence(t *testing.T) {
	d := fakekamatera.New()
	t.Cleanup(d.Close)
	ini := func(id, secret string) string {
		return strings.Replace(baseINI(d.URL()), "[global]\n", fmt.Sprintf("[global]\nkamatera-api-client-id = %s\nkamatera-api-secret = %s\n", id, secret), 1) + twoGroups
	}
	good := map[string]string{EnvAPIClientID: d.ClientID(), EnvAPISecret: d.Secret()}
	tests := []struct {
		name string
		ini  string
		env  map[string]string
		opts []Option
		ok   bool
	}{
		{"file only", ini(d.ClientID(), d.Secret()), map[string]string{}, nil, true},
		{"environment wins over the file", ini("bad", "bad"), good, nil, true},
		{"empty environment falls back to the file", ini(d.ClientID(), d.Secret()), map[string]string{EnvAPIClientID: "", EnvAPISecret: ""}, nil, true},
		{"WithCredentials wins over both", ini("bad", "bad"), map[string]string{EnvAPIClientID: "bad", EnvAPISecret: "bad"}, []Option{WithCredentials(d.ClientID(), d.Secret())}, true},
		{"wrong file, no environment", ini("bad", "bad"), map[string]string{}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBedOn(t, d, tt.ini, tt.env, tt.opts...)
			_, err := b.p.NodeGroups(context.Background())
			if (err == nil) != tt.ok {
				t.Errorf("NodeGroups: %v", err)
			}
		})
	}
	t.Run("none at all", func(t *testing.T) {
		cfg, err := ParseCloudConfig(strings.NewReader(baseINI(d.URL())+twoGroups), "k.ini")
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(cfg, nil, WithLookupEnv(func(string) (string, bool) { return "", false }))
		if err == nil || !strings.Contains(err.Error(), EnvAPIClientID) || !strings.Contains(err.Error(), "kamatera-api-client-id") {
			t.Errorf("New: %v", err)
		}
	})
	t.Run("incomplete config", func(t *testing.T) {
		cfg, err := ParseCloudConfig(strings.NewReader(seedDiskExample), "k.ini")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(cfg, nil, WithCredentials("a", "b")); err == nil || !strings.Contains(err.Error(), "cluster-name") {
			t.Errorf("New: %v", err)
		}
	})
}

func TestProviderIDPrefix(t *testing.T) {
	d := fakekamatera.New()
	t.Cleanup(d.Close)
	d.AddServer(fakekamatera.Server{Name: "w-one", Power: true, Tags: tagged("workers")})
	d.AddServer(fakekamatera.Server{Name: "w-two", Power: true, Tags: tagged("workers")})
	b := newBedOn(t, d, baseINI(d.URL())+"provider-id-prefix = rke2://\n"+twoGroups, nil)
	equal(t, "instances", b.state("workers"), []string{"rke2://w-one=running", "rke2://w-two=running"})
	g := b.group("workers")
	if err := g.DeleteInstance(context.Background(), "rke2://w-one"); err != nil {
		t.Errorf("configured prefix: %v", err)
	}
	if err := g.DeleteInstance(context.Background(), "kamatera://w-two"); err != nil {
		t.Errorf("default prefix, as cluster-autoscaler accepts: %v", err)
	}
}

func TestNumericCommandIDs(t *testing.T) {
	d := fakekamatera.New(fakekamatera.WithNumericCommandIDs())
	t.Cleanup(d.Close)
	b := newBedOn(t, d, baseINI(d.URL())+twoGroups, nil)
	if err := b.group("workers").IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	d.CompleteAll()
	if st := b.state("workers"); len(st) != 1 || !strings.HasSuffix(st[0], "=running") {
		t.Errorf("instances %q", st)
	}
}

// A new Provider does not know the creates another one queued: like
// cluster-autoscaler, it takes their powered-off servers for unfinished
// deletions until they power on.
func TestFreshProviderSeesCreatesOnceRunning(t *testing.T) {
	b := newBed(t, twoGroups, nil)
	if err := b.group("workers").IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	fresh := newBedOn(t, b.d, baseINI(b.d.URL())+twoGroups, nil)
	name := b.d.PendingCreates()[0].ServerName
	equal(t, "before", fresh.state("workers"), []string{"kamatera://" + name + "=deleting"})
	b.d.CompleteAll()
	equal(t, "after", fresh.state("workers"), []string{"kamatera://" + name + "=running"})
}

func TestListingIsCached(t *testing.T) {
	b := newBed(t, twoGroups, nil, WithCacheTTL(time.Minute))
	ctx := context.Background()
	g := b.group("workers")
	if _, err := b.p.NodeGroups(ctx); err != nil {
		t.Fatal(err)
	}
	_, _ = g.TargetSize(ctx)
	_, _ = g.Instances(ctx)
	if n := b.d.RequestCount(http.MethodGet, "/service/servers"); n != 1 {
		t.Errorf("%d listings, want 1", n)
	}
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := b.d.RequestCount(http.MethodGet, "/service/servers"); n != 2 {
		t.Errorf("%d listings, want 2: a size change lists afresh", n)
	}
}
