package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The compact form (FormatCompact) holds only what the planner reads. Pods
// of one controller share their labels, kept annotations, owner references
// and trimmed spec: the form writes each such "shape" once, under
// podShapes, and per pod only what is its own plus the index of its shape:
//
//	{
//	  "format": "nodetide.io/snapshot-compact/v1",
//	  "capturedAt": "2026-11-30T10:00:00Z",
//	  "counts": {"nodes": 1, "podShapes": 1, "pods": 2, "podDisruptionBudgets": 0},
//	  "nodeGroups": [
//	    {"name": "workers", "provider": "aws", "minSize": 1, "maxSize": 10, "targetSize": 1, "template": {…}, "instances": ["aws:///eu-west-1a/i-0abc"]}
//	  ],
//	  "state": {"unneededSince": {}, "lastScaleUp": {}},
//	  "nodes": [
//	    {"metadata": {"name": "node-a", …}, "spec": {"providerID": "aws:///eu-west-1a/i-0abc"}, "status": {"allocatable": {…}, …}}
//	  ],
//	  "podDisruptionBudgets": [],
//	  "podShapes": [
//	    {"labels": {"app": "web"}, "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9", "uid": "…", "controller": true}],
//	     "spec": {"containers": [{"name": "web", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}]}}
//	  ],
//	  "pods": [
//	    {"name": "web-5d9-abcde", "namespace": "shop", "uid": "…", "shape": 0, "nodeName": "node-a", "phase": "Running", "creationTimestamp": "2026-11-30T09:00:00Z"},
//	    {"name": "web-5d9-fghij", "namespace": "shop", "uid": "…", "shape": 0, "phase": "Pending", "creationTimestamp": "2026-11-30T09:59:00Z",
//	     "scheduled": {"status": "False", "reason": "Unschedulable", "lastTransitionTime": "2026-11-30T09:59:01Z"}}
//	  ]
//	}
//
// format must be the first key. Nodes and PDBs are Kubernetes objects
// trimmed as the Trimmer trims them; a shape's ownerReferences and spec are
// Kubernetes fields too (unknown fields in them are tolerated, as newer
// clusters add some). Every other key is nodetide's and must be known.
// podShapes must come before pods; counts, when given, must match the lists
// (they let the reader size them up front).

// compactCounts is the compact form's counts object.
type compactCounts struct {
	Nodes                int `json:"nodes"`
	PodShapes            int `json:"podShapes"`
	Pods                 int `json:"pods"`
	PodDisruptionBudgets int `json:"podDisruptionBudgets"`
}

// compactShape is one podShapes entry as written.
type compactShape struct {
	Labels          map[string]string       `json:"labels,omitempty"`
	Annotations     map[string]string       `json:"annotations,omitempty"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
	Spec            *corev1.PodSpec         `json:"spec"`
}

// compactPodOut is one pods entry as written.
type compactPodOut struct {
	Name              string           `json:"name"`
	Namespace         string           `json:"namespace,omitempty"`
	UID               types.UID        `json:"uid,omitempty"`
	Shape             int              `json:"shape"`
	NodeName          string           `json:"nodeName,omitempty"`
	Phase             corev1.PodPhase  `json:"phase,omitempty"`
	NominatedNodeName string           `json:"nominatedNodeName,omitempty"`
	CreationTimestamp *metav1.Time     `json:"creationTimestamp,omitempty"`
	DeletionTimestamp *metav1.Time     `json:"deletionTimestamp,omitempty"`
	Scheduled         *compactSchedule `json:"scheduled,omitempty"`
}

type compactSchedule struct {
	Status             corev1.ConditionStatus `json:"status"`
	Reason             string                 `json:"reason,omitempty"`
	LastTransitionTime *metav1.Time           `json:"lastTransitionTime,omitempty"`
}

// WriteCompactSnapshot writes s in the compact form (FormatCompact), after
// the checks WriteSnapshot makes. It trims what s holds (s itself is not
// changed) and streams: one object is encoded at a time.
func WriteCompactSnapshot(w io.Writer, s Snapshot) error {
	if err := validateSnapshot(&s, ".metadata.name"); err != nil {
		return err
	}
	tr := NewTrimmer()
	shapeAt := map[*podShape]int{}
	var shapes []*podShape
	podShape := make([]int32, len(s.Pods))
	for i := range s.Pods {
		_, sh := tr.pod(&s.Pods[i])
		at, ok := shapeAt[sh]
		if !ok {
			at = len(shapes)
			shapeAt[sh] = at
			shapes = append(shapes, sh)
		}
		podShape[i] = int32(at)
	}

	sw := newSnapWriter(w, "")
	sw.raw("{\n")
	sw.field("format", FormatCompact)
	sw.field("capturedAt", s.CapturedAt.UTC())
	sw.field("counts", compactCounts{Nodes: len(s.Nodes), PodShapes: len(shapes), Pods: len(s.Pods), PodDisruptionBudgets: len(s.PodDisruptionBudgets)})
	groups := normalGroups(s.NodeGroups)
	sw.list("nodeGroups", len(groups), func(i int) { sw.encode(&groups[i], 2, false) })
	sw.field("state", normalState(s.State))
	sw.list("nodes", len(s.Nodes), func(i int) {
		n := tr.Node(&s.Nodes[i])
		sw.encode(&n, 2, false)
	})
	sw.list("podDisruptionBudgets", len(s.PodDisruptionBudgets), func(i int) {
		b := tr.PDB(&s.PodDisruptionBudgets[i])
		sw.encode(&b, 2, false)
	})
	sw.list("podShapes", len(shapes), func(i int) {
		sh := shapes[i]
		sw.encode(&compactShape{Labels: sh.labels, Annotations: sh.annotations, OwnerReferences: sh.owners, Spec: &sh.spec}, 2, false)
	})
	sw.list("pods", len(s.Pods), func(i int) {
		p := &s.Pods[i]
		out := compactPodOut{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, Shape: int(podShape[i]),
			NodeName: p.Spec.NodeName, Phase: p.Status.Phase, NominatedNodeName: p.Status.NominatedNodeName,
			DeletionTimestamp: p.DeletionTimestamp,
		}
		if !p.CreationTimestamp.IsZero() {
			out.CreationTimestamp = &p.CreationTimestamp
		}
		if c := scheduledCondition(p); c != nil {
			out.Scheduled = &compactSchedule{Status: c.Status, Reason: c.Reason}
			if !c.LastTransitionTime.IsZero() {
				out.Scheduled.LastTransitionTime = &c.LastTransitionTime
			}
		}
		sw.encode(&out, 2, false)
	})
	sw.raw("\n}\n")
	return sw.flush()
}

// compactReader reads the compact form's own parts: counts, podShapes and
// pods.
type compactReader struct {
	d         *docDecoder
	counts    compactCounts
	hasCounts bool
	shapes    []*podShape
	pod       compactPod // reused: decoding one allocates only its strings
}

// hint is a capacity for a list the counts say has n elements.
func (c *compactReader) hint(n int) int { return min(max(n, 0), maxPrealloc) }

func (c *compactReader) readCounts(path string) error {
	c.hasCounts = true
	return c.d.object(path, []string{"nodes", "podShapes", "pods", "podDisruptionBudgets"}, func(key, path string) error {
		var n *int
		switch key {
		case "nodes":
			n = &c.counts.Nodes
		case "podShapes":
			n = &c.counts.PodShapes
		case "pods":
			n = &c.counts.Pods
		case "podDisruptionBudgets":
			n = &c.counts.PodDisruptionBudgets
		}
		if err := c.d.value(path, n); err != nil {
			return err
		}
		if *n < 0 {
			return &DocumentError{Path: path, Err: fmt.Errorf("must not be negative (got %d)", *n)}
		}
		return nil
	})
}

// checkCounts reports a count that does not match its list.
func (c *compactReader) checkCounts(s *Snapshot) error {
	if !c.hasCounts {
		return nil
	}
	for _, f := range []struct {
		name      string
		said, got int
	}{
		{"nodes", c.counts.Nodes, len(s.Nodes)},
		{"podShapes", c.counts.PodShapes, len(c.shapes)},
		{"pods", c.counts.Pods, len(s.Pods)},
		{"podDisruptionBudgets", c.counts.PodDisruptionBudgets, len(s.PodDisruptionBudgets)},
	} {
		if f.said != f.got {
			return &DocumentError{Path: "counts." + f.name, Err: fmt.Errorf("says %d, but the document has %d", f.said, f.got)}
		}
	}
	return nil
}

func (c *compactReader) readShapes(path string) error {
	if c.shapes == nil {
		c.shapes = make([]*podShape, 0, c.hint(c.counts.PodShapes))
	}
	tr := c.d.tr
	return c.d.array(path, func(i int, path string) error {
		var (
			labels, annotations map[string]string
			owners              []metav1.OwnerReference
			spec                corev1.PodSpec
		)
		err := c.d.object(path, []string{"labels", "annotations", "ownerReferences", "spec"}, func(key, path string) error {
			switch key {
			case "labels":
				return c.d.value(path, &labels)
			case "annotations":
				return c.d.value(path, &annotations)
			case "ownerReferences":
				return c.d.value(path, &owners)
			case "spec":
				return c.d.value(path, &spec)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := checkPodResources(path+".spec", &spec); err != nil {
			return err
		}
		if spec.NodeName != "" {
			return &DocumentError{Path: path + ".spec.nodeName", Err: errors.New("belongs to each pod (pods[].nodeName), not to a shape")}
		}
		c.shapes = append(c.shapes, &podShape{
			labels:      tr.strMap(labels, nil),
			annotations: tr.strMap(annotations, keptAnnotation),
			owners:      tr.owners(owners),
			spec:        tr.internSpec(trimPodSpec(&spec)),
		})
		return nil
	})
}

func (c *compactReader) readPods(path string, out *[]corev1.Pod) error {
	pods := make([]corev1.Pod, 0, c.hint(c.counts.Pods))
	tr := c.d.tr
	err := c.d.array(path, func(i int, path string) error {
		mark := c.d.mark()
		p := &c.pod
		if err := c.d.dec.Decode(p); err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				// The pod's text ends where the decoder now is.
				line, col := c.d.src.position(c.d.mark() - int64(p.size) + int64(fe.off))
				if fe.path != "" {
					path = joinPath(path, fe.path)
				}
				return &DocumentError{Path: path, Line: line, Column: col, Err: fe.err}
			}
			return c.d.fail(path, mark, err)
		}
		if p.seen&(1<<podKeyShape) == 0 {
			return &DocumentError{Path: path + ".shape", Err: errors.New("missing: every pod names its podShapes entry")}
		}
		if p.shape >= len(c.shapes) {
			return &DocumentError{Path: path + ".shape", Err: fmt.Errorf("no podShapes[%d]: %d shapes come before the pods (podShapes must come first)", p.shape, len(c.shapes))}
		}
		sh := c.shapes[p.shape]
		pods = append(pods, corev1.Pod{})
		q := &pods[len(pods)-1]
		q.Name = p.name
		q.Namespace = tr.str(p.namespace)
		q.UID = types.UID(p.uid)
		q.CreationTimestamp = metav1.NewTime(p.created)
		if !p.deleted.IsZero() {
			t := metav1.NewTime(p.deleted)
			q.DeletionTimestamp = &t
		}
		q.Labels, q.Annotations, q.OwnerReferences = sh.labels, sh.annotations, sh.owners
		q.Spec = sh.spec
		q.Spec.NodeName = tr.str(p.nodeName)
		q.Status.Phase = corev1.PodPhase(tr.str(p.phase))
		q.Status.NominatedNodeName = tr.str(p.nominated)
		if p.scheduled {
			q.Status.Conditions = []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionStatus(tr.str(p.schedStatus)),
				Reason: tr.str(p.schedReason), LastTransitionTime: metav1.NewTime(p.schedTime),
			}}
		}
		return nil
	})
	*out = pods
	return err
}

// compactPod is one pods entry as read. Its fields are nodetide's, so it is
// read strictly (exact keys, none twice, none unknown) by a small parser of
// its own: decoding each of 150,000 pods through reflection and a token
// loop would cost most of a plan's time.
type compactPod struct {
	size int // length of the entry's text
	seen uint32

	name, namespace, uid, nodeName, phase, nominated string
	shape                                            int
	created, deleted                                 time.Time
	scheduled                                        bool
	schedStatus, schedReason                         string
	schedTime                                        time.Time
}

var (
	compactPodKeys      = []string{"name", "namespace", "uid", "shape", "nodeName", "phase", "nominatedNodeName", "creationTimestamp", "deletionTimestamp", "scheduled"}
	compactScheduleKeys = []string{"status", "reason", "lastTransitionTime"}
)

const podKeyShape = 3 // index of "shape" in compactPodKeys

// fieldError is a problem at a key of a compact pod, off bytes into its
// text.
type fieldError struct {
	path string
	off  int
	err  error
}

func (e *fieldError) Error() string { return e.path + ": " + e.err.Error() }

// UnmarshalJSON reads one pods entry. The decoder hands it a complete,
// syntactically valid JSON value.
func (p *compactPod) UnmarshalJSON(data []byte) error {
	*p = compactPod{size: len(data)}
	l := &flatLexer{data: data}
	seen, err := l.object("", compactPodKeys, func(key, path string) error {
		var err error
		switch key {
		case "name":
			p.name, err = l.stringValue(path)
		case "namespace":
			p.namespace, err = l.stringValue(path)
		case "uid":
			p.uid, err = l.stringValue(path)
		case "shape":
			p.shape, err = l.indexValue(path)
		case "nodeName":
			p.nodeName, err = l.stringValue(path)
		case "phase":
			p.phase, err = l.stringValue(path)
		case "nominatedNodeName":
			p.nominated, err = l.stringValue(path)
		case "creationTimestamp":
			p.created, err = l.timeValue(path)
		case "deletionTimestamp":
			p.deleted, err = l.timeValue(path)
		case "scheduled":
			if l.null() {
				return nil
			}
			p.scheduled = true
			_, err = l.object(path, compactScheduleKeys, func(key, path string) error {
				var err error
				switch key {
				case "status":
					p.schedStatus, err = l.stringValue(path)
				case "reason":
					p.schedReason, err = l.stringValue(path)
				case "lastTransitionTime":
					p.schedTime, err = l.timeValue(path)
				}
				return err
			})
		}
		return err
	})
	p.seen = seen
	return err
}

// flatLexer reads values of a small, syntactically valid JSON object.
type flatLexer struct {
	data []byte
	off  int
}

func (l *flatLexer) ws() {
	for l.off < len(l.data) {
		switch l.data[l.off] {
		case ' ', '\t', '\r', '\n':
			l.off++
		default:
			return
		}
	}
}

// kind describes the value at the current offset.
func (l *flatLexer) kind() string {
	switch l.data[l.off] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func (l *flatLexer) wrong(path, want string) error {
	return &fieldError{path: path, off: l.off, err: fmt.Errorf("expected %s, got %s", want, l.kind())}
}

// object reads an object whose keys must be among known (at most 32),
// calling each with the lexer at the key's value; it returns the set of
// keys seen, by index.
func (l *flatLexer) object(path string, known []string, each func(key, path string) error) (uint32, error) {
	l.ws()
	if l.data[l.off] != '{' {
		return 0, l.wrong(path, "an object")
	}
	l.off++
	var seen uint32
	for {
		l.ws()
		switch l.data[l.off] {
		case '}':
			l.off++
			return seen, nil
		case ',':
			l.off++
			l.ws()
		}
		keyOff := l.off
		key := l.str()
		kp := joinPath(path, key)
		i := slices.Index(known, key)
		if i < 0 {
			return seen, &fieldError{path: kp, off: keyOff, err: fmt.Errorf("%w (known: %s)", ErrUnknownKey, strings.Join(known, ", "))}
		}
		if seen&(1<<i) != 0 {
			return seen, &fieldError{path: kp, off: keyOff, err: ErrDuplicateKey}
		}
		seen |= 1 << i
		l.ws()
		l.off++ // the colon
		l.ws()
		if err := each(key, kp); err != nil {
			return seen, err
		}
	}
}

// str reads the string at the current offset.
func (l *flatLexer) str() string {
	start := l.off
	i, escaped := start+1, false
	for l.data[i] != '"' {
		if l.data[i] == '\\' {
			escaped = true
			i++
		}
		i++
	}
	l.off = i + 1
	raw := l.data[start+1 : i]
	if !escaped && utf8.Valid(raw) {
		return string(raw)
	}
	// Escapes and invalid UTF-8 are decoded as encoding/json decodes them.
	var s string
	_ = json.Unmarshal(l.data[start:i+1], &s)
	return s
}

// null consumes a null, reporting whether there was one.
func (l *flatLexer) null() bool {
	if l.data[l.off] == 'n' {
		l.off += len("null")
		return true
	}
	return false
}

// stringValue reads a string; null reads as "".
func (l *flatLexer) stringValue(path string) (string, error) {
	if l.null() {
		return "", nil
	}
	if l.data[l.off] != '"' {
		return "", l.wrong(path, "a string")
	}
	return l.str(), nil
}

// indexValue reads a non-negative integer that fits an int32.
func (l *flatLexer) indexValue(path string) (int, error) {
	start := l.off
	end := start
	for end < len(l.data) && isNumberByte(l.data[end]) {
		end++
	}
	if end == start {
		return 0, l.wrong(path, "a non-negative integer")
	}
	n, err := strconv.ParseInt(string(l.data[start:end]), 10, 32)
	if err != nil || n < 0 {
		return 0, &fieldError{path: path, off: start, err: fmt.Errorf("expected a non-negative integer, got %s", l.data[start:end])}
	}
	l.off = end
	return int(n), nil
}

// timeValue reads an RFC 3339 time as metav1.Time does (in local time);
// null reads as the zero time.
func (l *flatLexer) timeValue(path string) (time.Time, error) {
	start := l.off
	if l.null() {
		return time.Time{}, nil
	}
	s, err := l.stringValue(path)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, &fieldError{path: path, off: start, err: fmt.Errorf("bad time %q: want RFC 3339, as 2026-11-30T10:00:00Z", s)}
	}
	return t.Local(), nil
}
