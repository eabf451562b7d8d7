package metrics_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/metrics"
)

// doc is an EMF document read back as CloudWatch reads it.
type doc struct {
	AWS    *metrics.Directive
	Fields map[string]any
}

// parse reads the JSON lines w received and checks each against the EMF
// specification: an _aws member with a millisecond timestamp, one
// directive in the nodetide namespace with at most 100 metrics and 30
// dimensions per set, every dimension a string member, every metric a
// number or an array of at most 100 numbers.
func parse(t *testing.T, out []byte) []doc {
	t.Helper()
	var docs []doc
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var fields map[string]any
		if err := json.Unmarshal(sc.Bytes(), &fields); err != nil {
			t.Fatalf("not a JSON object: %v: %s", err, sc.Text())
		}
		raw, err := json.Marshal(fields["_aws"])
		if err != nil || fields["_aws"] == nil {
			t.Fatalf("no _aws member: %s", sc.Text())
		}
		var d metrics.Directive
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("_aws: %v", err)
		}
		if d.Timestamp <= 0 {
			t.Fatalf("_aws.Timestamp %d", d.Timestamp)
		}
		if len(d.CloudWatchMetrics) != 1 {
			t.Fatalf("want one directive, got %d", len(d.CloudWatchMetrics))
		}
		md := d.CloudWatchMetrics[0]
		if md.Namespace != metrics.Namespace {
			t.Fatalf("namespace %q", md.Namespace)
		}
		if n := len(md.Metrics); n == 0 || n > 100 {
			t.Fatalf("%d metrics in one document (1 to 100)", n)
		}
		for _, set := range md.Dimensions {
			if len(set) == 0 || len(set) > 30 {
				t.Fatalf("dimension set %v", set)
			}
			for _, name := range set {
				if _, ok := fields[name].(string); !ok {
					t.Fatalf("dimension %s is not a string member: %v", name, fields[name])
				}
			}
		}
		for _, m := range md.Metrics {
			if m.Name == "" || len(m.Name) > 255 || (m.Unit != metrics.Count && m.Unit != metrics.Seconds) {
				t.Fatalf("metric definition %+v", m)
			}
			switch v := fields[m.Name].(type) {
			case float64:
			case []any:
				if len(v) == 0 || len(v) > 100 {
					t.Fatalf("%s: %d values (1 to 100)", m.Name, len(v))
				}
				for _, x := range v {
					if _, ok := x.(float64); !ok {
						t.Fatalf("%s: value %v is not a number", m.Name, x)
					}
				}
			default:
				t.Fatalf("%s: value %v is not a number or an array", m.Name, fields[m.Name])
			}
		}
		docs = append(docs, doc{AWS: &d, Fields: fields})
	}
	return docs
}

// find returns the document defining name with exactly dims' extra
// dimension values, and the definition's unit.
func find(t *testing.T, docs []doc, name string, dims map[string]string) (doc, string) {
	t.Helper()
	for _, d := range docs {
		if len(d.Fields)-1-len(d.AWS.CloudWatchMetrics[0].Metrics) != 1+len(dims) {
			continue // other dimensions
		}
		ok := true
		for k, v := range dims {
			ok = ok && d.Fields[k] == v
		}
		if !ok {
			continue
		}
		for _, m := range d.AWS.CloudWatchMetrics[0].Metrics {
			if m.Name == name {
				return d, m.Unit
			}
		}
	}
	t.Fatalf("no document defines %s with %v", name, dims)
	return doc{}, ""
}

func TestDocuments(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := metrics.New("prod", func() time.Time { return at })
	r.Add(metrics.DrainsStarted, 1, nil)
	r.Add(metrics.DrainsStarted, 2, nil)
	r.Gauge(metrics.PendingPods, metrics.Count, 7, nil)
	r.Gauge(metrics.PendingPods, metrics.Count, 4, nil) // the last level wins
	r.Observe(metrics.DrainDuration, metrics.Seconds, 12.5, nil)
	r.Observe(metrics.DrainDuration, metrics.Seconds, 30, nil)
	r.Gauge(metrics.TargetSize, metrics.Count, 3, metrics.Dims{metrics.DimNodeGroup: "workers"})
	r.Gauge(metrics.TargetSize, metrics.Count, 5, metrics.Dims{metrics.DimNodeGroup: "gpu"})
	r.AddRollUp(metrics.ScaleUpFailures, 1, metrics.Dims{metrics.DimReason: "Throttled"})

	var out bytes.Buffer
	if err := r.Write(&out); err != nil {
		t.Fatal(err)
	}
	docs := parse(t, out.Bytes())
	if len(docs) != 4 { // cluster, workers, gpu, reason (with its roll-up)
		t.Fatalf("want 4 documents, got %d:\n%s", len(docs), out.String())
	}
	for _, d := range docs {
		if d.AWS.Timestamp != at.UnixMilli() {
			t.Errorf("timestamp %d, want %d", d.AWS.Timestamp, at.UnixMilli())
		}
		if d.Fields[metrics.DimCluster] != "prod" {
			t.Errorf("cluster %v", d.Fields[metrics.DimCluster])
		}
	}
	tests := []struct {
		name string
		dims map[string]string
		unit string
		want any
		sets [][]string
	}{
		{metrics.DrainsStarted, nil, metrics.Count, 3.0, [][]string{{"Cluster"}}},
		{metrics.PendingPods, nil, metrics.Count, 4.0, [][]string{{"Cluster"}}},
		{metrics.DrainDuration, nil, metrics.Seconds, []any{12.5, 30.0}, [][]string{{"Cluster"}}},
		{metrics.TargetSize, map[string]string{"NodeGroup": "workers"}, metrics.Count, 3.0, [][]string{{"Cluster", "NodeGroup"}}},
		{metrics.TargetSize, map[string]string{"NodeGroup": "gpu"}, metrics.Count, 5.0, [][]string{{"Cluster", "NodeGroup"}}},
		{metrics.ScaleUpFailures, map[string]string{"Reason": "Throttled"}, metrics.Count, 1.0, [][]string{{"Cluster"}, {"Cluster", "Reason"}}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.name, tc.dims), func(t *testing.T) {
			d, unit := find(t, docs, tc.name, tc.dims)
			if unit != tc.unit {
				t.Errorf("unit %s, want %s", unit, tc.unit)
			}
			if got, _ := json.Marshal(d.Fields[tc.name]); string(got) != string(must(json.Marshal(tc.want))) {
				t.Errorf("value %s, want %v", got, tc.want)
			}
			if !slices.EqualFunc(d.AWS.CloudWatchMetrics[0].Dimensions, tc.sets, slices.Equal) {
				t.Errorf("dimensions %v, want %v", d.AWS.CloudWatchMetrics[0].Dimensions, tc.sets)
			}
		})
	}

	// Written once: the recorder starts over for the next invocation.
	out.Reset()
	if err := r.Write(&out); err != nil || out.Len() != 0 {
		t.Fatalf("second write: %v, %q", err, out.String())
	}
}

func TestDocumentsStayWithinLimits(t *testing.T) {
	r := metrics.New("prod", nil)
	for i := range 250 {
		r.Add(fmt.Sprintf("M%03d", i), 1, nil)
	}
	for i := range 230 {
		r.Observe(metrics.DrainDuration, metrics.Seconds, float64(i), nil)
	}
	var out bytes.Buffer
	if err := r.Write(&out); err != nil {
		t.Fatal(err)
	}
	docs := parse(t, out.Bytes()) // checks ≤ 100 metrics and values each
	seen := map[string]int{}
	var durations []float64
	for _, d := range docs {
		for _, m := range d.AWS.CloudWatchMetrics[0].Metrics {
			seen[m.Name]++
			if m.Name == metrics.DrainDuration {
				for _, v := range d.Fields[m.Name].([]any) {
					durations = append(durations, v.(float64))
				}
			}
		}
	}
	if len(seen) != 251 {
		t.Fatalf("%d metrics published, want 251", len(seen))
	}
	for name, n := range seen {
		if name != metrics.DrainDuration && n != 1 {
			t.Errorf("%s in %d documents", name, n)
		}
	}
	if len(durations) != 230 || durations[0] != 0 || durations[229] != 229 {
		t.Errorf("durations: %d values, want all 230 in order", len(durations))
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	m := metrics.From(context.Background())
	m.Add(metrics.DrainsStarted, 1, nil) // no panic, nothing kept
	var out bytes.Buffer
	if err := m.Write(&out); err != nil || out.Len() != 0 {
		t.Fatalf("nil recorder wrote %q, %v", out.String(), err)
	}
	r := metrics.New("c", nil)
	if got := metrics.From(metrics.NewContext(context.Background(), r)); got != r {
		t.Fatal("the context does not carry the recorder")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// Each level publishes what its alarms need and nothing more: essential
// one series, Problems, the sum of what the cycle counted and the problem
// counters, when above 0.
func TestLevels(t *testing.T) {
	cycle := func(r *metrics.Recorder) {
		r.Add(metrics.CycleCompleted, 1, nil)
		r.Gauge(metrics.PendingPods, metrics.Count, 4, nil)
		r.Gauge(metrics.OldestPendingPodAge, metrics.Seconds, 700, nil)
		r.Gauge(metrics.TargetSize, metrics.Count, 3, metrics.Dims{metrics.DimNodeGroup: "workers"})
		r.Add(metrics.Problems, 2, nil) // e.g. a pod pending too long, a group backed off
	}
	failures := func(r *metrics.Recorder) {
		r.AddRollUp(metrics.ScaleUpFailures, 1, metrics.Dims{metrics.DimReason: "Throttled"})
		r.AddRollUp(metrics.ScaleUpFailures, 2, metrics.Dims{metrics.DimReason: "Refused"})
		r.Add(metrics.StrayCordonsRecovered, 1, nil)
		r.Add(metrics.DrainStartFailures, 5, nil) // not a problem counter
		r.Add(metrics.ScaleUpNodes, 4, metrics.Dims{metrics.DimNodeGroup: "workers"})
	}
	quiet := func(r *metrics.Recorder) {
		r.Add(metrics.CycleCompleted, 1, nil)
		r.Add(metrics.Problems, 0, nil)
	}
	rollback := func(r *metrics.Recorder) { // a drain step's invocation
		r.Add(metrics.DrainsStarted, 1, nil)
		r.Add(metrics.DrainsRolledBack, 1, nil)
	}
	drainStep := func(r *metrics.Recorder) { r.Add(metrics.DrainsStarted, 1, nil) }
	both := func(r *metrics.Recorder) { cycle(r); failures(r) }
	type point struct {
		name string
		dims string
		val  string
	}
	tests := []struct {
		name   string
		level  metrics.Level
		record func(*metrics.Recorder)
		want   []point
	}{
		{"off", metrics.LevelOff, both, nil},
		{"essential: the cycle's own and the counters", metrics.LevelEssential, both, []point{{metrics.Problems, "[[Cluster]]", "6"}}},
		// A quiet cycle publishes nothing: a healthy cluster pays for no metric.
		{"essential: quiet cycle", metrics.LevelEssential, quiet, nil},
		{"essential: a rollback outside a cycle", metrics.LevelEssential, rollback, []point{{metrics.Problems, "[[Cluster]]", "1"}}},
		// Nothing wrong outside a cycle: nothing published.
		{"essential: a drain step", metrics.LevelEssential, drainStep, nil},
		{"full", metrics.LevelFull, both, []point{
			{metrics.CycleCompleted, "[[Cluster]]", "1"}, {metrics.PendingPods, "[[Cluster]]", "4"},
			{metrics.OldestPendingPodAge, "[[Cluster]]", "700"}, {metrics.TargetSize, "[[Cluster NodeGroup]]", "3"},
			{metrics.ScaleUpFailures, "[[Cluster] [Cluster Reason]]", "1"}, {metrics.ScaleUpFailures, "[[Cluster] [Cluster Reason]]", "2"},
			{metrics.StrayCordonsRecovered, "[[Cluster]]", "1"}, {metrics.DrainStartFailures, "[[Cluster]]", "5"},
			{metrics.ScaleUpNodes, "[[Cluster NodeGroup]]", "4"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := metrics.New("prod", nil)
			r.SetLevel(tc.level)
			tc.record(r)
			var out bytes.Buffer
			if err := r.Write(&out); err != nil {
				t.Fatal(err)
			}
			var got []point
			for _, d := range parse(t, out.Bytes()) {
				for _, m := range d.AWS.CloudWatchMetrics[0].Metrics {
					got = append(got, point{m.Name, fmt.Sprint(d.AWS.CloudWatchMetrics[0].Dimensions), fmt.Sprint(d.Fields[m.Name])})
					if !metrics.Published(tc.level, m.Name) {
						t.Errorf("%s published at %s, which Published denies", m.Name, tc.level)
					}
				}
			}
			slices.SortFunc(got, func(a, b point) int { return strings.Compare(a.name+a.val, b.name+b.val) })
			want := slices.Clone(tc.want)
			slices.SortFunc(want, func(a, b point) int { return strings.Compare(a.name+a.val, b.name+b.val) })
			if !slices.Equal(got, want) {
				t.Errorf("published %v\nwant      %v", got, want)
			}
		})
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]metrics.Level{"": metrics.LevelFull, "full": metrics.LevelFull, "essential": metrics.LevelEssential, "off": metrics.LevelOff} {
		if got, err := metrics.ParseLevel(in); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := metrics.ParseLevel("Full"); err == nil || !strings.Contains(err.Error(), `want full, essential or off, got "Full"`) {
		t.Errorf("ParseLevel(Full): %v", err)
	}
}
