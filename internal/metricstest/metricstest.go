// Package metricstest reads EMF documents back for tests: what CloudWatch
// would extract from a function's output.
package metricstest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nodetide/nodetide/pkg/metrics"
)

// Published is every metric value in a set of documents, keyed by Key.
type Published map[string][]float64

// Key names a metric and its dimensions beyond Cluster, e.g.
// "TargetSize{NodeGroup=workers}", or "DrainsStarted".
func Key(name string, dims metrics.Dims) string {
	if len(dims) == 0 {
		return name
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(dims)) {
		parts = append(parts, k+"="+dims[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// Sum adds up a metric's values (0 when it was not published).
func (p Published) Sum(name string, dims metrics.Dims) float64 {
	var s float64
	for _, v := range p[Key(name, dims)] {
		s += v
	}
	return s
}

// Has tells whether a metric was published.
func (p Published) Has(name string, dims metrics.Dims) bool { return len(p[Key(name, dims)]) > 0 }

// Parse reads EMF JSON lines (other lines, such as logs, are skipped) for
// cluster, and returns what each dimension set of each metric published.
func Parse(out []byte, cluster string) (Published, error) {
	p := Published{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var fields map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &fields) != nil || fields["_aws"] == nil {
			continue
		}
		var d metrics.Directive
		if err := json.Unmarshal(fields["_aws"], &d); err != nil {
			return nil, fmt.Errorf("_aws: %w", err)
		}
		var c string
		if err := json.Unmarshal(fields[metrics.DimCluster], &c); err != nil || c != cluster {
			return nil, fmt.Errorf("document for cluster %q, want %q", c, cluster)
		}
		for _, md := range d.CloudWatchMetrics {
			for _, set := range md.Dimensions {
				dims := metrics.Dims{}
				for _, name := range set {
					var v string
					if err := json.Unmarshal(fields[name], &v); err != nil {
						return nil, fmt.Errorf("dimension %s: %w", name, err)
					}
					if name != metrics.DimCluster {
						dims[name] = v
					}
				}
				for _, m := range md.Metrics {
					raw := fields[m.Name]
					var one float64
					var many []float64
					switch {
					case json.Unmarshal(raw, &one) == nil:
						many = []float64{one}
					case json.Unmarshal(raw, &many) == nil:
					default:
						return nil, fmt.Errorf("metric %s: value %s", m.Name, raw)
					}
					k := Key(m.Name, dims)
					p[k] = append(p[k], many...)
				}
			}
		}
	}
	return p, sc.Err()
}
