package kamatera

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodetide/nodetide/pkg/providers"
)

// ProviderName is the name groups report through Provider().
const ProviderName = "kamatera"

// Server tag prefixes (cluster-autoscaler's): a server belongs to group g of
// cluster c when it carries both k8sca-c and k8scang-g.
const (
	ClusterTagPrefix   = "k8sca-"
	NodeGroupTagPrefix = "k8scang-"
)

// Environment variables that hold the API key; they win over the file.
const (
	EnvAPIClientID = "KAMATERA_API_CLIENT_ID"
	EnvAPISecret   = "KAMATERA_API_SECRET"
)

// ErrNoInitScript is returned (wrapped) by IncreaseSize for a group with no
// script-base64: its servers would boot but never join the cluster.
var ErrNoInitScript = errors.New("no script-base64 to join new servers to the cluster")

// Option tunes New.
type Option func(*options)

type options struct {
	clientID, secret string
	lookupEnv        func(string) (string, bool)
	attempts         int
	backoff          time.Duration
	requestTimeout   time.Duration
	cacheTTL         time.Duration
	createTimeout    time.Duration
	failedRetention  time.Duration
	commandWait      time.Duration
	commandPoll      time.Duration
	now              func() time.Time
	reserve          func(cpuMilli, memBytes int64) (int64, int64)
	log              *slog.Logger
}

// WithCredentials sets the API key (e.g. read from Secrets Manager); it wins
// over the environment and the file.
func WithCredentials(clientID, secret string) Option {
	return func(o *options) { o.clientID, o.secret = clientID, secret }
}

// WithLookupEnv replaces os.LookupEnv for KAMATERA_API_CLIENT_ID and
// KAMATERA_API_SECRET.
func WithLookupEnv(lookup func(string) (string, bool)) Option {
	return func(o *options) { o.lookupEnv = lookup }
}

// WithRetry sets how many attempts a call gets (default 5) and the first
// backoff (default 1 s, doubling).
func WithRetry(attempts int, backoff time.Duration) Option {
	return func(o *options) { o.attempts, o.backoff = max(attempts, 1), backoff }
}

// WithRequestTimeout bounds each attempt (default 60 s).
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) { o.requestTimeout = d }
}

// WithCacheTTL sets how long a listing of the servers is reused by reads
// (default 5 s: one evaluation reads each group several times). Size changes
// always list afresh.
func WithCacheTTL(d time.Duration) Option {
	return func(o *options) { o.cacheTTL = d }
}

// WithCreateTimeout sets how long a create may stay in Kamatera's queue
// before it counts as failed (default 40 min, as cluster-autoscaler waits).
func WithCreateTimeout(d time.Duration) Option {
	return func(o *options) { o.createTimeout = d }
}

// WithCommandWait sets how long DeleteInstance follows its terminate (or
// power-off) command in Kamatera's queue before returning (default 60 s,
// and never past the context's deadline less 10 s), and how often it reads
// the queue meanwhile (default 2 s). A command still unfinished then is
// followed by later listings.
func WithCommandWait(wait, poll time.Duration) Option {
	return func(o *options) { o.commandWait, o.commandPoll = wait, max(poll, time.Millisecond) }
}

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithSystemReserve replaces the default reserve (see Template) with fixed
// amounts held back from every node's CPU and memory.
func WithSystemReserve(cpu, memory resource.Quantity) Option {
	return func(o *options) {
		o.reserve = func(int64, int64) (int64, int64) { return cpu.MilliValue(), memory.Value() }
	}
}

// WithLogger sets where the provider logs (default: slog.Default(), so that
// a failed terminate or create is seen). Secrets are never logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// Provider is the Kamatera node-group provider of one cloud config. It keeps
// the creates it has queued in memory, so keep one Provider for the life of
// the process.
type Provider struct {
	cfg    *CloudConfig
	api    *apiClient
	opts   options
	groups []*NodeGroup

	// opMu serialises size changes, so that two increases can't both pass
	// the max-size check.
	opMu sync.Mutex
	// refreshMu lets one listing run at a time.
	refreshMu sync.Mutex

	mu sync.Mutex // guards the fields below
	// servers is the last listing (after filter-name-prefix), by name.
	servers map[string]listedServer
	// tags caches each server's tags: ours never change, and fetching them
	// costs one call per server.
	tags map[string][]string
	// creates are the creates this provider queued that are not yet seen
	// running (or failed recently), by server name.
	creates map[string]*create
	// deleting are the servers asked to terminate.
	deleting  map[string]deletion
	refreshed time.Time
}

// deletion is a server this provider asked to terminate or power off.
type deletion struct {
	group string
	at    time.Time
	// commandID is the queue command doing it; empty once it completed (or
	// when the answer named none: the listing tells then).
	commandID string
	// poweroff: the server is being powered off, not terminated; once off it
	// is parked (kept for poweron-on-scale-up) and no longer deleting.
	poweroff bool
}

type listedServer struct {
	name  string
	power bool
}

// unconfirmedTimeout is how long a create that got no clear answer (see
// errOutcomeUnknown) counts, waiting for its server to appear.
const unconfirmedTimeout = 5 * time.Minute

// create is one server creation (or power-on of a parked server) queued in
// Kamatera.
type create struct {
	group string
	name  string
	// commandID is empty for a create that got no clear answer: it is
	// followed through the listing instead of the queue.
	commandID string
	started   time.Time
	// done: the command completed; the server counts as creating until the
	// listing shows it powered on.
	done bool
	// failed holds the error once the command failed or timed out.
	failed   string
	failedAt time.Time
	// cancelled: DecreaseTargetSize gave it up; it is terminated once its
	// command completes (a queued command can't be recalled).
	cancelled bool
	// poweron: a parked server being powered on, not a new one.
	poweron bool
}

var _ providers.Provider = (*Provider)(nil)

// New returns the provider of cfg. httpClient may be nil. The API key comes
// from WithCredentials, else KAMATERA_API_CLIENT_ID / KAMATERA_API_SECRET,
// else the file.
func New(cfg *CloudConfig, httpClient *http.Client, opts ...Option) (*Provider, error) {
	if cfg == nil {
		return nil, errors.New("kamatera: no cloud config")
	}
	o := options{
		lookupEnv:       os.LookupEnv,
		attempts:        5,
		backoff:         time.Second,
		requestTimeout:  time.Minute,
		cacheTTL:        5 * time.Second,
		createTimeout:   40 * time.Minute,
		failedRetention: 15 * time.Minute,
		commandWait:     time.Minute,
		commandPoll:     2 * time.Second,
		now:             time.Now,
		reserve:         defaultReserve,
		log:             slog.Default(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	clientID, secret := resolveCredential(o.clientID, o.lookupEnv, EnvAPIClientID, cfg.APIClientID),
		resolveCredential(o.secret, o.lookupEnv, EnvAPISecret, cfg.APISecret.Reveal())
	if clientID == "" {
		return nil, fmt.Errorf("kamatera %s: no API client ID: set %s or kamatera-api-client-id in [global]", cfg.Source, EnvAPIClientID)
	}
	if secret == "" {
		return nil, fmt.Errorf("kamatera %s: no API secret: set %s or kamatera-api-secret in [global]", cfg.Source, EnvAPISecret)
	}
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	hide := []string{secret}
	for _, g := range cfg.NodeGroups {
		hide = append(hide, g.Server.Password.Reveal())
	}
	p := &Provider{
		cfg:  cfg,
		opts: o,
		api: &apiClient{
			baseURL: strings.TrimRight(cfg.APIURL, "/"),
			http:    httpClient,
			auth: func(h http.Header) {
				h.Set("AuthClientId", clientID)
				h.Set("AuthSecret", secret)
			},
			redact:   redactor(hide...),
			attempts: o.attempts,
			backoff:  o.backoff,
			timeout:  o.requestTimeout,
			log:      o.log,
		},
		servers:  map[string]listedServer{},
		tags:     map[string][]string{},
		creates:  map[string]*create{},
		deleting: map[string]deletion{},
	}
	for _, gc := range cfg.NodeGroups {
		p.groups = append(p.groups, &NodeGroup{p: p, cfg: gc})
	}
	return p, nil
}

func resolveCredential(explicit string, lookup func(string) (string, bool), env, file string) string {
	if explicit != "" {
		return explicit
	}
	if v, ok := lookup(env); ok && v != "" {
		return v
	}
	return file
}

// String names the provider without any secret.
func (p *Provider) String() string {
	return fmt.Sprintf("kamatera provider (%s, cluster %q)", p.cfg.Source, p.cfg.ClusterName)
}

// GoString keeps %#v free of secrets.
func (p *Provider) GoString() string { return p.String() }

// NodeGroups implements providers.Provider: one group per [nodegroup]
// section, in file order. It lists the servers, so an unreachable API or a
// rejected key shows here.
func (p *Provider) NodeGroups(ctx context.Context) ([]providers.NodeGroup, error) {
	if err := p.refresh(ctx, false); err != nil {
		return nil, err
	}
	out := make([]providers.NodeGroup, len(p.groups))
	for i, g := range p.groups {
		out[i] = g
	}
	return out, nil
}

// NodeGroup returns the named group.
func (p *Provider) NodeGroup(name string) (*NodeGroup, bool) {
	for _, g := range p.groups {
		if g.cfg.Name == name {
			return g, true
		}
	}
	return nil, false
}

// ProviderID is the provider ID of a server.
func (p *Provider) ProviderID(serverName string) string {
	return p.cfg.ProviderIDPrefix + serverName
}

// serverName reads a provider ID: the configured prefix, or kamatera:// as
// cluster-autoscaler also accepts.
func (p *Provider) serverName(providerID string) (string, bool) {
	name, ok := strings.CutPrefix(providerID, p.cfg.ProviderIDPrefix)
	if !ok {
		name, ok = strings.CutPrefix(providerID, DefaultProviderIDPrefix)
	}
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

// newServerName follows cluster-autoscaler: the name prefix, a dash, and 11
// random hex digits (it takes a UUID's first 12 characters, one of which is
// the UUID's dash, and drops the dash).
func newServerName(namePrefix string) (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return serverNamePrefix(namePrefix) + hex.EncodeToString(b)[:11], nil
}

// refresh lists the servers (reusing a listing younger than the cache TTL
// unless force), reads the tags of servers not seen before, and follows the
// queued creates, power changes and terminates. The API is called without
// p.mu held; what the answers change is applied under it in one step.
func (p *Provider) refresh(ctx context.Context, force bool) error {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	p.mu.Lock()
	fresh := !p.refreshed.IsZero() && p.opts.now().Sub(p.refreshed) < p.opts.cacheTTL
	p.mu.Unlock()
	if fresh && !force {
		return nil
	}

	servers, err := p.listOurs(ctx)
	if err != nil {
		return err
	}
	needTags, follow, followDel := p.toFollow(servers)
	newTags, err := p.readTags(ctx, needTags)
	if err != nil {
		return err
	}
	created, err := p.followCreates(ctx, follow)
	if err != nil {
		return err
	}
	deleted, err := p.followDeletes(ctx, followDel)
	if err != nil {
		return err
	}

	now := p.opts.now()
	p.mu.Lock()
	p.settleDeletes(deleted, followDel)
	p.settleCreates(created, now)
	terminate := p.expireCreates(servers, now)
	p.expireDeletes(servers, now)
	for name, t := range newTags {
		p.tags[name] = t
	}
	for name := range p.tags {
		if _, listed := servers[name]; !listed && p.creates[name] == nil {
			delete(p.tags, name)
		}
	}
	p.servers = servers
	p.refreshed = now
	p.mu.Unlock()

	p.removeCancelled(ctx, terminate, now)
	return nil
}

// listOurs lists the servers whose names carry the cluster's filter prefix.
func (p *Provider) listOurs(ctx context.Context) (map[string]listedServer, error) {
	list, err := p.api.listServers(ctx)
	if err != nil {
		return nil, fmt.Errorf("kamatera cluster %s: list servers: %w", p.cfg.ClusterName, err)
	}
	servers := make(map[string]listedServer, len(list))
	for _, s := range list {
		if s.Name == "" || !strings.HasPrefix(s.Name, p.cfg.FilterNamePrefix) {
			continue
		}
		servers[s.Name] = listedServer{name: s.Name, power: s.Power == "on"}
	}
	return servers, nil
}

// toFollow names, under p.mu, the servers whose tags are not known yet, the
// creates whose queued command is still open, and the deletions with one.
func (p *Provider) toFollow(servers map[string]listedServer) (needTags []string, follow []*create, followDel map[string]deletion) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range servers {
		if _, ok := p.tags[name]; !ok {
			needTags = append(needTags, name)
		}
	}
	sort.Strings(needTags)
	for _, c := range p.creates {
		if c.failed == "" && !c.done && c.commandID != "" {
			follow = append(follow, c)
		}
	}
	followDel = map[string]deletion{}
	for name, d := range p.deleting {
		if d.commandID != "" {
			followDel[name] = d
		}
	}
	return needTags, follow, followDel
}

func (p *Provider) readTags(ctx context.Context, names []string) (map[string][]string, error) {
	tags := make(map[string][]string, len(names))
	for _, name := range names {
		t, err := p.api.serverTags(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("kamatera cluster %s: tags of server %s: %w", p.cfg.ClusterName, name, err)
		}
		tags[name] = t
	}
	return tags, nil
}

// createOutcome is what the queue says of one create (or power-on).
type createOutcome struct {
	c      *create
	status queueCommand
	err    error
}

func (p *Provider) followCreates(ctx context.Context, follow []*create) ([]createOutcome, error) {
	outcomes := make([]createOutcome, 0, len(follow))
	for _, c := range follow {
		st, err := p.api.queueStatus(ctx, c.commandID)
		if err != nil && !errors.Is(err, errUnknownCommand) {
			return nil, fmt.Errorf("kamatera group %s: follow the create of server %s (command %s): %w", c.group, c.name, c.commandID, err)
		}
		outcomes = append(outcomes, createOutcome{c: c, status: st, err: err})
	}
	return outcomes, nil
}

func (p *Provider) followDeletes(ctx context.Context, followDel map[string]deletion) (map[string]queueCommand, error) {
	outcomes := map[string]queueCommand{}
	for _, name := range sortedKeys(followDel) {
		d := followDel[name]
		st, err := p.api.queueStatus(ctx, d.commandID)
		if errors.Is(err, errUnknownCommand) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kamatera group %s: follow the %s of server %s (command %s): %w", d.group, d.action(), name, d.commandID, err)
		}
		outcomes[name] = st
	}
	return outcomes, nil
}

// settleDeletes applies the queue's answers on deletions; p.mu is held.
func (p *Provider) settleDeletes(outcomes map[string]queueCommand, followed map[string]deletion) {
	for name, st := range outcomes {
		d, ok := p.deleting[name]
		if !ok || d.commandID != followed[name].commandID {
			continue // changed meanwhile
		}
		switch st.Status {
		case queueComplete:
			p.deletionDone(name, d)
		case queueError, queueCancelled:
			// The server is still there and, as far as anyone knows,
			// running: it counts again, so it is neither billed unseen
			// nor forgotten.
			delete(p.deleting, name)
			p.opts.log.Warn("kamatera: a "+d.action()+" command failed; the server counts as running again", "group", d.group, "server", name, "command", d.commandID, "status", st.Status, "log", st.Log)
		}
	}
}

// settleCreates applies the queue's answers on creates; p.mu is held.
func (p *Provider) settleCreates(outcomes []createOutcome, now time.Time) {
	for _, o := range outcomes {
		c := o.c
		switch {
		case o.err != nil:
			// Not (yet) in the queue: wait, up to the create timeout.
		case o.status.Status == queueComplete:
			c.done = true
		case o.status.Status == queueError || o.status.Status == queueCancelled:
			msg := o.status.Log
			if msg == "" {
				msg = "the create command ended with status " + o.status.Status
			}
			p.fail(c, now, "kamatera "+c.what()+" of server "+c.name+" failed: "+msg)
		}
	}
}

// expireCreates settles creates against the listing: done, timed out,
// failed long enough ago; it returns the cancelled creates whose servers
// exist and must be removed. p.mu is held.
func (p *Provider) expireCreates(servers map[string]listedServer, now time.Time) (terminate []*create) {
	for name, c := range p.creates {
		s, listed := servers[name]
		if c.commandID == "" && listed {
			c.done = true // an unconfirmed create whose server appeared
		}
		timeout := p.opts.createTimeout
		if c.commandID == "" && !c.done {
			timeout = min(timeout, unconfirmedTimeout)
		}
		switch {
		case c.failed != "":
			if now.Sub(c.failedAt) >= p.opts.failedRetention || c.cancelled {
				delete(p.creates, name)
			}
		case c.done && c.cancelled && listed:
			terminate = append(terminate, c)
		case c.done && listed && s.power:
			delete(p.creates, name) // now an ordinary running server
		case now.Sub(c.started) >= timeout:
			if c.cancelled {
				delete(p.creates, name)
				continue
			}
			var msg string
			switch {
			case c.commandID == "" && !c.done:
				msg = fmt.Sprintf("kamatera create of server %s got no clear answer, and no such server appeared within %s", name, timeout)
			case c.done:
				msg = fmt.Sprintf("kamatera create of server %s completed, but the server is not listed powered on after %s", name, timeout)
			default:
				msg = fmt.Sprintf("kamatera create of server %s (command %s) is still not complete after %s", name, c.commandID, timeout)
			}
			p.fail(c, now, msg)
		}
	}
	return terminate
}

// expireDeletes settles deletions against the listing. A terminated server
// is remembered a while after it is gone, so that a repeated DeleteInstance
// (a retried drain step) succeeds. p.mu is held.
func (p *Provider) expireDeletes(servers map[string]listedServer, now time.Time) {
	for name, d := range p.deleting {
		s, listed := servers[name]
		switch {
		case !listed && now.Sub(d.at) >= p.opts.failedRetention:
			delete(p.deleting, name)
		case listed && d.poweroff && d.commandID == "" && !s.power:
			delete(p.deleting, name) // powered off: kept, no longer deleting
		case listed && now.Sub(d.at) >= p.opts.createTimeout:
			// A command the queue never finished (or never knew): the
			// server is still there, so it counts again.
			delete(p.deleting, name)
			p.opts.log.Warn("kamatera: a "+d.action()+" did not finish; the server counts again", "group", d.group, "server", name, "command", d.commandID, "after", p.opts.createTimeout.String())
		}
	}
}

// removeCancelled removes the servers of creates DecreaseTargetSize gave up
// once they exist (a kept server powered on for nothing is powered off
// again); a failure is retried by the next refresh.
func (p *Provider) removeCancelled(ctx context.Context, terminate []*create, now time.Time) {
	for _, c := range terminate {
		park := c.poweron // it was kept powered off before: so again
		var id string
		var err error
		if park {
			id, err = p.api.powerServer(ctx, c.name, false)
		} else {
			id, err = p.api.terminateServer(ctx, c.name)
		}
		if err != nil {
			p.opts.log.WarnContext(ctx, "kamatera: removing a cancelled server failed; will retry", "group", c.group, "server", c.name, "error", err.Error())
			continue
		}
		p.mu.Lock()
		delete(p.creates, c.name)
		p.deleting[c.name] = deletion{group: c.group, at: now, commandID: id, poweroff: park}
		p.mu.Unlock()
	}
}

func (c *create) what() string {
	if c.poweron {
		return "power-on"
	}
	return "create"
}

func (d deletion) action() string {
	if d.poweroff {
		return "power-off"
	}
	return "terminate"
}

// deletionDone records a completed terminate or power-off; p.mu is held. A
// terminated server is remembered a while (see refresh); a powered-off one
// is parked: listed off, and no longer deleting.
func (p *Provider) deletionDone(name string, d deletion) {
	if d.poweroff {
		delete(p.deleting, name)
		if s, ok := p.servers[name]; ok {
			s.power = false
			p.servers[name] = s
		}
		return
	}
	d.commandID = ""
	p.deleting[name] = d
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fail marks a create failed; p.mu is held.
func (p *Provider) fail(c *create, now time.Time, msg string) {
	c.failed, c.failedAt = msg, now
	if !c.cancelled {
		p.opts.log.Warn("kamatera server create failed", "group", c.group, "server", c.name, "command", c.commandID, "error", msg)
	}
}

// member is one instance of a group as the provider sees it.
type member struct {
	name    string
	state   providers.InstanceState
	errMsg  string
	counted bool // part of the target size
	listed  bool
	create  *create
	marked  bool // asked to terminate or power off
	// parked: powered off and kept for poweron-on-scale-up; not an
	// instance of the group (not listed, not counted).
	parked bool
}

// members returns a group's instances from the last refresh, by name.
func (p *Provider) members(group string) []member {
	clusterTag := ClusterTagPrefix + p.cfg.ClusterName
	groupTag := NodeGroupTagPrefix + group
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []member
	for name, c := range p.creates {
		if c.group != group {
			continue
		}
		_, listed := p.servers[name]
		m := member{name: name, listed: listed, create: c, state: providers.StateCreating}
		switch {
		case c.failed != "":
			m.errMsg = c.failed
		case c.cancelled:
			m.state = providers.StateDeleting
		default:
			m.counted = true
		}
		out = append(out, m)
	}
	for name, s := range p.servers {
		if p.creates[name] != nil || !hasTags(p.tags[name], clusterTag, groupTag) {
			continue
		}
		m := member{name: name, listed: true}
		_, m.marked = p.deleting[name]
		switch {
		case m.marked:
			m.state = providers.StateDeleting
		case s.power:
			m.state, m.counted = providers.StateRunning, true
		case p.cfg.PoweroffOnScaleDown || p.cfg.PoweronOnScaleUp:
			// In power-off mode a powered-off server is kept capacity, not
			// running capacity.
			m.parked = true
		default:
			// A powered-off server this process didn't create: like
			// cluster-autoscaler, take it for a deletion that didn't finish.
			m.state = providers.StateDeleting
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func hasTags(tags []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, t := range tags {
			if t == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func targetOf(ms []member) int {
	n := 0
	for _, m := range ms {
		if m.counted {
			n++
		}
	}
	return n
}

// Format prints String for every verb, so no verb walks into the options
// that hold the API key.
func (p *Provider) Format(f fmt.State, _ rune) { fmt.Fprint(f, p.String()) }

// errStillQueued: a command had not finished when waitCommand stopped
// waiting.
var errStillQueued = errors.New("the command is still in Kamatera's queue")

// waitCommand reads a command's status until it is complete, failed or
// cancelled, for at most the command wait (and 10 s short of ctx's
// deadline, so the caller can still answer).
func (p *Provider) waitCommand(ctx context.Context, id string) (queueCommand, error) {
	until := time.Now().Add(p.opts.commandWait)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-10*time.Second).Before(until) {
		until = dl.Add(-10 * time.Second)
	}
	for {
		st, err := p.api.queueStatus(ctx, id)
		switch {
		case err != nil && !errors.Is(err, errUnknownCommand):
			return queueCommand{}, err
		case err == nil && (st.Status == queueComplete || st.Status == queueError || st.Status == queueCancelled):
			return st, nil
		}
		wait := min(p.opts.commandPoll, time.Until(until))
		if wait <= 0 {
			return queueCommand{}, fmt.Errorf("command %s: %w after %s", id, errStillQueued, p.opts.commandWait)
		}
		if err := sleep(ctx, wait); err != nil {
			return queueCommand{}, err
		}
	}
}
