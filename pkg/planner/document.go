package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DocumentError is a problem in a snapshot document, located by its JSON
// path (e.g. "nodeGroups[1].template.allocatable.cpu") and, where the
// position is known, line and column.
type DocumentError struct {
	Path   string
	Line   int
	Column int
	Err    error
}

func (e *DocumentError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	if e.Line > 0 {
		if e.Path != "" {
			b.WriteString(" (")
		}
		fmt.Fprintf(&b, "line %d:%d", e.Line, e.Column)
		if e.Path != "" {
			b.WriteString(")")
		}
	}
	if b.Len() == 0 {
		b.WriteString("snapshot")
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *DocumentError) Unwrap() error { return e.Err }

// Problems ReadSnapshot reports (wrapped in a DocumentError).
var (
	ErrUnknownKey   = errors.New("unknown key")
	ErrDuplicateKey = errors.New("duplicate key")
)

// ReadSnapshot decodes and checks a snapshot document. Keys nodetide defines
// (the top level, node groups, templates, state) must be known; Kubernetes
// objects may carry fields this build does not know, as newer clusters add
// them. Errors are *DocumentError values naming the JSON path.
func ReadSnapshot(r io.Reader) (Snapshot, error) {
	data, err := readAll(r)
	if err != nil {
		return Snapshot{}, fmt.Errorf("read snapshot: %w", err)
	}
	d := &docDecoder{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	if off, tok := hugeExponent(data); off >= 0 {
		line, col := d.position(int64(off))
		return Snapshot{}, &DocumentError{Line: line, Column: col,
			Err: fmt.Errorf("quantity %q: its exponent is beyond ±%d", tok, maxExponent)}
	}
	var s Snapshot
	err = d.object("", []string{"capturedAt", "nodeGroups", "nodes", "pods", "podDisruptionBudgets", "state"}, func(key, path string) error {
		switch key {
		case "capturedAt":
			return d.value(path, &s.CapturedAt)
		case "nodeGroups":
			return d.array(path, func(i int, path string) error {
				s.NodeGroups = append(s.NodeGroups, NodeGroup{})
				return d.nodeGroup(path, &s.NodeGroups[len(s.NodeGroups)-1])
			})
		case "nodes":
			return decodeList(d, path, &s.Nodes)
		case "pods":
			return decodeList(d, path, &s.Pods)
		case "podDisruptionBudgets":
			return decodeList(d, path, &s.PodDisruptionBudgets)
		case "state":
			return d.state(path, &s.State)
		}
		return nil
	})
	if err != nil {
		return Snapshot{}, err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return Snapshot{}, d.fail("", d.start(), errors.New("unexpected data after the document"))
	}
	if err := validateSnapshot(&s); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// WriteSnapshot writes s as the indented document ReadSnapshot reads,
// after the same checks; empty lists are written as [] and maps as {}.
func WriteSnapshot(w io.Writer, s Snapshot) error {
	if err := validateSnapshot(&s); err != nil {
		return err
	}
	s.CapturedAt = s.CapturedAt.UTC()
	groups := make([]NodeGroup, len(s.NodeGroups))
	for i, g := range s.NodeGroups {
		g.Instances = orEmpty(g.Instances)
		g.Template.Taints = orEmpty(g.Template.Taints)
		if g.Template.Labels == nil {
			g.Template.Labels = map[string]string{}
		}
		if g.Template.Allocatable == nil {
			g.Template.Allocatable = corev1.ResourceList{}
		}
		groups[i] = g
	}
	s.NodeGroups = groups
	s.Nodes = orEmpty(s.Nodes)
	s.Pods = orEmpty(s.Pods)
	s.PodDisruptionBudgets = orEmpty(s.PodDisruptionBudgets)
	s.State = normalState(s.State)
	return writeJSON(w, "snapshot", s)
}

// WritePlan writes p as the indented `nodetide plan -o json` document.
func WritePlan(w io.Writer, p Plan) error {
	p.ScaleUp = slices.Clone(orEmpty(p.ScaleUp))
	for i := range p.ScaleUp {
		p.ScaleUp[i].Pods = orEmpty(p.ScaleUp[i].Pods)
	}
	p.ScaleDown = orEmpty(p.ScaleDown)
	p.Unschedulable = orEmpty(p.Unschedulable)
	p.NodeGroups = orEmpty(p.NodeGroups)
	p.State = normalState(p.State)
	return writeJSON(w, "plan", p)
}

func writeJSON(w io.Writer, what string, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// normalState copies the state with non-nil maps and UTC times.
func normalState(s State) State {
	utc := func(m map[string]time.Time) map[string]time.Time {
		out := make(map[string]time.Time, len(m))
		for k, t := range m {
			out[k] = t.UTC()
		}
		return out
	}
	return State{UnneededSince: utc(s.UnneededSince), LastScaleUp: utc(s.LastScaleUp), BackoffUntil: utc(s.BackoffUntil)}
}

// docDecoder streams the document: lists of Kubernetes objects are decoded
// one element at a time, so an error names its index and the document is
// not copied.
type docDecoder struct {
	data []byte
	dec  *json.Decoder
}

// start is the offset of the next value (after separators).
func (d *docDecoder) start() int64 {
	off := d.dec.InputOffset()
	for off < int64(len(d.data)) {
		switch d.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (d *docDecoder) position(off int64) (line, col int) {
	off = min(max(off, 0), int64(len(d.data)))
	before := d.data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// fail turns a decoding error at offset off (where the value at path
// starts) into a DocumentError.
func (d *docDecoder) fail(path string, off int64, err error) error {
	var de *DocumentError
	if errors.As(err, &de) {
		return err
	}
	e := &DocumentError{Path: path, Err: err}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		e.Line, e.Column = d.position(syn.Offset)
		e.Err = errors.New(syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		e.Line, e.Column = d.position(int64(len(d.data)))
		e.Err = errors.New("unexpected end of document")
	case errors.As(err, &typ):
		// Inside an object the offset locates the field; for a plain value
		// the value's own start is the clearer place to point at.
		e.Line, e.Column = d.position(off)
		if typ.Field != "" {
			e.Path = joinPath(path, typ.Field)
			e.Line, e.Column = d.position(off + typ.Offset)
		}
		e.Err = fmt.Errorf("expected %s, got %s", typ.Type, typ.Value)
	default:
		e.Line, e.Column = d.position(off)
	}
	return e
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *docDecoder) value(path string, v any) error {
	off := d.start()
	if err := d.dec.Decode(v); err != nil {
		return d.fail(path, off, err)
	}
	return nil
}

// open reads the opening delimiter of an object or array, or null
// (reported as false: an absent list).
func (d *docDecoder) open(path string, want json.Delim) (bool, error) {
	off := d.start()
	tok, err := d.dec.Token()
	if err != nil {
		return false, d.fail(path, off, err)
	}
	if tok == nil {
		return false, nil
	}
	if tok != want {
		kind := "an object"
		if want == '[' {
			kind = "an array"
		}
		return false, d.fail(path, off, fmt.Errorf("expected %s, got %s", kind, describe(tok)))
	}
	return true, nil
}

func describe(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprint(tok)
}

// object reads an object whose keys must be among known, calling each for
// its value.
func (d *docDecoder) object(path string, known []string, each func(key, path string) error) error {
	ok, err := d.open(path, '{')
	if err != nil || !ok {
		return err
	}
	seen := map[string]bool{}
	for d.dec.More() {
		off := d.start()
		tok, err := d.dec.Token()
		if err != nil {
			return d.fail(path, off, err)
		}
		key := tok.(string)
		kp := joinPath(path, key)
		if !slices.Contains(known, key) {
			return &DocumentError{Path: kp, Err: fmt.Errorf("%w (known: %s)", ErrUnknownKey, strings.Join(known, ", "))}
		}
		if seen[key] {
			return &DocumentError{Path: kp, Err: ErrDuplicateKey}
		}
		seen[key] = true
		if err := each(key, kp); err != nil {
			return err
		}
	}
	off := d.start()
	if _, err := d.dec.Token(); err != nil {
		return d.fail(path, off, err)
	}
	return nil
}

// array reads an array, calling each per element.
func (d *docDecoder) array(path string, each func(i int, path string) error) error {
	ok, err := d.open(path, '[')
	if err != nil || !ok {
		return err
	}
	for i := 0; d.dec.More(); i++ {
		if err := each(i, path+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	off := d.start()
	if _, err := d.dec.Token(); err != nil {
		return d.fail(path, off, err)
	}
	return nil
}

// maxExponent bounds the decimal exponent of a number written in the
// document. Kubernetes' quantity parser rounds 1e-9999999 to nano-units by
// computing 10^9999999, which takes seconds per value (it stalled fuzzing
// at a few executions a minute); no countable quantity comes near the bound.
const maxExponent = 999

// hugeExponent finds the first JSON string or number that is a number
// whose exponent is beyond maxExponent (e.g. "1e-5000"), returning its
// offset and text, or -1. Only a whole token in number form counts, so a
// UID such as "3e12345-…" does not.
func hugeExponent(data []byte) (int, string) {
	for i := 0; i < len(data); i++ {
		c := data[i]
		var start, end int
		switch {
		case c == '"':
			start = i + 1
			end = start
			for end < len(data) && data[end] != '"' {
				if data[end] == '\\' {
					end++
				}
				end++
			}
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			start, end = i, i
			for end < len(data) && bytes.IndexByte([]byte("+-.eE0123456789"), data[end]) >= 0 {
				end++
			}
			i = end - 1
		default:
			continue
		}
		if end > len(data) {
			end = len(data)
		}
		if tok := data[start:end]; bigExponent(tok) {
			return start, string(tok)
		}
	}
	return -1, ""
}

// bigExponent reports whether tok is [sign]digits[.digits]e[sign]exponent
// with an exponent beyond maxExponent.
func bigExponent(tok []byte) bool {
	e := bytes.IndexAny(tok, "eE")
	if e <= 0 {
		return false
	}
	mant, exp := tok[:e], tok[e+1:]
	mant = bytes.TrimLeft(mant, "+-")
	if len(mant) == 0 || strings.Trim(string(mant), "0123456789.") != "" || bytes.Count(mant, []byte{'.'}) > 1 || string(mant) == "." {
		return false
	}
	if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	if len(exp) == 0 || strings.Trim(string(exp), "0123456789") != "" {
		return false
	}
	exp = bytes.TrimLeft(exp, "0")
	return len(exp) > len(strconv.Itoa(maxExponent)) || (len(exp) == len(strconv.Itoa(maxExponent)) && string(exp) > strconv.Itoa(maxExponent))
}

// decodeList reads a list of Kubernetes objects, tolerating unknown fields.
// The list is sized up front: a Pod is over a kilobyte, and growing a slice
// of 150,000 of them by appending allocates several times the final size.
func decodeList[T any](d *docDecoder, path string, out *[]T) error {
	*out = make([]T, 0, countElements(d.data[d.start():]))
	return d.array(path, func(i int, path string) error {
		var zero T
		*out = append(*out, zero)
		return d.value(path, &(*out)[i])
	})
}

// countElements counts the elements of the array data starts with. It is a
// capacity hint only: malformed input is left to the decoder to report.
func countElements(data []byte) int {
	if len(data) == 0 || data[0] != '[' {
		return 0
	}
	depth, n := 0, 0
	inString, escaped, empty := false, false, true
	for _, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				if empty {
					return 0
				}
				return n + 1
			}
		case ',':
			if depth == 1 {
				n++
			}
		}
		if depth > 1 || c != '[' {
			empty = false
		}
	}
	return 0
}

// readAll reads the document into one buffer, sized up front when the
// reader knows its length (files, in-memory readers).
func readAll(r io.Reader) ([]byte, error) {
	size := 0
	switch v := r.(type) {
	case interface{ Len() int }:
		size = v.Len()
	case interface{ Stat() (fs.FileInfo, error) }:
		if fi, err := v.Stat(); err == nil && fi.Mode().IsRegular() {
			size = int(fi.Size())
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

func (d *docDecoder) nodeGroup(path string, g *NodeGroup) error {
	known := []string{"name", "provider", "minSize", "maxSize", "targetSize", "template", "instances", "boundsFrom"}
	return d.object(path, known, func(key, path string) error {
		switch key {
		case "name":
			return d.value(path, &g.Name)
		case "provider":
			return d.value(path, &g.Provider)
		case "minSize":
			return d.value(path, &g.MinSize)
		case "maxSize":
			return d.value(path, &g.MaxSize)
		case "targetSize":
			return d.value(path, &g.TargetSize)
		case "instances":
			return d.value(path, &g.Instances)
		case "boundsFrom":
			return d.value(path, &g.BoundsFrom)
		case "template":
			return d.template(path, &g.Template)
		}
		return nil
	})
}

func (d *docDecoder) template(path string, t *Template) error {
	return d.object(path, []string{"allocatable", "labels", "taints"}, func(key, path string) error {
		switch key {
		case "labels":
			return d.value(path, &t.Labels)
		case "taints":
			return decodeList(d, path, &t.Taints)
		case "allocatable":
			var raw map[string]json.RawMessage
			if err := d.value(path, &raw); err != nil {
				return err
			}
			t.Allocatable = corev1.ResourceList{}
			names := make([]string, 0, len(raw))
			for k := range raw {
				names = append(names, k)
			}
			slices.Sort(names)
			for _, name := range names {
				q, err := parseQuantity(raw[name])
				if err != nil {
					return &DocumentError{Path: joinPath(path, name), Err: err}
				}
				t.Allocatable[corev1.ResourceName(name)] = q
			}
		}
		return nil
	})
}

// maxQuantity is the most the planner can count: it adds quantities as
// int64 milli-units.
var maxQuantity = *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)

// CheckQuantity reports why q is not an amount the planner can count: a
// negative one, or one beyond int64 milli-units (1e309 parses, but its
// milli-value wraps to 0 and a pod asking for it would seem to ask nothing).
func CheckQuantity(q resource.Quantity) error {
	if q.Sign() < 0 {
		return fmt.Errorf("must not be negative (got %s)", q.String())
	}
	// Comparing 1e999999999 with the bound directly would expand it to a
	// billion-digit integer: its order of magnitude settles it first.
	d := q.AsDec()
	if magnitude := len(d.UnscaledBig().String()) - int(d.Scale()); magnitude > len(strconv.FormatInt(math.MaxInt64, 10)) || q.Cmp(maxQuantity) > 0 {
		return fmt.Errorf("is too large (got %s, at most %s)", q.String(), maxQuantity.String())
	}
	return nil
}

// parseQuantity accepts a quantity as a string ("4", "16Gi") or a number.
func parseQuantity(raw json.RawMessage) (resource.Quantity, error) {
	s := string(bytes.TrimSpace(raw))
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(raw, &s); err != nil {
			return resource.Quantity{}, fmt.Errorf("bad quantity: %w", err)
		}
	}
	return resource.ParseQuantity(s)
}

func (d *docDecoder) state(path string, s *State) error {
	return d.object(path, []string{"unneededSince", "lastScaleUp", "backoffUntil"}, func(key, path string) error {
		switch key {
		case "unneededSince":
			return d.value(path, &s.UnneededSince)
		case "lastScaleUp":
			return d.value(path, &s.LastScaleUp)
		case "backoffUntil":
			return d.value(path, &s.BackoffUntil)
		}
		return nil
	})
}

// validateSnapshot checks what JSON syntax cannot: sizes, names, instances,
// quantities, taints. ReadSnapshot and WriteSnapshot share it, so a document
// nodetide writes is one it reads back.
func validateSnapshot(s *Snapshot) error {
	bad := func(path, format string, args ...any) error {
		return &DocumentError{Path: path, Err: fmt.Errorf(format, args...)}
	}
	if s.CapturedAt.IsZero() {
		return bad("capturedAt", "missing: the instant the snapshot was taken is the planner's now")
	}
	groupAt := map[string]int{}
	instanceAt := map[string]string{}
	for i := range s.NodeGroups {
		g := &s.NodeGroups[i]
		p := "nodeGroups[" + strconv.Itoa(i) + "]"
		if g.Name == "" {
			return bad(p+".name", "must not be empty")
		}
		if j, dup := groupAt[g.Name]; dup {
			return bad(p+".name", "duplicate node group name %q (also nodeGroups[%d])", g.Name, j)
		}
		groupAt[g.Name] = i
		for _, f := range []struct {
			name string
			v    int
		}{{"minSize", g.MinSize}, {"maxSize", g.MaxSize}, {"targetSize", g.TargetSize}} {
			if f.v < 0 {
				return bad(p+"."+f.name, "must not be negative (got %d)", f.v)
			}
		}
		if g.MinSize > g.MaxSize {
			return bad(p+".minSize", "%d is greater than maxSize %d", g.MinSize, g.MaxSize)
		}
		if err := checkResources(p+".template.allocatable", g.Template.Allocatable); err != nil {
			return err
		}
		for j, t := range g.Template.Taints {
			tp := p + ".template.taints[" + strconv.Itoa(j) + "]"
			if t.Key == "" {
				return bad(tp+".key", "must not be empty")
			}
			switch t.Effect {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			default:
				return bad(tp+".effect", "must be NoSchedule, PreferNoSchedule or NoExecute (got %q)", t.Effect)
			}
		}
		for j, id := range g.Instances {
			ip := p + ".instances[" + strconv.Itoa(j) + "]"
			if id == "" {
				return bad(ip, "must not be empty")
			}
			if other, dup := instanceAt[id]; dup {
				return bad(ip, "instance %q is already in node group %q", id, other)
			}
			instanceAt[id] = g.Name
		}
	}
	nodeAt := make(map[string]int, len(s.Nodes))
	for i := range s.Nodes {
		name := s.Nodes[i].Name
		p := "nodes[" + strconv.Itoa(i) + "].metadata.name"
		if name == "" {
			return bad(p, "must not be empty")
		}
		if j, dup := nodeAt[name]; dup {
			return bad(p, "duplicate node %q (also nodes[%d])", name, j)
		}
		nodeAt[name] = i
		st := &s.Nodes[i].Status
		if err := checkResources("nodes["+strconv.Itoa(i)+"].status.allocatable", st.Allocatable); err != nil {
			return err
		}
		if err := checkResources("nodes["+strconv.Itoa(i)+"].status.capacity", st.Capacity); err != nil {
			return err
		}
	}
	type nsName struct{ ns, name string }
	podAt := make(map[nsName]int, len(s.Pods))
	for i := range s.Pods {
		k := nsName{s.Pods[i].Namespace, s.Pods[i].Name}
		p := "pods[" + strconv.Itoa(i) + "].metadata.name"
		if k.name == "" {
			return bad(p, "must not be empty")
		}
		if j, dup := podAt[k]; dup {
			return bad(p, "duplicate pod %s/%s (also pods[%d])", k.ns, k.name, j)
		}
		podAt[k] = i
		if err := checkPodResources("pods["+strconv.Itoa(i)+"].spec", &s.Pods[i].Spec); err != nil {
			return err
		}
	}
	return nil
}

// checkPodResources checks every quantity of a pod the planner adds up:
// a request it cannot count would otherwise drop the pod from the plan.
func checkPodResources(path string, spec *corev1.PodSpec) error {
	for _, list := range []struct {
		field      string
		containers []corev1.Container
	}{{"containers", spec.Containers}, {"initContainers", spec.InitContainers}} {
		for j := range list.containers {
			r := &list.containers[j].Resources
			cp := path + "." + list.field + "[" + strconv.Itoa(j) + "].resources"
			if err := checkResources(cp+".requests", r.Requests); err != nil {
				return err
			}
			if err := checkResources(cp+".limits", r.Limits); err != nil {
				return err
			}
		}
	}
	if spec.Resources != nil {
		if err := checkResources(path+".resources.requests", spec.Resources.Requests); err != nil {
			return err
		}
		if err := checkResources(path+".resources.limits", spec.Resources.Limits); err != nil {
			return err
		}
	}
	return checkResources(path+".overhead", spec.Overhead)
}

// checkResources reports the first quantity of l (in name order) that
// CheckQuantity refuses.
func checkResources(path string, l corev1.ResourceList) error {
	if len(l) == 0 {
		return nil
	}
	var bad []string
	for name, q := range l {
		if CheckQuantity(q) != nil {
			bad = append(bad, string(name))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	q := l[corev1.ResourceName(bad[0])]
	return &DocumentError{Path: path + "." + bad[0], Err: CheckQuantity(q)}
}
