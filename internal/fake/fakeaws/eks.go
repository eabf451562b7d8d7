package fakeaws

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Nodegroup is an EKS managed node group, as eks:DescribeNodegroup reports
// it. EKS tags the Auto Scaling Group behind it with eks:cluster-name and
// eks:nodegroup-name; a test adds those tags to the Group itself.
type Nodegroup struct {
	Cluster, Name string
	Labels        map[string]string
	Taints        []NodegroupTaint
	// CapacityType is ON_DEMAND (default) or SPOT.
	CapacityType string
}

// NodegroupTaint is a taint as EKS spells it: Effect is NO_SCHEDULE,
// NO_EXECUTE or PREFER_NO_SCHEDULE.
type NodegroupTaint struct {
	Key, Value, Effect string
}

// AddNodegroup adds (or replaces) an EKS managed node group.
func (s *Server) AddNodegroup(ng Nodegroup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodegroups == nil {
		s.nodegroups = map[string]Nodegroup{}
	}
	s.nodegroups[ng.Cluster+"/"+ng.Name] = ng
}

type jsonTaint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

type jsonNodegroup struct {
	NodegroupName string            `json:"nodegroupName"`
	NodegroupArn  string            `json:"nodegroupArn"`
	ClusterName   string            `json:"clusterName"`
	Status        string            `json:"status"`
	CapacityType  string            `json:"capacityType"`
	Labels        map[string]string `json:"labels,omitempty"`
	Taints        []jsonTaint       `json:"taints,omitempty"`
}

// serveEKS answers the one EKS call the provider makes, in EKS's REST-JSON
// protocol: GET /clusters/<cluster>/node-groups/<nodegroup>.
func (s *Server) serveEKS(w http.ResponseWriter, r *http.Request) {
	const action = "DescribeNodegroup"
	if err := s.checkSignature(r, "eks"); err != nil {
		writeEKSError(w, err)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	if r.Method != http.MethodGet || len(parts) != 4 || parts[0] != "clusters" || parts[2] != "node-groups" {
		writeEKSError(w, &apiError{status: http.StatusNotFound, code: "NotFoundException", message: "Not found: " + r.Method + " " + r.URL.Path})
		return
	}
	cluster, err1 := url.PathUnescape(parts[1])
	name, err2 := url.PathUnescape(parts[3])
	if err1 != nil || err2 != nil {
		writeEKSError(w, &apiError{status: http.StatusBadRequest, code: "InvalidParameterException", message: "bad path"})
		return
	}
	s.mu.Lock()
	s.calls[action]++
	s.lastForm[action] = map[string][]string{"clusterName": {cluster}, "nodegroupName": {name}}
	s.forms[action] = append(s.forms[action], s.lastForm[action])
	if q := s.faults[action]; len(q) > 0 {
		f := q[0]
		s.faults[action] = q[1:]
		s.mu.Unlock()
		writeEKSError(w, &apiError{status: f.Status, code: f.Code, message: f.Message})
		return
	}
	ng, ok := s.nodegroups[cluster+"/"+name]
	region, account := s.region, s.account
	s.mu.Unlock()
	if !ok {
		writeEKSError(w, &apiError{status: http.StatusNotFound, code: "ResourceNotFoundException", message: fmt.Sprintf("No node group found for name: %s.", name)})
		return
	}
	out := jsonNodegroup{
		NodegroupName: ng.Name, ClusterName: ng.Cluster, Status: "ACTIVE", CapacityType: ng.CapacityType, Labels: ng.Labels,
		NodegroupArn: fmt.Sprintf("arn:aws:eks:%s:%s:nodegroup/%s/%s/00000000-0000-0000-0000-000000000000", region, account, ng.Cluster, ng.Name),
	}
	if out.CapacityType == "" {
		out.CapacityType = "ON_DEMAND"
	}
	for _, t := range ng.Taints {
		out.Taints = append(out.Taints, jsonTaint(t))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"nodegroup": out})
}

func writeEKSError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", e.code)
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": e.message})
}
