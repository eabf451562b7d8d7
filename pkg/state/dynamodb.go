package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// DynamoDBAPI is the part of the DynamoDB client this package calls;
// *dynamodb.Client satisfies it.
type DynamoDBAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// DynamoDB is the Store of one cluster in a table that may hold many.
type DynamoDB struct {
	client  DynamoDBAPI
	table   string
	cluster string
}

var _ Store = (*DynamoDB)(nil)

// NewDynamoDB returns the store of cluster in table.
func NewDynamoDB(client DynamoDBAPI, table, cluster string) *DynamoDB {
	return &DynamoDB{client: client, table: table, cluster: cluster}
}

// timeFormat is how times are stored: UTC RFC 3339 with nanoseconds, so a
// loaded time formats back to the same string and the equality conditions
// SaveState writes compare like time.Equal.
const timeFormat = time.RFC3339Nano

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func (s *DynamoDB) key(sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: clusterKey(s.cluster)},
		"sk": &types.AttributeValueMemberS{Value: sk},
	}
}

// LoadState reads the cluster's GROUP#, NODE# and REPLACE# items with strongly
// consistent queries, so a run sees what the previous run wrote.
func (s *DynamoDB) LoadState(ctx context.Context) (snapshot.State, error) {
	st := emptyState()
	err := s.query(ctx, "load state of", groupPrefix, func(group string, item map[string]types.AttributeValue) error {
		for attr, m := range map[string]map[string]time.Time{
			attrLastScaleUp:  st.LastScaleUp,
			attrBackoffUntil: st.BackoffUntil,
		} {
			if t, ok, err := timeAttr(item, attr); err != nil {
				return err
			} else if ok {
				m[group] = t
			}
		}
		return nil
	})
	if err != nil {
		return snapshot.State{}, err
	}
	err = s.query(ctx, "load state of", nodePrefix, func(node string, item map[string]types.AttributeValue) error {
		t, ok, err := timeAttr(item, attrUnneededSince)
		if ok {
			st.UnneededSince[node] = t
		}
		return err
	})
	if err != nil {
		return snapshot.State{}, err
	}
	if err := s.loadReplacing(ctx, &st); err != nil {
		return snapshot.State{}, err
	}
	return st, nil
}

// query calls fn with the name (sort key less prefix) and attributes of each
// of the cluster's items whose sort key starts with prefix, reading strongly
// consistent. op starts its errors ("load state of").
func (s *DynamoDB) query(ctx context.Context, op, prefix string, fn func(name string, item map[string]types.AttributeValue) error) error {
	pages := dynamodb.NewQueryPaginator(s.client, &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":     &types.AttributeValueMemberS{Value: clusterKey(s.cluster)},
			":prefix": &types.AttributeValueMemberS{Value: prefix},
		},
		ConsistentRead: aws.Bool(true),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			if _, missing := errors.AsType[*types.ResourceNotFoundException](err); missing {
				return fmt.Errorf("%s cluster %q: table %q: %w", op, s.cluster, s.table, ErrNoTable)
			}
			return fmt.Errorf("%s cluster %q: query %s items of table %q: %w", op, s.cluster, prefix, s.table, err)
		}
		for _, item := range page.Items {
			sk, _ := item["sk"].(*types.AttributeValueMemberS)
			if sk == nil {
				return fmt.Errorf("%s cluster %q: table %q: item without a string sk", op, s.cluster, s.table)
			}
			if err := fn(strings.TrimPrefix(sk.Value, prefix), item); err != nil {
				return fmt.Errorf("%s cluster %q: item %s: %w", op, s.cluster, sk.Value, err)
			}
		}
	}
	return nil
}

// timeAttr reads a time stored as a string attribute; ok is false when the
// attribute is absent.
func timeAttr(item map[string]types.AttributeValue, attr string) (time.Time, bool, error) {
	v, present := item[attr]
	if !present {
		return time.Time{}, false, nil
	}
	str, isString := v.(*types.AttributeValueMemberS)
	if !isString {
		return time.Time{}, false, fmt.Errorf("attribute %s is %T, want a string", attr, v)
	}
	t, err := time.Parse(timeFormat, str.Value)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("attribute %s: %w", attr, err)
	}
	return t.UTC(), true, nil
}

// SaveState writes one conditional UpdateItem (or DeleteItem, for a node no
// longer unneeded) per changed item; unchanged items get no request.
func (s *DynamoDB) SaveState(ctx context.Context, prev, next snapshot.State) error {
	// Checked before anything is written: an invalid replacement changes
	// nothing.
	replacing, err := diffReplacing(prev, next)
	if err != nil {
		return fmt.Errorf("save state of cluster %q: %w", s.cluster, err)
	}
	var conflicts []string
	// written files an item's failed condition as a conflict and stops at
	// any other error.
	written := func(sk string, err error) error {
		var failed *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &failed):
			conflicts = append(conflicts, sk)
		case err != nil:
			return fmt.Errorf("save state of cluster %q: %w", s.cluster, err)
		}
		return nil
	}
	for _, c := range diff(prev, next) {
		if err := written(c.sk(), s.write(ctx, c)); err != nil {
			return err
		}
	}
	for _, c := range replacing {
		if err := written(c.sk(), s.writeReplacement(ctx, c)); err != nil {
			return err
		}
	}
	if len(conflicts) > 0 {
		return conflictError(s.cluster, conflicts)
	}
	return nil
}

// write applies one item's changes, on condition that each changed
// attribute holds prev's value or already next's.
func (s *DynamoDB) write(ctx context.Context, c itemChange) error {
	e := newExpr()
	var sets, removes, conds []string
	for _, f := range c.fields {
		name := e.name(f.attr)
		conds = append(conds, "("+e.matches(name, f.prev)+" OR "+e.matches(name, f.next)+")")
		if f.next.ok {
			sets = append(sets, name+" = "+e.value(&types.AttributeValueMemberS{Value: formatTime(f.next.t)}))
		} else {
			removes = append(removes, name)
		}
	}
	cond := aws.String(strings.Join(conds, " AND "))

	// A node that is no longer unneeded has nothing left to keep, unless a
	// drain marks it (then only the attribute goes, below).
	if c.prefix == nodePrefix && len(sets) == 0 {
		noDrain := *cond + " AND attribute_not_exists(" + e.name(attrDrainID) + ")"
		_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 aws.String(s.table),
			Key:                       s.key(c.sk()),
			ConditionExpression:       aws.String(noDrain),
			ExpressionAttributeNames:  e.names,
			ExpressionAttributeValues: e.valuesOrNil(),
		})
		var failed *types.ConditionalCheckFailedException
		if err == nil {
			return nil
		}
		if !errors.As(err, &failed) {
			return fmt.Errorf("delete %s: %w", c.sk(), err)
		}
		delete(e.names, "#"+attrDrainID)
	}

	var update []string
	if len(sets) > 0 {
		update = append(update, "SET "+strings.Join(sets, ", "))
	}
	if len(removes) > 0 {
		update = append(update, "REMOVE "+strings.Join(removes, ", "))
	}
	if c.prefix == groupPrefix {
		// A group item is also written by others (schedule overrides);
		// version counts every write, whoever made it.
		update = append(update, "ADD "+e.name(attrVersion)+" "+e.value(&types.AttributeValueMemberN{Value: "1"}))
	}
	// An item left with no attributes of its own stays: pk and sk only.
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(c.sk()),
		UpdateExpression:          aws.String(strings.Join(update, " ")),
		ConditionExpression:       cond,
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.valuesOrNil(),
	})
	if err != nil {
		return fmt.Errorf("update %s: %w", c.sk(), err)
	}
	return nil
}

// expr collects the placeholders of one request's expressions.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}}
}

// name returns the placeholder of an attribute name; placeholders keep
// names clear of DynamoDB's reserved words.
func (e *expr) name(attr string) string {
	p := "#" + attr
	e.names[p] = attr
	return p
}

func (e *expr) value(v types.AttributeValue) string {
	p := ":v" + strconv.Itoa(len(e.values))
	e.values[p] = v
	return p
}

// matches is the condition that the attribute behind name holds o.
func (e *expr) matches(name string, o optTime) string {
	if !o.ok {
		return "attribute_not_exists(" + name + ")"
	}
	return name + " = " + e.value(&types.AttributeValueMemberS{Value: formatTime(o.t)})
}

// valuesOrNil avoids sending an empty value map, which DynamoDB rejects.
func (e *expr) valuesOrNil() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

// epochSeconds writes t as exact decimal epoch seconds, so lease conditions
// compare it with the whole seconds of expiresAt without rounding.
func epochSeconds(t time.Time) string {
	sec, nsec := t.Unix(), t.Nanosecond()
	if sec >= 0 || nsec == 0 {
		return fmt.Sprintf("%d.%09d", sec, nsec)
	}
	return fmt.Sprintf("-%d.%09d", -(sec + 1), 1_000_000_000-nsec)
}

// AcquireLease puts the LEASE# item on condition that there is none, it has
// expired, or it is holder's own (see Store). expiresAt is stored as epoch
// seconds so a table TTL can clean up, but the condition alone decides.
func (s *DynamoDB) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (Lease, error) {
	if err := checkLeaseArgs(name, holder, ttl); err != nil {
		return Lease{}, fmt.Errorf("acquire lease: %w", err)
	}
	l := Lease{Name: name, Holder: holder, ExpiresAt: leaseExpiry(now, ttl)}
	item := s.key(leasePrefix + name)
	item[attrHolder] = &types.AttributeValueMemberS{Value: holder}
	item[attrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(l.ExpiresAt.Unix(), 10)}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(pk) OR #expiresAt < :now OR #holder = :holder"),
		ExpressionAttributeNames: map[string]string{
			"#expiresAt": attrExpiresAt,
			"#holder":    attrHolder,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now":    &types.AttributeValueMemberN{Value: epochSeconds(now)},
			":holder": &types.AttributeValueMemberS{Value: holder},
		},
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return Lease{}, s.leaseHeld(ctx, name, holder)
	case err != nil:
		return Lease{}, fmt.Errorf("acquire lease %q of cluster %q for %q: %w", name, s.cluster, holder, err)
	}
	return l, nil
}

// leaseHeld reads who has the lease, for the error message. dynalite does
// not return the item on a failed condition, so this is a second read; by
// then the lease may have moved on, which the message can then only say.
func (s *DynamoDB) leaseHeld(ctx context.Context, name, holder string) error {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.key(leasePrefix + name),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("acquire lease %q for %q: %w (reading its holder failed: %w)", name, holder, ErrLeaseHeld, err)
	}
	cur := Lease{Name: name, Holder: "(released since)"}
	if h, ok := out.Item[attrHolder].(*types.AttributeValueMemberS); ok {
		cur.Holder = h.Value
	}
	if n, ok := out.Item[attrExpiresAt].(*types.AttributeValueMemberN); ok {
		if sec, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			cur.ExpiresAt = time.Unix(sec, 0)
		}
	}
	return leaseHeldError(name, holder, cur)
}

// ReleaseLease deletes the LEASE# item on condition that l.Holder still
// has it (see Store).
func (s *DynamoDB) ReleaseLease(ctx context.Context, l Lease) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(leasePrefix + l.Name),
		ConditionExpression:       aws.String("#holder = :holder"),
		ExpressionAttributeNames:  map[string]string{"#holder": attrHolder},
		ExpressionAttributeValues: map[string]types.AttributeValue{":holder": &types.AttributeValueMemberS{Value: l.Holder}},
	})
	var failed *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &failed) {
		return fmt.Errorf("release lease %q of cluster %q for %q: %w", l.Name, s.cluster, l.Holder, err)
	}
	return nil
}

// CreateTable creates the state table (string pk and sk, on-demand billing)
// and waits until it is ACTIVE. A table that already exists is fine if its
// key is pk/sk.
func CreateTable(ctx context.Context, client DynamoDBAPI, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	var exists *types.ResourceInUseException
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("create table %q: %w", table, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		// The default first retry is 20 s later; new tables are usually
		// ACTIVE within seconds (dynalite's within milliseconds), and the
		// delay grows exponentially from here.
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	out, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 5*time.Minute)
	if err != nil {
		return fmt.Errorf("create table %q: wait until active: %w", table, err)
	}
	if got := keySchema(out.Table); got != "pk HASH, sk RANGE" {
		return fmt.Errorf("create table %q: it exists with key %q, want pk HASH, sk RANGE", table, got)
	}
	return nil
}

func keySchema(t *types.TableDescription) string {
	if t == nil {
		return ""
	}
	var parts []string
	for _, k := range t.KeySchema {
		parts = append(parts, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	return strings.Join(parts, ", ")
}
