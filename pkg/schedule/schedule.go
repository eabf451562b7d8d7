// Package schedule holds nodetide's scheduled scaling: the schedule
// document (a superset of scalerd's), its validation, cron expressions with
// their time zones and daylight-saving rules, and the pure decision of which
// schedules a tick fires (all pure: no I/O, no clock), and the schedule
// function's handler, which claims due fires in the store and applies them
// to the cluster and the node groups (apply.go, handler.go).
package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
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
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Replicas *int32 `json:"replicas,omitzero"`
}

// The workload kinds an App may name.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
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
	if err := decodeStrict(data, scheduleShape(), &s); err != nil {
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
	if err := decodeStrict(data, &shape{elem: scheduleShape()}, &list); err != nil {
		return nil, fmt.Errorf("parse schedules: %w", err)
	}
	return list, nil
}

// shape is what the strict check expects of a JSON value: an object with
// the given fields, an array of elem, or (both nil) anything.
type shape struct {
	fields map[string]*shape
	elem   *shape
}

func scheduleShape() *shape {
	scalar := (*shape)(nil)
	return &shape{fields: map[string]*shape{
		"name": scalar, "cron": scalar, "timezone": scalar, "description": scalar,
		"desiredCapacity": scalar,
		"nodeGroups": {elem: &shape{fields: map[string]*shape{
			"name": scalar, "desired": scalar, "min": scalar, "max": scalar,
		}}},
		"appScaleTemplates": {elem: &shape{fields: map[string]*shape{
			"app": scalar, "replicas": scalar,
		}}},
		"apps": {elem: &shape{fields: map[string]*shape{
			"namespace": scalar, "kind": scalar, "name": scalar, "replicas": scalar,
		}}},
	}}
}

// decodeStrict checks data's field names against want, then decodes it
// into v. encoding/json alone would match field names in any case and let
// a repeated field silently win.
func decodeStrict(data []byte, want *shape, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := checkValue(dec, "", want); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return fmt.Errorf("unexpected data after the document at offset %d", dec.InputOffset())
		}
		return fmt.Errorf("after the document: %w", err)
	}
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	if err := strict.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return fmt.Errorf("%s: got a %s, want %s", typeErr.Field, typeErr.Value, typeErr.Type)
		}
		return err
	}
	return nil
}

// checkValue reads one JSON value from dec, checking the names of the
// objects want describes. path names the value in errors.
func checkValue(dec *json.Decoder, path string, want *shape) error {
	tok, err := dec.Token()
	if err != nil {
		return tokenError(path, err)
	}
	delim, isDelim := tok.(json.Delim)
	switch {
	case want != nil && want.fields != nil && delim != '{':
		return fmt.Errorf("%swant a JSON object", prefix(path))
	case want != nil && want.elem != nil && delim != '[' && tok != nil:
		return fmt.Errorf("%swant a JSON array", prefix(path))
	case !isDelim:
		return nil
	case delim == '{':
		seen := map[string]bool{}
		for dec.More() {
			keyTok, err := dec.Token()
			if err != nil {
				return tokenError(path, err)
			}
			key := keyTok.(string) // the decoder only yields string keys in objects
			field := join(path, key)
			var sub *shape
			if want != nil && want.fields != nil {
				s, known := want.fields[key]
				if !known {
					return fmt.Errorf("%s: unknown field", field)
				}
				sub = s
			}
			if seen[key] {
				return fmt.Errorf("%s: field given twice", field)
			}
			seen[key] = true
			if err := checkValue(dec, field, sub); err != nil {
				return err
			}
		}
	case delim == '[':
		var elem *shape
		if want != nil {
			elem = want.elem
		}
		for i := 0; dec.More(); i++ {
			if err := checkValue(dec, path+"["+strconv.Itoa(i)+"]", elem); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return tokenError(path, err)
	}
	return nil
}

// tokenError names where the JSON broke off or went wrong.
func tokenError(path string, err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%sunexpected end of input", prefix(path))
	}
	return fmt.Errorf("%s%w", prefix(path), err)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func prefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}
