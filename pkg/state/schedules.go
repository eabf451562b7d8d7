package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodetide/nodetide/pkg/schedule"
)

// ScheduleStore keeps a cluster's schedules (SCHEDULE#<name> items) and
// which of their fire times have been dealt with. ClaimFire is what makes a
// fire time apply once when ticks overlap or are delivered twice: every
// tick may decide to fire it, only one wins the claim.
type ScheduleStore interface {
	// PutSchedule stores s after validating it (without knowing the
	// configured node groups). expectedVersion 0 creates it, at version
	// 1, and fails with ErrVersionConflict if it exists; otherwise the
	// stored version must be expectedVersion (ErrVersionConflict if not,
	// also wrapping ErrScheduleNotFound if there is none) and becomes
	// expectedVersion+1. CreatedAt is now on creation; UpdatedAt is now.
	// Replacing a definition keeps LastFiredAt and the skip record.
	PutSchedule(ctx context.Context, s schedule.Schedule, expectedVersion int64, now time.Time) (schedule.Record, error)
	// GetSchedule returns one schedule, or ErrScheduleNotFound.
	GetSchedule(ctx context.Context, name string) (schedule.Record, error)
	// ListSchedules returns every schedule of the cluster, by name.
	ListSchedules(ctx context.Context) ([]schedule.Record, error)
	// DeleteSchedule removes a schedule, or fails with ErrScheduleNotFound.
	DeleteSchedule(ctx context.Context, name string) error
	// ClaimFire moves LastFiredAt to fireAt if it is unset or earlier and
	// reports whether it did: false means another tick has already dealt
	// with this fire time (or a later one), and the caller must not apply
	// the schedule. The version is left alone.
	ClaimFire(ctx context.Context, name string, fireAt time.Time) (bool, error)
	// RecordSkip is ClaimFire for a fire time that is too late to apply:
	// it also sets LastSkippedAt to fireAt and LastSkipReason to reason,
	// so the miss shows and the fire time is not tried again.
	RecordSkip(ctx context.Context, name string, fireAt time.Time, reason string) (bool, error)
	// RecordResult sets the schedule's LastResult, or fails with
	// ErrScheduleNotFound. The version is left alone.
	RecordResult(ctx context.Context, name string, res schedule.Result) error
	// The node-group overrides fired schedules set (on GROUP# items).
	schedule.OverrideStore
}

var (
	// ErrVersionConflict means a schedule's stored version is not the one
	// the write expected; the wrapping error names both.
	ErrVersionConflict = errors.New("schedule version conflict")
	// ErrScheduleNotFound means the cluster has no schedule of that name.
	ErrScheduleNotFound = errors.New("no such schedule")
)

var (
	_ ScheduleStore = (*DynamoDB)(nil)
	_ ScheduleStore = (*MemorySchedules)(nil)
)

const schedulePrefix = "SCHEDULE#"

// Attributes of SCHEDULE# items; version is shared with the other items.
const (
	schedAttrDefinition  = "definition" // the document as JSON, exactly as schedule.Parse reads it
	schedAttrCreatedAt   = "createdAt"
	schedAttrUpdatedAt   = "updatedAt"
	schedAttrLastFiredAt = "lastFiredAt"
	schedAttrSkippedAt   = "lastSkippedAt"
	schedAttrSkipReason  = "lastSkipReason"
	schedAttrLastResult  = "lastResult" // JSON
)

// schedTimeFormat is fixed-width UTC with nanoseconds, so that DynamoDB's
// string comparison in ClaimFire's condition orders times correctly
// (RFC 3339 with trimmed fractions does not: "…:00Z" sorts after
// "…:00.5Z").
const schedTimeFormat = "2006-01-02T15:04:05.000000000Z"

func formatSchedTime(t time.Time) string { return t.UTC().Format(schedTimeFormat) }

// checkSchedTime keeps times within the years the fixed-width format can
// order.
func checkSchedTime(what string, t time.Time) error {
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%s %s is outside the years 1-9999", what, t.UTC().Format(time.RFC3339))
	}
	return nil
}

// encodeDefinition validates s and returns the JSON stored for it.
func encodeDefinition(s schedule.Schedule) ([]byte, error) {
	if err := schedule.Validate(s, nil); err != nil {
		return nil, err
	}
	def, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode definition: %w", err)
	}
	return def, nil
}

func checkExpectedVersion(v int64) error {
	if v < 0 {
		return fmt.Errorf("expected version %d is negative", v)
	}
	return nil
}

func checkScheduleName(name string) error {
	if name == "" {
		return errors.New("schedule name is empty")
	}
	return nil
}

// versionConflict explains a refused PutSchedule; current is nil when the
// schedule does not exist.
func versionConflict(cluster, name string, expected int64, current *int64) error {
	switch {
	case current == nil:
		return fmt.Errorf("put schedule %q of cluster %q: %w: expected version %d, but %w", name, cluster, ErrVersionConflict, expected, ErrScheduleNotFound)
	case expected == 0:
		return fmt.Errorf("put schedule %q of cluster %q: %w: it already exists, at version %d", name, cluster, ErrVersionConflict, *current)
	default:
		return fmt.Errorf("put schedule %q of cluster %q: %w: expected version %d, stored version is %d", name, cluster, ErrVersionConflict, expected, *current)
	}
}

func scheduleNotFound(op, cluster, name string) error {
	return fmt.Errorf("%s schedule %q of cluster %q: %w", op, name, cluster, ErrScheduleNotFound)
}

// MemorySchedules is a ScheduleStore held in this process, for local runs
// and tests. It keeps definitions as the same JSON the DynamoDB store
// writes and applies the same conditions, so code tested against it
// behaves the same in AWS. It is safe for concurrent use.
type MemorySchedules struct {
	cluster string

	mu        sync.Mutex
	items     map[string]memSchedule
	overrides map[string]schedule.Override // by group
}

// memSchedule is one stored schedule: a Record whose Schedule is kept
// encoded.
type memSchedule struct {
	definition []byte
	rec        schedule.Record // Schedule left zero
}

// NewMemorySchedules returns an empty schedule store for one cluster.
func NewMemorySchedules(cluster string) *MemorySchedules {
	return &MemorySchedules{cluster: cluster, items: map[string]memSchedule{}}
}

func (m *MemorySchedules) record(item memSchedule) (schedule.Record, error) {
	s, err := schedule.Parse(item.definition)
	if err != nil {
		return schedule.Record{}, err
	}
	rec := item.rec
	rec.Schedule = s
	if item.rec.LastResult != nil {
		// A copy: callers must not reach the stored result.
		doc, err := json.Marshal(item.rec.LastResult)
		if err != nil {
			return schedule.Record{}, err
		}
		rec.LastResult = &schedule.Result{}
		if err := json.Unmarshal(doc, rec.LastResult); err != nil {
			return schedule.Record{}, err
		}
	}
	return rec, nil
}

// PutSchedule creates or replaces a schedule (see ScheduleStore).
func (m *MemorySchedules) PutSchedule(ctx context.Context, s schedule.Schedule, expectedVersion int64, now time.Time) (schedule.Record, error) {
	if err := checkExpectedVersion(expectedVersion); err != nil {
		return schedule.Record{}, fmt.Errorf("put schedule %q: %w", s.Name, err)
	}
	def, err := encodeDefinition(s)
	if err != nil {
		return schedule.Record{}, fmt.Errorf("put schedule %q: %w", s.Name, err)
	}
	if err := checkSchedTime("now", now); err != nil {
		return schedule.Record{}, fmt.Errorf("put schedule %q: %w", s.Name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	item, exists := m.items[s.Name]
	switch {
	case !exists && expectedVersion != 0:
		return schedule.Record{}, versionConflict(m.cluster, s.Name, expectedVersion, nil)
	case exists && item.rec.Version != expectedVersion:
		return schedule.Record{}, versionConflict(m.cluster, s.Name, expectedVersion, &item.rec.Version)
	case !exists:
		item.rec.CreatedAt = now.UTC()
	}
	item.definition = def
	item.rec.Version = expectedVersion + 1
	item.rec.UpdatedAt = now.UTC()
	m.items[s.Name] = item
	return m.record(item)
}

// GetSchedule returns one schedule (see ScheduleStore).
func (m *MemorySchedules) GetSchedule(ctx context.Context, name string) (schedule.Record, error) {
	if err := checkScheduleName(name); err != nil {
		return schedule.Record{}, fmt.Errorf("get schedule: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	item, ok := m.items[name]
	if !ok {
		return schedule.Record{}, scheduleNotFound("get", m.cluster, name)
	}
	rec, err := m.record(item)
	if err != nil {
		return schedule.Record{}, fmt.Errorf("get schedule %q of cluster %q: %w", name, m.cluster, err)
	}
	return rec, nil
}

// ListSchedules returns every schedule, by name (see ScheduleStore).
func (m *MemorySchedules) ListSchedules(ctx context.Context) ([]schedule.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []schedule.Record{} // an empty list, not null, in JSON
	for _, name := range slices.Sorted(maps.Keys(m.items)) {
		rec, err := m.record(m.items[name])
		if err != nil {
			return nil, fmt.Errorf("list schedules of cluster %q: schedule %q: %w", m.cluster, name, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// DeleteSchedule removes a schedule (see ScheduleStore).
func (m *MemorySchedules) DeleteSchedule(ctx context.Context, name string) error {
	if err := checkScheduleName(name); err != nil {
		return fmt.Errorf("delete schedule: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.items[name]; !ok {
		return scheduleNotFound("delete", m.cluster, name)
	}
	delete(m.items, name)
	return nil
}

// ClaimFire takes a fire time (see ScheduleStore).
func (m *MemorySchedules) ClaimFire(ctx context.Context, name string, fireAt time.Time) (bool, error) {
	return m.advance("claim fire of", name, fireAt, nil)
}

// RecordSkip takes a fire time without applying it (see ScheduleStore).
func (m *MemorySchedules) RecordSkip(ctx context.Context, name string, fireAt time.Time, reason string) (bool, error) {
	return m.advance("record skip of", name, fireAt, &reason)
}

// advance moves LastFiredAt forward to fireAt, and records a skip when
// reason is not nil.
func (m *MemorySchedules) advance(op, name string, fireAt time.Time, reason *string) (bool, error) {
	if err := checkScheduleName(name); err != nil {
		return false, fmt.Errorf("%s schedule: %w", op, err)
	}
	if err := checkSchedTime("fire time", fireAt); err != nil {
		return false, fmt.Errorf("%s schedule %q: %w", op, name, err)
	}
	fireAt = fireAt.UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	item, ok := m.items[name]
	if !ok {
		return false, scheduleNotFound(op, m.cluster, name)
	}
	if !item.rec.LastFiredAt.IsZero() && !item.rec.LastFiredAt.Before(fireAt) {
		return false, nil
	}
	item.rec.LastFiredAt = fireAt
	if reason != nil {
		item.rec.LastSkippedAt, item.rec.LastSkipReason = fireAt, *reason
	}
	m.items[name] = item
	return true, nil
}

// PutSchedule writes the SCHEDULE# item with one conditional UpdateItem,
// which leaves the fire record (lastFiredAt, skip) of an existing item as
// it is (see ScheduleStore).
func (s *DynamoDB) PutSchedule(ctx context.Context, sch schedule.Schedule, expectedVersion int64, now time.Time) (schedule.Record, error) {
	if err := checkExpectedVersion(expectedVersion); err != nil {
		return schedule.Record{}, fmt.Errorf("put schedule %q: %w", sch.Name, err)
	}
	def, err := encodeDefinition(sch)
	if err != nil {
		return schedule.Record{}, fmt.Errorf("put schedule %q: %w", sch.Name, err)
	}
	if err := checkSchedTime("now", now); err != nil {
		return schedule.Record{}, fmt.Errorf("put schedule %q: %w", sch.Name, err)
	}
	e := newExpr()
	sets := []string{
		e.name(schedAttrDefinition) + " = " + e.value(&types.AttributeValueMemberS{Value: string(def)}),
		e.name(attrVersion) + " = " + e.value(numberAttr(expectedVersion+1)),
		e.name(schedAttrUpdatedAt) + " = " + e.value(&types.AttributeValueMemberS{Value: formatSchedTime(now)}),
	}
	var cond string
	if expectedVersion == 0 {
		sets = append(sets, e.name(schedAttrCreatedAt)+" = "+e.value(&types.AttributeValueMemberS{Value: formatSchedTime(now)}))
		cond = "attribute_not_exists(pk)"
	} else {
		cond = e.name(attrVersion) + " = " + e.value(numberAttr(expectedVersion))
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(schedulePrefix + sch.Name),
		UpdateExpression:          aws.String("SET " + strings.Join(sets, ", ")),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return schedule.Record{}, s.versionConflict(ctx, sch.Name, expectedVersion)
	case err != nil:
		return schedule.Record{}, fmt.Errorf("put schedule %q of cluster %q: %w", sch.Name, s.cluster, err)
	}
	rec, err := decodeScheduleItem(out.Attributes)
	if err != nil {
		return schedule.Record{}, fmt.Errorf("put schedule %q of cluster %q: stored item: %w", sch.Name, s.cluster, err)
	}
	return rec, nil
}

// versionConflict reads the stored version for PutSchedule's error. The
// item may have changed again since the refused write; the message then
// shows the newer version, which is what a retry needs anyway.
func (s *DynamoDB) versionConflict(ctx context.Context, name string, expected int64) error {
	item, err := s.getScheduleItem(ctx, name)
	if err != nil {
		return fmt.Errorf("put schedule %q of cluster %q: %w (reading the stored version failed: %w)", name, s.cluster, ErrVersionConflict, err)
	}
	if item == nil {
		return versionConflict(s.cluster, name, expected, nil)
	}
	v, err := numberAttrValue(item, attrVersion)
	if err != nil {
		return fmt.Errorf("put schedule %q of cluster %q: %w (stored item: %w)", name, s.cluster, ErrVersionConflict, err)
	}
	return versionConflict(s.cluster, name, expected, &v)
}

func (s *DynamoDB) getScheduleItem(ctx context.Context, name string) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.key(schedulePrefix + name),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	return out.Item, nil // nil when there is none
}

// GetSchedule reads one SCHEDULE# item, strongly consistent (see
// ScheduleStore).
func (s *DynamoDB) GetSchedule(ctx context.Context, name string) (schedule.Record, error) {
	if err := checkScheduleName(name); err != nil {
		return schedule.Record{}, fmt.Errorf("get schedule: %w", err)
	}
	item, err := s.getScheduleItem(ctx, name)
	if err != nil {
		return schedule.Record{}, fmt.Errorf("get schedule %q of cluster %q: %w", name, s.cluster, err)
	}
	if item == nil {
		return schedule.Record{}, scheduleNotFound("get", s.cluster, name)
	}
	rec, err := decodeScheduleItem(item)
	if err != nil {
		return schedule.Record{}, fmt.Errorf("get schedule %q of cluster %q: %w", name, s.cluster, err)
	}
	return rec, nil
}

// ListSchedules queries the cluster's SCHEDULE# items, strongly consistent
// so a tick sees the claims of the ticks before it (see ScheduleStore).
func (s *DynamoDB) ListSchedules(ctx context.Context) ([]schedule.Record, error) {
	out := []schedule.Record{} // an empty list, not null, in JSON
	err := s.query(ctx, "list schedules of", schedulePrefix, func(_ string, item map[string]types.AttributeValue) error {
		rec, err := decodeScheduleItem(item)
		if err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteSchedule deletes the SCHEDULE# item if there is one (see
// ScheduleStore).
func (s *DynamoDB) DeleteSchedule(ctx context.Context, name string) error {
	if err := checkScheduleName(name); err != nil {
		return fmt.Errorf("delete schedule: %w", err)
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:           aws.String(s.table),
		Key:                 s.key(schedulePrefix + name),
		ConditionExpression: aws.String("attribute_exists(pk)"),
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return scheduleNotFound("delete", s.cluster, name)
	case err != nil:
		return fmt.Errorf("delete schedule %q of cluster %q: %w", name, s.cluster, err)
	}
	return nil
}

// ClaimFire is one conditional UpdateItem of lastFiredAt (see
// ScheduleStore).
func (s *DynamoDB) ClaimFire(ctx context.Context, name string, fireAt time.Time) (bool, error) {
	return s.advanceFire(ctx, "claim fire of", name, fireAt, nil)
}

// RecordSkip is ClaimFire that also writes the skip (see ScheduleStore).
func (s *DynamoDB) RecordSkip(ctx context.Context, name string, fireAt time.Time, reason string) (bool, error) {
	return s.advanceFire(ctx, "record skip of", name, fireAt, &reason)
}

func (s *DynamoDB) advanceFire(ctx context.Context, op, name string, fireAt time.Time, reason *string) (bool, error) {
	if err := checkScheduleName(name); err != nil {
		return false, fmt.Errorf("%s schedule: %w", op, err)
	}
	if err := checkSchedTime("fire time", fireAt); err != nil {
		return false, fmt.Errorf("%s schedule %q: %w", op, name, err)
	}
	e := newExpr()
	last := e.name(schedAttrLastFiredAt)
	at := e.value(&types.AttributeValueMemberS{Value: formatSchedTime(fireAt)})
	sets := []string{last + " = " + at}
	if reason != nil {
		sets = append(sets,
			e.name(schedAttrSkippedAt)+" = "+at,
			e.name(schedAttrSkipReason)+" = "+e.value(&types.AttributeValueMemberS{Value: *reason}))
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(schedulePrefix + name),
		UpdateExpression:          aws.String("SET " + strings.Join(sets, ", ")),
		ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_not_exists(" + last + ") OR " + last + " < " + at + ")"),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case !errors.As(err, &failed):
		return false, fmt.Errorf("%s schedule %q of cluster %q: %w", op, name, s.cluster, err)
	}
	// Refused: claimed already, or no such schedule. Only a read tells
	// which, and only the second needs saying.
	item, err := s.getScheduleItem(ctx, name)
	switch {
	case err != nil:
		return false, fmt.Errorf("%s schedule %q of cluster %q: refused, and reading why failed: %w", op, name, s.cluster, err)
	case item == nil:
		return false, scheduleNotFound(op, s.cluster, name)
	}
	return false, nil
}

// decodeScheduleItem reads a SCHEDULE# item into a Record.
func decodeScheduleItem(item map[string]types.AttributeValue) (schedule.Record, error) {
	def, ok := item[schedAttrDefinition].(*types.AttributeValueMemberS)
	if !ok {
		return schedule.Record{}, fmt.Errorf("attribute %s is missing or not a string", schedAttrDefinition)
	}
	sch, err := schedule.Parse([]byte(def.Value))
	if err != nil {
		return schedule.Record{}, fmt.Errorf("attribute %s: %w", schedAttrDefinition, err)
	}
	rec := schedule.Record{Schedule: sch}
	if rec.Version, err = numberAttrValue(item, attrVersion); err != nil {
		return schedule.Record{}, err
	}
	for attr, dst := range map[string]*time.Time{
		schedAttrCreatedAt:   &rec.CreatedAt,
		schedAttrUpdatedAt:   &rec.UpdatedAt,
		schedAttrLastFiredAt: &rec.LastFiredAt,
		schedAttrSkippedAt:   &rec.LastSkippedAt,
	} {
		t, present, err := timeAttr(item, attr)
		if err != nil {
			return schedule.Record{}, err
		}
		if present {
			*dst = t
		}
	}
	if r, ok := item[schedAttrSkipReason].(*types.AttributeValueMemberS); ok {
		rec.LastSkipReason = r.Value
	}
	if r, ok := item[schedAttrLastResult].(*types.AttributeValueMemberS); ok {
		var res schedule.Result
		if err := json.Unmarshal([]byte(r.Value), &res); err != nil {
			return schedule.Record{}, fmt.Errorf("attribute %s: %w", schedAttrLastResult, err)
		}
		rec.LastResult = &res
	}
	return rec, nil
}

func numberAttr(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func numberAttrValue(item map[string]types.AttributeValue, attr string) (int64, error) {
	n, ok := item[attr].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s is missing or not a number", attr)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", attr, err)
	}
	return v, nil
}

// RecordResult sets lastResult with one conditional UpdateItem (see
// ScheduleStore).
func (s *DynamoDB) RecordResult(ctx context.Context, name string, res schedule.Result) error {
	if err := checkScheduleName(name); err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	doc, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("record result of schedule %q: %w", name, err)
	}
	e := newExpr()
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(schedulePrefix + name),
		UpdateExpression:          aws.String("SET " + e.name(schedAttrLastResult) + " = " + e.value(&types.AttributeValueMemberS{Value: string(doc)})),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return scheduleNotFound("record result of", s.cluster, name)
	case err != nil:
		return fmt.Errorf("record result of schedule %q of cluster %q: %w", name, s.cluster, err)
	}
	return nil
}

// RecordResult sets the schedule's LastResult (see ScheduleStore).
func (m *MemorySchedules) RecordResult(ctx context.Context, name string, res schedule.Result) error {
	if err := checkScheduleName(name); err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	// Through JSON, as the DynamoDB store keeps it, so nothing is shared
	// with the caller.
	doc, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("record result of schedule %q: %w", name, err)
	}
	var stored schedule.Result
	if err := json.Unmarshal(doc, &stored); err != nil {
		return fmt.Errorf("record result of schedule %q: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	item, ok := m.items[name]
	if !ok {
		return scheduleNotFound("record result of", m.cluster, name)
	}
	item.rec.LastResult = &stored
	m.items[name] = item
	return nil
}
