package fakeaws

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The EC2 response documents: members right under the <ActionResponse> root,
// lowerCamel names, lists as <item>.

type xmlGPU struct {
	Name         string `xml:"name"`
	Manufacturer string `xml:"manufacturer"`
	Count        int    `xml:"count"`
}

type xmlNetworkInfo struct {
	MaximumNetworkInterfaces  int `xml:"maximumNetworkInterfaces"`
	IPv4AddressesPerInterface int `xml:"ipv4AddressesPerInterface"`
}

type xmlInstanceType struct {
	InstanceType           string          `xml:"instanceType"`
	CurrentGeneration      bool            `xml:"currentGeneration"`
	SupportedArchitectures []string        `xml:"processorInfo>supportedArchitectures>item"`
	DefaultVCpus           int             `xml:"vCpuInfo>defaultVCpus"`
	SizeInMiB              int             `xml:"memoryInfo>sizeInMiB"`
	NetworkInfo            *xmlNetworkInfo `xml:"networkInfo,omitempty"`
	GPUs                   []xmlGPU        `xml:"gpuInfo>gpus>item,omitempty"`
}

type describeInstanceTypesResponse struct {
	XMLName   xml.Name          `xml:"DescribeInstanceTypesResponse"`
	NS        string            `xml:"xmlns,attr"`
	RequestID string            `xml:"requestId"`
	Types     []xmlInstanceType `xml:"instanceTypeSet>item"`
	NextToken string            `xml:"nextToken,omitempty"`
}

type xmlLaunchTemplateVersion struct {
	LaunchTemplateID   string `xml:"launchTemplateId"`
	LaunchTemplateName string `xml:"launchTemplateName"`
	VersionNumber      int    `xml:"versionNumber"`
	DefaultVersion     bool   `xml:"defaultVersion"`
	CreateTime         string `xml:"createTime"`
	InstanceType       string `xml:"launchTemplateData>instanceType,omitempty"`
}

type describeLaunchTemplateVersionsResponse struct {
	XMLName   xml.Name                   `xml:"DescribeLaunchTemplateVersionsResponse"`
	NS        string                     `xml:"xmlns,attr"`
	RequestID string                     `xml:"requestId"`
	Versions  []xmlLaunchTemplateVersion `xml:"launchTemplateVersionSet>item"`
}

func instanceTypeXML(t InstanceType) xmlInstanceType {
	x := xmlInstanceType{
		InstanceType: t.Name, CurrentGeneration: t.CurrentGeneration,
		SupportedArchitectures: []string{t.Architecture},
		DefaultVCpus:           t.VCPUs, SizeInMiB: t.MemoryMiB,
	}
	if t.MaxENIs > 0 {
		x.NetworkInfo = &xmlNetworkInfo{MaximumNetworkInterfaces: t.MaxENIs, IPv4AddressesPerInterface: t.IPv4PerENI}
	}
	if t.GPUs > 0 {
		x.GPUs = []xmlGPU{{Name: t.GPUName, Manufacturer: t.GPUManufacturer, Count: t.GPUs}}
	}
	return x
}

func (s *Server) describeInstanceTypes(form map[string][]string, reqID string) (any, *apiError) {
	wanted := list(form, "InstanceType", "")
	size, err := intParam(form, "MaxResults", 100, 5, 100)
	if err != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidParameterValue", message: err.message}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for _, w := range wanted {
		if _, ok := s.types[w]; !ok {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidInstanceType",
			message: fmt.Sprintf("The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))}
	}
	names := wanted
	if len(names) == 0 {
		for n := range s.types {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	start, end, next, perr := page(len(names), first(form, "NextToken"), size)
	if perr != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidNextToken", message: perr.message}
	}
	resp := describeInstanceTypesResponse{NS: ec2NS, RequestID: reqID, NextToken: next}
	for _, n := range names[start:end] {
		resp.Types = append(resp.Types, instanceTypeXML(s.types[n]))
	}
	return resp, nil
}

func (s *Server) describeLaunchTemplateVersions(form map[string][]string, reqID string) (any, *apiError) {
	id, name := first(form, "LaunchTemplateId"), first(form, "LaunchTemplateName")
	if id == "" && name == "" {
		return nil, &apiError{status: http.StatusBadRequest, code: "MissingParameter", message: "The request must contain the parameter LaunchTemplateId or LaunchTemplateName"}
	}
	if id != "" && name != "" {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidParameterCombination", message: "The parameters LaunchTemplateId and LaunchTemplateName cannot be used together"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lt := s.templateLocked(id, name)
	if lt == nil {
		if id != "" {
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidLaunchTemplateId.NotFound",
				message: fmt.Sprintf("The specified launch template, with template ID %s, does not exist.", id)}
		}
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidLaunchTemplateName.NotFoundException",
			message: "At least one of the launch templates specified in the request does not exist."}
	}
	versions := list(form, "LaunchTemplateVersion", "")
	var nums []int
	if len(versions) == 0 {
		for i := range lt.InstanceTypes {
			nums = append(nums, i+1)
		}
	}
	for _, v := range versions {
		n, ok := lt.version(v)
		if !ok {
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidLaunchTemplateId.VersionNotFound",
				message: fmt.Sprintf("Could not find launch template version %s for launch template ID %s.", v, lt.ID)}
		}
		nums = append(nums, n)
	}
	resp := describeLaunchTemplateVersionsResponse{NS: ec2NS, RequestID: reqID}
	for _, n := range nums {
		resp.Versions = append(resp.Versions, xmlLaunchTemplateVersion{
			LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name, VersionNumber: n,
			DefaultVersion: n == lt.DefaultVersion, CreateTime: "1970-01-01T00:00:00.000Z",
			InstanceType: lt.InstanceTypes[n-1],
		})
	}
	return resp, nil
}

type getInstanceTypesFromInstanceRequirementsResponse struct {
	XMLName   xml.Name      `xml:"GetInstanceTypesFromInstanceRequirementsResponse"`
	NS        string        `xml:"xmlns,attr"`
	RequestID string        `xml:"requestId"`
	Types     []xmlTypeName `xml:"instanceTypeSet>item"`
}

type xmlTypeName struct {
	InstanceType string `xml:"instanceType"`
}

// getInstanceTypesFromInstanceRequirements matches the double's instance
// types on architecture and the vCPU and memory ranges; AWS's required
// parameters are required here too.
func (s *Server) getInstanceTypesFromInstanceRequirements(form map[string][]string, reqID string) (any, *apiError) {
	archs := list(form, "ArchitectureType", "")
	virt := list(form, "VirtualizationType", "")
	missing := func(p string) *apiError {
		return &apiError{status: http.StatusBadRequest, code: "MissingParameter", message: "The request must contain the parameter " + p}
	}
	switch {
	case len(archs) == 0:
		return nil, missing("ArchitectureType")
	case len(virt) == 0:
		return nil, missing("VirtualizationType")
	case first(form, "InstanceRequirements.VCpuCount.Min") == "":
		return nil, missing("InstanceRequirements.VCpuCount")
	case first(form, "InstanceRequirements.MemoryMiB.Min") == "":
		return nil, missing("InstanceRequirements.MemoryMiB")
	}
	num := func(key string) (int, *apiError) {
		v := first(form, key)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, &apiError{status: http.StatusBadRequest, code: "InvalidParameterValue", message: fmt.Sprintf("Invalid value '%s' for %s", v, key)}
		}
		return n, nil
	}
	var r InstanceRequirements
	for key, dst := range map[string]*int{
		"InstanceRequirements.VCpuCount.Min": &r.VCPUMin, "InstanceRequirements.VCpuCount.Max": &r.VCPUMax,
		"InstanceRequirements.MemoryMiB.Min": &r.MemoryMiBMin, "InstanceRequirements.MemoryMiB.Max": &r.MemoryMiBMax,
	} {
		n, err := num(key)
		if err != nil {
			return nil, err
		}
		*dst = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := getInstanceTypesFromInstanceRequirementsResponse{NS: ec2NS, RequestID: reqID}
	for _, n := range s.matchingTypesLocked(r, archs) {
		resp.Types = append(resp.Types, xmlTypeName{InstanceType: n})
	}
	return resp, nil
}

// matchingTypesLocked are the instance types meeting r on one of archs,
// smallest (vCPUs, then memory, then name) first.
func (s *Server) matchingTypesLocked(r InstanceRequirements, archs []string) []string {
	var match []InstanceType
	for _, t := range s.types {
		if r.matches(t) && slices.Contains(archs, t.Architecture) {
			match = append(match, t)
		}
	}
	slices.SortFunc(match, func(a, b InstanceType) int {
		if a.VCPUs != b.VCPUs {
			return a.VCPUs - b.VCPUs
		}
		if a.MemoryMiB != b.MemoryMiB {
			return a.MemoryMiB - b.MemoryMiB
		}
		return strings.Compare(a.Name, b.Name)
	})
	names := make([]string, 0, len(match))
	for _, t := range match {
		names = append(names, t.Name)
	}
	return names
}
