// Package metrics collects an invocation's metrics and writes them as
// CloudWatch Embedded Metric Format (EMF) documents: JSON lines on stdout
// that CloudWatch Logs turns into metrics in the Lambda's log group, with no
// API call and no extra latency. A Recorder travels in the context, so the
// code that knows a fact records it, and the caller that owns the
// invocation writes the documents once, at its end.
package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace of every nodetide metric.
const Namespace = "nodetide"

// Units (the CloudWatch names EMF takes).
const (
	Count   = "Count"
	Seconds = "Seconds"
	None    = "None" // money: CloudWatch has no currency unit; the Currency dimension says which
)

// Dimension names. Every metric carries Cluster; group metrics NodeGroup;
// scale-up failures also Reason; cost metrics Currency.
const (
	DimCluster   = "Cluster"
	DimNodeGroup = "NodeGroup"
	DimReason    = "Reason"
	DimCurrency  = "Currency"
)

// EMF limits (CloudWatch's specification).
const (
	maxMetricsPerDocument = 100
	maxValuesPerMetric    = 100
)

type kind int

const (
	sum   kind = iota // values add up within an invocation (counters)
	last              // the latest value wins (gauges)
	every             // every value is kept (durations): CloudWatch gets the distribution
)

// Dims are a metric's dimensions beyond Cluster; nil for the cluster-wide
// figure.
type Dims map[string]string

type key struct {
	dims string // canonical "k=v,k=v" of the extra dimensions
	name string
}

type series struct {
	name   string
	unit   string
	kind   kind
	dims   Dims
	values []float64
	// rollUp: the metric is also published under Cluster alone (the
	// figure an alarm watches), besides its own dimensions.
	rollUp bool
}

// Recorder collects one invocation's metrics for one cluster. Its methods
// are safe for concurrent use, and do nothing on a nil Recorder, so code
// records unconditionally and a caller that wants no metrics passes none.
type Recorder struct {
	cluster string
	now     func() time.Time
	level   Level

	mu     sync.Mutex
	series map[key]*series
	order  []key
}

// New returns an empty Recorder for cluster; now stamps the documents
// (nil: time.Now).
func New(cluster string, now func() time.Time) *Recorder {
	if now == nil {
		now = time.Now
	}
	return &Recorder{cluster: cluster, now: now, series: map[key]*series{}}
}

type ctxKey struct{}

// NewContext returns ctx carrying r.
func NewContext(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// From returns the Recorder ctx carries, or nil (which records nothing).
func From(ctx context.Context) *Recorder {
	r, _ := ctx.Value(ctxKey{}).(*Recorder)
	return r
}

// Add adds n to a counter.
func (r *Recorder) Add(name string, n float64, dims Dims) { r.put(name, Count, sum, n, dims, false) }

// AddRollUp adds n to a counter published both with dims and under Cluster
// alone, so one alarm sees every dimension value.
func (r *Recorder) AddRollUp(name string, n float64, dims Dims) {
	r.put(name, Count, sum, n, dims, true)
}

// Gauge sets a level (a count of things now); the last value recorded in
// the invocation is published.
func (r *Recorder) Gauge(name, unit string, v float64, dims Dims) {
	r.put(name, unit, last, v, dims, false)
}

// Observe records one more value of a distribution (a duration); every value
// is published.
func (r *Recorder) Observe(name, unit string, v float64, dims Dims) {
	r.put(name, unit, every, v, dims, false)
}

func (r *Recorder) put(name, unit string, k kind, v float64, dims Dims, rollUp bool) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id := key{dims: canonical(dims), name: name}
	s, ok := r.series[id]
	if !ok {
		s = &series{name: name, unit: unit, kind: k, dims: maps.Clone(dims), rollUp: rollUp}
		r.series[id] = s
		r.order = append(r.order, id)
	}
	switch {
	case k == sum && len(s.values) == 1:
		s.values[0] += v
	case k == last && len(s.values) == 1:
		s.values[0] = v
	default:
		s.values = append(s.values, v)
	}
}

func canonical(d Dims) string {
	ks := slices.Sorted(maps.Keys(d))
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = k + "=" + d[k]
	}
	return strings.Join(parts, ",")
}

// Directive is the "_aws" member of an EMF document.
type Directive struct {
	Timestamp         int64             `json:"Timestamp"`
	CloudWatchMetrics []MetricDirective `json:"CloudWatchMetrics"`
}

// MetricDirective names the metrics of a document and their dimension sets.
type MetricDirective struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []MetricName `json:"Metrics"`
}

// MetricName is one metric's definition in a directive.
type MetricName struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// Documents returns the EMF documents of what was recorded: one per set of
// dimension values, split so that none defines more than 100 metrics, and a
// distribution with more than 100 values is spread over documents too. No
// recording gives no documents.
func (r *Recorder) Documents() []map[string]any {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.now().UnixMilli()
	type group struct {
		dims   Dims
		rollUp bool
		series []*series
	}
	var groups []*group
	byDims := map[string]*group{}
	for _, s := range r.selected() {
		gk := fmt.Sprintf("%s|%v", canonical(s.dims), s.rollUp)
		g, ok := byDims[gk]
		if !ok {
			g = &group{dims: s.dims, rollUp: s.rollUp}
			byDims[gk] = g
			groups = append(groups, g)
		}
		g.series = append(g.series, s)
	}
	var docs []map[string]any
	for _, g := range groups {
		names := append([]string{DimCluster}, slices.Sorted(maps.Keys(g.dims))...)
		sets := [][]string{names}
		if g.rollUp && len(names) > 1 {
			sets = [][]string{{DimCluster}, names}
		}
		// Each pass takes up to 100 values of each of up to 100 series.
		pending := slices.Clone(g.series)
		offset := map[*series]int{}
		for len(pending) > 0 {
			doc := map[string]any{DimCluster: r.cluster}
			for k, v := range g.dims {
				doc[k] = v
			}
			n := min(len(pending), maxMetricsPerDocument)
			defs := make([]MetricName, 0, n)
			var rest []*series
			for i, s := range pending {
				if i >= n {
					rest = append(rest, s)
					continue
				}
				defs = append(defs, MetricName{Name: s.name, Unit: s.unit})
				from := offset[s]
				to := min(from+maxValuesPerMetric, len(s.values))
				if vals := s.values[from:to]; len(vals) == 1 {
					doc[s.name] = vals[0]
				} else {
					doc[s.name] = slices.Clone(vals)
				}
				offset[s] = to
				if to < len(s.values) {
					rest = append(rest, s)
				}
			}
			doc["_aws"] = Directive{Timestamp: ts, CloudWatchMetrics: []MetricDirective{{
				Namespace: Namespace, Dimensions: sets, Metrics: defs,
			}}}
			docs = append(docs, doc)
			pending = rest
		}
	}
	return docs
}

// Write writes the documents, one JSON line each, and forgets what was
// recorded, so a Recorder can serve the next invocation.
func (r *Recorder) Write(w io.Writer) error {
	if r == nil {
		return nil
	}
	docs := r.Documents()
	r.mu.Lock()
	r.series, r.order = map[key]*series{}, nil
	r.mu.Unlock()
	enc := json.NewEncoder(w)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return fmt.Errorf("write metrics: %w", err)
		}
	}
	return nil
}
