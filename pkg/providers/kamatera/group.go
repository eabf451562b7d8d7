package kamatera

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// NodeGroup is one [nodegroup] of the cloud config.
type NodeGroup struct {
	p   *Provider
	cfg *NodeGroupConfig
}

var _ providers.NodeGroup = (*NodeGroup)(nil)

// Name implements providers.NodeGroup.
func (g *NodeGroup) Name() string { return g.cfg.Name }

// Provider implements providers.NodeGroup.
func (g *NodeGroup) Provider() string { return ProviderName }

// Bounds implements providers.NodeGroup: the INI's min-size and max-size
// (pkg/setup narrows them by the config).
func (g *NodeGroup) Bounds() providers.Bounds {
	return providers.Bounds{Min: g.cfg.MinSize, Max: g.cfg.MaxSize}
}

// Config returns the group's configuration.
func (g *NodeGroup) Config() NodeGroupConfig { return *g.cfg }

func (g *NodeGroup) members(ctx context.Context, force bool) ([]member, error) {
	if err := g.p.refresh(ctx, force); err != nil {
		return nil, fmt.Errorf("kamatera group %s: %w", g.cfg.Name, err)
	}
	return g.p.members(g.cfg.Name), nil
}

// TargetSize implements providers.NodeGroup: the servers powered on plus the
// creates still in Kamatera's queue. Failed, cancelled and terminating
// servers don't count.
func (g *NodeGroup) TargetSize(ctx context.Context) (int, error) {
	ms, err := g.members(ctx, false)
	if err != nil {
		return 0, err
	}
	return targetOf(ms), nil
}

// Instances implements providers.NodeGroup. A create is "creating" until its
// command completes and the server is listed powered on; a failed create
// stays "creating" with Error set (for 15 minutes).
func (g *NodeGroup) Instances(ctx context.Context) ([]providers.Instance, error) {
	ms, err := g.members(ctx, false)
	if err != nil {
		return nil, err
	}
	out := make([]providers.Instance, 0, len(ms))
	for _, m := range ms {
		if m.parked {
			continue
		}
		out = append(out, providers.Instance{ProviderID: g.p.ProviderID(m.name), State: m.state, Error: m.errMsg})
	}
	return out, nil
}

// createSpec is the create request of this group, less the name; it fails
// when the group can't make servers that would join the cluster.
func (g *NodeGroup) createSpec() (createRequest, error) {
	s := g.cfg.Server
	if s.ScriptBase64 == "" {
		return createRequest{}, fmt.Errorf("kamatera group %s: %w: set script-base64 in [nodegroup %q] or default-script-base64 in [global] of %s", g.cfg.Name, ErrNoInitScript, g.cfg.Name, g.p.cfg.Source)
	}
	script, err := s.Script()
	if err != nil {
		return createRequest{}, fmt.Errorf("kamatera group %s: %w", g.cfg.Name, err)
	}
	tags := []string{ClusterTagPrefix + g.p.cfg.ClusterName, NodeGroupTagPrefix + g.cfg.Name}
	for _, t := range tags {
		// the API takes tags as one space-separated string
		if strings.ContainsAny(t, " \t") {
			return createRequest{}, fmt.Errorf("kamatera group %s: tag %q holds a space, which the create API can't carry: servers can't be created for it", g.cfg.Name, t)
		}
	}
	password := s.Password.Reveal()
	if password == "" {
		password = generatePassword
	}
	return createRequest{
		Password:           password,
		PasswordValidate:   password,
		SSHKey:             s.SSHKey,
		Datacenter:         s.Datacenter,
		Image:              s.Image,
		CPU:                s.CPU,
		RAM:                strconv.Itoa(s.RAM),
		Disk:               strings.Join(s.Disks, " "),
		DailyBackup:        boolFlag(s.DailyBackup),
		Managed:            boolFlag(s.Managed),
		Network:            strings.Join(s.Networks, " "),
		Quantity:           1,
		BillingCycle:       s.BillingCycle,
		MonthlyPackage:     s.MonthlyPackage,
		PowerOnAfterCreate: "yes",
		ScriptFile:         script,
		Tag:                strings.Join(tags, " "),
	}, nil
}

// IncreaseSize implements providers.NodeGroup: with poweron-on-scale-up it
// first powers on the group's powered-off servers, then queues the rest as
// server creates (one API call each), and returns without waiting for them;
// they count in the target size from then on. If a create fails midway, the ones
// already queued stay.
func (g *NodeGroup) IncreaseSize(ctx context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("kamatera group %s: increase must be positive, got %d", g.cfg.Name, delta)
	}
	spec, err := g.createSpec()
	if err != nil {
		return err
	}
	g.p.opMu.Lock()
	defer g.p.opMu.Unlock()
	ms, err := g.members(ctx, true)
	if err != nil {
		return err
	}
	size := targetOf(ms)
	if err := providers.CheckIncrease("size", size, delta, g.cfg.MaxSize); err != nil {
		return fmt.Errorf("kamatera group %s: %w", g.cfg.Name, err)
	}
	tags := strings.Fields(spec.Tag)
	if g.p.cfg.PoweronOnScaleUp {
		delta = g.powerOn(ctx, ms, delta)
	}
	for i := range delta {
		name, err := newServerName(g.cfg.Server.NamePrefix)
		if err != nil {
			return fmt.Errorf("kamatera group %s: server name: %w", g.cfg.Name, err)
		}
		req := spec
		req.Name = name
		id, err := g.p.api.createServer(ctx, req)
		if err != nil && !errors.Is(err, errOutcomeUnknown) {
			return fmt.Errorf("kamatera group %s: create server %s (%d of %d): %w", g.cfg.Name, name, i+1, delta, err)
		}
		g.p.mu.Lock()
		g.p.creates[name] = &create{group: g.cfg.Name, name: name, commandID: id, started: g.p.opts.now()}
		g.p.tags[name] = tags
		g.p.mu.Unlock()
		if err != nil {
			// Counted as creating, so the next cycle doesn't ask again for
			// what may already be on its way.
			return fmt.Errorf("kamatera group %s: create server %s (%d of %d): %w; it counts as creating until it appears (at most %s)", g.cfg.Name, name, i+1, delta, err, unconfirmedTimeout)
		}
		g.p.opts.log.InfoContext(ctx, "kamatera server create queued", "group", g.cfg.Name, "server", name, "command", id)
	}
	return nil
}

// powerOn starts up to delta of the group's parked servers and returns how
// many are still to create. A power-on that fails to queue is logged and
// made up for by a create.
func (g *NodeGroup) powerOn(ctx context.Context, ms []member, delta int) int {
	for _, m := range ms {
		if delta == 0 {
			break
		}
		if !m.parked {
			continue
		}
		id, err := g.p.api.powerServer(ctx, m.name, true)
		if err != nil {
			g.p.opts.log.WarnContext(ctx, "kamatera: power on a kept server failed; creating one instead", "group", g.cfg.Name, "server", m.name, "error", err.Error())
			continue
		}
		g.p.mu.Lock()
		g.p.creates[m.name] = &create{group: g.cfg.Name, name: m.name, commandID: id, started: g.p.opts.now(), poweron: true}
		g.p.mu.Unlock()
		g.p.opts.log.InfoContext(ctx, "kamatera server power-on queued", "group", g.cfg.Name, "server", m.name, "command", id)
		delta--
	}
	return delta
}

// DeleteInstance implements providers.NodeGroup: it terminates the server
// (forced, so a powered-on server goes too), or with poweroff-on-scale-down
// powers it off and keeps it (up to poweroff-on-scale-down-max-servers per
// group), and follows that command in Kamatera's queue (see
// WithCommandWait). A command that fails is retried, up to three in all;
// then the error is returned and the server, still running, counts as
// running. The Node object is not touched: without a cloud controller
// manager nothing else removes it, so the caller (the drain) deletes it. A
// server still in creation is cancelled instead, and terminated once its
// create completes.
func (g *NodeGroup) DeleteInstance(ctx context.Context, providerID string) error {
	name, ok := g.p.serverName(providerID)
	if !ok {
		return fmt.Errorf("kamatera group %s: %q is not a Kamatera provider ID: %w", g.cfg.Name, providerID, providers.ErrUnknownInstance)
	}
	g.p.opMu.Lock()
	defer g.p.opMu.Unlock()
	ms, err := g.members(ctx, true)
	if err != nil {
		return err
	}
	var m *member
	parked := 0
	for i := range ms {
		if ms[i].name == name {
			m = &ms[i]
		}
		if ms[i].parked {
			parked++
		}
	}
	if m == nil {
		g.p.mu.Lock()
		d, gone := g.p.deleting[name]
		g.p.mu.Unlock()
		if gone && d.group == g.cfg.Name {
			return nil // terminated earlier: removal is idempotent
		}
		return fmt.Errorf("kamatera group %s: server %s: %w", g.cfg.Name, name, providers.ErrUnknownInstance)
	}
	if m.counted {
		if size := targetOf(ms); size-1 < g.cfg.MinSize {
			return fmt.Errorf("kamatera group %s: size %d - 1: %w (%d)", g.cfg.Name, size, providers.ErrBelowMin, g.cfg.MinSize)
		}
	}
	keep := g.p.cfg.PoweroffOnScaleDown && (g.p.cfg.PoweroffMaxServers < 0 || parked < g.p.cfg.PoweroffMaxServers)
	switch {
	case m.marked || (m.create != nil && m.create.cancelled):
		return nil // already on its way out
	case m.parked && g.p.cfg.PoweroffOnScaleDown:
		return nil // already powered off and kept
	case m.create != nil && m.create.failed != "":
		g.p.mu.Lock()
		delete(g.p.creates, name)
		g.p.mu.Unlock()
		if !m.listed {
			return nil
		}
		keep = false // a server whose create failed is not worth keeping
	case m.create != nil && !m.create.done:
		g.p.mu.Lock()
		m.create.cancelled = true
		g.p.mu.Unlock()
		return nil
	}
	if keep && !m.parked {
		return g.remove(ctx, name, true)
	}
	return g.remove(ctx, name, false)
}

// terminateAttempts bounds the terminate (or power-off) commands one
// DeleteInstance queues when they fail.
const terminateAttempts = 3

// remove terminates a server, or powers it off, and follows the command. A
// failed call whose server is gone anyway (an earlier attempt went through)
// counts as done. g.p.opMu is held, and let go while the command runs.
func (g *NodeGroup) remove(ctx context.Context, name string, poweroff bool) error {
	what := "terminate"
	if poweroff {
		what = "power off"
	}
	var lastErr error
	for attempt := 1; attempt <= terminateAttempts; attempt++ {
		var id string
		var err error
		if poweroff {
			id, err = g.p.api.powerServer(ctx, name, false)
		} else {
			id, err = g.p.api.terminateServer(ctx, name)
		}
		if err != nil {
			if !poweroff && g.gone(ctx, name) {
				break
			}
			return fmt.Errorf("kamatera group %s: %s server %s: %w", g.cfg.Name, what, name, err)
		}
		d := deletion{group: g.cfg.Name, at: g.p.opts.now(), commandID: id, poweroff: poweroff}
		g.p.mu.Lock()
		delete(g.p.creates, name)
		g.p.deleting[name] = d
		g.p.mu.Unlock()
		if id == "" {
			break // nothing to follow: the listing tells
		}
		// The server is marked: other size changes may go on meanwhile.
		g.p.opMu.Unlock()
		st, err := g.p.waitCommand(ctx, id)
		g.p.opMu.Lock()
		if err != nil {
			// Still queued (or the queue can't be read now): later
			// listings follow it, and undo the mark if it fails.
			g.p.opts.log.InfoContext(ctx, "kamatera: "+what+" still in progress; followed by later listings", "group", g.cfg.Name, "server", name, "command", id, "reason", err.Error())
			return nil
		}
		g.p.mu.Lock()
		if st.Status == queueComplete {
			g.p.deletionDone(name, d)
			g.p.mu.Unlock()
			lastErr = nil
			break
		}
		delete(g.p.deleting, name) // failed: still there, counts again
		g.p.mu.Unlock()
		msg := st.Log
		if msg == "" {
			msg = "no log"
		}
		lastErr = fmt.Errorf("command %s ended with status %s: %s", id, st.Status, msg)
		g.p.opts.log.WarnContext(ctx, "kamatera: "+what+" command failed", "group", g.cfg.Name, "server", name, "attempt", attempt, "error", lastErr.Error())
	}
	if lastErr != nil {
		return fmt.Errorf("kamatera group %s: %s server %s: %w (%d attempts; the server is still there and counts as running)", g.cfg.Name, what, name, lastErr, terminateAttempts)
	}
	g.p.opts.log.InfoContext(ctx, "kamatera server "+map[bool]string{true: "powered off", false: "terminated"}[poweroff], "group", g.cfg.Name, "server", name)
	return nil
}

// gone reports whether a fresh listing no longer shows the server; then it
// is remembered as terminated.
func (g *NodeGroup) gone(ctx context.Context, name string) bool {
	if g.p.refresh(ctx, true) != nil {
		return false
	}
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if _, listed := g.p.servers[name]; listed {
		return false
	}
	delete(g.p.creates, name)
	g.p.deleting[name] = deletion{group: g.cfg.Name, at: g.p.opts.now()}
	return true
}

// DecreaseTargetSize implements providers.NodeGroup: it gives up creates
// whose command has not completed, newest first. Kamatera can't recall a
// queued command, so a given-up server is terminated as soon as it exists;
// it stops counting at once. Servers already created are never touched.
func (g *NodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("kamatera group %s: decrease must be negative, got %d", g.cfg.Name, delta)
	}
	g.p.opMu.Lock()
	defer g.p.opMu.Unlock()
	ms, err := g.members(ctx, true)
	if err != nil {
		return err
	}
	var pending []*create
	for _, m := range ms {
		if m.counted && m.create != nil && !m.create.done {
			pending = append(pending, m.create)
		}
	}
	if -delta > len(pending) {
		return fmt.Errorf("kamatera group %s: decrease by %d with %d creates in progress: %w", g.cfg.Name, -delta, len(pending), providers.ErrNothingToDecrease)
	}
	sort.Slice(pending, func(i, j int) bool { return pending[i].started.After(pending[j].started) })
	g.p.mu.Lock()
	for _, c := range pending[:-delta] {
		c.cancelled = true
	}
	g.p.mu.Unlock()
	return nil
}

// Template implements providers.NodeGroup (see template.go).
func (g *NodeGroup) Template(context.Context) (snapshot.Template, error) {
	t, err := buildTemplate(g.cfg, g.p.opts.reserve)
	if err != nil {
		return snapshot.Template{}, fmt.Errorf("kamatera group %s: %w", g.cfg.Name, err)
	}
	return t, nil
}

// String names the group; Format uses it for every verb, so printing a group
// never walks into its provider's credentials.
func (g *NodeGroup) String() string { return "kamatera node group " + g.cfg.Name }

// Format prints String for every verb.
func (g *NodeGroup) Format(f fmt.State, _ rune) { fmt.Fprint(f, g.String()) }
