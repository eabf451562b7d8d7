package fakeaws_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
)

func pricingClient(d *fakeaws.Server, region string) (*pricing.Client, *recorder) {
	rec := &recorder{}
	return pricing.NewFromConfig(awssdk.Config{
		Region:           region,
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", ""),
		BaseEndpoint:     awssdk.String(d.URL()),
		HTTPClient:       &http.Client{Transport: rec},
		RetryMaxAttempts: 1,
	}), rec
}

func term(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: awssdk.String(field), Value: awssdk.String(value)}
}

// GetProducts through the real SDK: PriceList items are JSON documents in
// AWS's shape, filters narrow them, NextToken pages them.
func TestGetProductsShapeFiltersAndPaging(t *testing.T) {
	d := fakeaws.New(fakeaws.WithPriceListPageSize(2))
	defer d.Close()
	c, _ := pricingClient(d, "us-east-1")
	in := &pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2"), Filters: []pricingtypes.Filter{
		term("instanceType", "m5.large"), term("regionCode", "us-east-1"),
	}}
	var docs []string
	pages := pricing.NewGetProductsPaginator(c, in)
	n := 0
	for pages.HasMorePages() {
		page, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(page.PriceList) > 2 || awssdk.ToString(page.FormatVersion) != "aws_v1" {
			t.Fatalf("page of %d items, format %q", len(page.PriceList), awssdk.ToString(page.FormatVersion))
		}
		docs = append(docs, page.PriceList...)
		n++
	}
	if len(docs) != 6 || n != 3 {
		t.Fatalf("%d products in %d pages, want every variant of m5.large (6) in 3", len(docs), n)
	}
	var doc struct {
		Product struct {
			ProductFamily string            `json:"productFamily"`
			Attributes    map[string]string `json:"attributes"`
			SKU           string            `json:"sku"`
		} `json:"product"`
		Terms struct {
			OnDemand map[string]struct {
				OfferTermCode   string `json:"offerTermCode"`
				PriceDimensions map[string]struct {
					Unit         string            `json:"unit"`
					PricePerUnit map[string]string `json:"pricePerUnit"`
				} `json:"priceDimensions"`
			} `json:"OnDemand"`
		} `json:"terms"`
	}
	if err := json.Unmarshal([]byte(docs[0]), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Product.ProductFamily != "Compute Instance" || doc.Product.Attributes["instanceType"] != "m5.large" || doc.Product.SKU == "" {
		t.Errorf("product = %+v", doc.Product)
	}
	for _, term := range doc.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			if dim.Unit != "Hrs" || dim.PricePerUnit["USD"] != "0.0960000000" {
				t.Errorf("price dimension %+v, want 0.0960000000 USD per Hrs", dim)
			}
		}
	}

	in.Filters = append(in.Filters, term("operatingSystem", "Linux"), term("tenancy", "Shared"),
		term("preInstalledSw", "NA"), term("capacitystatus", "Used"))
	out, err := c.GetProducts(t.Context(), in)
	if err != nil || len(out.PriceList) != 1 || out.NextToken != nil {
		t.Fatalf("fully filtered: %v items, %v; want one product, one page", out, err)
	}
	in.Filters = append(in.Filters, term("noSuchField", "x"))
	if out, err := c.GetProducts(t.Context(), in); err != nil || len(out.PriceList) != 0 {
		t.Fatalf("unknown field: %v, %v; want no products", out, err)
	}
}

// Bad requests get the Price List's error codes; a client signed for a
// region without a Price List endpoint is refused.
func TestGetProductsErrors(t *testing.T) {
	d := fakeaws.New()
	defer d.Close()
	c, _ := pricingClient(d, "us-east-1")
	tests := []struct {
		name string
		in   *pricing.GetProductsInput
		code string
	}{
		{"filter type", &pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2"), Filters: []pricingtypes.Filter{
			{Type: "EXACT", Field: awssdk.String("instanceType"), Value: awssdk.String("m5.large")}}}, "ValidationException"},
		{"empty value", &pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2"), Filters: []pricingtypes.Filter{
			{Type: pricingtypes.FilterTypeTermMatch, Field: awssdk.String("instanceType"), Value: awssdk.String("")}}}, "InvalidParameterException"},
		{"max results", &pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2"), MaxResults: awssdk.Int32(500)}, "ValidationException"},
		{"service code", &pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonNope")}, "NotFoundException"},
		{"next token", &pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2"), NextToken: awssdk.String("forged")}, "InvalidNextTokenException"},
	}
	for _, tt := range tests {
		_, err := c.GetProducts(t.Context(), tt.in)
		if code, msg := apiCode(t, err); code != tt.code || msg == "" {
			t.Errorf("%s: %s %q, want %s", tt.name, code, msg, tt.code)
		}
	}
	far, _ := pricingClient(d, "eu-west-1")
	_, err := far.GetProducts(t.Context(), &pricing.GetProductsInput{ServiceCode: awssdk.String("AmazonEC2")})
	if code, msg := apiCode(t, err); code != "InvalidSignatureException" || !strings.Contains(msg, "us-east-1, eu-central-1, ap-south-1") {
		t.Errorf("eu-west-1 endpoint: %s %q", code, msg)
	}
}

// DescribeSpotPriceHistory through the real SDK: the changes since
// StartTime and the one in effect at it, per type and zone, newest first,
// in pages.
func TestDescribeSpotPriceHistory(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	d := fakeaws.New(fakeaws.WithClock(func() time.Time { return now }))
	defer d.Close()
	_, ec2c, rec := clients(t, d, d.Region())
	for i := range 8 {
		d.SetSpotPrice("us-east-1a", "m5.large", 0.03+float64(i)/1000, now.Add(time.Duration(i-10)*time.Hour))
	}
	d.SetSpotPrice("us-east-1b", "m5.large", 0.05, now.Add(-20*time.Hour))
	d.SetSpotPrice("us-east-1a", "c5.large", 0.02, now.Add(-time.Hour))

	out, err := ec2c.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, ProductDescriptions: []string{"Linux/UNIX"},
		StartTime: awssdk.Time(now), EndTime: awssdk.Time(now),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sp := range out.SpotPriceHistory {
		got[awssdk.ToString(sp.AvailabilityZone)] = awssdk.ToString(sp.SpotPrice)
		if sp.InstanceType != "m5.large" || sp.ProductDescription != "Linux/UNIX" || sp.Timestamp == nil {
			t.Errorf("entry %+v", sp)
		}
	}
	if len(got) != 2 || got["us-east-1a"] != "0.037000" || got["us-east-1b"] != "0.050000" {
		t.Errorf("prices in effect now = %v, want 1a 0.037000 (the latest change) and 1b 0.050000", got)
	}
	if _, body := rec.last(); !strings.Contains(body, "<spotPriceHistorySet>") {
		t.Errorf("body %s", body)
	}

	// The whole history, five a page.
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(ec2c, &ec2.DescribeSpotPriceHistoryInput{
		StartTime: awssdk.Time(now.Add(-30 * time.Hour)), MaxResults: awssdk.Int32(5),
		Filters: []ec2types.Filter{{Name: awssdk.String("availability-zone"), Values: []string{"us-east-1a"}}},
	})
	var n, pageCount int
	var last time.Time
	for pages.HasMorePages() {
		page, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range page.SpotPriceHistory {
			if ts := awssdk.ToTime(sp.Timestamp); n > 0 && ts.After(last) {
				t.Errorf("not newest first: %v after %v", ts, last)
			}
			last = awssdk.ToTime(sp.Timestamp)
			n++
		}
		pageCount++
	}
	if n != 9 || pageCount != 2 {
		t.Errorf("%d entries in %d pages, want 9 in 2", n, pageCount)
	}

	_, err = ec2c.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{ProductDescriptions: []string{"Linux"}})
	if code, _ := apiCode(t, err); code != "InvalidParameterValue" {
		t.Errorf("bad product description: %s", code)
	}
}
