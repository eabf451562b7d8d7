package aws_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	ngaws "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/state"
)

var priceNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// pricedGroup starts the double in region, adds g and returns its one group
// with the Price List and Spot clients wired, and a cache on a fresh
// in-memory table.
func pricedGroup(t *testing.T, region string, setup func(*fakeaws.Server), g fakeaws.Group) (*fakeaws.Server, *ngaws.Group, *state.PriceCache) {
	t.Helper()
	d := fakeaws.New(fakeaws.WithRegion(region), fakeaws.WithClock(func() time.Time { return priceNow }))
	t.Cleanup(d.Close)
	if setup != nil {
		setup(d)
	}
	d.AddGroup(g)
	cfg := awssdk.Config{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", ""),
		BaseEndpoint: awssdk.String(d.URL()),
	}
	fast := func(o *retry.StandardOptions) { o.MaxBackoff = time.Millisecond }
	as, ec2c := ngaws.NewClients(cfg, fast)
	p := newProvider(t, as, ec2c, ngaws.Options{AutoScalingGroup: g.Name, Pricing: ngaws.NewPricingClient(cfg, fast), SpotPrices: ec2c})
	gs := groups(t, p)
	cache := &state.PriceCache{Store: state.NewMemory("c1"), Now: func() time.Time { return priceNow }}
	return d, gs[0].(*ngaws.Group), cache
}

// An ASG launching one type on demand is priced from the Price List: Linux,
// shared tenancy, no preinstalled software, the machine's own line (not a
// capacity reservation's), in the group's region; the endpoint is the
// Price List's nearest (eu-central-1 for eu-west-1). A second read within
// the TTL is answered from the cache.
func TestPriceOnDemandFromThePriceList(t *testing.T) {
	d, g, cache := pricedGroup(t, "eu-west-1", func(d *fakeaws.Server) {
		d.SetOnDemandPrice("us-east-1", "m5.xlarge", 0.192)
		d.SetOnDemandPrice("eu-west-1", "m5.xlarge", 0.214)
		d.AddLaunchConfiguration("lc", "m5.xlarge")
	}, fakeaws.Group{Name: "asg", MaxSize: 5, DesiredCapacity: 1, LaunchConfigurationName: "lc"})

	q, err := g.Price(t.Context(), cache)
	if err != nil {
		t.Fatal(err)
	}
	if q.PerHour != 0.214 || q.Currency != "USD" || q.Source != ngaws.SourcePriceList || !q.RetrievedAt.Equal(priceNow) || q.Stale {
		t.Fatalf("price = %+v, want 0.214 USD from the price list, read now", q)
	}
	reqs := d.Requests("GetProducts")
	if len(reqs) != 1 {
		t.Fatalf("%d GetProducts calls, want 1", len(reqs))
	}
	var in struct {
		ServiceCode string
		Filters     []struct{ Type, Field, Value string }
	}
	if err := json.Unmarshal([]byte(reqs[0]["body"][0]), &in); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"instanceType": "m5.xlarge", "regionCode": "eu-west-1", "operatingSystem": "Linux",
		"tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
	if in.ServiceCode != "AmazonEC2" || len(in.Filters) != len(want) {
		t.Fatalf("request %+v, want AmazonEC2 with filters %v", in, want)
	}
	for _, f := range in.Filters {
		if f.Type != "TERM_MATCH" || want[f.Field] != f.Value {
			t.Errorf("filter %+v, want TERM_MATCH of %v", f, want)
		}
	}
	if _, err := g.Price(t.Context(), cache); err != nil || d.Calls("GetProducts") != 1 {
		t.Errorf("second read: %v, %d calls; want the cached price", err, d.Calls("GetProducts"))
	}
}

// A type the Price List has no price for is no price, with the cause, and
// so is a Price List that fails.
func TestPriceMissingIsAnError(t *testing.T) {
	t.Run("not listed", func(t *testing.T) {
		_, g, cache := pricedGroup(t, "us-east-1", func(d *fakeaws.Server) {
			d.RemoveOnDemandPrice("us-east-1", "c5.large")
			d.AddLaunchConfiguration("lc", "c5.large")
		}, fakeaws.Group{Name: "asg", MaxSize: 5, LaunchConfigurationName: "lc"})
		q, err := g.Price(t.Context(), cache)
		if err == nil || !strings.Contains(err.Error(), "no Linux on-demand price for c5.large in us-east-1") || q.PerHour != 0 {
			t.Fatalf("Price = %+v, %v; want no price naming the type and region", q, err)
		}
	})
	t.Run("Price List failing", func(t *testing.T) {
		d, g, cache := pricedGroup(t, "us-east-1", func(d *fakeaws.Server) { d.AddLaunchConfiguration("lc", "m5.large") },
			fakeaws.Group{Name: "asg", MaxSize: 5, LaunchConfigurationName: "lc"})
		d.FailNext("GetProducts", 10, fakeaws.Fault{Status: 500, Code: "InternalErrorException", Message: "An internal error occurred"})
		if _, err := g.Price(t.Context(), cache); err == nil || !strings.Contains(err.Error(), "InternalErrorException") {
			t.Fatalf("Price error = %v, want the Price List's error", err)
		}
	})
	t.Run("no client", func(t *testing.T) {
		d, as, ec2c := newDouble(t)
		d.AddLaunchConfiguration("lc", "m5.large")
		d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 5, LaunchConfigurationName: "lc"})
		g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg"}).(*ngaws.Group)
		_, err := g.Price(t.Context(), &state.PriceCache{Store: state.NewMemory("c1")})
		if err == nil || !strings.Contains(err.Error(), "pricing:GetProducts") {
			t.Fatalf("Price error = %v, want the missing Price List client named", err)
		}
	})
}

// spotHistory sets Spot prices in the group's zones a and b (and a dearer
// zone c the group is not in), each after an older, superseded price.
func spotHistory(d *fakeaws.Server) {
	for typ, byZone := range map[string][3]float64{
		"m5.large":  {0.030, 0.040, 0.5},
		"c5.large":  {0.035, 0.020, 0.5},
		"m5.xlarge": {0.070, 0.080, 0.9},
	} {
		for i, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
			d.SetSpotPrice(z, typ, 0.9, priceNow.Add(-5*time.Hour)) // superseded
			d.SetSpotPrice(z, typ, byZone[i], priceNow.Add(-time.Hour))
		}
	}
}

// A mixed instances policy is priced by its distribution and allocation
// strategies: the on-demand share (base, then the percentage above it,
// rounded up) at the first override's price (prioritized) or the
// cheapest's (lowest-price), the Spot share at the mean of the
// SpotInstancePools cheapest types (lowest-price) or the dearest type
// (capacity-optimized: the worst case), each type's Spot price the highest
// current one over the group's own zones.
func TestPriceMixedInstancesPolicy(t *testing.T) {
	pct := func(n int) *int { return &n }
	types := []string{"m5.large", "c5.large", "m5.xlarge"} // on demand 0.096, 0.085, 0.192
	// Spot, max over zones a and b: m5.large 0.04, c5.large 0.035, m5.xlarge 0.08.
	tests := []struct {
		name   string
		size   int
		dist   *fakeaws.InstancesDistribution
		want   float64
		source string
	}{
		{"AWS's defaults: all on demand, first override", 4, nil, 0.096, ngaws.SourcePriceList},
		{"on demand lowest-price", 4, &fakeaws.InstancesDistribution{OnDemandAllocationStrategy: "lowest-price"}, 0.085, ngaws.SourcePriceList},
		{"base 1, 50% above, Spot over the 2 cheapest", 4,
			&fakeaws.InstancesDistribution{OnDemandBaseCapacity: 1, OnDemandPercentageAboveBaseCapacity: pct(50), SpotInstancePools: 2},
			0.75*0.096 + 0.25*(0.035+0.04)/2, ngaws.SourceSpotHistory},
		{"same, capacity-optimized: the dearest Spot type", 4,
			&fakeaws.InstancesDistribution{OnDemandBaseCapacity: 1, OnDemandPercentageAboveBaseCapacity: pct(50), SpotAllocationStrategy: "capacity-optimized"},
			0.75*0.096 + 0.25*0.08, ngaws.SourceSpotHistory},
		{"all Spot, price-capacity-optimized", 3,
			&fakeaws.InstancesDistribution{OnDemandPercentageAboveBaseCapacity: pct(0), SpotAllocationStrategy: "price-capacity-optimized"},
			0.08, ngaws.SourceSpotHistory},
		{"all Spot, lowest-price over 1 pool", 3,
			&fakeaws.InstancesDistribution{OnDemandPercentageAboveBaseCapacity: pct(0), SpotInstancePools: 1},
			0.035, ngaws.SourceSpotHistory},
		{"empty group: one machine, over the base", 0,
			&fakeaws.InstancesDistribution{OnDemandBaseCapacity: 2, OnDemandPercentageAboveBaseCapacity: pct(0)},
			0.096, ngaws.SourcePriceList},
		{"empty group, no base: the share above it", 0,
			&fakeaws.InstancesDistribution{OnDemandPercentageAboveBaseCapacity: pct(0), SpotInstancePools: 3},
			(0.04 + 0.035 + 0.08) / 3, ngaws.SourceSpotHistory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, g, cache := pricedGroup(t, "us-east-1", spotHistory, fakeaws.Group{
				Name: "asg", MaxSize: 10, DesiredCapacity: tt.size, AvailabilityZones: []string{"us-east-1a", "us-east-1b"},
				MixedInstanceTypes: types, Distribution: tt.dist,
			})
			q, err := g.Price(t.Context(), cache)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(q.PerHour-tt.want) > 1e-9 || q.Source != tt.source || q.Currency != "USD" {
				t.Fatalf("price = %v %s from %s, want %v from %s", q.PerHour, q.Currency, q.Source, tt.want, tt.source)
			}
		})
	}
}

// Spot prices are cached per type and zone set for an hour: a second read
// within it asks EC2 nothing; one a type has no Spot price for in the
// group's zones is no price.
func TestPriceSpotCachedAndMissing(t *testing.T) {
	pct := func(n int) *int { return &n }
	d, g, cache := pricedGroup(t, "us-east-1", spotHistory, fakeaws.Group{
		Name: "asg", MaxSize: 10, DesiredCapacity: 2, AvailabilityZones: []string{"us-east-1a", "us-east-1b"},
		MixedInstanceTypes: []string{"m5.large", "t3.medium"}, Distribution: &fakeaws.InstancesDistribution{OnDemandPercentageAboveBaseCapacity: pct(0)},
	})
	_, err := g.Price(t.Context(), cache)
	if err == nil || !strings.Contains(err.Error(), "no Linux/UNIX Spot price for t3.medium in us-east-1a, us-east-1b") {
		t.Fatalf("Price error = %v, want t3.medium's missing Spot price named", err)
	}
	d.SetSpotPrice("us-east-1b", "t3.medium", 0.0125, priceNow.Add(-time.Minute))
	q, err := g.Price(t.Context(), cache)
	if err != nil || math.Abs(q.PerHour-(0.0125+0.04)/2) > 1e-9 {
		t.Fatalf("Price = %+v, %v", q, err)
	}
	calls := d.Calls("DescribeSpotPriceHistory")
	if _, err := g.Price(t.Context(), cache); err != nil || d.Calls("DescribeSpotPriceHistory") != calls {
		t.Errorf("third read: %v, %d more calls; want the cached prices", err, d.Calls("DescribeSpotPriceHistory")-calls)
	}
	last := d.LastRequest("DescribeSpotPriceHistory")
	if last["ProductDescription.1"][0] != "Linux/UNIX" || last["Filter.1.Name"][0] != "availability-zone" || last["StartTime"][0] == "" {
		t.Errorf("request %v, want Linux/UNIX in the group's zones from now", last)
	}
}

func TestPricingRegion(t *testing.T) {
	for in, want := range map[string]string{
		"us-east-1": "us-east-1", "us-west-2": "us-east-1", "sa-east-1": "us-east-1", "ca-central-1": "us-east-1",
		"eu-west-1": "eu-central-1", "me-south-1": "eu-central-1", "af-south-1": "eu-central-1",
		"ap-southeast-2": "ap-south-1", "ap-northeast-1": "ap-south-1",
	} {
		if got := ngaws.PricingRegion(in); got != want {
			t.Errorf("PricingRegion(%s) = %s, want %s", in, got, want)
		}
	}
}
