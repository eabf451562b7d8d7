// Package fakeaws is an in-process stand-in for the AWS APIs the aws
// node-group provider calls: EC2 Auto Scaling (the query protocol, version
// 2011-01-01), the EC2 actions it needs (the EC2 query protocol, version
// 2016-11-15) and EKS's DescribeNodegroup. It is an httptest server, so tests drive it through the real
// aws-sdk-go-v2 clients: point BaseEndpoint at URL() and sign with any static
// credentials for Region().
//
// What it serves:
//
//   - Auto Scaling: DescribeAutoScalingGroups (AutoScalingGroupNames, Filters
//     tag-key / tag-value / tag:<key>, MaxRecords + NextToken, IncludeInstances),
//     SetDesiredCapacity, TerminateInstanceInAutoScalingGroup,
//     PutLifecycleHook, DescribeLifecycleHooks, DeleteLifecycleHook,
//     CompleteLifecycleAction, RecordLifecycleActionHeartbeat,
//     DescribeScalingActivities and DescribeLaunchConfigurations.
//   - EC2: DescribeInstanceTypes, DescribeLaunchTemplateVersions,
//     GetInstanceTypesFromInstanceRequirements, DescribeInstances and
//     DescribeSpotInstanceRequests (instances.go).
//   - Prices: the Price List Query API's GetProducts (pricing.go) and EC2's
//     DescribeSpotPriceHistory (spotprice.go), set with SetOnDemandPrice and
//     SetSpotPrice.
//   - EKS: DescribeNodegroup (REST-JSON, GET /clusters/<c>/node-groups/<n>),
//     for managed node groups a test adds with AddNodegroup; labels, taints
//     and capacity type only.
//
// Every request must carry a SigV4 Authorization header scoped to the
// double's region and to the service the Version names; the signature itself
// is not checked (the double does not know the secret).
//
// A test shapes the world with AddGroup, AddInstance,
// AddLaunchTemplate and AddLaunchConfiguration, reads it back with Group,
// moves machines along with Boot and Reap, watches them
// with OnLaunch and OnTerminate (a test bed registers a Node with the same
// provider ID there), and injects faults with FailNext, DelayNext and
// FailLaunches. FailNext answers the next calls of an action with an error
// instead of carrying them out (Throttling, InternalFailure, … build the
// usual ones); DelayNext carries them out but holds the answer back, so a
// caller whose deadline is shorter gives up on a change that has landed.
//
// Where the double can differ from AWS:
//
//   - Error wording. The messages for SetDesiredCapacity above max / below
//     min and for a terminate that would go below min follow AWS's published
//     wording; "AutoScalingGroup name not found", "Instance Id not found" and
//     the message for terminating an instance that is already terminating are
//     close to, not copied from, what AWS says.
//   - No asynchrony: a raised desired capacity creates its instances (in
//     Pending, or InService with WithAutoBoot) before the response is sent,
//     and DescribeAutoScalingGroups is strongly consistent. AWS launches
//     seconds later and its reads can lag its writes.
//   - Lifecycle hooks: PutLifecycleHook, CompleteLifecycleAction and
//     RecordLifecycleActionHeartbeat, for termination hooks on machines a
//     test takes out with ScaleIn (the double never scales in by itself
//     under a hook); a launch hook is stored and never holds a launch.
//     Timeouts are applied when the double is next called, not on a timer.
//     A token no open action holds (made up, completed, timed out) gets
//     AWS's ValidationError "No active Lifecycle Action found with token
//     <token>", and a held machine is Terminating:Wait, then
//     Terminating:Proceed, as AWS lists them. A call carrying both a token
//     and an instance ID is matched by the token alone: what AWS does when
//     the two disagree is not documented. DeleteLifecycleHook first
//     completes the actions waiting on the hook with CONTINUE, as AWS
//     documents; deleting a hook the group does not have is a
//     ValidationError "No Lifecycle Hook found with name <hook> for group
//     <group>" (AWS's wording for this case is not documented).
//     DescribeLifecycleHooks answers in one page. A machine taken out with
//     ScaleIn waits on one termination hook only (AWS makes an action per
//     hook): tests with two hooks on a group take no machine out of it.
//   - No cooldowns, instance protection, termination
//     policies (scale-in takes Pending machines first, then the newest), AZ
//     rebalancing or weighted capacity.
//   - Attribute-based instance selection only by vCPU and memory ranges
//     (Group.InstanceRequirements); GetInstanceTypesFromInstanceRequirements
//     matches the double's instance types on those and on architecture,
//     ignoring every other requirement it is sent, and answers in one page.
//   - Warm pools only as machines a test adds in a Warmed:* state
//     (AddInstance): DescribeAutoScalingGroups lists them with the group's
//     instances, outside its desired capacity. There is no DescribeWarmPool,
//     and a growing group launches new machines instead of taking them from
//     the pool.
//   - Standby only as machines a test adds in Standby or EnteringStandby
//     (AddInstance): outside desired capacity, as AWS counts them. There is
//     no EnterStandby / ExitStandby.
//   - Launch failures happen only when a test asks (FailLaunches); AWS keeps
//     retrying a failed launch, the double retries on the next change of
//     desired capacity or when the failure is cleared.
//   - Filters: AWS limits how many filters and values one request may carry;
//     the double does not, and it answers an unknown filter name with a
//     ValidationError of its own wording.
//   - DescribeLaunchConfigurations, DescribeScalingActivities and
//     DescribeLaunchTemplateVersions return a single page.
//   - DescribeInstances and DescribeSpotInstanceRequests take IDs only (no
//     filters, no pagination) and answer one reservation per instance. The
//     EC2 state follows the group's lifecycle state (Terminating:Wait is
//     running, the other Terminating states shutting-down, a reaped machine
//     terminated and still described, for ever rather than AWS's hour),
//     unless a test sets it (SetEC2State). Spot instances (Group.Spot,
//     Instance.Lifecycle) have one-time requests: fulfilled, then what
//     InterruptSpot marks, then instance-terminated-by-price (marked) or
//     -by-user once reaped; the request states that go with them (active,
//     closed) follow AWS's table as far as it was known here. The error
//     codes (InvalidInstanceID.Malformed / .NotFound,
//     InvalidSpotInstanceRequestID.Malformed / .NotFound) are AWS's; their
//     messages are close to, not copied from, what AWS says.
//   - Response metadata (request IDs, ARNs, timestamps) is made up but well
//     formed; fields the provider does not read are mostly left out.
package fakeaws

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Lifecycle states of instances in a group (as AWS spells them).
const (
	StatePending     = "Pending"
	StateInService   = "InService"
	StateTerminating = "Terminating"
	StateStandby     = "Standby"
)

// Group describes an Auto Scaling Group to create.
type Group struct {
	Name               string
	MinSize, MaxSize   int
	DesiredCapacity    int
	AvailabilityZones  []string          // default: the region's "a" zone
	Tags               map[string]string // key → value
	InstanceType       string            // type of the machines it launches; default from the launch source, else m5.large
	LaunchTemplate     *LaunchTemplateRef
	MixedInstanceTypes []string // a mixed instances policy whose overrides are these types, over LaunchTemplate
	// InstanceRequirements, when set, makes the mixed instances policy's
	// one override attribute-based instance selection (over LaunchTemplate)
	// instead of MixedInstanceTypes.
	InstanceRequirements    *InstanceRequirements
	LaunchConfigurationName string
	// Status is AWS's group status; "Delete in progress" marks a group being deleted.
	Status string
	// Spot makes the machines it launches Spot instances, each with a
	// one-time Spot request (see instances.go).
	Spot bool
	// Distribution is the mixed instances policy's instances distribution
	// (with MixedInstanceTypes or InstanceRequirements); nil is AWS's
	// defaults. It is described, not acted on: which machines launch as Spot
	// is still Spot's.
	Distribution *InstancesDistribution
}

// InstancesDistribution is a mixed instances policy's split between
// on-demand and Spot, as Auto Scaling describes it. Empty fields take AWS's
// defaults: on-demand prioritized (lowest-price with instance
// requirements), base 0, 100% on-demand above it, Spot lowest-price over 2
// pools.
type InstancesDistribution struct {
	OnDemandAllocationStrategy          string
	OnDemandBaseCapacity                int
	OnDemandPercentageAboveBaseCapacity *int
	SpotAllocationStrategy              string
	SpotInstancePools                   int
}

// InstanceRequirements is the part of attribute-based instance selection the
// double knows: vCPU and memory ranges (0 for no bound on that side), and
// architectures matched by GetInstanceTypesFromInstanceRequirements.
type InstanceRequirements struct {
	VCPUMin, VCPUMax           int
	MemoryMiBMin, MemoryMiBMax int
}

// matches reports whether an instance type meets the requirements.
func (r InstanceRequirements) matches(t InstanceType) bool {
	within := func(v, lo, hi int) bool { return v >= lo && (hi == 0 || v <= hi) }
	return within(t.VCPUs, r.VCPUMin, r.VCPUMax) && within(t.MemoryMiB, r.MemoryMiBMin, r.MemoryMiBMax)
}

// LaunchTemplateRef names a launch template from a group (ID or name, and a
// version: a number, "$Latest" or "$Default").
type LaunchTemplateRef struct {
	ID, Name, Version string
}

// LaunchTemplate is an EC2 launch template; version N has InstanceTypes[N-1].
type LaunchTemplate struct {
	ID, Name       string
	InstanceTypes  []string
	DefaultVersion int // default 1
}

// InstanceType is one EC2 instance type as DescribeInstanceTypes reports it.
type InstanceType struct {
	Name              string
	VCPUs             int
	MemoryMiB         int
	Architecture      string // x86_64 or arm64
	GPUs              int
	GPUManufacturer   string // e.g. NVIDIA
	GPUName           string
	MaxENIs           int // maximumNetworkInterfaces; 0 leaves networkInfo out
	IPv4PerENI        int
	CurrentGeneration bool
}

// Instance is one machine of a group.
type Instance struct {
	ID               string
	AvailabilityZone string
	InstanceType     string
	LifecycleState   string
	HealthStatus     string
	// Lifecycle is EC2's instanceLifecycle: "spot", or "" for on-demand.
	Lifecycle string
	// SpotRequestID and SpotStatus are the Spot request behind a Spot
	// instance and its status code ("fulfilled" until EC2 marks it for
	// interruption; filled in when empty).
	SpotRequestID, SpotStatus string
	// EC2State, when set, is the EC2 instance state DescribeInstances
	// reports instead of the one its lifecycle state implies.
	EC2State string
}

// ProviderID is the Kubernetes provider ID of the machine's Node.
func (i Instance) ProviderID() string {
	return "aws:///" + i.AvailabilityZone + "/" + i.ID
}

// GroupState is a snapshot of a group, for assertions.
type GroupState struct {
	Name                     string
	MinSize, MaxSize         int
	DesiredCapacity          int
	Instances                []Instance
	HonorCooldownLastRequest string // "true", "false" or "" as last sent to SetDesiredCapacity
}

// Event tells a callback about a machine of a group.
type Event struct {
	Group    string
	Instance Instance
}

// Fault is an error response a test makes the double return.
type Fault struct {
	Status  int
	Code    string
	Message string
}

// Throttling is Auto Scaling's rate limit error (HTTP 400).
func Throttling() Fault { return Fault{Status: 400, Code: "Throttling", Message: "Rate exceeded"} }

// RequestLimitExceeded is EC2's rate limit error (HTTP 503).
func RequestLimitExceeded() Fault {
	return Fault{Status: 503, Code: "RequestLimitExceeded", Message: "Request limit exceeded."}
}

// InternalFailure is a server error (HTTP 500).
func InternalFailure() Fault {
	return Fault{Status: 500, Code: "InternalFailure", Message: "The request processing has failed because of an unknown error, exception or failure."}
}

// ServiceUnavailable is an unavailable service (HTTP 503).
func ServiceUnavailable() Fault {
	return Fault{Status: 503, Code: "ServiceUnavailable", Message: "The service is unavailable. Please try again later."}
}

// ValidationError is a client error AWS does not retry (HTTP 400).
func ValidationError(msg string) Fault {
	return Fault{Status: 400, Code: "ValidationError", Message: msg}
}

// Option configures a Server.
type Option func(*Server)

// WithRegion sets the region (default us-east-1); requests must be signed for it.
func WithRegion(r string) Option { return func(s *Server) { s.region = r } }

// WithAutoBoot makes launched machines InService at once instead of Pending.
func WithAutoBoot() Option { return func(s *Server) { s.autoBoot = true } }

// WithClock sets the double's clock (lifecycle hook timeouts, activities).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

type group struct {
	spec          Group
	desired       int
	instances     []*Instance
	created       time.Time
	launchFailure string
	honorCooldown string
	hooks         map[string]LifecycleHook // by name
}

type activity struct {
	id, group, description, cause, status, statusMessage, details string
	start, end                                                    time.Time
	progress                                                      int
}

// Server is the double. It is safe for concurrent use.
type Server struct {
	srv      *httptest.Server
	region   string
	account  string
	autoBoot bool
	now      func() time.Time

	mu            sync.Mutex
	groups        map[string]*group
	types         map[string]InstanceType
	templates     []*LaunchTemplate
	configs       map[string]string // launch configuration → instance type
	activities    []activity        // oldest first
	faults        map[string][]Fault
	delays        map[string][]time.Duration
	calls         map[string]int
	seq           int
	onLaunch      []func(Event)
	onTerminate   []func(Event)
	lastForm      map[string]map[string][]string
	forms         map[string][]map[string][]string // every request's form, by action
	unsignedCalls int
	nodegroups    map[string]Nodegroup        // by cluster/name
	actions       map[string]*LifecycleAction // by token
	// reaped are machines gone from their group, which EC2 still
	// describes as terminated.
	reaped []Instance
	// onDemand is the Price List: region → instance type → USD per hour
	// (pricing.go); spot the Spot price changes (spotprice.go).
	onDemand      map[string]map[string]float64
	priceListPage int
	spot          []spotPoint
}

// New starts a double with a catalogue of common instance types.
func New(opts ...Option) *Server {
	s := &Server{
		region:   "us-east-1",
		account:  "123456789012",
		now:      time.Now,
		groups:   map[string]*group{},
		types:    map[string]InstanceType{},
		configs:  map[string]string{},
		faults:   map[string][]Fault{},
		delays:   map[string][]time.Duration{},
		calls:    map[string]int{},
		lastForm: map[string]map[string][]string{},
		forms:    map[string][]map[string][]string{},
		onDemand: map[string]map[string]float64{},
	}
	for _, o := range opts {
		o(s)
	}
	s.onDemand[s.region] = defaultOnDemandPrices()
	for _, t := range defaultInstanceTypes() {
		s.types[t.Name] = t
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// defaultInstanceTypes are real types with their published vCPU, memory, GPU
// and ENI figures, enough for templates without a test adding its own.
func defaultInstanceTypes() []InstanceType {
	return []InstanceType{
		{Name: "t3.medium", VCPUs: 2, MemoryMiB: 4096, Architecture: "x86_64", MaxENIs: 3, IPv4PerENI: 6, CurrentGeneration: true},
		{Name: "m5.large", VCPUs: 2, MemoryMiB: 8192, Architecture: "x86_64", MaxENIs: 3, IPv4PerENI: 10, CurrentGeneration: true},
		{Name: "m5.xlarge", VCPUs: 4, MemoryMiB: 16384, Architecture: "x86_64", MaxENIs: 4, IPv4PerENI: 15, CurrentGeneration: true},
		{Name: "m5.2xlarge", VCPUs: 8, MemoryMiB: 32768, Architecture: "x86_64", MaxENIs: 4, IPv4PerENI: 15, CurrentGeneration: true},
		{Name: "c5.large", VCPUs: 2, MemoryMiB: 4096, Architecture: "x86_64", MaxENIs: 3, IPv4PerENI: 10, CurrentGeneration: true},
		{Name: "m6g.large", VCPUs: 2, MemoryMiB: 8192, Architecture: "arm64", MaxENIs: 3, IPv4PerENI: 10, CurrentGeneration: true},
		{Name: "g4dn.xlarge", VCPUs: 4, MemoryMiB: 16384, Architecture: "x86_64", GPUs: 1, GPUManufacturer: "NVIDIA", GPUName: "T4", MaxENIs: 3, IPv4PerENI: 10, CurrentGeneration: true},
	}
}

// URL is the endpoint for both clients' BaseEndpoint.
func (s *Server) URL() string { return s.srv.URL }

// Region is the region requests must be signed for.
func (s *Server) Region() string { return s.region }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// AddGroup creates a group; its DesiredCapacity machines start InService
// (OnLaunch callbacks registered before are told about them).
func (s *Server) AddGroup(g Group) {
	s.mu.Lock()
	if len(g.AvailabilityZones) == 0 {
		g.AvailabilityZones = []string{s.region + "a"}
	}
	if g.InstanceType == "" {
		g.InstanceType = s.launchTypeLocked(g)
	}
	grp := &group{spec: g, desired: g.DesiredCapacity, created: s.now().UTC()}
	s.groups[g.Name] = grp
	var launched []Event
	for range g.DesiredCapacity {
		in := s.newInstanceLocked(grp, StateInService)
		launched = append(launched, Event{Group: g.Name, Instance: *in})
	}
	cbs := slices.Clone(s.onLaunch)
	s.mu.Unlock()
	notify(cbs, launched)
}

// launchTypeLocked is the instance type a group's launch source names.
func (s *Server) launchTypeLocked(g Group) string {
	if r := g.InstanceRequirements; r != nil {
		// AWS picks by its allocation strategy; the smallest match will do.
		if names := s.matchingTypesLocked(*r, []string{"x86_64", "arm64"}); len(names) > 0 {
			return names[0]
		}
	}
	if len(g.MixedInstanceTypes) > 0 {
		return g.MixedInstanceTypes[0]
	}
	if g.LaunchTemplate != nil {
		if lt := s.templateLocked(g.LaunchTemplate.ID, g.LaunchTemplate.Name); lt != nil {
			if v, ok := lt.version(g.LaunchTemplate.Version); ok {
				return lt.InstanceTypes[v-1]
			}
		}
	}
	if t, ok := s.configs[g.LaunchConfigurationName]; ok {
		return t
	}
	return "m5.large"
}

// AddInstance puts a machine in a group in any lifecycle state, without
// changing the desired capacity and without callbacks. An empty ID, zone or
// type is filled in.
func (s *Server) AddInstance(groupName string, in Instance) (Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[groupName]
	if !ok {
		return Instance{}, fmt.Errorf("fakeaws: no group %q", groupName)
	}
	if in.ID == "" {
		s.seq++
		in.ID = fmt.Sprintf("i-%017x", s.seq)
	}
	if in.AvailabilityZone == "" {
		in.AvailabilityZone = s.pickZoneLocked(g)
	}
	if in.InstanceType == "" {
		in.InstanceType = g.spec.InstanceType
	}
	if in.LifecycleState == "" {
		in.LifecycleState = StateInService
	}
	if in.HealthStatus == "" {
		in.HealthStatus = "Healthy"
	}
	if g.spec.Spot && in.Lifecycle == "" {
		in.Lifecycle = LifecycleSpot
	}
	s.spotRequestLocked(&in)
	cp := in
	g.instances = append(g.instances, &cp)
	return in, nil
}

// AddLaunchTemplate adds a launch template.
func (s *Server) AddLaunchTemplate(lt LaunchTemplate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lt.DefaultVersion == 0 {
		lt.DefaultVersion = 1
	}
	s.templates = append(s.templates, &lt)
}

// AddLaunchConfiguration adds a launch configuration.
func (s *Server) AddLaunchConfiguration(name, instanceType string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configs[name] = instanceType
}

// SetBounds changes a group's min and max, as someone editing the ASG would.
func (s *Server) SetBounds(groupName string, minSize, maxSize int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[groupName]
	if !ok {
		return fmt.Errorf("fakeaws: no group %q", groupName)
	}
	g.spec.MinSize, g.spec.MaxSize = minSize, maxSize
	return nil
}

// Group returns a snapshot of a group.
func (s *Server) Group(name string) (GroupState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	g, ok := s.groups[name]
	if !ok {
		return GroupState{}, false
	}
	st := GroupState{Name: name, MinSize: g.spec.MinSize, MaxSize: g.spec.MaxSize, DesiredCapacity: g.desired, HonorCooldownLastRequest: g.honorCooldown}
	for _, in := range g.instances {
		st.Instances = append(st.Instances, *in)
	}
	return st, true
}

// OnLaunch registers a callback for each machine a group launches. It runs
// after the launching request's state change, outside the double's lock, so
// it may call back into the double (Boot, for one).
func (s *Server) OnLaunch(fn func(Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onLaunch = append(s.onLaunch, fn)
}

// OnTerminate registers a callback for each machine that starts terminating.
func (s *Server) OnTerminate(fn func(Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onTerminate = append(s.onTerminate, fn)
}

// Boot moves a group's Pending machines to InService and returns them.
func (s *Server) Boot(groupName string) []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[groupName]
	if !ok {
		return nil
	}
	var out []Instance
	for _, in := range g.instances {
		if strings.HasPrefix(in.LifecycleState, "Pending") {
			in.LifecycleState = StateInService
			out = append(out, *in)
		}
	}
	return out
}

// Reap removes a group's terminating machines, as AWS does once they are
// gone; EC2 goes on describing them as terminated.
func (s *Server) Reap(groupName string) []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[groupName]
	if !ok {
		return nil
	}
	var gone []Instance
	g.instances = slices.DeleteFunc(g.instances, func(in *Instance) bool {
		if isTerminating(in.LifecycleState) {
			gone = append(gone, *in)
			return true
		}
		return false
	})
	for _, in := range gone {
		s.reaped = append(s.reaped, terminated(in))
	}
	return gone
}

// FailNext makes the next n calls of action (e.g. "SetDesiredCapacity")
// return f instead of being carried out.
func (s *Server) FailNext(action string, n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[action] = append(s.faults[action], f)
	}
}

// DelayNext makes the next n calls of action be carried out as usual but
// answered only after d, or never if the caller gives up first: the change
// lands, the caller does not learn it (a slow response beyond the client's
// deadline).
func (s *Server) DelayNext(action string, n int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.delays[action] = append(s.delays[action], d)
	}
}

// FailLaunches makes the group's launches fail with message (recorded as a
// Failed scaling activity, as AWS does for e.g. InsufficientInstanceCapacity);
// an empty message clears the failure and launches what is missing.
func (s *Server) FailLaunches(groupName, message string) error {
	s.mu.Lock()
	g, ok := s.groups[groupName]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("fakeaws: no group %q", groupName)
	}
	g.launchFailure = message
	var launched []Event
	if message == "" {
		launched = s.reconcileLocked(g, "an instance was started in response to a difference between desired and actual capacity")
	}
	cbs := slices.Clone(s.onLaunch)
	s.mu.Unlock()
	notify(cbs, launched)
	return nil
}

// Calls is how many requests of action the double received (faults included).
func (s *Server) Calls(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[action]
}

// Requests are the forms of every request of action, in order (a request
// the client retried appears again).
func (s *Server) Requests(action string) []map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.forms[action])
}

// LastRequest is the form of the last request of action, as sent.
func (s *Server) LastRequest(action string) map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastForm[action]
}

// UnsignedCalls is how many requests were refused for lacking a SigV4
// Authorization header.
func (s *Server) UnsignedCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsignedCalls
}

func notify(cbs []func(Event), events []Event) {
	for _, e := range events {
		for _, cb := range cbs {
			cb(e)
		}
	}
}

func isTerminating(state string) bool {
	return strings.HasPrefix(state, "Terminat") || strings.HasPrefix(state, "Detach")
}

func (s *Server) findInstanceLocked(id string) (*group, *Instance) {
	for _, g := range s.groups {
		for _, in := range g.instances {
			if in.ID == id {
				return g, in
			}
		}
	}
	return nil, nil
}

// pickZoneLocked balances machines across the group's zones, as AWS does.
func (s *Server) pickZoneLocked(g *group) string {
	count := map[string]int{}
	for _, in := range g.instances {
		if !isTerminating(in.LifecycleState) {
			count[in.AvailabilityZone]++
		}
	}
	best := g.spec.AvailabilityZones[0]
	for _, z := range g.spec.AvailabilityZones[1:] {
		if count[z] < count[best] {
			best = z
		}
	}
	return best
}

func (s *Server) newInstanceLocked(g *group, state string) *Instance {
	s.seq++
	in := &Instance{
		ID:               fmt.Sprintf("i-%017x", s.seq),
		AvailabilityZone: s.pickZoneLocked(g),
		InstanceType:     g.spec.InstanceType,
		LifecycleState:   state,
		HealthStatus:     "Healthy",
	}
	if g.spec.Spot {
		in.Lifecycle = LifecycleSpot
		s.spotRequestLocked(in)
	}
	g.instances = append(g.instances, in)
	return in
}

// liveLocked are the machines that count toward desired capacity: not the
// warm pool's, nor those in standby (AWS launches a replacement for a
// machine put in standby unless desired capacity was lowered with it).
func liveLocked(g *group) []*Instance {
	var out []*Instance
	for _, in := range g.instances {
		if !isTerminating(in.LifecycleState) && !strings.HasPrefix(in.LifecycleState, "Warmed") && !strings.HasSuffix(in.LifecycleState, "Standby") {
			out = append(out, in)
		}
	}
	return out
}

// reconcileLocked launches machines until the group's live
// machines reach its desired capacity (or a Failed activity for each launch
// when launches are made to fail), and returns the launches.
func (s *Server) reconcileLocked(g *group, cause string) []Event {
	live := liveLocked(g)
	var launched []Event
	now := s.now().UTC()
	for n := len(live); n < g.desired; n++ {
		if g.launchFailure != "" {
			s.addActivityLocked(activity{
				group:         g.spec.Name,
				description:   "Launching a new EC2 instance.  Status Reason: " + g.launchFailure + " Launching EC2 instance failed.",
				cause:         fmt.Sprintf("At %s %s.", now.Format(time.RFC3339), cause),
				status:        "Failed",
				statusMessage: g.launchFailure + " Launching EC2 instance failed.",
				start:         now, end: now, progress: 100,
			})
			continue
		}
		state := StatePending
		if s.autoBoot {
			state = StateInService
		}
		in := s.newInstanceLocked(g, state)
		s.addActivityLocked(activity{
			group:       g.spec.Name,
			description: "Launching a new EC2 instance: " + in.ID,
			cause:       fmt.Sprintf("At %s %s.", now.Format(time.RFC3339), cause),
			status:      "Successful",
			details:     fmt.Sprintf(`{"Subnet ID":"subnet-0","Availability Zone":%q}`, in.AvailabilityZone),
			start:       now, end: now, progress: 100,
		})
		launched = append(launched, Event{Group: g.spec.Name, Instance: *in})
	}
	return launched
}

// shrinkLocked terminates machines over the desired capacity: Pending ones
// first, then the newest.
func (s *Server) shrinkLocked(g *group) []Event {
	live := liveLocked(g)
	extra := len(live) - g.desired
	if extra <= 0 {
		return nil
	}
	// Newest first (machines are appended as they launch), Pending before the rest.
	slices.Reverse(live)
	sort.SliceStable(live, func(i, j int) bool {
		return strings.HasPrefix(live[i].LifecycleState, "Pending") && !strings.HasPrefix(live[j].LifecycleState, "Pending")
	})
	var out []Event
	now := s.now().UTC()
	for _, in := range live[:extra] {
		s.terminateLocked(g, in)
		s.addActivityLocked(activity{
			group:       g.spec.Name,
			description: "Terminating EC2 instance: " + in.ID,
			cause:       fmt.Sprintf("At %s a user request explicitly set group desired capacity changing the desired capacity, shrinking the capacity to %d.", now.Format(time.RFC3339), g.desired),
			status:      "InProgress",
			start:       now, progress: 50,
		})
		out = append(out, Event{Group: g.spec.Name, Instance: *in})
	}
	return out
}

func (s *Server) terminateLocked(g *group, in *Instance) {
	in.LifecycleState = StateTerminating
}

func (s *Server) addActivityLocked(a activity) activity {
	s.seq++
	a.id = fmt.Sprintf("%08x-1111-4222-8333-%012x", s.seq, s.seq)
	s.activities = append(s.activities, a)
	return a
}

func (s *Server) templateLocked(id, name string) *LaunchTemplate {
	for _, lt := range s.templates {
		if (id != "" && lt.ID == id) || (id == "" && name != "" && lt.Name == name) {
			return lt
		}
	}
	return nil
}

// version resolves "", "$Default", "$Latest" or a number to a version number.
func (lt *LaunchTemplate) version(v string) (int, bool) {
	switch v {
	case "", "$Default":
		return lt.DefaultVersion, lt.DefaultVersion >= 1 && lt.DefaultVersion <= len(lt.InstanceTypes)
	case "$Latest":
		return len(lt.InstanceTypes), len(lt.InstanceTypes) > 0
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || fmt.Sprint(n) != v {
		return 0, false
	}
	return n, n >= 1 && n <= len(lt.InstanceTypes)
}
