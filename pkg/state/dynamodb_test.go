package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// recorder counts the writes a store sends and shrinks query pages, so
// tests see which items were touched and that paging is followed.
type recorder struct {
	state.DynamoDBAPI
	pageSize int32
	writes   atomic.Int64
	queries  atomic.Int64
}

func (r *recorder) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	r.queries.Add(1)
	if r.pageSize > 0 {
		in.Limit = aws.Int32(r.pageSize)
	}
	return r.DynamoDBAPI.Query(ctx, in, opts...)
}

func (r *recorder) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.writes.Add(1)
	return r.DynamoDBAPI.PutItem(ctx, in, opts...)
}

func (r *recorder) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	r.writes.Add(1)
	return r.DynamoDBAPI.UpdateItem(ctx, in, opts...)
}

func (r *recorder) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	r.writes.Add(1)
	return r.DynamoDBAPI.DeleteItem(ctx, in, opts...)
}

// newTable creates a fresh table for the test and returns a raw client to
// inspect it.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	client := dynamoClient(t)
	table := tableName(t)
	if err := state.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	return client, table
}

func getItem(t *testing.T, c *dynamodb.Client, table, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(table),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk},
			"sk": &types.AttributeValueMemberS{Value: sk},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem %s %s: %v", pk, sk, err)
	}
	return out.Item
}

// attrs prints an item's attributes other than its key, in a stable order.
func attrs(item map[string]types.AttributeValue) string {
	if item == nil {
		return "(no item)"
	}
	var parts []string
	for _, name := range []string{"lastScaleUp", "backoffUntil", "unneededSince", "version", "holder", "expiresAt"} {
		switch v := item[name].(type) {
		case *types.AttributeValueMemberS:
			parts = append(parts, name+"="+v.Value)
		case *types.AttributeValueMemberN:
			parts = append(parts, name+"=#"+v.Value)
		case nil:
		default:
			parts = append(parts, fmt.Sprintf("%s=%T", name, v))
		}
	}
	return strings.Join(parts, " ")
}

func TestDynamoDBItems(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	s := state.NewDynamoDB(client, table, "prod")
	base := sample()
	save(t, s, snapshot.State{}, base)
	next := with(base, func(s *snapshot.State) {
		delete(s.BackoffUntil, "gpu")
		s.LastScaleUp["workers"] = time.Date(2026, 11, 30, 10, 1, 0, 500, time.UTC)
	})
	save(t, s, base, next)
	if _, err := s.AcquireLease(t.Context(), "evaluate", "run-1", time.Minute, t0); err != nil {
		t.Fatal(err)
	}

	tests := []struct{ sk, want string }{
		{"GROUP#workers", "lastScaleUp=2026-11-30T10:01:00.0000005Z version=#2"},
		{"GROUP#gpu", "lastScaleUp=2026-11-30T08:00:00Z version=#2"},
		{"NODE#node-a", "unneededSince=2026-11-30T09:45:00Z"},
		{"LEASE#evaluate", fmt.Sprintf("holder=run-1 expiresAt=#%d", t0.Add(time.Minute).Unix())},
	}
	for _, tt := range tests {
		if got := attrs(getItem(t, client, table, "CLUSTER#prod", tt.sk)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.sk, got, tt.want)
		}
	}
}

func TestDynamoDBWritesOnlyChangedItems(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	rec := &recorder{DynamoDBAPI: client}
	s := state.NewDynamoDB(rec, table, "prod")
	base := sample()
	save(t, s, snapshot.State{}, base)

	tests := []struct {
		name       string
		prev, next snapshot.State
		wantWrites int64
	}{
		{"unchanged", base, base, 0},
		{"same instants in another zone", base, with(base, func(s *snapshot.State) {
			s.LastScaleUp["workers"] = s.LastScaleUp["workers"].In(time.FixedZone("X", 7200))
		}), 0},
		{"one node dropped, one group changed", base, with(base, func(s *snapshot.State) {
			delete(s.UnneededSince, "node-a")
			s.LastScaleUp["gpu"] = at(0)
			s.BackoffUntil["gpu"] = at(10 * time.Minute)
		}), 2},
	}
	for _, tt := range tests {
		before := rec.writes.Load()
		save(t, s, tt.prev, tt.next)
		if got := rec.writes.Load() - before; got != tt.wantWrites {
			t.Errorf("%s: %d writes, want %d", tt.name, got, tt.wantWrites)
		}
	}
	// workers was never changed after its first write.
	if got := attrs(getItem(t, client, table, "CLUSTER#prod", "GROUP#workers")); !strings.HasSuffix(got, "version=#1") {
		t.Errorf("GROUP#workers: %s, want version 1", got)
	}
	if item := getItem(t, client, table, "CLUSTER#prod", "NODE#node-a"); item != nil {
		t.Errorf("NODE#node-a still stored: %s", attrs(item))
	}
}

func TestDynamoDBLoadStateFollowsPages(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	want := snapshot.State{UnneededSince: map[string]time.Time{}, LastScaleUp: map[string]time.Time{}}
	for i := range 23 {
		want.UnneededSince[fmt.Sprintf("node-%02d", i)] = at(time.Duration(i) * time.Second)
	}
	for i := range 9 {
		want.LastScaleUp[fmt.Sprintf("group-%d", i)] = at(time.Duration(i) * time.Minute)
	}
	save(t, state.NewDynamoDB(client, table, "prod"), snapshot.State{}, want)
	// Items of other kinds and clusters are not read into the State.
	save(t, state.NewDynamoDB(client, table, "prod-2"), snapshot.State{}, sample())
	_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"pk":   &types.AttributeValueMemberS{Value: "CLUSTER#prod"},
			"sk":   &types.AttributeValueMemberS{Value: "SCHEDULE#daytime"},
			"cron": &types.AttributeValueMemberS{Value: "0 8 * * 1-5"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	rec := &recorder{DynamoDBAPI: client, pageSize: 5}
	wantState(t, state.NewDynamoDB(rec, table, "prod"), want)
	// ceil(9/5) + ceil(23/5) pages at least.
	if got := rec.queries.Load(); got < 7 {
		t.Errorf("%d queries, want at least 7 pages", got)
	}
}

func TestDynamoDBLoadStateRejectsBadTimes(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"pk":            &types.AttributeValueMemberS{Value: "CLUSTER#prod"},
			"sk":            &types.AttributeValueMemberS{Value: "NODE#node-a"},
			"unneededSince": &types.AttributeValueMemberS{Value: "yesterday"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = state.NewDynamoDB(client, table, "prod").LoadState(t.Context())
	if err == nil || !strings.Contains(err.Error(), "NODE#node-a") || !strings.Contains(err.Error(), "unneededSince") {
		t.Fatalf("LoadState of a malformed time: %v, want an error naming the item and attribute", err)
	}
}

func TestCreateTable(t *testing.T) {
	t.Parallel()
	client := dynamoClient(t)
	ctx := t.Context()
	table := tableName(t)
	for i := range 2 {
		began := time.Now()
		if err := state.CreateTable(ctx, client, table); err != nil {
			t.Fatalf("CreateTable, call %d: %v", i+1, err)
		}
		t.Logf("CreateTable call %d: %v", i+1, time.Since(began).Round(time.Millisecond))
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Table.BillingModeSummary == nil || out.Table.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode %+v, want PAY_PER_REQUEST", out.Table.BillingModeSummary)
	}

	// A table of the same name with another key is refused, not used.
	other := table + "-other-key"
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(other),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := state.CreateTable(ctx, client, other); err == nil || !strings.Contains(err.Error(), "id HASH") {
		t.Errorf("CreateTable over a table keyed by id: %v, want an error naming its key", err)
	}
}

// TestLoadStateWithoutTheTable: a table that does not exist (nothing
// deployed yet, or a misspelt name) is ErrNoTable, naming the table, so a
// caller can tell it from a failed read.
func TestLoadStateWithoutTheTable(t *testing.T) {
	t.Parallel()
	client := dynamoClient(t)
	table := tableName(t) // never created
	_, err := state.NewDynamoDB(client, table, "prod").LoadState(t.Context())
	if !errors.Is(err, state.ErrNoTable) || !strings.Contains(err.Error(), table) {
		t.Fatalf("LoadState of a missing table: %v, want ErrNoTable naming %q", err, table)
	}
	// An existing table with nothing in it is an empty state, not ErrNoTable.
	_, existing := newTable(t)
	st, err := state.NewDynamoDB(client, existing, "prod").LoadState(t.Context())
	if err != nil || len(st.UnneededSince)+len(st.LastScaleUp)+len(st.BackoffUntil) != 0 {
		t.Fatalf("LoadState of an empty table: %+v, %v", st, err)
	}
}
