package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Drain statuses.
const (
	DrainRunning    = "running"
	DrainSucceeded  = "succeeded"
	DrainRolledBack = "rolledBack"
)

// drainRetention is how long finished drain records stay (DynamoDB TTL; the
// code never relies on the expiry happening).
const drainRetention = 30 * 24 * time.Hour

// DrainRecord is the durable record of one drain (DRAIN#<node>#<id>). It
// holds what a rollback needs even if the execution's own state is lost: the
// replica counts of surged workloads, written before they are changed.
type DrainRecord struct {
	Node       string           `json:"node"`
	ID         string           `json:"id"`
	NodeGroup  string           `json:"nodeGroup"`
	Status     string           `json:"status"`
	Surged     []SurgedWorkload `json:"surged,omitempty"`
	StartedAt  time.Time        `json:"startedAt"`
	FinishedAt time.Time        `json:"finishedAt,omitzero"`
	Error      string           `json:"error,omitempty"`
}

// SurgedWorkload is a Deployment a drain grew so its pods on the node are
// replaced before they go.
type SurgedWorkload struct {
	Namespace        string   `json:"namespace"`
	Name             string   `json:"name"`
	OriginalReplicas int32    `json:"originalReplicas"`
	Pods             []string `json:"pods"`
	Restored         bool     `json:"restored,omitempty"`
}

// DrainStore keeps the drains of a cluster: which node is being drained by
// which execution, and each drain's record.
type DrainStore interface {
	// BeginDrain marks rec.Node as drained by rec.ID and stores rec, unless
	// another drain holds the node (ErrDraining, naming it). Beginning the
	// same drain again returns the stored record unchanged.
	BeginDrain(ctx context.Context, rec DrainRecord) (DrainRecord, error)
	// UpdateDrain replaces a running drain's record.
	UpdateDrain(ctx context.Context, rec DrainRecord) error
	GetDrain(ctx context.Context, node, id string) (DrainRecord, error)
	// EndDrain records the outcome and frees the node if id still holds it;
	// it also forgets the node's unneeded-since time and counts the drain.
	EndDrain(ctx context.Context, node, id, status, errMsg string, now time.Time) error
	// NodeDrain returns the drain holding node ("" if none) and how many
	// drains of it have ended, which names the next execution.
	NodeDrain(ctx context.Context, node string) (active string, ended int, err error)
}

var (
	// ErrDraining means another drain holds the node.
	ErrDraining = errors.New("node is already being drained")
	// ErrNoDrain means the drain record does not exist.
	ErrNoDrain = errors.New("no such drain")
)

const (
	drainPrefix   = "DRAIN#"
	attrDrainID   = "drainId"
	attrDrains    = "drains"
	attrRecord    = "record"
	attrStatus    = "status"
	attrExpiresTT = "expiresAt"
)

func drainKey(node, id string) string { return drainPrefix + node + "#" + id }

// memory implementation

type memDrains struct {
	mu      sync.Mutex
	active  map[string]string
	ended   map[string]int
	records map[string]DrainRecord
}

func (m *Memory) drains() *memDrains {
	m.drainOnce.Do(func() {
		m.drainState = &memDrains{active: map[string]string{}, ended: map[string]int{}, records: map[string]DrainRecord{}}
	})
	return m.drainState
}

// BeginDrain implements DrainStore.
func (m *Memory) BeginDrain(_ context.Context, rec DrainRecord) (DrainRecord, error) {
	d := m.drains()
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur := d.active[rec.Node]; cur != "" && cur != rec.ID {
		return DrainRecord{}, fmt.Errorf("node %s: %w by %s", rec.Node, ErrDraining, cur)
	}
	d.active[rec.Node] = rec.ID
	key := drainKey(rec.Node, rec.ID)
	if stored, ok := d.records[key]; ok {
		return stored, nil
	}
	rec.Status = DrainRunning
	d.records[key] = rec
	return rec, nil
}

// UpdateDrain implements DrainStore.
func (m *Memory) UpdateDrain(_ context.Context, rec DrainRecord) error {
	d := m.drains()
	d.mu.Lock()
	defer d.mu.Unlock()
	key := drainKey(rec.Node, rec.ID)
	if _, ok := d.records[key]; !ok {
		return fmt.Errorf("update drain %s of node %s: %w", rec.ID, rec.Node, ErrNoDrain)
	}
	d.records[key] = rec
	return nil
}

// GetDrain implements DrainStore.
func (m *Memory) GetDrain(_ context.Context, node, id string) (DrainRecord, error) {
	d := m.drains()
	d.mu.Lock()
	defer d.mu.Unlock()
	rec, ok := d.records[drainKey(node, id)]
	if !ok {
		return DrainRecord{}, fmt.Errorf("drain %s of node %s: %w", id, node, ErrNoDrain)
	}
	return rec, nil
}

// EndDrain implements DrainStore.
func (m *Memory) EndDrain(_ context.Context, node, id, status, errMsg string, now time.Time) error {
	d := m.drains()
	d.mu.Lock()
	key := drainKey(node, id)
	if rec, ok := d.records[key]; ok && rec.Status == DrainRunning {
		rec.Status, rec.Error, rec.FinishedAt = status, errMsg, now.UTC()
		d.records[key] = rec
	}
	if d.active[node] == id {
		delete(d.active, node)
		d.ended[node]++
	}
	d.mu.Unlock()
	m.mu.Lock()
	delete(m.state.UnneededSince, node)
	m.mu.Unlock()
	return nil
}

// NodeDrain implements DrainStore.
func (m *Memory) NodeDrain(_ context.Context, node string) (string, int, error) {
	d := m.drains()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active[node], d.ended[node], nil
}

// DynamoDB implementation

// BeginDrain implements DrainStore with two conditional writes: the node's
// mark (only if free or already ours), then the record (only if absent).
func (s *DynamoDB) BeginDrain(ctx context.Context, rec DrainRecord) (DrainRecord, error) {
	e := newExpr()
	id := e.name(attrDrainID)
	idVal := e.value(&types.AttributeValueMemberS{Value: rec.ID})
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(nodePrefix + rec.Node),
		UpdateExpression:          aws.String("SET " + id + " = " + idVal),
		ConditionExpression:       aws.String("attribute_not_exists(" + id + ") OR " + id + " = " + idVal),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		cur, _, gerr := s.NodeDrain(ctx, rec.Node)
		if gerr != nil {
			return DrainRecord{}, fmt.Errorf("node %s: %w (and reading the holder: %v)", rec.Node, ErrDraining, gerr)
		}
		return DrainRecord{}, fmt.Errorf("node %s: %w by %s", rec.Node, ErrDraining, cur)
	}
	if err != nil {
		return DrainRecord{}, fmt.Errorf("begin drain %s of node %s: %w", rec.ID, rec.Node, err)
	}
	rec.Status = DrainRunning
	item, err := s.drainItem(rec)
	if err != nil {
		return DrainRecord{}, err
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if errors.As(err, &failed) {
		return s.GetDrain(ctx, rec.Node, rec.ID) // begun before: keep what it recorded
	}
	if err != nil {
		return DrainRecord{}, fmt.Errorf("begin drain %s of node %s: put record: %w", rec.ID, rec.Node, err)
	}
	return rec, nil
}

func (s *DynamoDB) drainItem(rec DrainRecord) (map[string]types.AttributeValue, error) {
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("drain %s of node %s: encode: %w", rec.ID, rec.Node, err)
	}
	item := s.key(drainKey(rec.Node, rec.ID))
	item[attrRecord] = &types.AttributeValueMemberS{Value: string(body)}
	item[attrStatus] = &types.AttributeValueMemberS{Value: rec.Status}
	item[attrExpiresTT] = &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.StartedAt.Add(drainRetention).Unix(), 10)}
	return item, nil
}

// UpdateDrain implements DrainStore.
func (s *DynamoDB) UpdateDrain(ctx context.Context, rec DrainRecord) error {
	item, err := s.drainItem(rec)
	if err != nil {
		return err
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                item,
		ConditionExpression: aws.String("attribute_exists(pk)"),
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return fmt.Errorf("update drain %s of node %s: %w", rec.ID, rec.Node, ErrNoDrain)
	}
	if err != nil {
		return fmt.Errorf("update drain %s of node %s: %w", rec.ID, rec.Node, err)
	}
	return nil
}

// GetDrain implements DrainStore.
func (s *DynamoDB) GetDrain(ctx context.Context, node, id string) (DrainRecord, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: s.key(drainKey(node, id)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return DrainRecord{}, fmt.Errorf("drain %s of node %s: %w", id, node, err)
	}
	body, ok := out.Item[attrRecord].(*types.AttributeValueMemberS)
	if !ok {
		return DrainRecord{}, fmt.Errorf("drain %s of node %s: %w", id, node, ErrNoDrain)
	}
	var rec DrainRecord
	if err := json.Unmarshal([]byte(body.Value), &rec); err != nil {
		return DrainRecord{}, fmt.Errorf("drain %s of node %s: decode: %w", id, node, err)
	}
	return rec, nil
}

// EndDrain implements DrainStore.
func (s *DynamoDB) EndDrain(ctx context.Context, node, id, status, errMsg string, now time.Time) error {
	rec, err := s.GetDrain(ctx, node, id)
	if err == nil && rec.Status == DrainRunning {
		rec.Status, rec.Error, rec.FinishedAt = status, errMsg, now.UTC()
		if err := s.UpdateDrain(ctx, rec); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, ErrNoDrain) {
		return err
	}
	e := newExpr()
	idName := e.name(attrDrainID)
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table),
		Key:       s.key(nodePrefix + node),
		UpdateExpression: aws.String("REMOVE " + idName + ", " + e.name(attrUnneededSince) +
			" ADD " + e.name(attrDrains) + " " + e.value(&types.AttributeValueMemberN{Value: "1"})),
		ConditionExpression:       aws.String(idName + " = " + e.value(&types.AttributeValueMemberS{Value: id})),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return nil // ended before (a retried step), or never held the node
	}
	if err != nil {
		return fmt.Errorf("end drain %s of node %s: %w", id, node, err)
	}
	return nil
}

// NodeDrain implements DrainStore.
func (s *DynamoDB) NodeDrain(ctx context.Context, node string) (string, int, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: s.key(nodePrefix + node), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", 0, fmt.Errorf("drain of node %s: %w", node, err)
	}
	active := ""
	if v, ok := out.Item[attrDrainID].(*types.AttributeValueMemberS); ok {
		active = v.Value
	}
	ended := 0
	if v, ok := out.Item[attrDrains].(*types.AttributeValueMemberN); ok {
		ended, _ = strconv.Atoi(v.Value)
	}
	return active, ended, nil
}
