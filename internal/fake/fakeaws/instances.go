package fakeaws

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// LifecycleSpot is EC2's instanceLifecycle of a Spot instance.
const LifecycleSpot = "spot"

// Spot request status codes (as EC2 spells them) the double uses.
const (
	SpotFulfilled            = "fulfilled"
	SpotMarkedForTermination = "marked-for-termination"
	SpotMarkedForStop        = "marked-for-stop"
	SpotMarkedForHibernation = "marked-for-hibernation"
	spotTerminatedByPrice    = "instance-terminated-by-price"
	spotTerminatedByUser     = "instance-terminated-by-user"
)

// EC2 instance states, with the codes DescribeInstances sends.
var instanceStateCodes = map[string]int{
	"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80,
}

var (
	ec2InstanceID   = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)
	spotRequestIDRe = regexp.MustCompile(`^sir-[0-9a-z]{8,}$`)
)

// spotRequestLocked gives a Spot instance its one-time Spot request.
func (s *Server) spotRequestLocked(in *Instance) {
	if in.Lifecycle != LifecycleSpot {
		return
	}
	if in.SpotRequestID == "" {
		s.seq++
		in.SpotRequestID = fmt.Sprintf("sir-%08x", s.seq)
	}
	if in.SpotStatus == "" {
		in.SpotStatus = SpotFulfilled
	}
}

// terminated is a reaped machine as EC2 describes it afterwards.
func terminated(in Instance) Instance {
	in.EC2State = "terminated"
	in.LifecycleState = "Terminated"
	if in.Lifecycle == LifecycleSpot {
		if in.SpotStatus == SpotMarkedForTermination {
			in.SpotStatus = spotTerminatedByPrice
		} else {
			in.SpotStatus = spotTerminatedByUser
		}
	}
	return in
}

// ec2State is the EC2 instance state behind an Auto Scaling lifecycle
// state: a machine held by a termination hook still runs; one whose hook is
// done (or that has none) is shutting down.
func ec2State(in Instance) string {
	switch {
	case in.EC2State != "":
		return in.EC2State
	case strings.HasPrefix(in.LifecycleState, "Pending"):
		return "pending"
	case in.LifecycleState == StateTerminatingWait:
		return "running"
	case in.LifecycleState == "Terminated":
		return "terminated"
	case isTerminating(in.LifecycleState) && !strings.HasPrefix(in.LifecycleState, "Detach"):
		return "shutting-down"
	case strings.HasPrefix(in.LifecycleState, "Warmed:Stopped"), strings.HasPrefix(in.LifecycleState, "Warmed:Hibernated"):
		return "stopped"
	default:
		return "running"
	}
}

// InterruptSpot marks a Spot instance for interruption, as EC2 does when it
// sends its two-minute warning: action is terminate, stop or hibernate. The
// instance keeps running (and its group keeps it InService) until a test
// moves it on.
func (s *Server) InterruptSpot(instanceID, action string) (Instance, error) {
	status := map[string]string{"terminate": SpotMarkedForTermination, "stop": SpotMarkedForStop, "hibernate": SpotMarkedForHibernation}[action]
	if status == "" {
		return Instance{}, fmt.Errorf("fakeaws: interruption action %q is not terminate, stop or hibernate", action)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, in := s.findInstanceLocked(instanceID)
	if in == nil {
		return Instance{}, fmt.Errorf("fakeaws: no instance %s in any group", instanceID)
	}
	if in.Lifecycle != LifecycleSpot {
		return Instance{}, fmt.Errorf("fakeaws: instance %s is not a Spot instance", instanceID)
	}
	in.SpotStatus = status
	return *in, nil
}

// SetEC2State overrides the EC2 state DescribeInstances reports for a
// machine of a group ("" goes back to the one its lifecycle state implies).
func (s *Server) SetEC2State(instanceID, state string) error {
	if _, ok := instanceStateCodes[state]; !ok && state != "" {
		return fmt.Errorf("fakeaws: %q is not an EC2 instance state", state)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, in := s.findInstanceLocked(instanceID)
	if in == nil {
		return fmt.Errorf("fakeaws: no instance %s in any group", instanceID)
	}
	in.EC2State = state
	return nil
}

// ec2InstanceLocked finds a machine EC2 knows: in a group, or reaped.
func (s *Server) ec2InstanceLocked(id string) (Instance, string, bool) {
	if g, in := s.findInstanceLocked(id); in != nil {
		return *in, g.spec.Name, true
	}
	for i := len(s.reaped) - 1; i >= 0; i-- {
		if s.reaped[i].ID == id {
			return s.reaped[i], "", true
		}
	}
	return Instance{}, "", false
}

type xmlInstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type ec2XMLTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type ec2XMLInstance struct {
	InstanceID            string           `xml:"instanceId"`
	ImageID               string           `xml:"imageId"`
	State                 xmlInstanceState `xml:"instanceState"`
	InstanceType          string           `xml:"instanceType"`
	LaunchTime            string           `xml:"launchTime"`
	AvailabilityZone      string           `xml:"placement>availabilityZone"`
	Tenancy               string           `xml:"placement>tenancy"`
	InstanceLifecycle     string           `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string           `xml:"spotInstanceRequestId,omitempty"`
	Tags                  []ec2XMLTag      `xml:"tagSet>item,omitempty"`
}

type xmlReservation struct {
	ReservationID string           `xml:"reservationId"`
	OwnerID       string           `xml:"ownerId"`
	Instances     []ec2XMLInstance `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	XMLName      xml.Name         `xml:"DescribeInstancesResponse"`
	NS           string           `xml:"xmlns,attr"`
	RequestID    string           `xml:"requestId"`
	Reservations []xmlReservation `xml:"reservationSet>item"`
}

// describeInstances answers for the instances named by InstanceId.N, as EC2
// does: a malformed ID is InvalidInstanceID.Malformed, an unknown one
// InvalidInstanceID.NotFound, and either fails the whole call.
func (s *Server) describeInstances(form map[string][]string, reqID string) (any, *apiError) {
	ids := list(form, "InstanceId", "")
	if len(ids) == 0 || len(list(form, "Filter.1.Value", "")) > 0 || first(form, "Filter.1.Name") != "" {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidParameterCombination",
			message: "the double describes instances by InstanceId only, without filters"}
	}
	for _, id := range ids {
		if !ec2InstanceID.MatchString(id) {
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidInstanceID.Malformed", message: fmt.Sprintf("Invalid id: %q", id)}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	resp := describeInstancesResponse{NS: ec2NS, RequestID: reqID}
	for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
		in, group, ok := s.ec2InstanceLocked(id)
		if !ok {
			missing = append(missing, id)
			continue
		}
		st := ec2State(in)
		x := ec2XMLInstance{
			InstanceID: in.ID, ImageID: "ami-0abcdef1234567890", State: xmlInstanceState{Code: instanceStateCodes[st], Name: st},
			InstanceType: in.InstanceType, LaunchTime: "1970-01-01T00:00:00.000Z", AvailabilityZone: in.AvailabilityZone, Tenancy: "default",
			InstanceLifecycle: in.Lifecycle, SpotInstanceRequestID: in.SpotRequestID,
		}
		if group != "" {
			x.Tags = []ec2XMLTag{{Key: "aws:autoscaling:groupName", Value: group}}
		}
		resp.Reservations = append(resp.Reservations, xmlReservation{
			ReservationID: "r-" + strings.TrimPrefix(in.ID, "i-"), OwnerID: s.account, Instances: []ec2XMLInstance{x}})
	}
	switch len(missing) {
	case 0:
		return resp, nil
	case 1:
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidInstanceID.NotFound", message: fmt.Sprintf("The instance ID '%s' does not exist", missing[0])}
	default:
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidInstanceID.NotFound", message: fmt.Sprintf("The instance IDs '%s' do not exist", strings.Join(missing, ", "))}
	}
}

type xmlSpotStatus struct {
	Code       string `xml:"code"`
	UpdateTime string `xml:"updateTime"`
	Message    string `xml:"message"`
}

type xmlSpotRequest struct {
	ID                   string        `xml:"spotInstanceRequestId"`
	SpotPrice            string        `xml:"spotPrice"`
	Type                 string        `xml:"type"`
	State                string        `xml:"state"`
	Status               xmlSpotStatus `xml:"status"`
	InstanceID           string        `xml:"instanceId"`
	CreateTime           string        `xml:"createTime"`
	ProductDescription   string        `xml:"productDescription"`
	LaunchedAZ           string        `xml:"launchedAvailabilityZone"`
	InterruptionBehavior string        `xml:"instanceInterruptionBehavior"`
}

type describeSpotRequestsResponse struct {
	XMLName   xml.Name         `xml:"DescribeSpotInstanceRequestsResponse"`
	NS        string           `xml:"xmlns,attr"`
	RequestID string           `xml:"requestId"`
	Requests  []xmlSpotRequest `xml:"spotInstanceRequestSet>item"`
}

// spotRequestState is the request state that goes with a status code: a
// one-time request closes once its instance is marked for termination or
// gone.
func spotRequestState(code string) string {
	switch code {
	case SpotFulfilled, SpotMarkedForStop, SpotMarkedForHibernation:
		return "active"
	default:
		return "closed"
	}
}

// describeSpotInstanceRequests answers for the requests named by
// SpotInstanceRequestId.N, with EC2's Malformed and NotFound errors.
func (s *Server) describeSpotInstanceRequests(form map[string][]string, reqID string) (any, *apiError) {
	ids := list(form, "SpotInstanceRequestId", "")
	if len(ids) == 0 || first(form, "Filter.1.Name") != "" {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidParameterCombination",
			message: "the double describes Spot requests by SpotInstanceRequestId only, without filters"}
	}
	for _, id := range ids {
		if !spotRequestIDRe.MatchString(id) {
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidSpotInstanceRequestID.Malformed", message: fmt.Sprintf("Invalid id: %q", id)}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	byID := map[string]Instance{}
	for _, g := range s.groups {
		for _, in := range g.instances {
			if in.SpotRequestID != "" {
				byID[in.SpotRequestID] = *in
			}
		}
	}
	for _, in := range s.reaped {
		if in.SpotRequestID != "" {
			byID[in.SpotRequestID] = in
		}
	}
	resp := describeSpotRequestsResponse{NS: ec2NS, RequestID: reqID}
	now := s.now().UTC().Format(time.RFC3339)
	for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
		in, ok := byID[id]
		if !ok {
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidSpotInstanceRequestID.NotFound",
				message: fmt.Sprintf("The spot instance request ID '%s' does not exist", id)}
		}
		resp.Requests = append(resp.Requests, xmlSpotRequest{
			ID: id, SpotPrice: "0.096000", Type: "one-time", State: spotRequestState(in.SpotStatus),
			Status:     xmlSpotStatus{Code: in.SpotStatus, UpdateTime: now, Message: "Status of the Spot request: " + in.SpotStatus},
			InstanceID: in.ID, CreateTime: "1970-01-01T00:00:00.000Z", ProductDescription: "Linux/UNIX",
			LaunchedAZ: in.AvailabilityZone, InterruptionBehavior: "terminate",
		})
	}
	return resp, nil
}

// SetSpot makes a group's machines, and those it launches from now on,
// Spot instances (as a group whose instances distribution is all Spot).
func (s *Server) SetSpot(groupName string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[groupName]
	if !ok {
		return fmt.Errorf("fakeaws: no group %q", groupName)
	}
	g.spec.Spot = true
	for _, in := range g.instances {
		in.Lifecycle = LifecycleSpot
		s.spotRequestLocked(in)
	}
	return nil
}
