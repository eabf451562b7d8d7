package state_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodetide/nodetide/pkg/state"
)

func priceStores(t *testing.T) map[string]func(t *testing.T) state.PriceStore {
	return map[string]func(t *testing.T) state.PriceStore{
		"memory": func(*testing.T) state.PriceStore { return state.NewMemory("c1") },
		"dynamodb": func(t *testing.T) state.PriceStore {
			client, table := newTable(t)
			return state.NewDynamoDB(client, table, "c1")
		},
	}
}

// reader answers prices or errors in turn and counts its calls.
type reader struct {
	answers []func() (state.Price, error)
	calls   int
}

func (f *reader) read(context.Context) (state.Price, error) {
	a := f.answers[f.calls]
	f.calls++
	return a()
}

func ok(v float64, at time.Time) func() (state.Price, error) {
	return func() (state.Price, error) {
		return state.Price{PerHour: v, Currency: "USD", Source: "aws-price-list", RetrievedAt: at}, nil
	}
}

func fails(msg string) func() (state.Price, error) {
	return func() (state.Price, error) { return state.Price{}, errors.New(msg) }
}

// The cache answers from the table while a price is fresh, reads again it
// when stale, keeps a cached price through a failed read only while it is
// young enough (saying so, with its age), and otherwise answers no price
// with the cause: never a zero.
func TestPriceCacheFreshStaleAndMissing(t *testing.T) {
	key := state.PriceKey{Provider: "aws", Region: "us-east-1", Type: "m5.large", Lifecycle: state.LifecycleOnDemand}
	for name, open := range priceStores(t) {
		t.Run(name, func(t *testing.T) {
			now := t0
			c := &state.PriceCache{Store: open(t), Now: func() time.Time { return now }}
			f := &reader{answers: []func() (state.Price, error){
				ok(0.096, t0),
				ok(0.1, t0.Add(25*time.Hour)),
				fails("Price List throttled"),
				fails("Price List down"),
				ok(0, t0.Add(9*24*time.Hour)),
			}}
			steps := []struct {
				at        time.Duration
				wantPrice float64 // 0: no price
				wantAge   time.Duration
				stale     bool
				reads     int
				errHas    string
			}{
				{at: 0, wantPrice: 0.096, reads: 1},                                       // nothing cached: read
				{at: 23 * time.Hour, wantPrice: 0.096, wantAge: 23 * time.Hour, reads: 1}, // fresh: no call
				{at: 25 * time.Hour, wantPrice: 0.1, reads: 2},                            // past the 24 h TTL: read again
				{at: 50 * time.Hour, wantPrice: 0.1, wantAge: 25 * time.Hour, stale: true, reads: 3, errHas: "Price List throttled"},
				{at: 25*time.Hour + 8*24*time.Hour, reads: 4, errHas: "Price List down"}, // past the week's grace
				{at: 9 * 24 * time.Hour, reads: 5, errHas: "not positive"},               // a zero is no price
			}
			for i, s := range steps {
				now = t0.Add(s.at)
				q, err := c.Get(t.Context(), key, f.read)
				if f.calls != s.reads {
					t.Fatalf("step %d: %d reads, want %d", i, f.calls, s.reads)
				}
				if s.wantPrice == 0 {
					if err == nil || !strings.Contains(err.Error(), s.errHas) || !strings.Contains(err.Error(), key.String()) {
						t.Fatalf("step %d: Get = %+v, %v; want no price naming %s and %q", i, q, err, key, s.errHas)
					}
					if q.PerHour != 0 || q.Currency != "" {
						t.Fatalf("step %d: no price still answered %+v", i, q)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: Get: %v", i, err)
				}
				if q.PerHour != s.wantPrice || q.Currency != "USD" || q.Source != "aws-price-list" || q.Age != s.wantAge || q.Stale != s.stale {
					t.Fatalf("step %d: Get = %+v, want %v USD aged %v stale %v", i, q, s.wantPrice, s.wantAge, s.stale)
				}
				if s.errHas != "" && (q.RefreshErr == nil || !strings.Contains(q.RefreshErr.Error(), s.errHas)) {
					t.Fatalf("step %d: RefreshErr = %v, want %q", i, q.RefreshErr, s.errHas)
				}
				if s.errHas == "" && q.RefreshErr != nil {
					t.Fatalf("step %d: RefreshErr = %v", i, q.RefreshErr)
				}
			}
		})
	}
}

// Spot prices are fresh for an hour and stand in for six.
func TestPriceCacheSpotPolicy(t *testing.T) {
	key := state.PriceKey{Provider: "aws", Region: "us-east-1", Type: "m5.large", Lifecycle: state.LifecycleSpot}
	now := t0
	c := &state.PriceCache{Store: state.NewMemory("c1"), Now: func() time.Time { return now }}
	f := &reader{answers: []func() (state.Price, error){ok(0.03, t0), fails("x"), fails("y")}}
	if _, err := c.Get(t.Context(), key, f.read); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(61 * time.Minute)
	if q, err := c.Get(t.Context(), key, f.read); err != nil || !q.Stale || f.calls != 2 {
		t.Fatalf("after an hour: %+v, %v, %d reads; want stale after a new read", q, err, f.calls)
	}
	now = t0.Add(6*time.Hour + time.Second)
	if _, err := c.Get(t.Context(), key, f.read); err == nil {
		t.Fatal("a Spot price over six hours old still answered")
	}
}

// The item follows the table's contract: the cluster's pk, sk
// PRICE#<provider>#<region>#<type>#<lifecycle>, the figure as a number, its
// currency, source and retrieval time, and the TTL attribute at read + grace.
func TestPriceItemShape(t *testing.T) {
	client, table := newTable(t)
	s := state.NewDynamoDB(client, table, "c1")
	c := &state.PriceCache{Store: s, Now: func() time.Time { return t0 }}
	key := state.PriceKey{Provider: "scaleway", Region: "fr-par-1", Type: "DEV1-M", Lifecycle: state.LifecycleOnDemand}
	f := &reader{answers: []func() (state.Price, error){func() (state.Price, error) {
		return state.Price{PerHour: 0.0198, Currency: "EUR", Source: "scaleway-catalogue", RetrievedAt: t0}, nil
	}}}
	if _, err := c.Get(t.Context(), key, f.read); err != nil {
		t.Fatal(err)
	}
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "CLUSTER#c1"},
		"sk": &types.AttributeValueMemberS{Value: "PRICE#scaleway#fr-par-1#DEV1-M#on-demand"},
	}})
	if err != nil || out.Item == nil {
		t.Fatalf("GetItem = %v, %v", out, err)
	}
	want := map[string]string{
		"perHour": "0.0198", "currency": "EUR", "source": "scaleway-catalogue",
		"retrievedAt": "2026-11-30T10:00:00Z", "expiresAt": strconv.FormatInt(t0.Add(7*24*time.Hour).Unix(), 10),
	}
	for attr, v := range want {
		var got string
		switch a := out.Item[attr].(type) {
		case *types.AttributeValueMemberS:
			got = a.Value
		case *types.AttributeValueMemberN:
			got = a.Value
		}
		if got != v {
			t.Errorf("%s = %q, want %q", attr, got, v)
		}
	}
	if _, ok := out.Item["perHour"].(*types.AttributeValueMemberN); !ok {
		t.Errorf("perHour is %T, want a number", out.Item["perHour"])
	}
}

// brokenStore fails every read and write.
type brokenStore struct{}

func (brokenStore) GetPrice(context.Context, state.PriceKey) (state.Price, bool, error) {
	return state.Price{}, false, errors.New("table unreachable")
}

func (brokenStore) PutPrice(context.Context, state.PriceKey, state.Price, time.Time) error {
	return errors.New("table unreachable")
}

// A table that cannot be reached costs the cache, not the price.
func TestPriceCacheWithoutTheTable(t *testing.T) {
	c := &state.PriceCache{Store: brokenStore{}, Now: func() time.Time { return t0 }}
	key := state.PriceKey{Provider: "aws", Region: "us-east-1", Type: "m5.large", Lifecycle: state.LifecycleOnDemand}
	f := &reader{answers: []func() (state.Price, error){ok(0.096, t0)}}
	q, err := c.Get(t.Context(), key, f.read)
	if err != nil || q.PerHour != 0.096 || q.RefreshErr == nil || !strings.Contains(q.RefreshErr.Error(), "table unreachable") {
		t.Fatalf("Get = %+v, %v; want the read price with the table's error", q, err)
	}
}

// Keys that would run into one another in the sort key are refused.
func TestPriceKeyChecked(t *testing.T) {
	c := &state.PriceCache{Store: state.NewMemory("c1")}
	for _, k := range []state.PriceKey{
		{Provider: "aws", Region: "us-east-1", Type: "m5#large", Lifecycle: "spot"},
		{Provider: "aws", Region: "", Type: "m5.large", Lifecycle: "spot"},
	} {
		if _, err := c.Get(t.Context(), k, (&reader{answers: []func() (state.Price, error){ok(1, t0)}}).read); err == nil {
			t.Errorf("key %+v accepted", k)
		}
	}
}

// A price made of several quotes is as old as the oldest, stale if any is,
// and carries every read error.
func TestCombineQuotes(t *testing.T) {
	fresh := state.Quote{Price: state.Price{PerHour: 0.1, RetrievedAt: t0.Add(time.Hour)}}
	stale := state.Quote{Price: state.Price{PerHour: 0.04, RetrievedAt: t0}, Age: 2 * time.Hour, Stale: true, RefreshErr: errors.New("Spot history throttled")}
	q := state.Combine(0.085, "USD", "aws-spot-history", fresh, stale)
	if q.PerHour != 0.085 || q.Currency != "USD" || q.Source != "aws-spot-history" || !q.RetrievedAt.Equal(t0) ||
		q.Age != 2*time.Hour || !q.Stale || q.RefreshErr == nil || !strings.Contains(q.RefreshErr.Error(), "throttled") {
		t.Fatalf("Combine = %+v", q)
	}
}
