package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodetide/nodetide/pkg/schedule"
)

var (
	_ schedule.OverrideStore = (*DynamoDB)(nil)
	_ schedule.OverrideStore = (*MemorySchedules)(nil)
)

// Attributes of a GROUP# item that hold its schedule override, next to the
// planner's times (which SaveState writes attribute by attribute, so the
// two never overwrite each other).
const (
	attrOverride         = "override"         // the Override as JSON
	attrOverrideKey      = "overrideKey"      // orders overrides: fixed-width firedAt, "#", schedule
	attrOverrideSchedule = "overrideSchedule" // the schedule that set it
)

// overrideKey orders overrides by fire time, then schedule name, as a
// string DynamoDB can compare in a condition.
func overrideKey(o schedule.Override) string {
	return formatSchedTime(o.FiredAt) + "#" + o.Schedule
}

func checkOverride(o schedule.Override) error {
	switch {
	case o.Group == "":
		return errors.New("node group name is empty")
	case o.Schedule == "":
		return errors.New("schedule name is empty")
	case o.FiredAt.IsZero():
		return errors.New("fire time is not set")
	}
	for what, v := range map[string]*int{"min": o.Min, "max": o.Max, "desired": o.Desired} {
		if v != nil && *v < 0 {
			return fmt.Errorf("%s %d is negative", what, *v)
		}
	}
	return checkSchedTime("fire time", o.FiredAt)
}

// SetOverride writes the override on the group's GROUP# item with one
// conditional UpdateItem (see schedule.OverrideStore).
func (s *DynamoDB) SetOverride(ctx context.Context, o schedule.Override) (bool, error) {
	if err := checkOverride(o); err != nil {
		return false, fmt.Errorf("set override: %w", err)
	}
	o.FiredAt = o.FiredAt.UTC()
	doc, err := json.Marshal(o)
	if err != nil {
		return false, fmt.Errorf("set override of node group %q: %w", o.Group, err)
	}
	e := newExpr()
	key := e.name(attrOverrideKey)
	k := e.value(&types.AttributeValueMemberS{Value: overrideKey(o)})
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table),
		Key:       s.key(groupPrefix + o.Group),
		UpdateExpression: aws.String("SET " + strings.Join([]string{
			e.name(attrOverride) + " = " + e.value(&types.AttributeValueMemberS{Value: string(doc)}),
			key + " = " + k,
			e.name(attrOverrideSchedule) + " = " + e.value(&types.AttributeValueMemberS{Value: o.Schedule}),
		}, ", ")),
		ConditionExpression:       aws.String("attribute_not_exists(" + key + ") OR " + key + " <= " + k),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("set override of node group %q of cluster %q: %w", o.Group, s.cluster, err)
	}
	return true, nil
}

// Overrides reads the cluster's GROUP# items, strongly consistent, for
// their overrides (see schedule.OverrideStore).
func (s *DynamoDB) Overrides(ctx context.Context) ([]schedule.Override, error) {
	out := []schedule.Override{}
	err := s.query(ctx, "list overrides of", groupPrefix, func(_ string, item map[string]types.AttributeValue) error {
		if _, ok := item[attrOverride]; !ok {
			return nil
		}
		o, err := decodeOverride(item)
		if err != nil {
			return err
		}
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func decodeOverride(item map[string]types.AttributeValue) (schedule.Override, error) {
	doc, ok := item[attrOverride].(*types.AttributeValueMemberS)
	if !ok {
		return schedule.Override{}, fmt.Errorf("attribute %s is not a string", attrOverride)
	}
	var o schedule.Override
	if err := json.Unmarshal([]byte(doc.Value), &o); err != nil {
		return schedule.Override{}, fmt.Errorf("attribute %s: %w", attrOverride, err)
	}
	if err := checkOverride(o); err != nil {
		return schedule.Override{}, fmt.Errorf("attribute %s: %w", attrOverride, err)
	}
	return o, nil
}

// ClearOverrides removes the schedule's overrides, each on condition that it
// is still the one read, so an override a later fire set meanwhile stays
// (see schedule.OverrideStore).
func (s *DynamoDB) ClearOverrides(ctx context.Context, name string) ([]string, error) {
	if err := checkScheduleName(name); err != nil {
		return nil, fmt.Errorf("clear overrides: %w", err)
	}
	all, err := s.Overrides(ctx)
	if err != nil {
		return nil, err
	}
	cleared := []string{}
	for _, o := range all {
		if o.Schedule != name {
			continue
		}
		e := newExpr()
		key := e.name(attrOverrideKey)
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.table),
			Key:                       s.key(groupPrefix + o.Group),
			UpdateExpression:          aws.String("REMOVE " + e.name(attrOverride) + ", " + key + ", " + e.name(attrOverrideSchedule)),
			ConditionExpression:       aws.String(key + " = " + e.value(&types.AttributeValueMemberS{Value: overrideKey(o)})),
			ExpressionAttributeNames:  e.names,
			ExpressionAttributeValues: e.values,
		})
		var failed *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &failed):
			continue // replaced by a later fire meanwhile
		case err != nil:
			return cleared, fmt.Errorf("clear override of node group %q of cluster %q: %w", o.Group, s.cluster, err)
		}
		cleared = append(cleared, o.Group)
	}
	return cleared, nil
}

// SetOverride replaces the group's override unless a later one holds (see
// schedule.OverrideStore).
func (m *MemorySchedules) SetOverride(ctx context.Context, o schedule.Override) (bool, error) {
	if err := checkOverride(o); err != nil {
		return false, fmt.Errorf("set override: %w", err)
	}
	o.FiredAt = o.FiredAt.UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.overrides[o.Group]; ok && overrideKey(cur) > overrideKey(o) {
		return false, nil
	}
	if m.overrides == nil {
		m.overrides = map[string]schedule.Override{}
	}
	m.overrides[o.Group] = cloneOverride(o)
	return true, nil
}

// Overrides lists the overrides by group (see schedule.OverrideStore).
func (m *MemorySchedules) Overrides(ctx context.Context) ([]schedule.Override, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []schedule.Override{}
	for _, g := range slices.Sorted(maps.Keys(m.overrides)) {
		out = append(out, cloneOverride(m.overrides[g]))
	}
	return out, nil
}

// ClearOverrides removes the schedule's overrides (see
// schedule.OverrideStore).
func (m *MemorySchedules) ClearOverrides(ctx context.Context, name string) ([]string, error) {
	if err := checkScheduleName(name); err != nil {
		return nil, fmt.Errorf("clear overrides: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cleared := []string{}
	for _, g := range slices.Sorted(maps.Keys(m.overrides)) {
		if m.overrides[g].Schedule == name {
			delete(m.overrides, g)
			cleared = append(cleared, g)
		}
	}
	return cleared, nil
}

func cloneOverride(o schedule.Override) schedule.Override {
	for _, p := range []**int{&o.Min, &o.Max, &o.Desired} {
		if *p != nil {
			v := **p
			*p = &v
		}
	}
	return o
}
