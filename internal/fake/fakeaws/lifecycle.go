package fakeaws

import (
	"encoding/xml"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Lifecycle hook transitions and results (as AWS spells them).
const (
	TransitionTerminating = "autoscaling:EC2_INSTANCE_TERMINATING"
	TransitionLaunching   = "autoscaling:EC2_INSTANCE_LAUNCHING"
	ResultContinue        = "CONTINUE"
	ResultAbandon         = "ABANDON"
	// StateTerminatingWait is a machine held by a termination hook;
	// StateTerminatingProceed one whose hook is done, on its way out.
	StateTerminatingWait    = "Terminating:Wait"
	StateTerminatingProceed = "Terminating:Proceed"
)

// LifecycleHook is a group's hook, as PutLifecycleHook stores it.
type LifecycleHook struct {
	Group, Name, Transition string
	DefaultResult           string
	HeartbeatTimeout        time.Duration
}

// LifecycleAction is one machine held by a termination hook.
type LifecycleAction struct {
	Token, Group, Hook, InstanceID string
	// Deadline is when the hook's default result applies (moved on by each
	// heartbeat, never past GlobalDeadline).
	Deadline, GlobalDeadline time.Time
	Heartbeats               int
	// Result is "" while the action waits, else what ended it: the result
	// a CompleteLifecycleAction gave, or "timeout:<default>".
	Result string
}

// maxGlobalTimeout: AWS ends an action at 100 heartbeat timeouts or 48
// hours, whichever is less.
const maxGlobalTimeout = 48 * time.Hour

func (s *Server) putHookLocked(h LifecycleHook) *apiError {
	g, ok := s.groups[h.Group]
	if !ok {
		return validation("AutoScalingGroup name not found - AutoScalingGroup %s not found", h.Group)
	}
	if h.Transition != TransitionTerminating && h.Transition != TransitionLaunching {
		return validation("Invalid Lifecycle Transition %s", h.Transition)
	}
	switch h.DefaultResult {
	case "":
		h.DefaultResult = ResultAbandon
	case ResultContinue, ResultAbandon:
	default:
		return validation("Invalid DefaultResult %s", h.DefaultResult)
	}
	if h.HeartbeatTimeout == 0 {
		h.HeartbeatTimeout = time.Hour
	}
	if h.HeartbeatTimeout < 30*time.Second || h.HeartbeatTimeout > 7200*time.Second {
		return validation("1 validation error detected: Value '%d' at 'heartbeatTimeout' failed to satisfy constraint: Member must have value between 30 and 7200", int(h.HeartbeatTimeout.Seconds()))
	}
	if g.hooks == nil {
		g.hooks = map[string]LifecycleHook{}
	}
	g.hooks[h.Name] = h
	return nil
}

// PutLifecycleHook adds or replaces a group's hook, as the API call does.
func (s *Server) PutLifecycleHook(h LifecycleHook) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.putHookLocked(h); err != nil {
		return err
	}
	return nil
}

// ScaleIn takes one machine out of a group as the ASG itself does (a scale
// in, a rebalance, an instance refresh): the desired capacity drops by one
// and, with a termination hook, the machine waits in Terminating:Wait until
// the action completes or its heartbeat timeout passes. It returns the
// action (a zero one without a hook: the machine goes at once).
func (s *Server) ScaleIn(groupName, instanceID string) (LifecycleAction, error) {
	s.mu.Lock()
	s.expireLocked()
	g, ok := s.groups[groupName]
	if !ok {
		s.mu.Unlock()
		return LifecycleAction{}, fmt.Errorf("no group %s", groupName)
	}
	i := slices.IndexFunc(g.instances, func(in *Instance) bool { return in.ID == instanceID })
	if i < 0 || isTerminating(g.instances[i].LifecycleState) {
		s.mu.Unlock()
		return LifecycleAction{}, fmt.Errorf("no live instance %s in group %s", instanceID, groupName)
	}
	in := g.instances[i]
	g.desired = max(g.desired-1, g.spec.MinSize)
	for _, h := range g.hooks {
		if h.Transition != TransitionTerminating {
			continue
		}
		s.seq++
		now := s.now()
		a := &LifecycleAction{
			Token: fmt.Sprintf("%08x-4321-4321-4321-%012x", s.seq, s.seq), Group: groupName, Hook: h.Name, InstanceID: instanceID,
			Deadline: now.Add(h.HeartbeatTimeout), GlobalDeadline: now.Add(min(100*h.HeartbeatTimeout, maxGlobalTimeout)),
		}
		if s.actions == nil {
			s.actions = map[string]*LifecycleAction{}
		}
		s.actions[a.Token] = a
		in.LifecycleState = StateTerminatingWait
		s.mu.Unlock()
		return *a, nil
	}
	ev := s.proceedLocked(g, in)
	onTerminate := slices.Clone(s.onTerminate)
	s.mu.Unlock()
	notify(onTerminate, []Event{ev})
	return LifecycleAction{}, nil
}

// Action returns a lifecycle action by token, for assertions.
func (s *Server) Action(token string) (LifecycleAction, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	a, ok := s.actions[token]
	if !ok {
		return LifecycleAction{}, false
	}
	return *a, true
}

func (s *Server) proceedLocked(g *group, in *Instance) Event {
	in.LifecycleState = StateTerminatingProceed
	return Event{Group: g.spec.Name, Instance: *in}
}

// expireLocked applies the default result of every action past its
// deadline: for a termination hook the machine goes either way.
func (s *Server) expireLocked() []Event {
	now := s.now()
	var out []Event
	for _, a := range s.actions {
		if a.Result != "" || now.Before(a.Deadline) {
			continue
		}
		g := s.groups[a.Group]
		a.Result = "timeout:" + g.hooks[a.Hook].DefaultResult
		if _, in := s.findInstanceLocked(a.InstanceID); in != nil {
			out = append(out, s.proceedLocked(g, in))
		}
	}
	return out
}

// activeActionLocked finds the waiting action a call names, by token or by
// instance ID, with AWS's error for none.
func (s *Server) activeActionLocked(form map[string][]string) (*LifecycleAction, *apiError) {
	group, hook := first(form, "AutoScalingGroupName"), first(form, "LifecycleHookName")
	token, id := first(form, "LifecycleActionToken"), first(form, "InstanceId")
	g, ok := s.groups[group]
	if !ok {
		return nil, validation("AutoScalingGroup name not found - AutoScalingGroup %s not found", group)
	}
	if _, ok := g.hooks[hook]; !ok {
		return nil, validation("No Lifecycle Hook found with name %s for group %s", hook, group)
	}
	if token == "" && id == "" {
		return nil, validation("Either LifecycleActionToken or InstanceId must be specified")
	}
	for _, a := range s.actions {
		if a.Result == "" && a.Group == group && a.Hook == hook && (a.Token == token || token == "" && a.InstanceID == id) {
			return a, nil
		}
	}
	if token != "" {
		return nil, validation("No active Lifecycle Action found with token %s", token)
	}
	return nil, validation("No active Lifecycle Action found with instance ID %s", id)
}

type emptyResponse struct {
	XMLName  xml.Name
	NS       string `xml:"xmlns,attr"`
	Result   struct{ XMLName xml.Name }
	Metadata responseMetadata `xml:"ResponseMetadata"`
}

func (s *Server) empty(action, reqID string) emptyResponse {
	r := emptyResponse{XMLName: xml.Name{Local: action + "Response"}, NS: autoScalingNS, Metadata: responseMetadata{reqID}}
	r.Result.XMLName = xml.Name{Local: action + "Result"}
	return r
}

func (s *Server) putLifecycleHook(form map[string][]string, reqID string) (any, *apiError) {
	h := LifecycleHook{Group: first(form, "AutoScalingGroupName"), Name: first(form, "LifecycleHookName"),
		Transition: first(form, "LifecycleTransition"), DefaultResult: first(form, "DefaultResult")}
	if v := first(form, "HeartbeatTimeout"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, validation("Invalid HeartbeatTimeout %s", v)
		}
		h.HeartbeatTimeout = time.Duration(n) * time.Second
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.putHookLocked(h); err != nil {
		return nil, err
	}
	return s.empty("PutLifecycleHook", reqID), nil
}

func (s *Server) completeLifecycleAction(form map[string][]string, reqID string) (any, *apiError) {
	result := first(form, "LifecycleActionResult")
	if result != ResultContinue && result != ResultAbandon {
		return nil, validation("1 validation error detected: Value '%s' at 'lifecycleActionResult' failed to satisfy constraint: Member must be CONTINUE or ABANDON", result)
	}
	s.mu.Lock()
	expired := s.expireLocked()
	a, err := s.activeActionLocked(form)
	var events []Event
	if err == nil {
		a.Result = result
		g := s.groups[a.Group]
		if _, in := s.findInstanceLocked(a.InstanceID); in != nil {
			events = append(events, s.proceedLocked(g, in))
		}
	}
	onTerminate := slices.Clone(s.onTerminate)
	s.mu.Unlock()
	notify(onTerminate, append(expired, events...))
	if err != nil {
		return nil, err
	}
	return s.empty("CompleteLifecycleAction", reqID), nil
}

func (s *Server) recordHeartbeat(form map[string][]string, reqID string) (any, *apiError) {
	s.mu.Lock()
	expired := s.expireLocked()
	a, err := s.activeActionLocked(form)
	if err == nil {
		a.Heartbeats++
		a.Deadline = s.now().Add(s.groups[a.Group].hooks[a.Hook].HeartbeatTimeout)
		if a.Deadline.After(a.GlobalDeadline) {
			a.Deadline = a.GlobalDeadline
		}
	}
	onTerminate := slices.Clone(s.onTerminate)
	s.mu.Unlock()
	notify(onTerminate, expired)
	if err != nil {
		return nil, err
	}
	return s.empty("RecordLifecycleActionHeartbeat", reqID), nil
}

// Hooks returns a group's lifecycle hooks by name, for assertions.
func (s *Server) Hooks(groupName string) []LifecycleHook {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[groupName]
	if !ok {
		return nil
	}
	out := make([]LifecycleHook, 0, len(g.hooks))
	for _, h := range g.hooks {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b LifecycleHook) int { return strings.Compare(a.Name, b.Name) })
	return out
}

type xmlLifecycleHook struct {
	Name             string `xml:"LifecycleHookName"`
	Group            string `xml:"AutoScalingGroupName"`
	Transition       string `xml:"LifecycleTransition"`
	HeartbeatTimeout int    `xml:"HeartbeatTimeout"`
	GlobalTimeout    int    `xml:"GlobalTimeout"`
	DefaultResult    string `xml:"DefaultResult"`
}

type describeLifecycleHooksResponse struct {
	XMLName  xml.Name           `xml:"DescribeLifecycleHooksResponse"`
	NS       string             `xml:"xmlns,attr"`
	Hooks    []xmlLifecycleHook `xml:"DescribeLifecycleHooksResult>LifecycleHooks>member"`
	Metadata responseMetadata   `xml:"ResponseMetadata"`
}

// describeLifecycleHooks lists a group's hooks (those named in
// LifecycleHookNames only, when given; a name no hook has is left out, not
// an error), sorted by name.
func (s *Server) describeLifecycleHooks(form map[string][]string, reqID string) (any, *apiError) {
	group := first(form, "AutoScalingGroupName")
	names := list(form, "LifecycleHookNames", "member")
	s.mu.Lock()
	_, ok := s.groups[group]
	s.mu.Unlock()
	if !ok {
		return nil, validation("AutoScalingGroup name not found - AutoScalingGroup %s not found", group)
	}
	resp := describeLifecycleHooksResponse{NS: autoScalingNS, Metadata: responseMetadata{reqID}}
	for _, h := range s.Hooks(group) {
		if len(names) > 0 && !slices.Contains(names, h.Name) {
			continue
		}
		hb := int(h.HeartbeatTimeout.Seconds())
		resp.Hooks = append(resp.Hooks, xmlLifecycleHook{Name: h.Name, Group: h.Group, Transition: h.Transition,
			HeartbeatTimeout: hb, GlobalTimeout: int(min(100*h.HeartbeatTimeout, maxGlobalTimeout).Seconds()), DefaultResult: h.DefaultResult})
	}
	return resp, nil
}

// deleteLifecycleHook removes a hook. As AWS documents, the actions still
// waiting on it are completed first: CONTINUE for terminating machines
// (which then go).
func (s *Server) deleteLifecycleHook(form map[string][]string, reqID string) (any, *apiError) {
	group, hook := first(form, "AutoScalingGroupName"), first(form, "LifecycleHookName")
	s.mu.Lock()
	expired := s.expireLocked()
	g, ok := s.groups[group]
	var err *apiError
	var events []Event
	switch {
	case !ok:
		err = validation("AutoScalingGroup name not found - AutoScalingGroup %s not found", group)
	case g.hooks[hook] == (LifecycleHook{}):
		err = validation("No Lifecycle Hook found with name %s for group %s", hook, group)
	default:
		for _, a := range s.actions {
			if a.Result != "" || a.Group != group || a.Hook != hook {
				continue
			}
			a.Result = ResultContinue
			if _, in := s.findInstanceLocked(a.InstanceID); in != nil {
				events = append(events, s.proceedLocked(g, in))
			}
		}
		delete(g.hooks, hook)
	}
	onTerminate := slices.Clone(s.onTerminate)
	s.mu.Unlock()
	notify(onTerminate, append(expired, events...))
	if err != nil {
		return nil, err
	}
	return s.empty("DeleteLifecycleHook", reqID), nil
}
