package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
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

	// NotSurged are Deployments the surge would have grown but left alone
	// (one an HPA manages), with why.
	NotSurged []NotSurged `json:"notSurged,omitempty"`

	// What Prepare checked and decided; the later steps trust these, not
	// the state their event carries, so a hand-made step event cannot
	// redirect a drain to another machine or policy.
	ProviderID string    `json:"providerID,omitempty"`
	Policy     string    `json:"policy,omitempty"`
	Deadline   time.Time `json:"deadline,omitzero"`
	BelowMin   bool      `json:"belowMin,omitempty"`
	Force      bool      `json:"force,omitempty"`
	// WasUnschedulable: the node was cordoned before the drain began
	// (by a person); a rollback then leaves it cordoned.
	WasUnschedulable bool `json:"wasUnschedulable,omitempty"`
	// Phase is how far the drain got, recorded before the step that
	// depends on it acts.
	Phase Phase `json:"phase,omitempty"`
	// Interruption is set when the cloud, not nodetide, decided the machine
	// goes (an Auto Scaling lifecycle hook, a Spot interruption, ...).
	Interruption *Interruption `json:"interruption,omitempty"`
	// Version counts the record's writes. UpdateDrain writes only over the
	// version it was read at, so a writer holding an old copy (a step that
	// read the record before the drain function joined a lifecycle action
	// to it) cannot silently undo another's write.
	Version int64 `json:"version,omitempty"`
}

// Interruption kinds: why the cloud takes a machine.
const (
	// InterruptLifecycle: the Auto Scaling Group terminates the machine and
	// waits on its termination lifecycle hook until the drain completes it.
	InterruptLifecycle = "lifecycle"
	// InterruptSpot: EC2 reclaims a Spot machine two minutes after warning.
	InterruptSpot = "spot"
	// InterruptRebalance: EC2 says a Spot machine is at raised risk.
	InterruptRebalance = "rebalance"
	// InterruptMaintenance: AWS Health scheduled a stop, reboot or
	// retirement of the machine.
	InterruptMaintenance = "maintenance"
)

// Interruption is what the cloud said about a machine it takes.
type Interruption struct {
	Kind       string `json:"kind"`
	InstanceID string `json:"instanceId"`
	// The termination lifecycle hook holding the machine (lifecycle only).
	AutoScalingGroup string `json:"autoScalingGroup,omitempty"`
	Hook             string `json:"hook,omitempty"`
	Token            string `json:"token,omitempty"`
}

// Terminal reports whether the machine goes whatever the drain does.
func (i *Interruption) Terminal() bool {
	return i != nil && (i.Kind == InterruptLifecycle || i.Kind == InterruptSpot)
}

// RunningDrain is a node a drain holds: the NODE# mark.
type RunningDrain struct {
	Node      string
	ID        string
	NodeGroup string
}

// SurgedWorkload is a Deployment a drain grew so its pods on the node are
// replaced before they go.
type SurgedWorkload struct {
	Namespace        string   `json:"namespace"`
	Name             string   `json:"name"`
	OriginalReplicas int32    `json:"originalReplicas"`
	Pods             []string `json:"pods"`
	// Delta is what the drain adds: one replica per pod on the node. The
	// undo writes the count back only while it is still the one the surge
	// wrote, so a replica count a person sets meanwhile is kept (see Left).
	Delta int32 `json:"delta,omitempty"`
	// Grown and Restored say the delta was added and taken back. Growing /
	// GrowFrom (and Shrinking / ShrinkFrom) record the count read just
	// before the write, recorded first, so a retry after a crash or a lost
	// answer can tell from the count whether the write happened.
	Grown      bool  `json:"grown,omitempty"`
	Growing    bool  `json:"growing,omitempty"`
	GrowFrom   int32 `json:"growFrom,omitempty"`
	Shrinking  bool  `json:"shrinking,omitempty"`
	ShrinkFrom int32 `json:"shrinkFrom,omitempty"`
	Restored   bool  `json:"restored,omitempty"`
	// Left says why the surge was not taken back: the count was no longer
	// the one the drain wrote (a person, an HPA or GitOps set another),
	// and theirs wins.
	Left string `json:"left,omitempty"`
}

// NotSurged is a Deployment a drain did not surge, and why.
type NotSurged struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Reason    string `json:"reason"`
}

// DrainStore keeps the drains of a cluster: which node is being drained by
// which execution, and each drain's record.
type DrainStore interface {
	// BeginDrain marks rec.Node as drained by rec.ID and stores rec, unless
	// another drain holds the node (ErrDraining, naming it). Beginning the
	// same drain again returns the stored record unchanged.
	BeginDrain(ctx context.Context, rec DrainRecord) (DrainRecord, error)
	// UpdateDrain replaces a running drain's record if it is still at
	// rec.Version, and advances rec.Version. A drain that has ended is not
	// written (ErrDrainEnded), so a step still in flight when its drain was
	// recovered cannot bring it back; a record written since rec was read
	// is not overwritten (ErrDrainChanged).
	UpdateDrain(ctx context.Context, rec *DrainRecord) error
	GetDrain(ctx context.Context, node, id string) (DrainRecord, error)
	// EndDrain records the outcome and frees the node if id still holds it;
	// it also forgets the node's unneeded-since time and counts the drain.
	EndDrain(ctx context.Context, node, id, status, errMsg string, now time.Time) error
	// NodeDrain returns the drain holding node ("" if none) and how many
	// drains of it have ended, which names the next execution.
	NodeDrain(ctx context.Context, node string) (active string, ended int, err error)
	// RunningDrains lists every node a drain holds, read consistently.
	RunningDrains(ctx context.Context) ([]RunningDrain, error)
	// LastDrain is the node's most recently begun drain (ErrNoDrain if it
	// has none on record).
	LastDrain(ctx context.Context, node string) (DrainRecord, error)
}

var (
	// ErrDraining means another drain holds the node.
	ErrDraining = errors.New("node is already being drained")
	// ErrNoDrain means the drain record does not exist.
	ErrNoDrain = errors.New("no such drain")
	// ErrDrainEnded means the drain record exists but the drain has ended.
	ErrDrainEnded = errors.New("the drain has ended")
	// ErrDrainChanged means the drain record was written since the copy
	// being saved was read; re-read it and apply the change again.
	ErrDrainChanged = errors.New("the drain record changed since it was read")
)

const (
	drainPrefix      = "DRAIN#"
	attrDrainID      = "drainId"
	attrDrainGroup   = "drainGroup"
	attrDrains       = "drains"
	attrRecord       = "record"
	attrStatus       = "status"
	attrExpiresTT    = "expiresAt"
	attrDrainVersion = "recordVersion"
)

func drainKey(node, id string) string { return drainPrefix + node + "#" + id }

// memory implementation

type memDrains struct {
	mu      sync.Mutex
	active  map[string]string
	groups  map[string]string
	ended   map[string]int
	records map[string]DrainRecord
}

func (m *Memory) drains() *memDrains {
	m.drainOnce.Do(func() {
		m.drainState = &memDrains{active: map[string]string{}, groups: map[string]string{}, ended: map[string]int{}, records: map[string]DrainRecord{}}
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
	d.groups[rec.Node] = rec.NodeGroup
	key := drainKey(rec.Node, rec.ID)
	if stored, ok := d.records[key]; ok {
		return stored, nil
	}
	rec.Status, rec.Version = DrainRunning, 1
	d.records[key] = rec
	return rec, nil
}

// UpdateDrain implements DrainStore.
func (m *Memory) UpdateDrain(_ context.Context, rec *DrainRecord) error {
	d := m.drains()
	d.mu.Lock()
	defer d.mu.Unlock()
	key := drainKey(rec.Node, rec.ID)
	stored, ok := d.records[key]
	if !ok {
		return fmt.Errorf("update drain %s of node %s: %w", rec.ID, rec.Node, ErrNoDrain)
	}
	if stored.Status != DrainRunning {
		return fmt.Errorf("update drain %s of node %s: %w (%s)", rec.ID, rec.Node, ErrDrainEnded, stored.Status)
	}
	if next := (func() DrainRecord { n := *rec; n.Version++; return n })(); sameRecord(stored, next) {
		rec.Version = next.Version // as the DynamoDB store: this write, retried
		return nil
	}
	if stored.Version != rec.Version {
		return fmt.Errorf("update drain %s of node %s: %w (version %d, read at %d)", rec.ID, rec.Node, ErrDrainChanged, stored.Version, rec.Version)
	}
	rec.Version++
	d.records[key] = *rec
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
		rec.Version++
		d.records[key] = rec
	}
	freed := d.active[node] == id
	if freed {
		delete(d.active, node)
		delete(d.groups, node)
		d.ended[node]++
	}
	d.mu.Unlock()
	if freed { // as the DynamoDB store: only the drain that held the node forgets its time
		m.mu.Lock()
		delete(m.state.UnneededSince, node)
		m.mu.Unlock()
	}
	return nil
}

// NodeDrain implements DrainStore.
func (m *Memory) NodeDrain(_ context.Context, node string) (string, int, error) {
	d := m.drains()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active[node], d.ended[node], nil
}

// RunningDrains implements DrainStore.
func (m *Memory) RunningDrains(context.Context) ([]RunningDrain, error) {
	d := m.drains()
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]RunningDrain, 0, len(d.active))
	for node, id := range d.active {
		out = append(out, RunningDrain{Node: node, ID: id, NodeGroup: d.groups[node]})
	}
	slices.SortFunc(out, func(a, b RunningDrain) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}

// LastDrain implements DrainStore.
func (m *Memory) LastDrain(_ context.Context, node string) (DrainRecord, error) {
	d := m.drains()
	d.mu.Lock()
	defer d.mu.Unlock()
	return lastOf(node, maps.Values(d.records))
}

// lastOf picks node's most recently begun drain.
func lastOf(node string, recs iter.Seq[DrainRecord]) (DrainRecord, error) {
	var last DrainRecord
	found := false
	for r := range recs {
		if r.Node == node && (!found || r.StartedAt.After(last.StartedAt)) {
			last, found = r, true
		}
	}
	if !found {
		return DrainRecord{}, fmt.Errorf("last drain of node %s: %w", node, ErrNoDrain)
	}
	return last, nil
}

// DynamoDB implementation

// BeginDrain implements DrainStore with two conditional writes: the node's
// mark (only if free or already ours), then the record (only if absent).
func (s *DynamoDB) BeginDrain(ctx context.Context, rec DrainRecord) (DrainRecord, error) {
	e := newExpr()
	id := e.name(attrDrainID)
	idVal := e.value(&types.AttributeValueMemberS{Value: rec.ID})
	group := e.name(attrDrainGroup) + " = " + e.value(&types.AttributeValueMemberS{Value: rec.NodeGroup})
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(nodePrefix + rec.Node),
		UpdateExpression:          aws.String("SET " + id + " = " + idVal + ", " + group),
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
	rec.Status, rec.Version = DrainRunning, 1
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
	item[attrDrainVersion] = &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.Version, 10)}
	return item, nil
}

// UpdateDrain implements DrainStore with one write conditioned on the
// drain running and its record at rec.Version. A record without a version
// (written before versions were kept) counts as version 0.
func (s *DynamoDB) UpdateDrain(ctx context.Context, rec *DrainRecord) error {
	next := *rec
	next.Version++
	item, err := s.drainItem(next)
	if err != nil {
		return err
	}
	e := newExpr()
	status, version := e.name(attrStatus), e.name(attrDrainVersion)
	cond := status + " = " + e.value(&types.AttributeValueMemberS{Value: DrainRunning}) + " AND "
	if rec.Version == 0 {
		cond += "attribute_not_exists(" + version + ")"
	} else {
		cond += version + " = " + e.value(&types.AttributeValueMemberN{Value: strconv.FormatInt(rec.Version, 10)})
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return s.updateRefused(ctx, rec, next)
	}
	if err != nil {
		return fmt.Errorf("update drain %s of node %s: %w", rec.ID, rec.Node, err)
	}
	rec.Version = next.Version
	return nil
}

// updateRefused says why UpdateDrain's write was refused: the drain ended,
// or the record changed — unless what is stored is exactly next, which is
// this very write landing on an earlier try whose answer was lost.
func (s *DynamoDB) updateRefused(ctx context.Context, rec *DrainRecord, next DrainRecord) error {
	stored, err := s.GetDrain(ctx, rec.Node, rec.ID)
	if err != nil {
		return fmt.Errorf("update drain %s of node %s: %w", rec.ID, rec.Node, err)
	}
	if stored.Status != DrainRunning {
		return fmt.Errorf("update drain %s of node %s: %w (%s)", rec.ID, rec.Node, ErrDrainEnded, stored.Status)
	}
	if sameRecord(stored, next) {
		rec.Version = next.Version
		return nil
	}
	return fmt.Errorf("update drain %s of node %s: %w (version %d, read at %d)", rec.ID, rec.Node, ErrDrainChanged, stored.Version, rec.Version)
}

// sameRecord compares two records as they are stored.
func sameRecord(a, b DrainRecord) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
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
	for try := 0; err == nil && rec.Status == DrainRunning; try++ {
		rec.Status, rec.Error, rec.FinishedAt = status, errMsg, now.UTC()
		// Ended meanwhile, or this very write landed and its answer was
		// lost: either way the mark below is what is left to free.
		uerr := s.UpdateDrain(ctx, &rec)
		if uerr == nil || errors.Is(uerr, ErrDrainEnded) {
			break
		}
		if !errors.Is(uerr, ErrDrainChanged) || try == 2 {
			return uerr
		}
		rec, err = s.GetDrain(ctx, node, id) // a step wrote meanwhile: end what it wrote
	}
	if err != nil && !errors.Is(err, ErrNoDrain) {
		return err
	}
	e := newExpr()
	idName := e.name(attrDrainID)
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table),
		Key:       s.key(nodePrefix + node),
		UpdateExpression: aws.String("REMOVE " + idName + ", " + e.name(attrDrainGroup) + ", " + e.name(attrUnneededSince) +
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

// RunningDrains implements DrainStore: the NODE# items that carry a drain
// mark, read with one consistent query.
func (s *DynamoDB) RunningDrains(ctx context.Context) ([]RunningDrain, error) {
	var out []RunningDrain
	err := s.query(ctx, "running drains of", nodePrefix, func(node string, item map[string]types.AttributeValue) error {
		id, ok := item[attrDrainID].(*types.AttributeValueMemberS)
		if !ok {
			return nil
		}
		rd := RunningDrain{Node: node, ID: id.Value}
		if g, ok := item[attrDrainGroup].(*types.AttributeValueMemberS); ok {
			rd.NodeGroup = g.Value
		}
		out = append(out, rd)
		return nil
	})
	return out, err
}

// LastDrain implements DrainStore: one query over the node's DRAIN# items.
func (s *DynamoDB) LastDrain(ctx context.Context, node string) (DrainRecord, error) {
	var recs []DrainRecord
	err := s.query(ctx, "drains of node "+node+" in", drainPrefix+node+"#", func(_ string, item map[string]types.AttributeValue) error {
		body, ok := item[attrRecord].(*types.AttributeValueMemberS)
		if !ok {
			return nil
		}
		var rec DrainRecord
		if err := json.Unmarshal([]byte(body.Value), &rec); err != nil {
			return fmt.Errorf("decode drain record: %w", err)
		}
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		return DrainRecord{}, err
	}
	return lastOf(node, slices.Values(recs))
}
