package fakeaws

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The Price List Query API (service "pricing", the JSON 1.1 protocol,
// X-Amz-Target AWSPriceListService.<Action>): GetProducts over a small
// catalogue of EC2 products.
//
// Where it can differ from AWS:
//
//   - Endpoints: AWS serves the Price List Query API from us-east-1,
//     eu-central-1 and ap-south-1 only; the double wants the request signed
//     for one of them (another region has no endpoint at AWS, so the error
//     here, SignatureDoesNotMatch, stands in for a failed connection).
//   - The catalogue is a few products per (region, instance type) set with
//     SetOnDemandPrice: Linux/Shared/NA with capacitystatus Used (the
//     price), the same with UnusedCapacityReservation and
//     AllocatedCapacityReservation (same price, as AWS lists them), Linux
//     Dedicated tenancy (10% more), Windows (+0.046 per vCPU-hour) and Linux
//     with SQL Web (+0.02 per vCPU-hour): enough that a query missing a
//     filter gets several prices. The figures of New's defaults are AWS's
//     published us-east-1 on-demand prices, in whatever region the double
//     serves.
//   - Filters: TERM_MATCH, EQUALS (both exact, case-insensitive on the
//     value), CONTAINS, ANY_OF and NONE_OF (comma-separated values); a field
//     the products do not have matches nothing, as AWS answers an unknown
//     field with no products. Error messages are close to, not copied from,
//     AWS's; their codes (ValidationException, InvalidParameterException,
//     NotFoundException, InvalidNextTokenException) are AWS's.
//   - Each PriceList item is a JSON document in AWS's shape (product with
//     productFamily, attributes and sku; serviceCode; terms.OnDemand with
//     one offer term and one price dimension in USD; version,
//     publicationDate), without the Reserved terms.

type pricingFilter struct {
	Type  string `json:"Type"`
	Field string `json:"Field"`
	Value string `json:"Value"`
}

type getProductsInput struct {
	ServiceCode   string          `json:"ServiceCode"`
	Filters       []pricingFilter `json:"Filters"`
	FormatVersion string          `json:"FormatVersion"`
	MaxResults    *int            `json:"MaxResults"`
	NextToken     string          `json:"NextToken"`
}

type getProductsOutput struct {
	FormatVersion string   `json:"FormatVersion"`
	NextToken     string   `json:"NextToken,omitempty"`
	PriceList     []string `json:"PriceList"`
}

// pricingRegions are the regions AWS serves the Price List Query API from.
var pricingRegions = []string{"us-east-1", "eu-central-1", "ap-south-1"}

// regionNames are the Price List's location names of a few regions.
var regionNames = map[string]string{
	"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-2": "US West (Oregon)",
	"eu-west-1": "EU (Ireland)", "eu-central-1": "EU (Frankfurt)", "ap-south-1": "Asia Pacific (Mumbai)",
}

// defaultOnDemandPrices are AWS's published us-east-1 Linux on-demand prices
// of the default instance types, in USD per hour.
func defaultOnDemandPrices() map[string]float64 {
	return map[string]float64{
		"t3.medium": 0.0416, "m5.large": 0.096, "m5.xlarge": 0.192, "m5.2xlarge": 0.384,
		"c5.large": 0.085, "m6g.large": 0.077, "g4dn.xlarge": 0.526,
	}
}

// SetOnDemandPrice sets the Linux on-demand price (USD per hour) of an
// instance type in a region of the Price List.
func (s *Server) SetOnDemandPrice(region, instanceType string, usd float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onDemand[region] == nil {
		s.onDemand[region] = map[string]float64{}
	}
	s.onDemand[region][instanceType] = usd
}

// RemoveOnDemandPrice takes an instance type out of a region's Price List.
func (s *Server) RemoveOnDemandPrice(region, instanceType string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.onDemand[region], instanceType)
}

// WithPriceListPageSize caps GetProducts pages below what the client asks.
func WithPriceListPageSize(n int) Option { return func(s *Server) { s.priceListPage = n } }

type product struct {
	sku   string
	attrs map[string]string
	usd   float64
}

// productsLocked is the catalogue in a stable order.
func (s *Server) productsLocked() []product {
	var out []product
	for _, region := range slices.Sorted(maps.Keys(s.onDemand)) {
		for _, typ := range slices.Sorted(maps.Keys(s.onDemand[region])) {
			out = append(out, s.typeProducts(region, typ, s.onDemand[region][typ])...)
		}
	}
	return out
}

func (s *Server) typeProducts(region, typ string, usd float64) []product {
	vcpus := 2.0
	if t, ok := s.types[typ]; ok {
		vcpus = float64(t.VCPUs)
	}
	base := func(os, tenancy, sw, capacity string) map[string]string {
		return map[string]string{
			"servicecode": "AmazonEC2", "instanceType": typ, "regionCode": region, "location": regionNames[region],
			"locationType": "AWS Region", "operatingSystem": os, "tenancy": tenancy, "preInstalledSw": sw,
			"capacitystatus": capacity, "licenseModel": "No License required", "marketoption": "OnDemand",
			"operation": "RunInstances", "usagetype": "BoxUsage:" + typ, "vcpu": strconv.Itoa(int(vcpus)),
		}
	}
	variants := []struct {
		os, tenancy, sw, capacity string
		usd                       float64
	}{
		{"Linux", "Shared", "NA", "Used", usd},
		{"Linux", "Shared", "NA", "UnusedCapacityReservation", usd},
		{"Linux", "Shared", "NA", "AllocatedCapacityReservation", usd},
		{"Linux", "Dedicated", "NA", "Used", usd * 1.1},
		{"Windows", "Shared", "NA", "Used", usd + 0.046*vcpus},
		{"Linux", "Shared", "SQL Web", "Used", usd + 0.02*vcpus},
	}
	out := make([]product, 0, len(variants))
	for i, v := range variants {
		out = append(out, product{
			sku:   fmt.Sprintf("%s%s%d", strings.ToUpper(strings.NewReplacer(".", "", "-", "").Replace(region+typ)), "X", i),
			attrs: base(v.os, v.tenancy, v.sw, v.capacity),
			usd:   v.usd,
		})
	}
	return out
}

// priceListItem is one PriceList entry, as AWS serves it: a JSON document
// in a string.
func priceListItem(p product) string {
	const term, rate = "JRTCKXETXF", "6YS6EN2CT7"
	doc := map[string]any{
		"product": map[string]any{
			"productFamily": "Compute Instance",
			"attributes":    p.attrs,
			"sku":           p.sku,
		},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{
			"OnDemand": map[string]any{
				p.sku + "." + term: map[string]any{
					"priceDimensions": map[string]any{
						p.sku + "." + term + "." + rate: map[string]any{
							"unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": []string{},
							"rateCode":     p.sku + "." + term + "." + rate,
							"description":  fmt.Sprintf("$%.4f per On Demand %s %s Instance Hour", p.usd, p.attrs["operatingSystem"], p.attrs["instanceType"]),
							"pricePerUnit": map[string]string{"USD": strconv.FormatFloat(p.usd, 'f', 10, 64)},
						},
					},
					"sku": p.sku, "effectiveDate": "2026-11-01T00:00:00Z", "offerTermCode": term,
					"termAttributes": map[string]string{},
				},
			},
		},
		"version":         "20261101000000",
		"publicationDate": "2026-11-01T00:00:00Z",
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

func (s *Server) servePricing(w http.ResponseWriter, r *http.Request) {
	action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AWSPriceListService.")
	reqID := s.requestID()
	if err := s.checkPricingSignature(r); err != nil {
		writeJSONError(w, reqID, err)
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.calls[action]++
	s.forms[action] = append(s.forms[action], map[string][]string{"body": {string(body)}})
	if q := s.faults[action]; len(q) > 0 {
		f := q[0]
		s.faults[action] = q[1:]
		s.mu.Unlock()
		writeJSONError(w, reqID, &apiError{status: f.Status, code: f.Code, message: f.Message})
		return
	}
	s.mu.Unlock()
	if action != "GetProducts" {
		writeJSONError(w, reqID, &apiError{status: http.StatusBadRequest, code: "UnknownOperationException", message: "Unknown operation " + action})
		return
	}
	var in getProductsInput
	if err := json.Unmarshal(body, &in); err != nil {
		writeJSONError(w, reqID, &apiError{status: http.StatusBadRequest, code: "SerializationException", message: err.Error()})
		return
	}
	out, apiErr := s.getProducts(in)
	if apiErr != nil {
		writeJSONError(w, reqID, apiErr)
		return
	}
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", reqID)
	_, _ = w.Write(b)
}

func (s *Server) checkPricingSignature(r *http.Request) *apiError {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 Credential=")
	if !ok || r.Header.Get("X-Amz-Date") == "" {
		return &apiError{status: http.StatusForbidden, code: "MissingAuthenticationTokenException", message: "Missing Authentication Token"}
	}
	cred, _, _ := strings.Cut(rest, ",")
	parts := strings.Split(cred, "/")
	switch {
	case len(parts) != 5 || parts[4] != "aws4_request":
		return &apiError{status: http.StatusForbidden, code: "IncompleteSignatureException", message: "Credential scope is malformed"}
	case parts[3] != "pricing":
		return &apiError{status: http.StatusForbidden, code: "InvalidSignatureException", message: "Credential should be scoped to correct service: 'pricing'."}
	case !slices.Contains(pricingRegions, parts[2]):
		return &apiError{status: http.StatusForbidden, code: "InvalidSignatureException",
			message: fmt.Sprintf("Credential should be scoped to a valid region, not '%s': the Price List Query API is served from %s only", parts[2], strings.Join(pricingRegions, ", "))}
	}
	return nil
}

// writeJSONError writes an error in the JSON 1.1 protocol's shape.
func writeJSONError(w http.ResponseWriter, reqID string, e *apiError) {
	b, _ := json.Marshal(map[string]string{"__type": e.code, "Message": e.message})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", reqID)
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

var filterTypes = []string{"TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF"}

func (s *Server) getProducts(in getProductsInput) (*getProductsOutput, *apiError) {
	invalid := func(format string, args ...any) *apiError {
		return &apiError{status: http.StatusBadRequest, code: "InvalidParameterException", message: fmt.Sprintf(format, args...)}
	}
	if in.FormatVersion == "" {
		in.FormatVersion = "aws_v1"
	}
	if in.FormatVersion != "aws_v1" {
		return nil, invalid("Input validation error: invalid FormatVersion %s", in.FormatVersion)
	}
	size := 100
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 100 {
			return nil, &apiError{status: http.StatusBadRequest, code: "ValidationException",
				message: fmt.Sprintf("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100", *in.MaxResults)}
		}
		size = *in.MaxResults
	}
	for i, f := range in.Filters {
		if !slices.Contains(filterTypes, f.Type) {
			return nil, &apiError{status: http.StatusBadRequest, code: "ValidationException",
				message: fmt.Sprintf("1 validation error detected: Value '%s' at 'filters.%d.member.type' failed to satisfy constraint: Member must satisfy enum value set: [%s]", f.Type, i+1, strings.Join(filterTypes, ", "))}
		}
		if f.Field == "" || f.Value == "" {
			return nil, invalid("Input validation error: filter %d needs a Field and a Value", i+1)
		}
	}
	if in.ServiceCode == "" {
		return nil, invalid("Input validation error: ServiceCode is required")
	}
	s.mu.Lock()
	if s.priceListPage > 0 {
		size = min(size, s.priceListPage)
	}
	all := s.productsLocked()
	s.mu.Unlock()
	if in.ServiceCode != "AmazonEC2" {
		return nil, &apiError{status: http.StatusBadRequest, code: "NotFoundException", message: "Service code " + in.ServiceCode + " not found"}
	}
	var match []product
	for _, p := range all {
		if matchesAll(p.attrs, in.Filters) {
			match = append(match, p)
		}
	}
	start, end, next, perr := page(len(match), in.NextToken, size)
	if perr != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidNextTokenException", message: "The NextToken is invalid"}
	}
	out := &getProductsOutput{FormatVersion: "aws_v1", NextToken: next, PriceList: []string{}}
	for _, p := range match[start:end] {
		out.PriceList = append(out.PriceList, priceListItem(p))
	}
	return out, nil
}

func matchesAll(attrs map[string]string, filters []pricingFilter) bool {
	for _, f := range filters {
		v, ok := attrs[f.Field]
		if !ok {
			return false
		}
		values := strings.Split(f.Value, ",")
		switch f.Type {
		case "TERM_MATCH", "EQUALS":
			if !strings.EqualFold(v, f.Value) {
				return false
			}
		case "CONTAINS":
			if !strings.Contains(strings.ToLower(v), strings.ToLower(f.Value)) {
				return false
			}
		case "ANY_OF":
			if !slices.ContainsFunc(values, func(x string) bool { return strings.EqualFold(strings.TrimSpace(x), v) }) {
				return false
			}
		case "NONE_OF":
			if slices.ContainsFunc(values, func(x string) bool { return strings.EqualFold(strings.TrimSpace(x), v) }) {
				return false
			}
		}
	}
	return true
}
