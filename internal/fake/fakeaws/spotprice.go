package fakeaws

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EC2 DescribeSpotPriceHistory over the Spot prices a test sets with
// SetSpotPrice.
//
// Like EC2, it answers the price changes within [StartTime, EndTime]
// (EndTime defaults to now, StartTime to EndTime) and, for each instance
// type, zone and product, the last change before StartTime: the price in
// effect at StartTime. Newest first, MaxResults (5 to 1000, default 1000)
// a page with NextToken. It filters by InstanceType.N, ProductDescription.N,
// AvailabilityZone and the filters availability-zone, instance-type and
// product-description (exact values; no wildcards, unlike EC2).
//
// Where it can differ from EC2: the products are those a test names
// (SetSpotPrice's, usually "Linux/UNIX"); EC2 also lists "Linux/UNIX (Amazon
// VPC)" and the Windows and SUSE/Red Hat ones. An unknown product
// description is InvalidParameterValue, as EC2 answers it; the messages
// are close to, not copied from, EC2's.

// SpotProducts are the product descriptions EC2 prices Spot instances by.
var SpotProducts = []string{
	"Linux/UNIX", "Linux/UNIX (Amazon VPC)", "SUSE Linux", "SUSE Linux (Amazon VPC)",
	"Red Hat Enterprise Linux", "Red Hat Enterprise Linux (Amazon VPC)", "Windows", "Windows (Amazon VPC)",
}

type spotPoint struct {
	zone, instanceType, product string
	usd                         float64
	at                          time.Time
}

// SetSpotPrice records a Spot price change (USD per hour) of an instance
// type's Linux/UNIX product in a zone at a time.
func (s *Server) SetSpotPrice(zone, instanceType string, usd float64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spot = append(s.spot, spotPoint{zone: zone, instanceType: instanceType, product: "Linux/UNIX", usd: usd, at: at.UTC()})
}

type xmlSpotPrice struct {
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
	AvailabilityZone   string `xml:"availabilityZone"`
}

type describeSpotPriceHistoryResponse struct {
	XMLName   xml.Name       `xml:"DescribeSpotPriceHistoryResponse"`
	NS        string         `xml:"xmlns,attr"`
	RequestID string         `xml:"requestId"`
	Prices    []xmlSpotPrice `xml:"spotPriceHistorySet>item"`
	NextToken string         `xml:"nextToken"`
}

// ec2Filters reads Filter.N.Name / Filter.N.Value.M.
func ec2Filters(form map[string][]string) map[string][]string {
	out := map[string][]string{}
	for i := 1; ; i++ {
		name := first(form, "Filter."+strconv.Itoa(i)+".Name")
		if name == "" {
			return out
		}
		out[name] = append(out[name], list(form, "Filter."+strconv.Itoa(i)+".Value", "")...)
	}
}

func (s *Server) describeSpotPriceHistory(form map[string][]string, reqID string) (any, *apiError) {
	bad := func(format string, args ...any) *apiError {
		return &apiError{status: http.StatusBadRequest, code: "InvalidParameterValue", message: fmt.Sprintf(format, args...)}
	}
	parseTime := func(key string, def time.Time) (time.Time, *apiError) {
		v := first(form, key)
		if v == "" {
			return def, nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return time.Time{}, bad("Invalid value '%s' for %s", v, key)
		}
		return t, nil
	}
	end, err := parseTime("EndTime", s.now().UTC())
	if err != nil {
		return nil, err
	}
	start, err := parseTime("StartTime", end)
	if err != nil {
		return nil, err
	}
	if start.After(end) {
		return nil, bad("The start time %s is after the end time %s", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	size, err := intParam(form, "MaxResults", 1000, 5, 1000)
	if err != nil {
		return nil, bad("%s", err.message)
	}
	filters := ec2Filters(form)
	types := append(list(form, "InstanceType", ""), filters["instance-type"]...)
	products := append(list(form, "ProductDescription", ""), filters["product-description"]...)
	zones := filters["availability-zone"]
	if z := first(form, "AvailabilityZone"); z != "" {
		zones = append(zones, z)
	}
	for _, p := range products {
		if !slices.Contains(SpotProducts, p) {
			return nil, bad("Invalid product description: %s", p)
		}
	}
	for name := range filters {
		if !slices.Contains([]string{"availability-zone", "instance-type", "product-description", "spot-price", "timestamp"}, name) {
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidParameterValue", message: "The filter '" + name + "' is invalid"}
		}
	}
	in := func(set []string, v string) bool { return len(set) == 0 || slices.Contains(set, v) }

	s.mu.Lock()
	points := slices.Clone(s.spot)
	s.mu.Unlock()
	var match []spotPoint
	before := map[string]spotPoint{} // type/zone/product → last change before start
	for _, p := range points {
		if !in(types, p.instanceType) || !in(products, p.product) || !in(zones, p.zone) || p.at.After(end) {
			continue
		}
		if !p.at.Before(start) {
			match = append(match, p)
			continue
		}
		k := p.instanceType + "/" + p.zone + "/" + p.product
		if b, ok := before[k]; !ok || p.at.After(b.at) {
			before[k] = p
		}
	}
	for _, p := range before {
		match = append(match, p)
	}
	slices.SortStableFunc(match, func(a, b spotPoint) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return strings.Compare(a.instanceType+a.zone, b.instanceType+b.zone)
	})
	from, to, next, perr := page(len(match), first(form, "NextToken"), size)
	if perr != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidNextToken", message: perr.message}
	}
	resp := describeSpotPriceHistoryResponse{NS: ec2NS, RequestID: reqID, NextToken: next}
	for _, p := range match[from:to] {
		resp.Prices = append(resp.Prices, xmlSpotPrice{
			InstanceType: p.instanceType, ProductDescription: p.product,
			SpotPrice: strconv.FormatFloat(p.usd, 'f', 6, 64), Timestamp: p.at.Format(timeFormat), AvailabilityZone: p.zone,
		})
	}
	return resp, nil
}
