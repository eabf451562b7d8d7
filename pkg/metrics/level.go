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
	// LevelFull publishes every metric with its dimensions.
	LevelFull Level = "full"
	// LevelEssential publishes only the metrics the essential alarms watch,
	// under Cluster alone, and OldestPendingPodAge only while a pod is
	// pending: one metric (CycleCompleted) is published every cycle, the
	// rest only in the hours something happens.
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

// Essential reports whether LevelEssential publishes the metric name: those
// no AWS metric can replace (a cycle completed, a pod unschedulable too
// long, a failed scale-up, a drain rolled back or ended unfinished, a stray
// cordon).
func Essential(name string) bool {
	switch name {
	case CycleCompleted, OldestPendingPodAge, ScaleUpFailures, DrainsRolledBack, DrainsRecovered, StrayCordonsRecovered:
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

// selected is what the level publishes, in recording order: at
// LevelEssential, the essential metrics under Cluster alone (a rolled-up
// counter's dimension values summed; a metric only per group is not
// published), and OldestPendingPodAge only above 0. The caller holds r.mu.
func (r *Recorder) selected() []*series {
	var out []*series
	if r.level == LevelOff {
		return nil
	}
	essential := r.level == LevelEssential
	merged := map[string]*series{}
	for _, id := range r.order {
		s := r.series[id]
		if !essential {
			out = append(out, s)
			continue
		}
		if !Essential(s.name) || (len(s.dims) > 0 && !s.rollUp) {
			continue
		}
		if s.name == OldestPendingPodAge && len(s.values) == 1 && s.values[0] == 0 {
			continue
		}
		if m, ok := merged[s.name]; ok {
			if m.kind == sum && len(m.values) == 1 && len(s.values) == 1 {
				m.values[0] += s.values[0]
			} else {
				m.values = append(m.values, s.values...)
			}
			continue
		}
		c := &series{name: s.name, unit: s.unit, kind: s.kind, values: slices.Clone(s.values)}
		merged[s.name] = c
		out = append(out, c)
	}
	return out
}
