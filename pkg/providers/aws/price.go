package aws

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// Where a price came from, as the snapshot names them.
const (
	SourcePriceList   = "aws-price-list"
	SourceSpotHistory = "aws-spot-history"
)

// PricingAPI is the Price List Query API call prices are read with;
// *pricing.Client has it.
type PricingAPI interface {
	GetProducts(ctx context.Context, in *pricing.GetProductsInput, optFns ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// SpotPriceAPI is the EC2 call Spot prices are read with; *ec2.Client has
// it.
type SpotPriceAPI interface {
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// PricingRegion is the Price List Query API endpoint nearest a region: AWS
// serves it from us-east-1, eu-central-1 and ap-south-1 only, each with
// every region's prices.
func PricingRegion(region string) string {
	switch {
	case strings.HasPrefix(region, "eu-"), strings.HasPrefix(region, "me-"), strings.HasPrefix(region, "af-"), strings.HasPrefix(region, "il-"):
		return "eu-central-1"
	case strings.HasPrefix(region, "ap-"):
		return "ap-south-1"
	}
	return "us-east-1"
}

// NewPricingClient returns a Price List client (for Options.Pricing) at the
// endpoint PricingRegion picks for cfg's region, retrying as NewClients'
// do.
func NewPricingClient(cfg awssdk.Config, retryOpts ...func(*retry.StandardOptions)) *pricing.Client {
	cfg = retrying(cfg, retryOpts)
	cfg.Region = PricingRegion(cfg.Region)
	return pricing.NewFromConfig(cfg)
}

// purchase is how an ASG buys its machines: the instance types it may
// launch (in its priority order) and its split between on-demand and Spot.
type purchase struct {
	region       string
	zones        []string
	types        []string
	onDemand     string // on-demand allocation strategy
	spot         string // Spot allocation strategy
	pools        int    // SpotInstancePools (lowest-price)
	base         int    // OnDemandBaseCapacity
	aboveBasePct int    // OnDemandPercentageAboveBaseCapacity
	size         int    // desired capacity
}

var _ providers.Pricer = (*Group)(nil)

// Price is what one node of the group costs per hour, in USD, Linux, shared
// tenancy: the on-demand price from the Price List Query API
// (pricing:GetProducts, by instance type and region) and, for the Spot part
// of a mixed instances policy, the current Spot price (ec2:
// DescribeSpotPriceHistory, Linux/UNIX), each through cache.
//
//   - An ASG without a mixed instances policy launches its launch
//     template's or configuration's type on demand (a launch template's
//     Spot market options are not read: such a group is priced on demand).
//   - A mixed instances policy launches its overrides' types, or for
//     instance requirements the smallest matching type (the template's).
//     Its distribution splits the group: OnDemandBaseCapacity machines on
//     demand, then OnDemandPercentageAboveBaseCapacity percent of the rest
//     (rounded up, as the dearer side), the others Spot. The price is the
//     average over the group's desired capacity (at least one machine):
//     onDemandShare × on-demand price + spotShare × Spot price.
//   - The on-demand part: "prioritized" launches the first override's type,
//     "lowest-price" the cheapest override.
//   - The Spot part: "lowest-price" spreads over the SpotInstancePools
//     cheapest types, so the mean of their prices; "capacity-optimized",
//     "price-capacity-optimized" and "capacity-optimized-prioritized" pick
//     by spare capacity, which cannot be known ahead, so the dearest
//     override: the worst case.
//   - A type's Spot price is the highest current one over the group's
//     zones: Auto Scaling keeps a group balanced across its zones whatever
//     each costs, so a new machine may well land in the dearest.
//
// Weighted capacity is not priced: the figure is per machine.
func (g *Group) Price(ctx context.Context, cache *state.PriceCache) (state.Quote, error) {
	pu, err := g.purchase(ctx)
	if err != nil {
		return state.Quote{}, fmt.Errorf("%s: price: %w", g.label(), err)
	}
	q, err := g.p.priceOf(ctx, pu, cache)
	if err != nil {
		return state.Quote{}, fmt.Errorf("%s: price: %w", g.label(), err)
	}
	return q, nil
}

func (g *Group) purchase(ctx context.Context) (purchase, error) {
	asg := g.snapshot()
	pu := purchase{
		region: region(asg), zones: slices.Sorted(slices.Values(asg.AvailabilityZones)),
		onDemand: "prioritized", spot: "lowest-price", pools: 2, aboveBasePct: 100,
		size: int(awssdk.ToInt32(asg.DesiredCapacity)),
	}
	if pu.region == "" {
		return pu, errors.New("the Auto Scaling Group's region is unknown")
	}
	if mip := asg.MixedInstancesPolicy; mip != nil && mip.LaunchTemplate != nil {
		for _, o := range mip.LaunchTemplate.Overrides {
			if t := awssdk.ToString(o.InstanceType); t != "" && !slices.Contains(pu.types, t) {
				pu.types = append(pu.types, t)
			}
		}
		if d := mip.InstancesDistribution; d != nil {
			distribute(&pu, d)
		}
	}
	if len(pu.types) == 0 {
		t, err := g.instanceType(ctx, asg)
		if err != nil {
			return pu, err
		}
		if t == "" {
			return pu, errors.New("no instance type in its launch template, launch configuration or mixed instances policy")
		}
		pu.types = []string{t}
	}
	return pu, nil
}

func distribute(pu *purchase, d *astypes.InstancesDistribution) {
	if s := awssdk.ToString(d.OnDemandAllocationStrategy); s != "" {
		pu.onDemand = s
	}
	if s := awssdk.ToString(d.SpotAllocationStrategy); s != "" {
		pu.spot = s
	}
	if n := awssdk.ToInt32(d.SpotInstancePools); n > 0 {
		pu.pools = int(n)
	}
	pu.base = int(awssdk.ToInt32(d.OnDemandBaseCapacity))
	if d.OnDemandPercentageAboveBaseCapacity != nil {
		pu.aboveBasePct = int(*d.OnDemandPercentageAboveBaseCapacity)
	}
}

// onDemandShare is the part of the group's machines bought on demand, over
// its desired capacity (at least one machine).
func (pu purchase) onDemandShare() float64 {
	n := max(pu.size, 1)
	base := min(n, pu.base)
	above := int(math.Ceil(float64(n-base) * float64(pu.aboveBasePct) / 100))
	return float64(base+above) / float64(n)
}

func (p *Provider) priceOf(ctx context.Context, pu purchase, cache *state.PriceCache) (state.Quote, error) {
	odShare := pu.onDemandShare()
	var parts []state.Quote
	var perHour float64
	if odShare > 0 {
		types := pu.types[:1]
		if pu.onDemand == "lowest-price" {
			types = pu.types
		}
		qs, err := p.quotes(ctx, cache, types, func(t string) (state.PriceKey, state.PriceReader) {
			return state.PriceKey{Provider: ProviderName, Region: pu.region, Type: t, Lifecycle: state.LifecycleOnDemand},
				func(ctx context.Context) (state.Price, error) { return p.onDemandPrice(ctx, cache, pu.region, t) }
		})
		if err != nil {
			return state.Quote{}, err
		}
		parts = append(parts, qs...)
		perHour += odShare * slices.MinFunc(qs, byPrice).PerHour
	}
	source := SourcePriceList
	if spotShare := 1 - odShare; spotShare > 0 {
		if len(pu.zones) == 0 {
			return state.Quote{}, errors.New("the Auto Scaling Group names no Availability Zones to read Spot prices in")
		}
		zones := strings.Join(pu.zones, "+")
		qs, err := p.quotes(ctx, cache, pu.types, func(t string) (state.PriceKey, state.PriceReader) {
			return state.PriceKey{Provider: ProviderName, Region: zones, Type: t, Lifecycle: state.LifecycleSpot},
				func(ctx context.Context) (state.Price, error) { return p.spotPrice(ctx, cache, pu.zones, t) }
		})
		if err != nil {
			return state.Quote{}, err
		}
		parts = append(parts, qs...)
		perHour += spotShare * spotPart(qs, pu.spot, pu.pools)
		source = SourceSpotHistory
	}
	return state.Combine(perHour, "USD", source, parts...), nil
}

func byPrice(a, b state.Quote) int { return cmp.Compare(a.PerHour, b.PerHour) }

// spotPart is the Spot price of the group's Spot machines under its
// allocation strategy.
func spotPart(qs []state.Quote, strategy string, pools int) float64 {
	if strategy != "lowest-price" {
		return slices.MaxFunc(qs, byPrice).PerHour
	}
	sorted := slices.SortedFunc(slices.Values(qs), byPrice)
	sorted = sorted[:min(max(pools, 1), len(sorted))]
	sum := 0.0
	for _, q := range sorted {
		sum += q.PerHour
	}
	return sum / float64(len(sorted))
}

// quotes reads each type's price through the cache; one missing is no
// price for the group, since the choice among them cannot then be made.
func (p *Provider) quotes(ctx context.Context, cache *state.PriceCache, types []string, key func(string) (state.PriceKey, state.PriceReader)) ([]state.Quote, error) {
	out := make([]state.Quote, 0, len(types))
	for _, t := range types {
		k, read := key(t)
		q, err := cache.Get(ctx, k, read)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// maxPriceListPages bounds the pages one query reads (AWS answers a
// matching product or two per type).
const maxPriceListPages = 20

// onDemandPrice asks the Price List for the Linux, shared-tenancy,
// no-preinstalled-software price of a type in a region (capacitystatus Used:
// the machine itself, not a capacity reservation's line). Should several
// products still match, the dearest is taken.
func (p *Provider) onDemandPrice(ctx context.Context, cache *state.PriceCache, region, typ string) (state.Price, error) {
	if p.opts.Pricing == nil {
		return state.Price{}, errors.New("no Price List client (pricing:GetProducts) configured")
	}
	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: awssdk.String(field), Value: awssdk.String(value)}
	}
	in := &pricing.GetProductsInput{
		ServiceCode:   awssdk.String("AmazonEC2"),
		FormatVersion: awssdk.String("aws_v1"),
		MaxResults:    awssdk.Int32(100),
		Filters: []pricingtypes.Filter{
			term("instanceType", typ), term("regionCode", region), term("operatingSystem", "Linux"),
			term("tenancy", "Shared"), term("preInstalledSw", "NA"), term("capacitystatus", "Used"),
		},
	}
	best := 0.0
	pages := pricing.NewGetProductsPaginator(p.opts.Pricing, in)
	for i := 0; pages.HasMorePages() && i < maxPriceListPages; i++ {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return state.Price{}, fmt.Errorf("price list of %s in %s: %w", typ, region, err)
		}
		for _, item := range page.PriceList {
			v, err := hourlyUSD(item)
			if err != nil {
				return state.Price{}, fmt.Errorf("price list of %s in %s: %w", typ, region, err)
			}
			best = max(best, v)
		}
	}
	if best == 0 {
		return state.Price{}, fmt.Errorf("the Price List has no Linux on-demand price for %s in %s", typ, region)
	}
	return state.Price{PerHour: best, Currency: "USD", Source: SourcePriceList, RetrievedAt: cache.Clock()}, nil
}

// priceListItem is the part of a Price List product document read here.
type priceListItem struct {
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// hourlyUSD is the highest hourly USD price of a product's on-demand
// terms; 0 when it has none.
func hourlyUSD(doc string) (float64, error) {
	var item priceListItem
	if err := json.Unmarshal([]byte(doc), &item); err != nil {
		return 0, fmt.Errorf("a PriceList item is not a product document: %w", err)
	}
	best := 0.0
	for _, t := range item.Terms.OnDemand {
		for _, d := range t.PriceDimensions {
			s, ok := d.PricePerUnit["USD"]
			if !ok || d.Unit != "Hrs" {
				continue
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("price per unit %q is not a number", s)
			}
			best = max(best, v)
		}
	}
	return best, nil
}

// maxSpotPages bounds the pages of one Spot price read.
const maxSpotPages = 10

// spotPrice is a type's highest current Linux/UNIX Spot price over zones:
// StartTime now makes EC2 answer, per zone, the price in effect now.
func (p *Provider) spotPrice(ctx context.Context, cache *state.PriceCache, zones []string, typ string) (state.Price, error) {
	if p.opts.SpotPrices == nil {
		return state.Price{}, errors.New("no EC2 client for Spot prices (ec2:DescribeSpotPriceHistory) configured")
	}
	now := cache.Clock()
	in := &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       []ec2types.InstanceType{ec2types.InstanceType(typ)},
		ProductDescriptions: []string{"Linux/UNIX"},
		Filters:             []ec2types.Filter{{Name: awssdk.String("availability-zone"), Values: zones}},
		StartTime:           awssdk.Time(now),
		EndTime:             awssdk.Time(now),
	}
	latest := map[string]ec2types.SpotPrice{}
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(p.opts.SpotPrices, in)
	for i := 0; pages.HasMorePages() && i < maxSpotPages; i++ {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return state.Price{}, fmt.Errorf("Spot price history of %s in %s: %w", typ, strings.Join(zones, ", "), err)
		}
		for _, sp := range page.SpotPriceHistory {
			z := awssdk.ToString(sp.AvailabilityZone)
			if string(sp.InstanceType) != typ || !slices.Contains(zones, z) {
				continue
			}
			if cur, ok := latest[z]; !ok || awssdk.ToTime(sp.Timestamp).After(awssdk.ToTime(cur.Timestamp)) {
				latest[z] = sp
			}
		}
	}
	best := 0.0
	for z, sp := range latest {
		v, err := strconv.ParseFloat(awssdk.ToString(sp.SpotPrice), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return state.Price{}, fmt.Errorf("Spot price %q of %s in %s is not a number", awssdk.ToString(sp.SpotPrice), typ, z)
		}
		best = max(best, v)
	}
	if best == 0 {
		return state.Price{}, fmt.Errorf("no Linux/UNIX Spot price for %s in %s", typ, strings.Join(zones, ", "))
	}
	return state.Price{PerHour: best, Currency: "USD", Source: SourceSpotHistory, RetrievedAt: now}, nil
}
