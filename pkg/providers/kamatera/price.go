package kamatera

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// SourceAPI names where a group's price came from, as the snapshot does.
const SourceAPI = "kamatera-api"

// hoursPerMonth turns a monthly price into an hourly one (AWS's and the
// plan's month).
const hoursPerMonth = 730

// apiPrice is a price as server info answers it: a decimal string (a
// number is taken too).
type apiPrice string

func (p *apiPrice) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*p = apiPrice(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("price %s is neither a string nor a number", b)
	}
	*p = apiPrice(n)
	return nil
}

// apiServerInfo is the part of a POST /service/server/info row read here.
type apiServerInfo struct {
	Name           string   `json:"name"`
	CPU            string   `json:"cpu"`
	RAM            apiPrice `json:"ram"` // a string or a number, like the prices
	Billing        string   `json:"billing"`
	PriceHourlyOn  apiPrice `json:"priceHourlyOn"`
	PriceMonthlyOn apiPrice `json:"priceMonthlyOn"`
}

// serverInfo reads one server's details, prices included. The API takes
// the name as a regular expression, so it is quoted and anchored.
func (c *apiClient) serverInfo(ctx context.Context, name string) (apiServerInfo, error) {
	var rows []apiServerInfo
	req := nameRequest{Name: "^" + regexp.QuoteMeta(name) + "$"}
	if err := c.call(ctx, http.MethodPost, "/service/server/info", nil, req, retryIdempotent, &rows); err != nil {
		return apiServerInfo{}, err
	}
	for _, r := range rows {
		if r.Name == name {
			return r, nil
		}
	}
	return apiServerInfo{}, fmt.Errorf("kamatera API POST /service/server/info: no server %s in the answer", name)
}

var _ providers.Pricer = (*NodeGroup)(nil)

// Price is what one server of the group costs per hour, in USD: Kamatera's
// server info (POST /service/server/info) prices existing servers only, so
// the figure is read off a running server of the group that has the
// group's cpu and ram (priceHourlyOn for hourly billing, priceMonthlyOn /
// 730 for monthly), through cache under the group's datacenter and server
// configuration. The API answers no currency: Kamatera lists its prices in
// USD. A group with no such server, and no fresh cached price, has none:
// set it in the config (nodeGroups[].price).
func (g *NodeGroup) Price(ctx context.Context, cache *state.PriceCache) (state.Quote, error) {
	s := g.cfg.Server
	key := state.PriceKey{Provider: ProviderName, Region: s.Datacenter, Type: configSignature(s), Lifecycle: state.LifecycleOnDemand}
	q, err := cache.Get(ctx, key, func(ctx context.Context) (state.Price, error) { return g.readPrice(ctx, cache) })
	if err != nil {
		return state.Quote{}, fmt.Errorf("kamatera group %s: price: %w", g.cfg.Name, err)
	}
	return q, nil
}

// configSignature names what a new server of the group is, as far as its
// price goes: cpu, ram and a digest of the rest (image, disks, backups,
// management, billing, traffic package).
func configSignature(s ServerConfig) string {
	h := sha256.New()
	for _, part := range append([]string{s.Image, strconv.FormatBool(s.DailyBackup), strconv.FormatBool(s.Managed), s.BillingCycle, s.MonthlyPackage}, s.Disks...) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s-%dMB-%s", s.CPU, s.RAM, hex.EncodeToString(h.Sum(nil))[:12])
}

func (g *NodeGroup) readPrice(ctx context.Context, cache *state.PriceCache) (state.Price, error) {
	ms, err := g.members(ctx, false)
	if err != nil {
		return state.Price{}, err
	}
	var names []string
	for _, m := range ms {
		if m.listed && !m.parked && m.state == providers.StateRunning {
			names = append(names, m.name)
		}
	}
	slices.Sort(names)
	s := g.cfg.Server
	for _, name := range names {
		info, err := g.p.api.serverInfo(ctx, name)
		if err != nil {
			return state.Price{}, err
		}
		if !strings.EqualFold(info.CPU, s.CPU) || string(info.RAM) != strconv.Itoa(s.RAM) {
			continue // made with another configuration: not what a new server costs
		}
		return infoPrice(info, cache)
	}
	return state.Price{}, fmt.Errorf("Kamatera prices existing servers only, and no running server of the group has its cpu %s and ram %d MB; set nodeGroups[].price in the config", s.CPU, s.RAM)
}

func infoPrice(info apiServerInfo, cache *state.PriceCache) (state.Price, error) {
	raw, div := info.PriceHourlyOn, 1.0
	if strings.EqualFold(info.Billing, BillingMonthly) {
		raw, div = info.PriceMonthlyOn, hoursPerMonth
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return state.Price{}, fmt.Errorf("server %s: %s price %q is not a number", info.Name, info.Billing, raw)
	}
	return state.Price{PerHour: v / div, Currency: "USD", Source: SourceAPI, RetrievedAt: cache.Clock()}, nil
}
