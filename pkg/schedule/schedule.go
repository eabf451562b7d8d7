// Package schedule holds nodetide's scheduled scaling: the schedule
// document (a superset of scalerd's), its validation, cron expressions with
// their time zones and daylight-saving rules, and the pure decision of which
// schedules a tick fires, and what a fire did (Result). All of it is pure:
// no I/O, no clock. The schedule function's handler and the applier, which
// claim due fires in the store and carry them out on the cluster and the
// node groups, are in pkg/schedulefire.
package schedule

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/nodetide/nodetide/pkg/strictjson"
)

// Schedule is one schedule document. Its JSON form is what users write and
// what is stored; a scalerd schedule file is one, unchanged:
//
//	{"name": "daytime", "cron": "0 0 8 * * *",
//	 "description": "Switch to full capacity during day time",
//	 "desiredCapacity": 5,
//	 "appScaleTemplates": [{"app": "todo", "replicas": 5}]}
//
// Absent numbers are nil, not 0, because 0 is a target (scale to zero at
// night). The omitzero tags keep absent fields absent and empty lists
// empty, so a document survives a round trip through storage unchanged.
type Schedule struct {
	// Name identifies the schedule; it is part of a DynamoDB sort key.
	Name string `json:"name"`
	// Cron has 5 or 6 fields; see ParseCron.
	Cron string `json:"cron"`
	// Timezone is the IANA zone Cron is read in; empty means UTC.
	Timezone    string `json:"timezone,omitzero"`
	Description string `json:"description,omitzero"`
	// DesiredCapacity (scalerd) is the desired size of every managed group.
	DesiredCapacity *int `json:"desiredCapacity,omitzero"`
	// NodeGroups sets named groups' sizes; it wins over DesiredCapacity.
	NodeGroups []NodeGroup `json:"nodeGroups,omitzero"`
	// AppScaleTemplates (scalerd) scale the Deployments labelled app=<app>.
	AppScaleTemplates []AppScaleTemplate `json:"appScaleTemplates,omitzero"`
	// Apps scale named workloads.
	Apps []App `json:"apps,omitzero"`
}

// NodeGroup sets one group's sizes; each is optional, at least one is set.
type NodeGroup struct {
	Name    string `json:"name"`
	Desired *int   `json:"desired,omitzero"`
	Min     *int   `json:"min,omitzero"`
	Max     *int   `json:"max,omitzero"`
}

// AppScaleTemplate scales the Deployments labelled app=<App> (scalerd).
type AppScaleTemplate struct {
	App      string `json:"app"`
	Replicas *int32 `json:"replicas,omitzero"`
}

// App scales one workload.
type App struct {
	Namespace string `json:"namespace"`
	// Kind is KindDeployment or KindStatefulSet.
	Kind     Kind   `json:"kind"`
	Name     string `json:"name"`
	Replicas *int32 `json:"replicas,omitzero"`
}

// The workload kinds an App may name.
const (
	KindDeployment  Kind = "Deployment"
	KindStatefulSet Kind = "StatefulSet"
)

// ParseCron parses the schedule's cron expression in its time zone.
func (s Schedule) ParseCron() (Cron, error) {
	loc, err := LoadLocation(s.Timezone)
	if err != nil {
		return Cron{}, fmt.Errorf("timezone: %w", err)
	}
	c, err := ParseCron(s.Cron, loc)
	if err != nil {
		return Cron{}, fmt.Errorf("cron: %w", err)
	}
	return c, nil
}

// Clone returns a deep copy, sharing nothing with s.
func (s Schedule) Clone() Schedule {
	c := s
	c.DesiredCapacity = clonePtr(s.DesiredCapacity)
	c.NodeGroups = slices.Clone(s.NodeGroups)
	for i, g := range c.NodeGroups {
		c.NodeGroups[i].Desired, c.NodeGroups[i].Min, c.NodeGroups[i].Max = clonePtr(g.Desired), clonePtr(g.Min), clonePtr(g.Max)
	}
	c.AppScaleTemplates = slices.Clone(s.AppScaleTemplates)
	for i, a := range c.AppScaleTemplates {
		c.AppScaleTemplates[i].Replicas = clonePtr(a.Replicas)
	}
	c.Apps = slices.Clone(s.Apps)
	for i, a := range c.Apps {
		c.Apps[i].Replicas = clonePtr(a.Replicas)
	}
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Parse decodes one schedule document strictly: a field the document format
// doesn't have (in any case spelling other than its own), a field given
// twice, a value of the wrong type or anything after the document is an
// error naming where. Parse does not validate; see Validate.
func Parse(data []byte) (Schedule, error) {
	var s Schedule
	if err := strictjson.Decode(data, &s); err != nil {
		return Schedule{}, fmt.Errorf("parse schedule: %w", err)
	}
	return s, nil
}

// ParseList decodes a file of schedules: one document (as scalerd's files
// hold) or a JSON array of them. Errors name the element, as "[2].cron".
func ParseList(data []byte) ([]Schedule, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '[' {
		s, err := Parse(data)
		if err != nil {
			return nil, err
		}
		return []Schedule{s}, nil
	}
	var list []Schedule
	if err := strictjson.Decode(data, &list); err != nil {
		return nil, fmt.Errorf("parse schedules: %w", err)
	}
	return list, nil
}
