package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Expanders pick among the groups that could host pending pods.
const (
	ExpanderLeastWaste = "least-waste"
	ExpanderPriority   = "priority"
	ExpanderPrice      = "price"
)

// ExpanderNames are the expanders a config may list, sorted.
var ExpanderNames = []string{ExpanderLeastWaste, ExpanderPrice, ExpanderPriority}

// Chain is the expanders in the order they apply: the listed ones, then
// least-waste as the last tie-breaker when they do not list it.
func (s ScaleUpSettings) Chain() []string {
	out := slices.Clone(s.Expanders)
	if !slices.Contains(out, ExpanderLeastWaste) {
		out = append(out, ExpanderLeastWaste)
	}
	return out
}

// HasExpander reports whether name is in the chain.
func (s ScaleUpSettings) HasExpander(name string) bool { return slices.Contains(s.Chain(), name) }

// wasteTolerance absorbs rounding between the wastes of different groups;
// wastes computed the same way for equal packings are equal.
const wasteTolerance = 1e-9

// expand applies the expander chain to the options of one round (every
// group that places pods), as cluster-autoscaler chains its expanders:
// each keeps its best options and the next breaks their ties; more pods
// placed, then the group's name, break what is left. The note says what the
// choice passed over for price, for the plan's reason; empty without price.
func (m *model) expand(opts []estimate) (best *estimate, note string) {
	left := make([]*estimate, len(opts))
	for i := range opts {
		left[i] = &opts[i]
	}
	all := slices.Clone(left)
	lostAt := map[*estimate]string{}
	var currencies string
	for _, name := range m.set.ScaleUp.Chain() {
		var kept []*estimate
		switch name {
		case ExpanderPriority:
			kept = keepLeast(left, func(e *estimate) float64 { return -float64(m.priority(e)) }, 0)
		case ExpanderPrice:
			kept, currencies = m.cheapest(left)
		default:
			kept = keepLeast(left, func(e *estimate) float64 { return e.waste }, wasteTolerance)
		}
		for _, e := range left {
			if !slices.Contains(kept, e) {
				lostAt[e] = name
			}
		}
		left = kept
	}
	best = slices.MinFunc(left, func(a, b *estimate) int {
		if a.pods != b.pods {
			return cmp.Compare(b.pods, a.pods)
		}
		return strings.Compare(m.groups[a.group].ng.Name, m.groups[b.group].ng.Name)
	})
	if !m.set.ScaleUp.HasExpander(ExpanderPrice) {
		return best, ""
	}
	return best, m.priceNote(best, all, lostAt, currencies)
}

// keepLeast keeps the options whose key is within tol of the least.
func keepLeast(opts []*estimate, key func(*estimate) float64, tol float64) []*estimate {
	least := math.Inf(1)
	for _, e := range opts {
		least = min(least, key(e))
	}
	var out []*estimate
	for _, e := range opts {
		if key(e) <= least+tol {
			out = append(out, e)
		}
	}
	return out
}

func (m *model) priority(e *estimate) int {
	return m.set.ScaleUp.Priorities[m.groups[e.group].ng.Name]
}

func (m *model) price(e *estimate) *snapshot.Price { return m.groups[e.group].ng.Price }

// cost is what the option's new nodes cost per hour; perPod what that is
// for each pod they take, which is what the price expander compares, so
// that a group hosting fewer of the pods is not cheaper for doing less.
func (m *model) cost(e *estimate) float64   { return float64(e.nodes) * m.price(e).PerHour }
func (m *model) perPod(e *estimate) float64 { return m.cost(e) / float64(e.pods) }

// cheapest is the price expander: the priced options beat the unpriced
// ones (whose price is unknown, never zero), and among the priced ones of
// a currency the cheapest per pod placed win. Prices in different
// currencies are not compared: the cheapest of each currency go on to the
// next expander, and currencies names them ("EUR and USD") for the reason.
// With no priced option, all go on.
func (m *model) cheapest(opts []*estimate) (kept []*estimate, currencies string) {
	byCurrency := map[string][]*estimate{}
	for _, e := range opts {
		if p := m.price(e); p != nil {
			byCurrency[p.Currency] = append(byCurrency[p.Currency], e)
		}
	}
	if len(byCurrency) == 0 {
		return opts, ""
	}
	names := sortedKeys(byCurrency)
	for _, c := range names {
		group := byCurrency[c]
		least := math.Inf(1)
		for _, e := range group {
			least = min(least, m.perPod(e))
		}
		kept = append(kept, keepLeast(group, m.perPod, least*1e-9)...)
	}
	if len(names) > 1 {
		currencies = strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	return kept, currencies
}

// priceNote says, for a chain with price in it, what the choice passed
// over: a cheaper group an earlier expander dropped (and why), groups
// without a price, currencies not compared.
func (m *model) priceNote(best *estimate, all []*estimate, lostAt map[*estimate]string, currencies string) string {
	var notes []string
	if c := m.cheaper(best, all); c != nil {
		label := "cheaper group"
		if m.price(best) == nil {
			label = "priced group"
		}
		notes = append(notes, fmt.Sprintf("%s %s (%s) not taken: %s", label, m.groups[c.group].ng.Name, m.costTerm(c), m.lostBecause(c, best, lostAt[c])))
	}
	var unpriced []string
	for _, e := range all {
		if e != best && m.price(e) == nil && lostAt[e] == ExpanderPrice {
			unpriced = append(unpriced, m.groups[e.group].ng.Name)
		}
	}
	if len(unpriced) > 0 {
		slices.Sort(unpriced)
		notes = append(notes, "no price: "+strings.Join(unpriced, ", ")+" (priced groups go first)")
	}
	if currencies != "" {
		notes = append(notes, "prices in "+currencies+" not compared")
	}
	return strings.Join(notes, "; ")
}

// cheaper is the cheapest option per pod in best's currency when it is
// cheaper than best (or, best having no price, the cheapest priced option
// of the first currency); nil when there is none.
func (m *model) cheaper(best *estimate, all []*estimate) *estimate {
	var out *estimate
	for _, e := range all {
		p := m.price(e)
		if e == best || p == nil {
			continue
		}
		if bp := m.price(best); bp != nil && (p.Currency != bp.Currency || m.perPod(e) >= m.perPod(best)*(1-1e-9)) {
			continue
		}
		if out == nil || m.cheaperThan(e, out) {
			out = e
		}
	}
	return out
}

// cheaperThan orders priced options: by currency, then per pod, then name.
func (m *model) cheaperThan(a, b *estimate) bool {
	pa, pb := m.price(a), m.price(b)
	if pa.Currency != pb.Currency {
		return pa.Currency < pb.Currency
	}
	if ca, cb := m.perPod(a), m.perPod(b); ca != cb {
		return ca < cb
	}
	return m.groups[a.group].ng.Name < m.groups[b.group].ng.Name
}

// lostBecause says why e lost to best at the expander step.
func (m *model) lostBecause(e, best *estimate, step string) string {
	switch step {
	case ExpanderPriority:
		return fmt.Sprintf("lower priority (%d against %d)", m.priority(e), m.priority(best))
	case ExpanderLeastWaste:
		return fmt.Sprintf("more waste (%d%% against %d%%)", pct(e.waste), pct(best.waste))
	}
	return "an earlier expander preferred " + m.groups[best.group].ng.Name
}

// expanderWhy is the reason an option was chosen, term by term in chain
// order: "priority 10, price $0.192/h for 2 nodes, waste 12%"; waste leads
// as "least waste 12%" when least-waste comes first.
func (m *model) expanderWhy(e *estimate) string {
	var terms []string
	for i, name := range m.set.ScaleUp.Chain() {
		switch name {
		case ExpanderPriority:
			terms = append(terms, fmt.Sprintf("priority %d", m.priority(e)))
		case ExpanderPrice:
			terms = append(terms, m.priceTerm(e))
		default:
			w := fmt.Sprintf("waste %d%%", pct(e.waste))
			if i == 0 {
				w = "least " + w
			}
			terms = append(terms, w)
		}
	}
	return strings.Join(terms, ", ")
}

// priceTerm is an option's cost in its reason: "price $0.192/h for 2
// nodes", or "no price".
func (m *model) priceTerm(e *estimate) string {
	if m.price(e) == nil {
		return "no price"
	}
	return "price " + m.costTerm(e)
}

// costTerm is a priced option's cost: "$0.192/h for 2 nodes".
func (m *model) costTerm(e *estimate) string {
	return fmt.Sprintf("%s/h for %s", money(m.cost(e), m.price(e).Currency), plural(int(e.nodes), "node"))
}

// money writes an amount with its currency's sign where it has a common
// one ($0.192, €0.1), else with its code (0.1 CHF).
func money(v float64, currency string) string {
	n := strconv.FormatFloat(round4(v), 'f', -1, 64)
	switch currency {
	case "USD":
		return "$" + n
	case "EUR":
		return "€" + n
	case "GBP":
		return "£" + n
	}
	return n + " " + currency
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
