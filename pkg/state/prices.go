package state

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Lifecycles of a price: how the machine is bought.
const (
	LifecycleOnDemand = "on-demand"
	LifecycleSpot     = "spot"
)

// PriceKey names one cached price: the provider, the region or zone its
// price list is per, the machine type and how it is bought (Lifecycle*).
// It is stored as sk PRICE#<provider>#<region>#<type>#<lifecycle>.
type PriceKey struct {
	Provider, Region, Type, Lifecycle string
}

func (k PriceKey) String() string {
	return k.Provider + "/" + k.Region + "/" + k.Type + "/" + k.Lifecycle
}

func (k PriceKey) check() error {
	for _, f := range []struct{ name, v string }{
		{"provider", k.Provider}, {"region", k.Region}, {"type", k.Type}, {"lifecycle", k.Lifecycle},
	} {
		if f.v == "" || strings.Contains(f.v, "#") {
			return fmt.Errorf("price key %s: %s %q must be set and hold no '#'", k, f.name, f.v)
		}
	}
	return nil
}

const pricePrefix = "PRICE#"

func (k PriceKey) sk() string {
	return pricePrefix + k.Provider + "#" + k.Region + "#" + k.Type + "#" + k.Lifecycle
}

// Price is what one machine costs per hour, where the figure came from and
// when it was read there.
type Price struct {
	PerHour     float64
	Currency    string // ISO 4217, e.g. USD, EUR
	Source      string // e.g. aws-price-list, aws-spot-history
	RetrievedAt time.Time
}

// Check refuses what is not a price: zero (a price list's "0.00" for a
// machine that does not exist there, or a parse that found nothing),
// negative, not finite, or without currency or source. A missing price is
// reported, never taken for a free machine.
func (p Price) Check() error {
	switch {
	case math.IsNaN(p.PerHour) || math.IsInf(p.PerHour, 0):
		return errors.New("price per hour is not a finite number")
	case p.PerHour <= 0:
		return fmt.Errorf("price per hour %v is not positive", p.PerHour)
	case len(p.Currency) != 3 || strings.ToUpper(p.Currency) != p.Currency:
		return fmt.Errorf("currency %q is not a three-letter uppercase code", p.Currency)
	case p.Source == "":
		return errors.New("price has no source")
	case p.RetrievedAt.IsZero():
		return errors.New("price has no retrieval time")
	}
	return nil
}

// PriceStore keeps read prices between runs.
type PriceStore interface {
	// GetPrice returns the stored price; false when there is none.
	GetPrice(ctx context.Context, key PriceKey) (Price, bool, error)
	// PutPrice stores p, replacing what was there: the newest read wins,
	// and a price is the same figure whoever read it.
	PutPrice(ctx context.Context, key PriceKey, p Price, expires time.Time) error
}

// Attributes of a PRICE# item.
const (
	attrPerHour     = "perHour"
	attrCurrency    = "currency"
	attrSource      = "source"
	attrRetrievedAt = "retrievedAt"
)

// GetPrice reads a PRICE# item (eventually consistent: a price a moment old
// is as good).
func (s *DynamoDB) GetPrice(ctx context.Context, key PriceKey) (Price, bool, error) {
	if err := key.check(); err != nil {
		return Price{}, false, err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: s.key(key.sk())})
	if err != nil {
		return Price{}, false, fmt.Errorf("get price %s of cluster %q: %w", key, s.cluster, err)
	}
	if out.Item == nil {
		return Price{}, false, nil
	}
	p, err := priceFromItem(out.Item)
	if err != nil {
		return Price{}, false, fmt.Errorf("price %s of cluster %q: %w", key, s.cluster, err)
	}
	return p, true, nil
}

func priceFromItem(item map[string]types.AttributeValue) (Price, error) {
	n, ok := item[attrPerHour].(*types.AttributeValueMemberN)
	if !ok {
		return Price{}, fmt.Errorf("attribute %s missing or not a number", attrPerHour)
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil {
		return Price{}, fmt.Errorf("attribute %s: %w", attrPerHour, err)
	}
	p := Price{PerHour: v}
	for attr, dst := range map[string]*string{attrCurrency: &p.Currency, attrSource: &p.Source} {
		s, ok := item[attr].(*types.AttributeValueMemberS)
		if !ok {
			return Price{}, fmt.Errorf("attribute %s missing or not a string", attr)
		}
		*dst = s.Value
	}
	t, ok, err := timeAttr(item, attrRetrievedAt)
	if err != nil {
		return Price{}, err
	}
	if !ok {
		return Price{}, fmt.Errorf("attribute %s missing", attrRetrievedAt)
	}
	p.RetrievedAt = t
	return p, p.Check()
}

// PutPrice writes a PRICE# item. expires goes into the table's TTL
// attribute so DynamoDB drops prices no one reads any more; nothing depends
// on it (readers judge a price by its retrieval time).
func (s *DynamoDB) PutPrice(ctx context.Context, key PriceKey, p Price, expires time.Time) error {
	if err := key.check(); err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("put price %s: %w", key, err)
	}
	item := s.key(key.sk())
	item[attrPerHour] = &types.AttributeValueMemberN{Value: strconv.FormatFloat(p.PerHour, 'g', -1, 64)}
	item[attrCurrency] = &types.AttributeValueMemberS{Value: p.Currency}
	item[attrSource] = &types.AttributeValueMemberS{Value: p.Source}
	item[attrRetrievedAt] = &types.AttributeValueMemberS{Value: formatTime(p.RetrievedAt)}
	item[attrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(expires.Unix(), 10)}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("put price %s of cluster %q: %w", key, s.cluster, err)
	}
	return nil
}

// GetPrice returns the stored price.
func (m *Memory) GetPrice(_ context.Context, key PriceKey) (Price, bool, error) {
	if err := key.check(); err != nil {
		return Price{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.prices[key]
	return p, ok, nil
}

// PutPrice stores p.
func (m *Memory) PutPrice(_ context.Context, key PriceKey, p Price, _ time.Time) error {
	if err := key.check(); err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("put price %s: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.prices == nil {
		m.prices = map[PriceKey]Price{}
	}
	m.prices[key] = p
	return nil
}

// PricePolicy says how long a cached price is fresh (TTL: used without
// asking the provider) and how long past that it may stand in when a read
// fails (MaxAge, counted from the read).
type PricePolicy struct {
	TTL, MaxAge time.Duration
}

// DefaultPricePolicy: list prices (on-demand, catalogues) change a few
// times a year, so a day's TTL and a week's grace; Spot prices move within
// hours, so an hour's TTL and six hours' grace, past which a figure says
// little about the market.
func DefaultPricePolicy(lifecycle string) PricePolicy {
	if lifecycle == LifecycleSpot {
		return PricePolicy{TTL: time.Hour, MaxAge: 6 * time.Hour}
	}
	return PricePolicy{TTL: 24 * time.Hour, MaxAge: 7 * 24 * time.Hour}
}

// Quote is a price as the cache answers it.
type Quote struct {
	Price
	// Age is how old the figure is (now less RetrievedAt).
	Age time.Duration
	// Stale: a cached price past its TTL, kept because the read failed;
	// RefreshErr says why. On a price that is not stale, RefreshErr reports
	// a state table that could not be read or written (a warning).
	Stale      bool
	RefreshErr error
}

// PriceCache answers prices from the store while they are fresh and from
// the provider otherwise. It is safe for concurrent use.
type PriceCache struct {
	Store PriceStore
	// Policy picks the TTL and grace of a key; nil is DefaultPricePolicy
	// of its lifecycle.
	Policy func(PriceKey) PricePolicy
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// PriceReader reads one price from a provider's API.
type PriceReader func(ctx context.Context) (Price, error)

// Get returns key's price: the stored one while younger than its TTL; else
// a fresh read, stored; when the read fails (or returns what is not a
// price), the stored one while younger than MaxAge, marked Stale with the
// read error. Otherwise there is no price: an error naming the key and the
// cause, never a zero. A store that cannot be read or written costs the
// cache, not the price: the read still answers.
func (c *PriceCache) Get(ctx context.Context, key PriceKey, read PriceReader) (Quote, error) {
	if err := key.check(); err != nil {
		return Quote{}, err
	}
	now := c.Clock()
	pol := DefaultPricePolicy(key.Lifecycle)
	if c.Policy != nil {
		pol = c.Policy(key)
	}
	cached, have, storeErr := c.Store.GetPrice(ctx, key)
	if have && now.Sub(cached.RetrievedAt) < pol.TTL {
		return Quote{Price: cached, Age: max(now.Sub(cached.RetrievedAt), 0)}, nil
	}
	fresh, err := read(ctx)
	if err == nil {
		err = fresh.Check()
	}
	if err == nil {
		if perr := c.Store.PutPrice(ctx, key, fresh, fresh.RetrievedAt.Add(pol.MaxAge)); perr != nil {
			storeErr = errors.Join(storeErr, perr)
		}
		return Quote{Price: fresh, Age: max(now.Sub(fresh.RetrievedAt), 0), RefreshErr: storeErr}, nil
	}
	if have && now.Sub(cached.RetrievedAt) < pol.MaxAge {
		age := now.Sub(cached.RetrievedAt)
		return Quote{Price: cached, Age: age, Stale: true,
			RefreshErr: fmt.Errorf("price %s: read failed, using the price read %s ago: %w", key, age.Round(time.Second), err)}, nil
	}
	if have {
		err = fmt.Errorf("%w (the cached price is %s old, past the %s it may stand in)", err, now.Sub(cached.RetrievedAt).Round(time.Second), pol.MaxAge)
	}
	return Quote{}, fmt.Errorf("no price for %s: %w", key, errors.Join(err, storeErr))
}

// Clock is the cache's time: Now, else time.Now. Readers stamp the prices
// they read with it.
func (c *PriceCache) Clock() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// GroupPrice is a node group's price per node-hour, or why it has none.
type GroupPrice struct {
	// Quote is nil when there is no price; Err then says why (a status
	// problem to report, never a zero).
	Quote *Quote
	Err   error
}

// Combine makes one quote of several a price was computed from: the
// oldest retrieval time and the greatest age, stale if any is, with every
// read error.
func Combine(perHour float64, currency, source string, parts ...Quote) Quote {
	q := Quote{Price: Price{PerHour: perHour, Currency: currency, Source: source}}
	var errs []error
	for i, p := range parts {
		if i == 0 || p.RetrievedAt.Before(q.RetrievedAt) {
			q.RetrievedAt = p.RetrievedAt
		}
		q.Age = max(q.Age, p.Age)
		q.Stale = q.Stale || p.Stale
		if p.RefreshErr != nil {
			errs = append(errs, p.RefreshErr)
		}
	}
	q.RefreshErr = errors.Join(errs...)
	return q
}
