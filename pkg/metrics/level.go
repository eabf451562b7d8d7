package metrics

import (
	"fmt"
	"slices"
)

// Level is how much a Recorder publishes: every custom metric costs $0.30 a
// month for each hour it receives data, so a deployment chooses.
type Level string

// The levels.
const (
	// LevelFull publishes every metric with its dimensions (but not
	// Problems, which only sums them).
	LevelFull Level = "full"
	// LevelEssential publishes one metric, Problems, under Cluster alone:
	// what the cycle counted itself plus the problem counters recorded
	// (ProblemCounter), and only above 0, so a healthy cluster publishes
	// nothing and pays for no metric.
	LevelEssential Level = "essential"
	// LevelOff publishes nothing.
	LevelOff Level = "off"
)

// Levels lists the levels, for messages.
func Levels() []Level { return []Level{LevelFull, LevelEssential, LevelOff} }

// ParseLevel reads a level; "" is LevelFull.
func ParseLevel(s string) (Level, error) {
	if s == "" {
		return LevelFull, nil
	}
	if l := Level(s); slices.Contains(Levels(), l) {
		return l, nil
	}
	return "", fmt.Errorf("want %s, %s or %s, got %q", LevelFull, LevelEssential, LevelOff, s)
}

// Published reports whether level publishes the metric name under Cluster
// alone (the dimension the stack's alarms read).
func Published(l Level, name string) bool {
	switch l {
	case LevelFull:
		return name != Problems
	case LevelEssential:
		return name == Problems
	}
	return false
}

// ProblemCounter reports whether the counter name adds to Problems at
// LevelEssential: events a person must act on that no AWS metric shows — a
// refused scale-up (its group is backed off), a drain undone, a drain whose
// execution ended without finishing it, a node left cordoned. Conditions
// that last (a pod pending too long, a group backed off, a drain past its
// deadline) the evaluate cycle adds to Problems itself, each cycle.
func ProblemCounter(name string) bool {
	switch name {
	case ScaleUpFailures, DrainsRolledBack, DrainsRecovered, StrayCordonsRecovered:
		return true
	}
	return false
}

// SetLevel sets what Write publishes (the default is LevelFull).
func (r *Recorder) SetLevel(l Level) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.level = l
}

// selected is what the level publishes, in recording order. The caller
// holds r.mu.
func (r *Recorder) selected() []*series {
	switch r.level {
	case LevelOff:
		return nil
	case LevelEssential:
		return r.problems()
	}
	var out []*series
	for _, id := range r.order {
		if s := r.series[id]; s.name != Problems {
			out = append(out, s)
		}
	}
	return out
}

// problems is LevelEssential's one series: Problems as recorded plus every
// problem counter under Cluster (a rolled-up counter's dimension values
// summed once; a counter only per group is not one), published when above 0.
func (r *Recorder) problems() []*series {
	total := 0.0
	for _, id := range r.order {
		s := r.series[id]
		if s.name != Problems && !(ProblemCounter(s.name) && (len(s.dims) == 0 || s.rollUp)) {
			continue
		}
		for _, v := range s.values {
			total += v
		}
	}
	if total == 0 {
		return nil
	}
	return []*series{{name: Problems, unit: Count, kind: sum, values: []float64{total}}}
}
