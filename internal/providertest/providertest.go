// Package providertest is the contract of providers.NodeGroup as a test
// suite, run against every provider (usually on the provider's HTTP double):
//
//	func TestContract(t *testing.T) { providertest.Run(t, factory) }
//
// The factory builds, for each check, a fresh group with the bounds, the
// starting size and the template labels a Spec asks for, and says how the
// group's machines are brought up (Bed.Boot). Every check reads the group the
// way an evaluate run does: a new Provider.NodeGroups call, then TargetSize,
// Instances and Template. What the suite checks:
//
//   - IncreaseSize adds instances that are "creating" until booted, then
//     "running"; the target follows; DeleteInstance lowers the target by one
//     and the instance leaves (gone, or "deleting"), and doing it again is a
//     no-op; deleting a machine still being created gives it up for good.
//   - Above MaxSize is providers.ErrAboveMax, below MinSize
//     providers.ErrBelowMin, a provider ID that is not the group's
//     providers.ErrUnknownInstance; each leaves the group and the cloud
//     untouched.
//   - A group of zero can grow: its Template has cpu and memory and the
//     group's labels.
//   - Concurrent IncreaseSize calls never take the group past MaxSize.
//   - An increase so large that size+delta would wrap (in int, or in the
//     cloud's int32/uint32) is ErrAboveMax and changes nothing.
//   - DecreaseTargetSize refuses a non-negative delta, is
//     providers.ErrNothingToDecrease when no capacity is waiting for a
//     machine, and gives back capacity that is (never a started machine).
//
// Waits poll with a deadline; nothing sleeps for a fixed time.
package providertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/providers"
)

// DefaultTimeout bounds each wait of the suite when Bed.Timeout is zero.
const DefaultTimeout = 30 * time.Second

const pollInterval = 50 * time.Millisecond

// Spec is the group a check wants.
type Spec struct {
	MinSize, MaxSize int
	// Size is how many machines the group starts with. The factory returns
	// once they exist; the suite waits until they are all running.
	Size int
	// Labels must be on the group's template (and so on its new nodes).
	Labels map[string]string
}

// Bed is one fresh group under test.
type Bed struct {
	// Provider lists the group (and possibly others); the suite asks it
	// again for each read, as every evaluate run does.
	Provider providers.Provider
	// Group is the name of the group under test.
	Group string
	// Boot brings up every machine of the group that is being created (the
	// double's Boot, Complete, ...). Nil when machines come up on their own;
	// the suite then only waits for them.
	Boot func(t testing.TB)
	// Unstarted raises g's target by n with capacity no machine has been
	// started for yet, which DecreaseTargetSize must be able to give back.
	// Nil when the provider never has such capacity.
	Unstarted func(t testing.TB, g providers.NodeGroup, n int)
	// StartsAtOnce says IncreaseSize starts its machines at once (an ASG
	// launches Pending instances), so what it adds is never given back by
	// DecreaseTargetSize.
	StartsAtOnce bool
	// UnknownID is a well-formed provider ID of this provider that no
	// machine has.
	UnknownID string
	// OtherGroupID, when set, is a machine of another group of the same
	// account or cluster, which the group under test must refuse to delete.
	OtherGroupID string
	// IDPrefix, when set, starts every provider ID of the group.
	IDPrefix string
	// Mutations, when set, counts the changing calls the cloud has received
	// so far; refused operations must not add to it.
	Mutations func() int
	// Timeout bounds each wait (DefaultTimeout when zero).
	Timeout time.Duration
}

// Factory builds a fresh group for one check; it registers its own cleanup
// with t.
type Factory func(t *testing.T, spec Spec) *Bed

// contractLabels are the template labels every check asks for.
var contractLabels = map[string]string{"contract.nodetide.io/group": "under-test"}

// KnownBug marks a check (a subtest path below the suite, e.g.
// "UnknownInstance/unknown-id") that the provider is known to fail: it is
// skipped, with the reason, unless the environment sets StrictEnv to a
// non-empty value, which runs it (and shows the failure).
type KnownBug struct {
	Check, Reason string
}

// StrictEnv names the environment variable that runs known bugs too.
const StrictEnv = "PROVIDERTEST_STRICT"

// suite is one Run.
type suite struct {
	factory Factory
	known   map[string]string
}

// skipKnown skips t when its check is a known bug.
func (s suite) skipKnown(t *testing.T, check string) {
	t.Helper()
	reason, ok := s.known[check]
	if !ok || os.Getenv(StrictEnv) != "" {
		return
	}
	t.Skipf("known bug, skipped unless %s is set: %s", StrictEnv, reason)
}

// Run runs the whole contract against the provider the factory builds.
func Run(t *testing.T, factory Factory, known ...KnownBug) {
	t.Helper()
	s := suite{factory: factory, known: map[string]string{}}
	for _, k := range known {
		s.known[k.Check] = k.Reason
	}
	checks := []struct {
		name string
		fn   func(*testing.T, suite)
	}{
		{"GrowBootRemove", growBootRemove},
		{"RemoveWhileCreating", removeWhileCreating},
		{"AboveMax", aboveMax},
		{"BelowMin", belowMin},
		{"UnknownInstance", unknownInstance},
		{"ScaleFromZero", scaleFromZero},
		{"ConcurrentIncrease", concurrentIncrease},
		{"DecreaseTargetSize", decreaseTargetSize},
		{"RefusedDeltas", refusedDeltas},
		{"HugeIncrease", hugeIncrease},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			s.skipKnown(t, c.name)
			c.fn(t, s)
		})
	}
}

// harness is one check's group.
type harness struct {
	t     *testing.T
	bed   *Bed
	spec  Spec
	suite suite
}

// in is the harness for a subtest of the check.
func (h *harness) in(t *testing.T) *harness {
	sub := *h
	sub.t = t
	return &sub
}

func start(t *testing.T, s suite, spec Spec) *harness {
	t.Helper()
	if spec.Labels == nil {
		spec.Labels = contractLabels
	}
	bed := s.factory(t, spec)
	if bed == nil || bed.Provider == nil || bed.Group == "" || bed.UnknownID == "" {
		t.Fatalf("the factory must return a Bed with Provider, Group and UnknownID set, got %+v", bed)
	}
	h := &harness{t: t, bed: bed, spec: spec, suite: s}
	g := h.group()
	if b := g.Bounds(); b.Min != spec.MinSize || b.Max != spec.MaxSize {
		t.Fatalf("group %s: bounds %d..%d, want %d..%d", bed.Group, b.Min, b.Max, spec.MinSize, spec.MaxSize)
	}
	h.eventually(fmt.Sprintf("the starting %d machines running", spec.Size), func(v view) bool {
		return v.target == spec.Size && v.count(providers.StateRunning) == spec.Size && len(v.instances) == spec.Size
	})
	return h
}

func (h *harness) timeout() time.Duration {
	if h.bed.Timeout > 0 {
		return h.bed.Timeout
	}
	return DefaultTimeout
}

func (h *harness) ctx() context.Context { return h.t.Context() }

// group is a fresh view of the group under test.
func (h *harness) group() providers.NodeGroup {
	h.t.Helper()
	g, err := h.find()
	if err != nil {
		h.t.Fatal(err)
	}
	return g
}

func (h *harness) find() (providers.NodeGroup, error) {
	groups, err := h.bed.Provider.NodeGroups(h.ctx())
	if err != nil {
		return nil, fmt.Errorf("NodeGroups: %w", err)
	}
	var names []string
	for _, g := range groups {
		if g.Name() == h.bed.Group {
			return g, nil
		}
		names = append(names, g.Name())
	}
	return nil, fmt.Errorf("NodeGroups: no group %q among %q", h.bed.Group, names)
}

// view is what one read of the group says.
type view struct {
	target    int
	instances []providers.Instance // by provider ID
}

func (v view) count(st providers.InstanceState) int {
	n := 0
	for _, in := range v.instances {
		if in.State == st {
			n++
		}
	}
	return n
}

// live are the instances not on their way out.
func (v view) live() []providers.Instance {
	var out []providers.Instance
	for _, in := range v.instances {
		if in.State != providers.StateDeleting {
			out = append(out, in)
		}
	}
	return out
}

func (v view) get(id string) (providers.Instance, bool) {
	for _, in := range v.instances {
		if in.ProviderID == id {
			return in, true
		}
	}
	return providers.Instance{}, false
}

// gone says the instance left the group: not listed, or deleting.
func (v view) gone(id string) bool {
	in, ok := v.get(id)
	return !ok || in.State == providers.StateDeleting
}

func (v view) String() string {
	parts := make([]string, 0, len(v.instances))
	for _, in := range v.instances {
		s := in.ProviderID + "=" + string(in.State)
		if in.Error != "" {
			s += " (" + in.Error + ")"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("target %d, instances [%s]", v.target, strings.Join(parts, ", "))
}

// read takes a view through a fresh group and checks what holds for every
// view: provider IDs are set, unique and well-formed, states are known.
func (h *harness) read() (view, error) {
	g, err := h.find()
	if err != nil {
		return view{}, err
	}
	target, err := g.TargetSize(h.ctx())
	if err != nil {
		return view{}, fmt.Errorf("TargetSize: %w", err)
	}
	ins, err := g.Instances(h.ctx())
	if err != nil {
		return view{}, fmt.Errorf("Instances: %w", err)
	}
	ins = slices.Clone(ins)
	slices.SortFunc(ins, func(a, b providers.Instance) int { return strings.Compare(a.ProviderID, b.ProviderID) })
	v := view{target: target, instances: ins}
	for i, in := range ins {
		switch {
		case in.ProviderID == "":
			return v, fmt.Errorf("an instance has no provider ID: %v", v)
		case h.bed.IDPrefix != "" && !strings.HasPrefix(in.ProviderID, h.bed.IDPrefix):
			return v, fmt.Errorf("provider ID %q does not start with %q: %v", in.ProviderID, h.bed.IDPrefix, v)
		case i > 0 && ins[i-1].ProviderID == in.ProviderID:
			return v, fmt.Errorf("provider ID %q is listed twice: %v", in.ProviderID, v)
		}
		switch in.State {
		case providers.StateCreating, providers.StateRunning, providers.StateDeleting:
		default:
			return v, fmt.Errorf("instance %s has state %q: %v", in.ProviderID, in.State, v)
		}
	}
	if target < 0 {
		return v, fmt.Errorf("negative target: %v", v)
	}
	return v, nil
}

func (h *harness) look() view {
	h.t.Helper()
	v, err := h.read()
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

// eventually reads the group until cond holds, failing at the deadline
// with the last view.
func (h *harness) eventually(what string, cond func(view) bool) view {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx(), h.timeout())
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last view
	var lastErr error
	for {
		v, err := h.read()
		if err == nil && cond(v) {
			return v
		}
		last, lastErr = v, err
		select {
		case <-ctx.Done():
			if lastErr != nil {
				h.t.Fatalf("waiting for %s: %v", what, lastErr)
			}
			h.t.Fatalf("waiting for %s: gave up after %s; last read: %v", what, h.timeout(), last)
		case <-tick.C:
		}
	}
}

func (h *harness) boot() {
	h.t.Helper()
	if h.bed.Boot != nil {
		h.bed.Boot(h.t)
	}
}

func (h *harness) mutations() int {
	if h.bed.Mutations == nil {
		return 0
	}
	return h.bed.Mutations()
}

// snapshot is the group and the cloud's count of changes, to check that a
// refused operation changed neither.
type snapshot struct {
	v         view
	mutations int
}

func (h *harness) snap() snapshot {
	h.t.Helper()
	return snapshot{v: h.look(), mutations: h.mutations()}
}

func (h *harness) unchanged(before snapshot, after string) {
	h.t.Helper()
	now := h.snap()
	if now.v.String() != before.v.String() {
		h.t.Errorf("after %s the group changed:\n before %v\n after  %v", after, before.v, now.v)
	}
	if now.mutations != before.mutations {
		h.t.Errorf("after %s the cloud received %d changing call(s)", after, now.mutations-before.mutations)
	}
}

func ids(ins []providers.Instance) []string {
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.ProviderID)
	}
	return out
}

func mustBe(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want one wrapping %q", what, err, target)
	}
}

func targetOf(t *testing.T, g providers.NodeGroup) int {
	t.Helper()
	n, err := g.TargetSize(t.Context())
	if err != nil {
		t.Fatalf("TargetSize: %v", err)
	}
	return n
}

// growBootRemove: increase → creating → boot → running; the target
// follows; remove one → target down by one, the instance leaves; removing it
// again changes nothing.
func growBootRemove(t *testing.T, s suite) {
	h := start(t, s, Spec{MinSize: 0, MaxSize: 5, Size: 1})
	before := h.look()
	first := before.instances[0].ProviderID

	g := h.group()
	if err := g.IncreaseSize(t.Context(), 2); err != nil {
		t.Fatalf("IncreaseSize(2): %v", err)
	}
	if n := targetOf(t, g); n != 3 {
		t.Errorf("the group that grew reports target %d, want 3", n)
	}
	grown := h.eventually("3 instances", func(v view) bool { return v.target == 3 && len(v.live()) == 3 })
	for _, in := range grown.instances {
		switch {
		case in.ProviderID == first:
			if in.State != providers.StateRunning {
				t.Errorf("the machine that was running is %s after the increase: %v", in.State, grown)
			}
		case in.State == providers.StateCreating:
		case in.State == providers.StateRunning && h.bed.Boot == nil:
			// Machines that come up on their own may already be up.
		default:
			t.Errorf("new instance %s is %s before boot, want creating: %v", in.ProviderID, in.State, grown)
		}
		if in.Error != "" {
			t.Errorf("instance %s reports an error: %v", in.ProviderID, grown)
		}
	}

	h.boot()
	up := h.eventually("3 running", func(v view) bool {
		return v.target == 3 && v.count(providers.StateRunning) == 3 && len(v.instances) == 3
	})
	if !slices.Equal(ids(up.instances), ids(grown.instances)) {
		t.Errorf("booting changed the instances: %v → %v", grown, up)
	}

	victim := ""
	for _, in := range up.instances {
		if in.ProviderID != first {
			victim = in.ProviderID
			break
		}
	}
	g = h.group()
	if err := g.DeleteInstance(t.Context(), victim); err != nil {
		t.Fatalf("DeleteInstance(%s): %v", victim, err)
	}
	if n := targetOf(t, g); n != 2 {
		t.Errorf("the group that removed a machine reports target %d, want 2", n)
	}
	after := h.eventually("the removed instance gone", func(v view) bool {
		return v.target == 2 && v.gone(victim) && len(v.live()) == 2
	})
	for _, in := range after.live() {
		if in.State != providers.StateRunning {
			t.Errorf("instance %s is %s after another was removed: %v", in.ProviderID, in.State, after)
		}
	}

	// A retried removal (a drain step run again) is a no-op.
	if err := h.group().DeleteInstance(t.Context(), victim); err != nil {
		t.Errorf("DeleteInstance(%s) again: %v, want nil (removal is idempotent)", victim, err)
	}
	if v := h.look(); v.target != 2 || len(v.live()) != 2 {
		t.Errorf("a repeated removal changed the group: %v", v)
	}
}

// removeWhileCreating: a machine removed before it is up lowers the target
// and stays gone once the others boot.
func removeWhileCreating(t *testing.T, s suite) {
	h := start(t, s, Spec{MinSize: 0, MaxSize: 5, Size: 1})
	first := h.look().instances[0].ProviderID
	if err := h.group().IncreaseSize(t.Context(), 1); err != nil {
		t.Fatalf("IncreaseSize(1): %v", err)
	}
	grown := h.eventually("a new instance", func(v view) bool { return v.target == 2 && len(v.live()) == 2 })
	var fresh string
	for _, in := range grown.instances {
		if in.ProviderID != first {
			fresh = in.ProviderID
		}
	}
	g := h.group()
	if err := g.DeleteInstance(t.Context(), fresh); err != nil {
		t.Fatalf("DeleteInstance(%s) while it is being created: %v", fresh, err)
	}
	if n := targetOf(t, g); n != 1 {
		t.Errorf("target %d after removing the machine being created, want 1", n)
	}
	h.eventually("the removed instance gone", func(v view) bool { return v.target == 1 && v.gone(fresh) })

	// Booting what is left must not bring it back.
	h.boot()
	h.eventually("only the first machine running", func(v view) bool {
		live := v.live()
		return v.target == 1 && len(live) == 1 && live[0].ProviderID == first && live[0].State == providers.StateRunning
	})
}

// aboveMax: an increase past MaxSize is ErrAboveMax and changes nothing,
// also once the group is exactly at its maximum.
func aboveMax(t *testing.T, s suite) {
	h := start(t, s, Spec{MinSize: 0, MaxSize: 2, Size: 1})
	before := h.snap()
	mustBe(t, h.group().IncreaseSize(t.Context(), 2), providers.ErrAboveMax, "IncreaseSize(2) from 1 with max 2")
	h.unchanged(before, "an increase above the maximum")

	if err := h.group().IncreaseSize(t.Context(), 1); err != nil {
		t.Fatalf("IncreaseSize(1) up to the maximum: %v", err)
	}
	h.boot()
	h.eventually("2 running", func(v view) bool { return v.target == 2 && v.count(providers.StateRunning) == 2 })
	atMax := h.snap()
	mustBe(t, h.group().IncreaseSize(t.Context(), 1), providers.ErrAboveMax, "IncreaseSize(1) at the maximum")
	h.unchanged(atMax, "an increase at the maximum")
}

// belowMin: removing a machine from a group at its minimum is ErrBelowMin
// and changes nothing.
func belowMin(t *testing.T, s suite) {
	h := start(t, s, Spec{MinSize: 1, MaxSize: 3, Size: 2})
	v := h.look()
	if err := h.group().DeleteInstance(t.Context(), v.instances[0].ProviderID); err != nil {
		t.Fatalf("DeleteInstance down to the minimum: %v", err)
	}
	last := v.instances[1].ProviderID
	h.eventually("one machine left", func(v view) bool {
		live := v.live()
		return v.target == 1 && len(live) == 1 && live[0].ProviderID == last
	})
	before := h.snap()
	mustBe(t, h.group().DeleteInstance(t.Context(), last), providers.ErrBelowMin, "DeleteInstance at the minimum")
	h.unchanged(before, "a removal below the minimum")
}

// unknownInstance: provider IDs that are not the group's are
// ErrUnknownInstance and change nothing.
func unknownInstance(t *testing.T, s suite) {
	h := start(t, s, Spec{MinSize: 0, MaxSize: 3, Size: 1})
	cases := []struct{ name, id string }{
		{"unknown-id", h.bed.UnknownID},
		{"other-provider", "gce://project/zone/vm-1"},
		{"empty", ""},
		{"other-group", h.bed.OtherGroupID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.id == "" && c.name == "other-group" {
				t.Skip("the factory gives no machine of another group")
			}
			s.skipKnown(t, "UnknownInstance/"+c.name)
			h := h.in(t)
			before := h.snap()
			mustBe(t, h.group().DeleteInstance(t.Context(), c.id), providers.ErrUnknownInstance, fmt.Sprintf("DeleteInstance(%q)", c.id))
			h.unchanged(before, fmt.Sprintf("DeleteInstance(%q)", c.id))
		})
	}
}

// scaleFromZero: an empty group describes its nodes and grows.
func scaleFromZero(t *testing.T, s suite) {
	h := start(t, s, Spec{MinSize: 0, MaxSize: 3, Size: 0})
	g := h.group()
	tpl, err := g.Template(t.Context())
	if err != nil {
		t.Fatalf("Template of an empty group: %v", err)
	}
	if cpu := tpl.Allocatable.Cpu(); cpu.Sign() <= 0 {
		t.Errorf("template cpu = %v, want > 0 (allocatable %v)", cpu, tpl.Allocatable)
	}
	if mem := tpl.Allocatable.Memory(); mem.Sign() <= 0 {
		t.Errorf("template memory = %v, want > 0 (allocatable %v)", mem, tpl.Allocatable)
	}
	for k, want := range h.spec.Labels {
		if got, ok := tpl.Labels[k]; !ok || got != want {
			t.Errorf("template label %s = %q, want %q (labels %v)", k, got, want, tpl.Labels)
		}
	}
	if err := g.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatalf("IncreaseSize(1) from zero: %v", err)
	}
	h.eventually("one instance", func(v view) bool { return v.target == 1 && len(v.live()) == 1 })
	h.boot()
	h.eventually("one running", func(v view) bool {
		return v.target == 1 && v.count(providers.StateRunning) == 1 && len(v.instances) == 1
	})
	// The template does not depend on the group's size.
	again, err := h.group().Template(t.Context())
	if err != nil {
		t.Fatalf("Template after growing: %v", err)
	}
	if !maps.Equal(again.Labels, tpl.Labels) || again.Allocatable.Cpu().Cmp(*tpl.Allocatable.Cpu()) != 0 || again.Allocatable.Memory().Cmp(*tpl.Allocatable.Memory()) != 0 {
		t.Errorf("template changed with the size: %+v → %+v", tpl, again)
	}
}

// concurrentIncrease: ten +1s at once against a maximum of 5 leave exactly
// 5, and the five refused are ErrAboveMax.
func concurrentIncrease(t *testing.T, s suite) {
	const callers, maxSize = 10, 5
	h := start(t, s, Spec{MinSize: 0, MaxSize: maxSize, Size: 0})
	var wg sync.WaitGroup
	errs := make([]error, callers)
	gate := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-gate
			// Each caller takes its own view, as overlapping cycles would.
			g, err := h.find()
			if err != nil {
				errs[i] = err
				return
			}
			errs[i] = g.IncreaseSize(t.Context(), 1)
		})
	}
	close(gate)
	wg.Wait()
	ok, above := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, providers.ErrAboveMax):
			above++
		default:
			t.Errorf("caller %d: %v", i, err)
		}
	}
	// Every call has returned: the group must be at its maximum now.
	if v := h.look(); ok != maxSize || above != callers-maxSize || v.target != maxSize || len(v.live()) > maxSize {
		t.Fatalf("%d increases succeeded and %d were ErrAboveMax, want %d and %d; the group: %v", ok, above, maxSize, callers-maxSize, v)
	}
	h.eventually("the maximum's machines", func(v view) bool { return len(v.live()) == maxSize })
	h.boot()
	h.eventually("5 running", func(v view) bool {
		return v.target == maxSize && v.count(providers.StateRunning) == maxSize && len(v.instances) == maxSize
	})
}

// decreaseTargetSize: nothing waiting for a machine → ErrNothingToDecrease;
// capacity waiting (where the provider has such) is given back, never more,
// and running machines stay.
func decreaseTargetSize(t *testing.T, s suite) {
	h := start(t, s, Spec{MinSize: 0, MaxSize: 5, Size: 1})
	before := h.snap()
	mustBe(t, h.group().DecreaseTargetSize(t.Context(), -1), providers.ErrNothingToDecrease, "DecreaseTargetSize(-1) with every machine running")
	h.unchanged(before, "a decrease with nothing to give back")

	if h.bed.StartsAtOnce {
		if err := h.group().IncreaseSize(t.Context(), 1); err != nil {
			t.Fatalf("IncreaseSize(1): %v", err)
		}
		h.eventually("a started machine", func(v view) bool {
			// Machines that come up on their own are compared once up.
			return v.target == 2 && len(v.live()) == 2 && (h.bed.Boot != nil || v.count(providers.StateRunning) == 2)
		})
		started := h.snap()
		mustBe(t, h.group().DecreaseTargetSize(t.Context(), -1), providers.ErrNothingToDecrease, "DecreaseTargetSize(-1) over a started machine")
		h.unchanged(started, "a decrease over a started machine")
		h.boot()
		h.eventually("2 running", func(v view) bool { return v.target == 2 && v.count(providers.StateRunning) == 2 })
	}
	if h.bed.Unstarted == nil {
		return
	}
	kept := h.look()
	size := kept.target
	h.bed.Unstarted(t, h.group(), 2)
	h.eventually("2 more waiting", func(v view) bool { return v.target == size+2 })
	waiting := h.snap()
	mustBe(t, h.group().DecreaseTargetSize(t.Context(), -3), providers.ErrNothingToDecrease, "DecreaseTargetSize(-3) with 2 waiting")
	h.unchanged(waiting, "a decrease larger than what waits")

	g := h.group()
	if err := g.DecreaseTargetSize(t.Context(), -1); err != nil {
		t.Fatalf("DecreaseTargetSize(-1) with 2 waiting: %v", err)
	}
	if n := targetOf(t, g); n != size+1 {
		t.Errorf("the group that gave one back reports target %d, want %d", n, size+1)
	}
	h.eventually("one given back", func(v view) bool { return v.target == size+1 })
	mustBe(t, h.group().DecreaseTargetSize(t.Context(), -2), providers.ErrNothingToDecrease, "DecreaseTargetSize(-2) with 1 waiting")
	if err := h.group().DecreaseTargetSize(t.Context(), -1); err != nil {
		t.Fatalf("DecreaseTargetSize(-1) with 1 waiting: %v", err)
	}
	onlyKept := func(v view) bool {
		return v.target == size && slices.Equal(ids(v.live()), ids(kept.instances)) && v.count(providers.StateRunning) == size
	}
	h.eventually("only the running machines", onlyKept)
	mustBe(t, h.group().DecreaseTargetSize(t.Context(), -1), providers.ErrNothingToDecrease, "DecreaseTargetSize(-1) once all was given back")

	// What was given back stays given back when the rest boots.
	h.boot()
	h.eventually("only the running machines, after boot", onlyKept)
}

// refusedDeltas: IncreaseSize with a delta ≤ 0 and DecreaseTargetSize with a
// delta ≥ 0 are errors and change nothing.
// hugeIncrease: deltas whose sum with the size wraps around (int64, or the
// 32-bit sizes cloud APIs take) are above the maximum, and change nothing:
// no machine is created and the target is not lowered.
func hugeIncrease(t *testing.T, s suite) {
	h := start(t, s, Spec{MinSize: 0, MaxSize: 5, Size: 2})
	before := h.snap()
	for _, d := range []int{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt32, 1 << 32, 1<<32 - 1} {
		// Bounded, so that a provider looping over a wrapped delta fails
		// here instead of creating machines until the test times out.
		ctx, cancel := context.WithTimeout(t.Context(), h.timeout())
		err := h.group().IncreaseSize(ctx, d)
		cancel()
		if !errors.Is(err, providers.ErrAboveMax) {
			t.Errorf("IncreaseSize(%d) from 2 with max 5: error %v, want one wrapping %q", d, err, providers.ErrAboveMax)
		}
	}
	h.unchanged(before, "increases that overflow")
}

func refusedDeltas(t *testing.T, s suite) {
	h := start(t, s, Spec{MinSize: 0, MaxSize: 5, Size: 1})
	before := h.snap()
	for _, d := range []int{0, -1} {
		if err := h.group().IncreaseSize(t.Context(), d); err == nil {
			t.Errorf("IncreaseSize(%d) succeeded, want an error", d)
		}
	}
	for _, d := range []int{0, 1} {
		err := h.group().DecreaseTargetSize(t.Context(), d)
		if err == nil {
			t.Errorf("DecreaseTargetSize(%d) succeeded, want an error", d)
		}
	}
	h.unchanged(before, "refused deltas")
}
