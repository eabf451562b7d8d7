// Package shadowcompare compares what nodetide would have done in shadow
// mode with what cluster-autoscaler did: it reads cluster-autoscaler's status
// ConfigMap and Events (strictly: what does not parse is a reported problem,
// never agreement) and compares them, per node group, with the shadow plan.
// Parsing and comparing are pure; Reader is the thin client-go adapter.
package shadowcompare

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"gopkg.in/yaml.v3"
)

// What cluster-autoscaler writes, as its source has it.
const (
	// Component is the source of cluster-autoscaler's Events.
	Component = "cluster-autoscaler"
	// StatusKey is the status ConfigMap's key holding the status.
	StatusKey = "status"
	// LastUpdatedAnnotation is when cluster-autoscaler last wrote its status.
	LastUpdatedAnnotation = "cluster-autoscaler.kubernetes.io/last-updated"
	// TimeFormat is the format of that annotation and of the status's time.
	TimeFormat = "2006-01-02 15:04:05.999999999 -0700 MST"
	// ReasonTriggeredScaleUp is the reason of the Event on each pod a
	// scale-up is for; ReasonScaleDown, on a node it starts removing.
	ReasonTriggeredScaleUp = "TriggeredScaleUp"
	ReasonScaleDown        = "ScaleDown"
	// ScaleDownMessage is the message of that node Event.
	ScaleDownMessage = "marked the node as toBeDeleted/unschedulable"

	textPrefix = "Cluster-autoscaler status at "
	// maxStatusBytes bounds what is parsed: a ConfigMap holds at most 1 MiB.
	maxStatusBytes = 1 << 20
	// maxGroups bounds the groups one status may list.
	maxGroups = 5000
	// maxScaleUpsPerEvent bounds the groups one scale-up Event may name.
	maxScaleUpsPerEvent = 1000
)

// Status is what cluster-autoscaler's status ConfigMap says: when it was
// written, and each node group's target (cloudProviderTarget), by
// cluster-autoscaler's name of the group.
type Status struct {
	At      time.Time
	Targets map[string]int
}

// ParseStatus reads the status ConfigMap in either of cluster-autoscaler's
// formats: the YAML document of version 1.30 on (autoscalerStatus,
// clusterWide, nodeGroups[].health.cloudProviderTarget) or the older text
// ("Cluster-autoscaler status at ...", NodeGroups: Name: / Health: ...
// cloudProviderTarget=N). Anything missing or malformed is an error naming it.
func ParseStatus(cm *corev1.ConfigMap) (Status, error) {
	if cm == nil {
		return Status{}, fmt.Errorf("no ConfigMap")
	}
	doc, ok := cm.Data[StatusKey]
	switch {
	case !ok:
		return Status{}, fmt.Errorf("ConfigMap %s/%s has no %q key", cm.Namespace, cm.Name, StatusKey)
	case len(doc) > maxStatusBytes:
		return Status{}, fmt.Errorf("ConfigMap %s/%s: %q is %d bytes, more than %d", cm.Namespace, cm.Name, StatusKey, len(doc), maxStatusBytes)
	}
	var st Status
	var err error
	if strings.HasPrefix(doc, textPrefix) {
		st, err = parseText(doc)
	} else {
		st, err = parseYAML(doc)
	}
	if err != nil {
		return Status{}, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	if st.At.IsZero() {
		// The YAML's time is optional; the annotation is always written.
		at, ok := cm.Annotations[LastUpdatedAnnotation]
		if !ok {
			return Status{}, fmt.Errorf("ConfigMap %s/%s: no status time and no %s annotation", cm.Namespace, cm.Name, LastUpdatedAnnotation)
		}
		if st.At, err = parseTime(at); err != nil {
			return Status{}, fmt.Errorf("ConfigMap %s/%s: annotation %s: %w", cm.Namespace, cm.Name, LastUpdatedAnnotation, err)
		}
	}
	return st, nil
}

// yamlStatus is the part of cluster-autoscaler's YAML status read here.
type yamlStatus struct {
	Time             string `yaml:"time"`
	AutoscalerStatus string `yaml:"autoscalerStatus"`
	NodeGroups       []struct {
		Name   string `yaml:"name"`
		Health struct {
			CloudProviderTarget *int `yaml:"cloudProviderTarget"`
		} `yaml:"health"`
	} `yaml:"nodeGroups"`
}

func parseYAML(doc string) (Status, error) {
	var y yamlStatus
	if err := yaml.Unmarshal([]byte(doc), &y); err != nil {
		return Status{}, fmt.Errorf("status is neither cluster-autoscaler's YAML nor its text: %w", err)
	}
	switch y.AutoscalerStatus {
	case "Running":
	case "":
		return Status{}, fmt.Errorf("status has no autoscalerStatus")
	default:
		return Status{}, fmt.Errorf("cluster-autoscaler is %s, not Running", y.AutoscalerStatus)
	}
	if len(y.NodeGroups) > maxGroups {
		return Status{}, fmt.Errorf("status lists %d node groups, more than %d", len(y.NodeGroups), maxGroups)
	}
	st := Status{Targets: make(map[string]int, len(y.NodeGroups))}
	if y.Time != "" {
		t, err := parseTime(y.Time)
		if err != nil {
			return Status{}, fmt.Errorf("status time: %w", err)
		}
		st.At = t
	}
	for i, g := range y.NodeGroups {
		if err := st.add(g.Name, g.Health.CloudProviderTarget); err != nil {
			return Status{}, fmt.Errorf("nodeGroups[%d]: %w", i, err)
		}
	}
	return st, nil
}

var textTarget = regexp.MustCompile(`\bcloudProviderTarget=(\d+)\b`)

// parseText reads the text status of cluster-autoscaler before 1.30: each
// group is a "Name:" line followed by a "Health:" line carrying its
// cloudProviderTarget.
func parseText(doc string) (Status, error) {
	first, rest, _ := strings.Cut(doc, "\n")
	at, err := parseTime(strings.TrimSuffix(strings.TrimPrefix(first, textPrefix), ":"))
	if err != nil {
		return Status{}, fmt.Errorf("status time: %w", err)
	}
	st := Status{At: at, Targets: map[string]int{}}
	_, groups, found := strings.Cut(rest, "\nNodeGroups:")
	if !found && !strings.HasPrefix(rest, "NodeGroups:") {
		return st, nil // no groups
	}
	name := ""
	for n, line := range strings.Split(groups, "\n") {
		field, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch field {
		case "Name":
			if name != "" {
				return Status{}, fmt.Errorf("node group %q has no Health line", name)
			}
			name = strings.TrimSpace(value)
			if name == "" {
				return Status{}, fmt.Errorf("NodeGroups line %d: empty Name", n+1)
			}
		case "Health":
			if name == "" {
				continue
			}
			m := textTarget.FindStringSubmatch(value)
			if m == nil {
				return Status{}, fmt.Errorf("node group %q: Health has no cloudProviderTarget", name)
			}
			v, err := strconv.Atoi(m[1])
			if err != nil {
				return Status{}, fmt.Errorf("node group %q: cloudProviderTarget %q: %w", name, m[1], err)
			}
			if err := st.add(name, &v); err != nil {
				return Status{}, err
			}
			name = ""
		}
	}
	if name != "" {
		return Status{}, fmt.Errorf("node group %q has no Health line", name)
	}
	return st, nil
}

func (st *Status) add(name string, target *int) error {
	switch {
	case name == "":
		return fmt.Errorf("a node group without a name")
	case target == nil:
		return fmt.Errorf("node group %q has no cloudProviderTarget", name)
	case *target < 0:
		return fmt.Errorf("node group %q: cloudProviderTarget %d is negative", name, *target)
	case len(st.Targets) >= maxGroups:
		return fmt.Errorf("more than %d node groups", maxGroups)
	}
	if _, dup := st.Targets[name]; dup {
		return fmt.Errorf("node group %q is listed twice", name)
	}
	st.Targets[name] = *target
	return nil
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeFormat, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a time like %q", s, TimeFormat)
	}
	return t.UTC(), nil
}

// ScaleUp is one node group's part of a scale-up cluster-autoscaler
// triggered: the group went from From to To nodes (at most Max).
type ScaleUp struct {
	Group    string
	From, To int
	Max      int
	At       time.Time
}

var (
	scaleUpPrefix = "pod triggered scale-up: ["
	scaleUpInfo   = regexp.MustCompile(`^\{(.+?) (\d+)->(\d+) \(max: (\d+)\)\}`)
)

// ParseScaleUp reads a TriggeredScaleUp message, e.g.
// "pod triggered scale-up: [{workers 1->3 (max: 10)} {gpu 0->1 (max: 4)}]".
func ParseScaleUp(msg string) ([]ScaleUp, error) {
	rest, ok := strings.CutPrefix(msg, scaleUpPrefix)
	if !ok || !strings.HasSuffix(rest, "]") {
		return nil, fmt.Errorf("message %q is not %q...]", clip(msg), scaleUpPrefix)
	}
	rest = strings.TrimSuffix(rest, "]")
	var out []ScaleUp
	for rest != "" {
		m := scaleUpInfo.FindStringSubmatch(rest)
		if m == nil || len(out) == maxScaleUpsPerEvent {
			return nil, fmt.Errorf("message %q: cannot read %q as {<group> <from>-><to> (max: <max>)}", clip(msg), clip(rest))
		}
		var n [3]int
		for i := range n {
			v, err := strconv.Atoi(m[i+2])
			if err != nil {
				return nil, fmt.Errorf("message %q: %q: %w", clip(msg), m[i+2], err)
			}
			n[i] = v
		}
		if n[1] < n[0] || n[1] > n[2] {
			return nil, fmt.Errorf("message %q: group %q from %d to %d (max %d) is no scale-up", clip(msg), m[1], n[0], n[1], n[2])
		}
		out = append(out, ScaleUp{Group: m[1], From: n[0], To: n[1], Max: n[2]})
		rest = strings.TrimPrefix(rest[len(m[0]):], " ")
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("message %q names no node group", clip(msg))
	}
	return out, nil
}

// EventTime is when an Event last happened: the newest of its series' last
// observation, its lastTimestamp, eventTime and firstTimestamp.
func EventTime(e *corev1.Event) time.Time {
	t := e.FirstTimestamp.Time
	for _, c := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t.UTC()
}

func clip(s string) string {
	const n = 120
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Observe turns what was read of cluster-autoscaler into observations: its
// status (cmErr: why the ConfigMap could not be read), and of its Events
// those from since (to the second) to now: the scale-ups it triggered and the nodes it started
// removing. A status older than staleAfter (0: never stale), an Event that
// does not parse or has no time, and a read that failed are problems.
func Observe(cm *corev1.ConfigMap, cmErr error, events []corev1.Event, since, now time.Time, staleAfter time.Duration) Observed {
	obs := Observed{ScaleDowns: map[string]time.Time{}}
	if cmErr != nil {
		obs.Problems = append(obs.Problems, "status ConfigMap: "+cmErr.Error())
	} else if st, err := ParseStatus(cm); err != nil {
		obs.Problems = append(obs.Problems, "status ConfigMap: "+err.Error())
	} else {
		obs.Status = &st
		if age := now.Sub(st.At); staleAfter > 0 && age > staleAfter {
			obs.Problems = append(obs.Problems, fmt.Sprintf("status ConfigMap: written %s, %s ago (more than %s): is cluster-autoscaler running?",
				st.At.Format(time.RFC3339), age.Round(time.Second), staleAfter))
		}
	}
	var ups []ScaleUp
	var bad []string
	for i := range events {
		e := &events[i]
		if e.Source.Component != Component && e.ReportingController != Component {
			continue // nodetide's own Events, and anyone else's
		}
		kind := e.InvolvedObject.Kind
		if !(e.Reason == ReasonTriggeredScaleUp && kind == "Pod") && !(e.Reason == ReasonScaleDown && kind == "Node") {
			continue
		}
		at := EventTime(e)
		switch {
		case at.IsZero():
			bad = append(bad, fmt.Sprintf("%s Event %s/%s has no time", e.Reason, e.Namespace, e.Name))
			continue
		case at.Before(since.Truncate(time.Second)) || at.After(now):
			// Event times are whole seconds: one in the second the window
			// opens counts, in this window and the one before.
			continue
		}
		if e.Reason == ReasonScaleDown {
			if e.Message != ScaleDownMessage || e.InvolvedObject.Name == "" {
				bad = append(bad, fmt.Sprintf("ScaleDown Event %s/%s: message %q is not %q", e.Namespace, e.Name, clip(e.Message), ScaleDownMessage))
				continue
			}
			if prev, ok := obs.ScaleDowns[e.InvolvedObject.Name]; !ok || at.After(prev) {
				obs.ScaleDowns[e.InvolvedObject.Name] = at
			}
			continue
		}
		parsed, err := ParseScaleUp(e.Message)
		if err != nil {
			bad = append(bad, fmt.Sprintf("TriggeredScaleUp Event %s/%s: %v", e.Namespace, e.Name, err))
			continue
		}
		for _, up := range parsed {
			up.At = at
			ups = append(ups, up)
		}
	}
	obs.ScaleUps = ScaleUps(ups)
	if len(bad) > 0 {
		p := fmt.Sprintf("%d cluster-autoscaler Event(s) unreadable: %s", len(bad), bad[0])
		if len(bad) > 1 {
			p += fmt.Sprintf(" (and %d more)", len(bad)-1)
		}
		obs.Problems = append(obs.Problems, p)
	}
	return obs
}
