package fakeaws

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// API versions and the XML namespaces of their responses.
const (
	autoScalingVersion = "2011-01-01"
	ec2Version         = "2016-11-15"
	autoScalingNS      = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
	ec2NS              = "http://ec2.amazonaws.com/doc/2016-11-15/"
)

// apiError is an error response; service picks its XML shape.
type apiError struct {
	status        int
	code, message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func validation(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "ValidationError", message: fmt.Sprintf(format, args...)}
}

type service int

const (
	autoScaling service = iota
	ec2Service
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/clusters/") {
		s.serveEKS(w, r)
		return
	}
	if strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AWSPriceListService.") {
		s.servePricing(w, r)
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, autoScaling, "", &apiError{status: http.StatusMethodNotAllowed, code: "InvalidAction", message: "the query protocol is POST only"})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, autoScaling, "", &apiError{status: http.StatusBadRequest, code: "MalformedQueryString", message: err.Error()})
		return
	}
	form := r.PostForm
	action, version := form.Get("Action"), form.Get("Version")
	var svc service
	var scope string
	switch version {
	case autoScalingVersion:
		svc, scope = autoScaling, "autoscaling"
	case ec2Version:
		svc, scope = ec2Service, "ec2"
	default:
		writeError(w, autoScaling, "", &apiError{status: http.StatusBadRequest, code: "InvalidAction", message: fmt.Sprintf("unsupported Version %q", version)})
		return
	}
	reqID := s.requestID()
	if err := s.checkSignature(r, scope); err != nil {
		writeError(w, svc, reqID, err)
		return
	}

	s.mu.Lock()
	s.calls[action]++
	s.lastForm[action] = form
	s.forms[action] = append(s.forms[action], form)
	if q := s.faults[action]; len(q) > 0 {
		f := q[0]
		s.faults[action] = q[1:]
		s.mu.Unlock()
		writeError(w, svc, reqID, &apiError{status: f.Status, code: f.Code, message: f.Message})
		return
	}
	var delay time.Duration
	if q := s.delays[action]; len(q) > 0 {
		delay = q[0]
		s.delays[action] = q[1:]
	}
	expired := s.expireLocked()
	onTerminate := slices.Clone(s.onTerminate)
	s.mu.Unlock()
	notify(onTerminate, expired)

	var body any
	var err *apiError
	switch {
	case svc == autoScaling && action == "DescribeAutoScalingGroups":
		body, err = s.describeAutoScalingGroups(form, reqID)
	case svc == autoScaling && action == "SetDesiredCapacity":
		body, err = s.setDesiredCapacity(form, reqID)
	case svc == autoScaling && action == "TerminateInstanceInAutoScalingGroup":
		body, err = s.terminateInstance(form, reqID)
	case svc == autoScaling && action == "PutLifecycleHook":
		body, err = s.putLifecycleHook(form, reqID)
	case svc == autoScaling && action == "DescribeLifecycleHooks":
		body, err = s.describeLifecycleHooks(form, reqID)
	case svc == autoScaling && action == "DeleteLifecycleHook":
		body, err = s.deleteLifecycleHook(form, reqID)
	case svc == autoScaling && action == "CompleteLifecycleAction":
		body, err = s.completeLifecycleAction(form, reqID)
	case svc == autoScaling && action == "RecordLifecycleActionHeartbeat":
		body, err = s.recordHeartbeat(form, reqID)
	case svc == autoScaling && action == "DescribeScalingActivities":
		body, err = s.describeScalingActivities(form, reqID)
	case svc == autoScaling && action == "DescribeLaunchConfigurations":
		body, err = s.describeLaunchConfigurations(form, reqID)
	case svc == ec2Service && action == "DescribeInstanceTypes":
		body, err = s.describeInstanceTypes(form, reqID)
	case svc == ec2Service && action == "DescribeLaunchTemplateVersions":
		body, err = s.describeLaunchTemplateVersions(form, reqID)
	case svc == ec2Service && action == "GetInstanceTypesFromInstanceRequirements":
		body, err = s.getInstanceTypesFromInstanceRequirements(form, reqID)
	case svc == ec2Service && action == "DescribeInstances":
		body, err = s.describeInstances(form, reqID)
	case svc == ec2Service && action == "DescribeSpotInstanceRequests":
		body, err = s.describeSpotInstanceRequests(form, reqID)
	case svc == ec2Service && action == "DescribeSpotPriceHistory":
		body, err = s.describeSpotPriceHistory(form, reqID)
	default:
		err = &apiError{status: http.StatusBadRequest, code: "InvalidAction", message: fmt.Sprintf("Could not find operation %s for version %s", action, version)}
	}
	if delay > 0 {
		// Carried out; the answer is held back, and lost if the caller
		// stops waiting first.
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	if err != nil {
		writeError(w, svc, reqID, err)
		return
	}
	writeXML(w, http.StatusOK, body)
}

// checkSignature wants a SigV4 Authorization header scoped to this region and
// service; it cannot verify the signature without the secret.
func (s *Server) checkSignature(r *http.Request, service string) *apiError {
	auth := r.Header.Get("Authorization")
	const prefix = "AWS4-HMAC-SHA256 Credential="
	rest, ok := strings.CutPrefix(auth, prefix)
	if !ok || r.Header.Get("X-Amz-Date") == "" || !strings.Contains(auth, "Signature=") {
		s.mu.Lock()
		s.unsignedCalls++
		s.mu.Unlock()
		return &apiError{status: http.StatusForbidden, code: "MissingAuthenticationToken", message: "Request is missing Authentication Token"}
	}
	cred, _, _ := strings.Cut(rest, ",")
	// access-key/date/region/service/aws4_request
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" {
		return &apiError{status: http.StatusForbidden, code: "IncompleteSignature", message: "Credential scope is malformed"}
	}
	if parts[2] != s.region {
		return &apiError{status: http.StatusForbidden, code: "SignatureDoesNotMatch", message: fmt.Sprintf("Credential should be scoped to a valid region, not '%s'.", parts[2])}
	}
	if parts[3] != service {
		return &apiError{status: http.StatusForbidden, code: "SignatureDoesNotMatch", message: fmt.Sprintf("Credential should be scoped to correct service: '%s'.", service)}
	}
	return nil
}

func (s *Server) requestID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%08x-aaaa-4bbb-8ccc-%012x", s.seq, s.seq)
}

func writeXML(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	if err := xml.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// Auto Scaling's error document.
type queryErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	NS        string   `xml:"xmlns,attr"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

// EC2's error document.
type ec2ErrorResponse struct {
	XMLName   xml.Name `xml:"Response"`
	Code      string   `xml:"Errors>Error>Code"`
	Message   string   `xml:"Errors>Error>Message"`
	RequestID string   `xml:"RequestID"`
}

func writeError(w http.ResponseWriter, svc service, reqID string, e *apiError) {
	if svc == ec2Service {
		writeXML(w, e.status, ec2ErrorResponse{Code: e.code, Message: e.message, RequestID: reqID})
		return
	}
	typ := "Sender"
	if e.status >= 500 {
		typ = "Receiver"
	}
	writeXML(w, e.status, queryErrorResponse{NS: autoScalingNS, Type: typ, Code: e.code, Message: e.message, RequestID: reqID})
}

// list reads a query-protocol list: prefix.member.1, prefix.member.2, … for
// Auto Scaling, prefix.1, prefix.2, … for EC2 (member == "").
func list(form url.Values, prefix, member string) []string {
	var out []string
	for i := 1; ; i++ {
		key := prefix + "." + strconv.Itoa(i)
		if member != "" {
			key = prefix + "." + member + "." + strconv.Itoa(i)
		}
		v, ok := form[key]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// intParam reads an optional integer parameter within [lo, hi].
func intParam(form url.Values, name string, def, lo, hi int) (int, *apiError) {
	v := form.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, validation("Value '%s' at '%s' failed to satisfy constraint: Member must be a number", v, lowerFirst(name))
	}
	if n < lo || n > hi {
		return 0, validation("Value '%d' at '%s' failed to satisfy constraint: Member must have value between %d and %d", n, lowerFirst(name), lo, hi)
	}
	return n, nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// page cuts items[offset:offset+size] and returns the token for the rest.
func page(total int, token string, size int) (start, end int, next string, err *apiError) {
	if token != "" {
		n, perr := strconv.Atoi(strings.TrimPrefix(token, "page-"))
		if perr != nil || !strings.HasPrefix(token, "page-") || n < 0 || n > total {
			return 0, 0, "", &apiError{status: http.StatusBadRequest, code: "InvalidNextToken", message: "The token '" + token + "' is invalid."}
		}
		start = n
	}
	end = min(start+size, total)
	if end < total {
		next = "page-" + strconv.Itoa(end)
	}
	return start, end, next, nil
}
