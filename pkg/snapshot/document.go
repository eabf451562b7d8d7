package snapshot

import (
	"bufio"
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
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
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

// The snapshot document's forms. A document without a format field is the
// full form.
const (
	// FormatFull is the full-object form: nodes, pods and PDBs as the API
	// serves them. It stays readable for ever.
	FormatFull = "nodetide.io/snapshot-full/v1"
	// FormatCompact holds only what the planner reads, with what the pods of
	// one controller share written once (see WriteCompactSnapshot).
	FormatCompact = "nodetide.io/snapshot-compact/v1"
)

var (
	fullKeys = []string{"format", "capturedAt", "nodeGroups", "nodes", "pods", "podDisruptionBudgets",
		"persistentVolumeClaims", "persistentVolumes", "storageClasses", "state"}
	compactKeys = []string{"format", "capturedAt", "counts", "nodeGroups", "state", "nodes", "podDisruptionBudgets",
		"persistentVolumeClaims", "persistentVolumes", "storageClasses", "podShapes", "pods"}
)

// ReadSnapshot decodes and checks a snapshot document in either form (the
// full one, or FormatCompact). It streams: one object is decoded at a time,
// and nodes, pods and PDBs are trimmed to what the planner reads as they
// arrive (see Trimmer), so the objects it returns share memory and are
// read-only. Keys nodetide defines (the top level, node groups, templates,
// state, and the compact form's pods and shapes) must be known; Kubernetes
// objects may carry fields this build does not know, as newer clusters add
// them. Errors are *DocumentError values naming the JSON path.
func ReadSnapshot(r io.Reader) (Snapshot, error) {
	src := newStreamReader(r)
	src.size = inputSize(r)
	d := &docDecoder{src: src, dec: json.NewDecoder(src), tr: NewTrimmer()}
	c := &compactReader{d: d}
	var s Snapshot
	form, keys := FormatFull, fullKeys
	first := true
	err := d.objectKeys("", func() []string { return keys }, func(key, path string) error {
		isFirst := first
		first = false
		switch key {
		case "format":
			if !isFirst {
				return &DocumentError{Path: path, Err: errors.New("must be the document's first key: it decides how the rest is read")}
			}
			var err error
			form, err = d.format(path)
			if form == FormatCompact {
				keys = compactKeys
			}
			return err
		case "capturedAt":
			return d.value(path, &s.CapturedAt)
		case "counts":
			return c.readCounts(path)
		case "nodeGroups":
			return d.array(path, func(i int, path string) error {
				s.NodeGroups = append(s.NodeGroups, NodeGroup{})
				return d.nodeGroup(path, &s.NodeGroups[len(s.NodeGroups)-1])
			})
		case "nodes":
			return decodeObjects(d, path, c.hint(c.counts.Nodes, len(`{},`)), &s.Nodes, func(path string, n *corev1.Node) (corev1.Node, error) {
				return d.tr.Node(n), checkKind(path, n.Kind, "Node")
			})
		case "pods":
			if form == FormatCompact {
				return c.readPods(path, &s.Pods)
			}
			// Limits are checked before trimming drops them.
			return decodeObjects(d, path, 0, &s.Pods, func(path string, p *corev1.Pod) (corev1.Pod, error) {
				if err := checkKind(path, p.Kind, "Pod"); err != nil {
					return corev1.Pod{}, err
				}
				if err := checkPodResources(path+".spec", &p.Spec); err != nil {
					return corev1.Pod{}, err
				}
				return d.tr.Pod(p), nil
			})
		case "podDisruptionBudgets":
			return decodeObjects(d, path, c.hint(c.counts.PodDisruptionBudgets, len(`{},`)), &s.PodDisruptionBudgets, func(path string, b *policyv1.PodDisruptionBudget) (policyv1.PodDisruptionBudget, error) {
				return d.tr.PDB(b), checkKind(path, b.Kind, "PodDisruptionBudget")
			})
		case "persistentVolumeClaims":
			return decodeObjects(d, path, 0, &s.PersistentVolumeClaims, func(path string, v *corev1.PersistentVolumeClaim) (corev1.PersistentVolumeClaim, error) {
				return d.tr.PersistentVolumeClaim(v), checkKind(path, v.Kind, "PersistentVolumeClaim")
			})
		case "persistentVolumes":
			return decodeObjects(d, path, 0, &s.PersistentVolumes, func(path string, v *corev1.PersistentVolume) (corev1.PersistentVolume, error) {
				return d.tr.PersistentVolume(v), checkKind(path, v.Kind, "PersistentVolume")
			})
		case "storageClasses":
			return decodeObjects(d, path, 0, &s.StorageClasses, func(path string, v *storagev1.StorageClass) (storagev1.StorageClass, error) {
				return d.tr.StorageClass(v), checkKind(path, v.Kind, "StorageClass")
			})
		case "podShapes":
			return c.readShapes(path)
		case "state":
			return d.state(path, &s.State)
		}
		return nil
	})
	if err := finishSnapshot(d, c, &s, form, err); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// format reads the document's format field: the form the rest is read in.
func (d *docDecoder) format(path string) (string, error) {
	mark := d.mark()
	form := "" // null decodes to nothing: an unknown format
	if err := d.value(path, &form); err != nil {
		return "", err
	}
	switch form {
	case FormatFull, FormatCompact:
		return form, nil
	}
	line, col := d.src.position(d.src.skipSeparators(mark))
	return "", &DocumentError{Path: path, Line: line, Column: col,
		Err: fmt.Errorf("unknown format %q (this build reads %s and %s)", form, FormatFull, FormatCompact)}
}

// finishSnapshot checks what only the whole document shows, once its keys are
// read (with err, what reading them returned): nothing after its end, the
// compact form's counts, and the snapshot's contents.
func finishSnapshot(d *docDecoder, c *compactReader, s *Snapshot, form string, err error) error {
	switch {
	case err == errPodsEnded:
		// The compact form's pods parser has read to the end.
	case err != nil:
		return err
	default:
		if err := d.end(); err != nil {
			return err
		}
	}
	if form == FormatCompact {
		if err := c.checkCounts(s); err != nil {
			return err
		}
	}
	paths := fullPodPaths
	if form == FormatCompact {
		paths = compactPodPaths
	}
	return validateSnapshot(s, paths)
}

// end checks that nothing follows the document.
func (d *docDecoder) end() error {
	mark := d.mark()
	if _, err := d.dec.Token(); err != io.EOF {
		var de *DocumentError
		if errors.As(err, &de) {
			return err
		}
		return d.fail("", mark, errors.New("unexpected data after the document"))
	}
	return nil
}

// inputSize is the length of what r will yield when r knows it (files,
// in-memory readers), or -1.
func inputSize(r io.Reader) int64 {
	switch v := r.(type) {
	case interface{ Len() int }:
		return int64(v.Len())
	case interface{ Stat() (fs.FileInfo, error) }:
		if fi, err := v.Stat(); err == nil && fi.Mode().IsRegular() {
			return fi.Size()
		}
	}
	return -1
}

// WriteSnapshot writes s as the indented full-object document ReadSnapshot
// reads, after the same checks; empty lists are written as [] and maps as {}.
// It streams: one object is encoded at a time.
func WriteSnapshot(w io.Writer, s Snapshot) error {
	if err := validateSnapshot(&s, fullPodPaths); err != nil {
		return err
	}
	sw := newSnapWriter(w, "  ")
	sw.raw("{\n")
	sw.field("capturedAt", s.CapturedAt.UTC())
	sw.field("nodeGroups", normalGroups(s.NodeGroups))
	writeList(sw, "nodes", s.Nodes)
	writeList(sw, "pods", s.Pods)
	writeList(sw, "podDisruptionBudgets", s.PodDisruptionBudgets)
	// Written only when there are any, so a snapshot without volumes reads
	// as it did before they were added.
	if len(s.PersistentVolumeClaims) > 0 {
		writeList(sw, "persistentVolumeClaims", s.PersistentVolumeClaims)
	}
	if len(s.PersistentVolumes) > 0 {
		writeList(sw, "persistentVolumes", s.PersistentVolumes)
	}
	if len(s.StorageClasses) > 0 {
		writeList(sw, "storageClasses", s.StorageClasses)
	}
	sw.field("state", s.State.Normal())
	sw.raw("\n}\n")
	return sw.flush()
}

// normalGroups copies groups with empty lists and maps instead of nil.
func normalGroups(in []NodeGroup) []NodeGroup {
	groups := make([]NodeGroup, len(in))
	for i, g := range in {
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
	return groups
}

// snapWriter writes a document a value at a time through a buffer, keeping
// the first error.
type snapWriter struct {
	w       *bufio.Writer
	scratch bytes.Buffer
	enc     *json.Encoder
	// indent is the unit of indentation; elements of top-level lists are
	// indented twice, one per line. An empty indent writes each list element
	// on one line.
	indent string
	fields int
	err    error
}

func newSnapWriter(w io.Writer, indent string) *snapWriter {
	sw := &snapWriter{w: bufio.NewWriterSize(w, 256<<10), indent: indent}
	sw.enc = json.NewEncoder(&sw.scratch)
	sw.enc.SetEscapeHTML(false)
	return sw
}

func (sw *snapWriter) raw(s string) {
	if sw.err == nil {
		_, sw.err = sw.w.WriteString(s)
	}
}

// encode writes v, indented as a value that starts at depth levels.
func (sw *snapWriter) encode(v any, depth int, pretty bool) {
	if sw.err != nil {
		return
	}
	sw.scratch.Reset()
	if pretty {
		sw.enc.SetIndent(strings.Repeat(sw.indent, depth), sw.indent)
	} else {
		sw.enc.SetIndent("", "")
	}
	if sw.err = sw.enc.Encode(v); sw.err != nil {
		return
	}
	_, sw.err = sw.w.Write(bytes.TrimSuffix(sw.scratch.Bytes(), []byte{'\n'}))
}

func (sw *snapWriter) key(name string) {
	if sw.fields > 0 {
		sw.raw(",\n")
	}
	sw.fields++
	sw.raw("  \"" + name + "\": ")
}

// field writes a top-level key and its value (indented when the writer is).
func (sw *snapWriter) field(name string, v any) {
	sw.key(name)
	sw.encode(v, 1, sw.indent != "")
}

// compactField writes a top-level key and its value on one line.
func (sw *snapWriter) compactField(name string, v any) {
	sw.key(name)
	sw.encode(v, 1, false)
}

// list writes a top-level key and an array of n elements, each written by
// elem.
func (sw *snapWriter) list(name string, n int, elem func(i int)) {
	sw.key(name)
	if n == 0 {
		sw.raw("[]")
		return
	}
	sw.raw("[")
	for i := range n {
		if i > 0 {
			sw.raw(",")
		}
		sw.raw("\n    ")
		elem(i)
		if sw.err != nil {
			return
		}
	}
	sw.raw("\n  ]")
}

func writeList[T any](sw *snapWriter, name string, items []T) {
	sw.list(name, len(items), func(i int) { sw.encode(&items[i], 2, sw.indent != "") })
}

func (sw *snapWriter) flush() error {
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	if sw.err != nil {
		return fmt.Errorf("write snapshot: %w", sw.err)
	}
	return nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Normal copies the state with non-nil maps and UTC times, as documents
// write it.
func (s State) Normal() State {
	utc := func(m map[string]time.Time) map[string]time.Time {
		out := make(map[string]time.Time, len(m))
		for k, t := range m {
			out[k] = t.UTC()
		}
		return out
	}
	out := State{UnneededSince: utc(s.UnneededSince), LastScaleUp: utc(s.LastScaleUp), BackoffUntil: utc(s.BackoffUntil)}
	if len(s.Replacing) > 0 {
		out.Replacing = make(map[string]Replacement, len(s.Replacing))
		for id, r := range s.Replacing {
			r.Nodes, r.Receivers = slices.Clone(r.Nodes), slices.Clone(r.Receivers)
			r.Since, r.Drained = r.Since.UTC(), r.Drained.UTC()
			out.Replacing[id] = r
		}
	}
	return out
}

// docDecoder streams the document: lists of Kubernetes objects are decoded
// one element at a time, so an error names its index and the document is
// never held whole.
type docDecoder struct {
	src *streamReader
	dec *json.Decoder
	tr  *Trimmer
}

// mark is the input offset the decoder has reached; the next value starts
// after separators (see streamReader.skipSeparators).
func (d *docDecoder) mark() int64 { return d.dec.InputOffset() }

// fail turns a decoding error of the value at path, decoded from mark,
// into a DocumentError.
func (d *docDecoder) fail(path string, mark int64, err error) error {
	var de *DocumentError
	if errors.As(err, &de) {
		return err
	}
	off := d.src.skipSeparators(mark)
	e := &DocumentError{Path: path, Err: err}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		e.Line, e.Column = d.src.position(syn.Offset)
		e.Err = errors.New(syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		e.Line, e.Column = d.src.position(d.src.read)
		e.Err = errors.New("unexpected end of document")
	case errors.As(err, &typ):
		// Inside an object the offset locates the field; for a plain value
		// the value's own start is the clearer place to point at.
		e.Line, e.Column = d.src.position(off)
		if typ.Field != "" {
			e.Path = joinPath(path, typ.Field)
			e.Line, e.Column = d.src.position(off + typ.Offset)
		}
		e.Err = fmt.Errorf("expected %s, got %s", typ.Type, typ.Value)
	default:
		e.Line, e.Column = d.src.position(off)
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
	mark := d.mark()
	if err := d.dec.Decode(v); err != nil {
		return d.fail(path, mark, err)
	}
	return nil
}

// open reads the opening delimiter of an object or array, or null
// (reported as false: an absent list).
func (d *docDecoder) open(path string, want json.Delim) (bool, error) {
	off := d.mark()
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
	return d.objectKeys(path, func() []string { return known }, each)
}

// objectKeys is object with known keys that may change as the object is
// read (a document's format decides its keys).
func (d *docDecoder) objectKeys(path string, knownKeys func() []string, each func(key, path string) error) error {
	ok, err := d.open(path, '{')
	if err != nil || !ok {
		return err
	}
	return d.members(path, knownKeys, map[string]bool{}, each)
}

// members reads an opened object's keys and values to its end, marking each
// key in seen; a nil knownKeys list takes any key (a map's entries), still
// refusing one twice.
func (d *docDecoder) members(path string, knownKeys func() []string, seen map[string]bool, each func(key, path string) error) error {
	for d.dec.More() {
		off := d.mark()
		tok, err := d.dec.Token()
		if err != nil {
			return d.fail(path, off, err)
		}
		key := tok.(string)
		kp := joinPath(path, key)
		if known := knownKeys(); known != nil && !slices.Contains(known, key) {
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
	off := d.mark()
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
	off := d.mark()
	if _, err := d.dec.Token(); err != nil {
		return d.fail(path, off, err)
	}
	return nil
}

// maxExponent bounds the decimal exponent of a number written in the
// document. Kubernetes' quantity parser rounds 1e-9999999 to nano-units by
// computing 10^9999999, which takes seconds per value (it stalled fuzzing
// at a few executions a minute); no countable quantity comes near the bound.
// The reader refuses such a number as it streams past (see exponentScan):
// only a whole JSON string or number in number form counts, so a UID such
// as "3e12345-…" does not.
const maxExponent = 999

func errHugeExponent(tok string) error {
	return fmt.Errorf("quantity %q: its exponent is beyond ±%d", tok, maxExponent)
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

// maxPrealloc bounds how many list elements a count in the document can
// make the reader allocate before it has read them; maxPreallocUnknown is
// the bound when the input's size is not known (a pipe).
const (
	maxPrealloc        = 1 << 20
	maxPreallocUnknown = 1 << 14
)

// decodeObjects reads a list of Kubernetes objects, tolerating unknown
// fields, and keeps of each what keep returns (or stops at its error). Elements are collected in
// chunks joined once at the end (unless hint, a expected length, sizes the
// list up front): a Pod is over a kilobyte, and growing a slice of 150,000
// of them by appending allocates several times the final size.
func decodeObjects[T any](d *docDecoder, path string, hint int, out *[]T, keep func(path string, v *T) (T, error)) error {
	var list chunkList[T]
	if hint > 0 {
		list.cur = make([]T, 0, hint)
	}
	var v T
	err := d.array(path, func(i int, path string) error {
		var zero T
		v = zero
		if err := d.value(path, &v); err != nil {
			return err
		}
		kept, err := keep(path, &v)
		if err != nil {
			return err
		}
		*list.add() = kept
		return nil
	})
	*out = list.slice()
	return err
}

// chunkList collects elements of an unknown count in chunks.
type chunkList[T any] struct {
	done [][]T
	cur  []T
	n    int
}

func (c *chunkList[T]) add() *T {
	if len(c.cur) == cap(c.cur) {
		if c.cur != nil {
			c.done = append(c.done, c.cur)
		}
		c.cur = make([]T, 0, max(64, c.n/2))
	}
	var zero T
	c.cur = append(c.cur, zero)
	c.n++
	return &c.cur[len(c.cur)-1]
}

// slice returns the elements as one slice (nil when there are none).
func (c *chunkList[T]) slice() []T {
	if len(c.done) == 0 {
		if len(c.cur) == 0 {
			return nil
		}
		return c.cur
	}
	out := make([]T, 0, c.n)
	for _, ch := range c.done {
		out = append(out, ch...)
	}
	out = append(out, c.cur...)
	c.done, c.cur = nil, nil
	return out
}

func (d *docDecoder) nodeGroup(path string, g *NodeGroup) error {
	known := []string{"name", "provider", "minSize", "maxSize", "targetSize", "template", "instances", "maxFrom", "boundsFrom", "headroom", "zones", "price", "templateFrom"}
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
		case "maxFrom":
			return d.value(path, &g.MaxFrom)
		case "boundsFrom":
			return d.value(path, &g.BoundsFrom)
		case "templateFrom":
			return d.value(path, &g.TemplateFrom)
		case "headroom":
			return d.value(path, &g.Headroom)
		case "price":
			return d.price(path, &g.Price)
		case "zones":
			if err := d.value(path, &g.Zones); err != nil {
				return err
			}
			return checkZones(path, g.Zones)
		case "template":
			return d.template(path, &g.Template)
		}
		return nil
	})
}

// checkZones refuses an empty zone or one listed twice: the planner would
// otherwise count a zone the cloud never picks.
func checkZones(path string, zones []string) error {
	for i, z := range zones {
		p := path + "[" + strconv.Itoa(i) + "]"
		if z == "" {
			return &DocumentError{Path: p, Err: errors.New("zone must not be empty")}
		}
		if slices.Contains(zones[:i], z) {
			return &DocumentError{Path: p, Err: fmt.Errorf("zone %q listed twice", z)}
		}
	}
	return nil
}

func (d *docDecoder) template(path string, t *Template) error {
	return d.object(path, []string{"allocatable", "labels", "taints"}, func(key, path string) error {
		switch key {
		case "labels":
			return d.value(path, &t.Labels)
		case "taints":
			return decodeObjects(d, path, 0, &t.Taints, func(_ string, t *corev1.Taint) (corev1.Taint, error) { return *t, nil })
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
	// Ordinary amounts, far below the bound, settle without the decimal
	// below, which allocates: a snapshot's read checks tens of thousands.
	if f := q.AsApproximateFloat64(); f < 1e15 {
		return nil
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
	return d.object(path, []string{"unneededSince", "lastScaleUp", "backoffUntil", "replacing"}, func(key, path string) error {
		switch key {
		case "replacing":
			return d.replacing(path, s)
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

// replacing reads state.replacing: replacements by ID, each with exactly
// its known keys.
func (d *docDecoder) replacing(path string, s *State) error {
	s.Replacing = map[string]Replacement{}
	return d.objectKeys(path, func() []string { return nil }, func(id, rp string) error {
		if id == "" {
			return badDoc(path, "a replacement's ID must not be empty")
		}
		var r Replacement
		err := d.object(rp, []string{"nodeGroup", "delta", "nodes", "since", "drained", "receivers"}, func(key, kp string) error {
			switch key {
			case "nodeGroup":
				return d.value(kp, &r.NodeGroup)
			case "delta":
				return d.value(kp, &r.Delta)
			case "nodes":
				return d.value(kp, &r.Nodes)
			case "since":
				return d.value(kp, &r.Since)
			case "drained":
				return d.value(kp, &r.Drained)
			case "receivers":
				return d.value(kp, &r.Receivers)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := r.Validate(); err != nil {
			return &DocumentError{Path: rp, Err: err}
		}
		s.Replacing[id] = r
		return nil
	})
}

// Validate checks a replacement's fields: a group, 1 to
// MaxReplacementNodes new nodes, 1 to MaxReplacementNodes distinct named
// nodes, a start, and receivers (at most MaxReplacementReceivers distinct
// named nodes) only once drained.
func (r Replacement) Validate() error {
	switch {
	case r.NodeGroup == "":
		return errors.New("nodeGroup: missing: the group the new nodes come from")
	case r.Delta < 1 || r.Delta > MaxReplacementNodes:
		return fmt.Errorf("delta: must be 1 to %d new nodes, got %d", MaxReplacementNodes, r.Delta)
	case len(r.Nodes) == 0 || len(r.Nodes) > MaxReplacementNodes:
		return fmt.Errorf("nodes: must name 1 to %d nodes, got %d", MaxReplacementNodes, len(r.Nodes))
	case r.Since.IsZero():
		return errors.New("since: missing: when the new nodes were asked for")
	case len(r.Receivers) > 0 && r.Drained.IsZero():
		return errors.New("receivers: only a drained replacement has them (drained is missing)")
	case len(r.Receivers) > MaxReplacementReceivers:
		return fmt.Errorf("receivers: must name at most %d nodes, got %d", MaxReplacementReceivers, len(r.Receivers))
	}
	if err := distinctNames("nodes", r.Nodes); err != nil {
		return err
	}
	return distinctNames("receivers", r.Receivers)
}

// distinctNames checks that the node names of list field key are neither
// empty nor repeated.
func distinctNames(key string, names []string) error {
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		switch {
		case n == "":
			return fmt.Errorf("%s[%d]: must not be empty", key, i)
		case seen[n]:
			return fmt.Errorf("%s[%d]: node %q listed twice", key, i, n)
		}
		seen[n] = true
	}
	return nil
}

// podPaths are the paths, inside a pod, of the fields validation names: they
// differ between the forms.
type podPaths struct{ name, nodeName string }

var (
	fullPodPaths    = podPaths{name: ".metadata.name", nodeName: ".spec.nodeName"}
	compactPodPaths = podPaths{name: ".name", nodeName: ".nodeName"}
)

// validateSnapshot checks what JSON syntax cannot: sizes, names, instances,
// quantities, taints, and that what refers to a node names one of the
// snapshot's. ReadSnapshot and WriteSnapshot share it, so a document
// nodetide writes is one it reads back.
func validateSnapshot(s *Snapshot, paths podPaths) error {
	if s.CapturedAt.IsZero() {
		return badDoc("capturedAt", "missing: the instant the snapshot was taken is the planner's now")
	}
	if err := validateGroups(s.NodeGroups); err != nil {
		return err
	}
	nodeAt, err := validateNodes(s.Nodes)
	if err != nil {
		return err
	}
	if err := validatePods(s.Pods, paths, nodeAt); err != nil {
		return err
	}
	if err := validatePDBs(s.PodDisruptionBudgets); err != nil {
		return err
	}
	return validateVolumes(s)
}

// checkKind refuses an object of another kind in a list (a Pod among the
// nodes): decoded as the list's kind, it would pass for one. Objects as the
// API lists them carry no kind, so none is required.
func checkKind(path, kind, want string) error {
	if kind == "" || kind == want {
		return nil
	}
	return badDoc(path, "kind %q is not a %s", kind, want)
}

// badDoc is a DocumentError at path with a formatted message.
func badDoc(path, format string, args ...any) error {
	return &DocumentError{Path: path, Err: fmt.Errorf(format, args...)}
}

// validateGroups checks each node group, and that group names and instance
// IDs are unique across all of them.
func validateGroups(groups []NodeGroup) error {
	groupAt := map[string]int{}
	instanceAt := map[string]string{}
	for i := range groups {
		g := &groups[i]
		p := "nodeGroups[" + strconv.Itoa(i) + "]"
		if g.Name == "" {
			return badDoc(p+".name", "must not be empty")
		}
		if j, dup := groupAt[g.Name]; dup {
			return badDoc(p+".name", "duplicate node group name %q (also nodeGroups[%d])", g.Name, j)
		}
		groupAt[g.Name] = i
		if err := validateGroup(p, g); err != nil {
			return err
		}
		for j, id := range g.Instances {
			ip := p + ".instances[" + strconv.Itoa(j) + "]"
			if id == "" {
				return badDoc(ip, "must not be empty")
			}
			if other, dup := instanceAt[id]; dup {
				return badDoc(ip, "instance %q is already in node group %q", id, other)
			}
			instanceAt[id] = g.Name
		}
	}
	return nil
}

// validateGroup checks one node group's sizes, bound sources, headroom and
// template.
func validateGroup(p string, g *NodeGroup) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"minSize", g.MinSize}, {"maxSize", g.MaxSize}, {"targetSize", g.TargetSize}} {
		if f.v < 0 {
			return badDoc(p+"."+f.name, "must not be negative (got %d)", f.v)
		}
	}
	if g.MinSize > g.MaxSize {
		return badDoc(p+".minSize", "%d is greater than maxSize %d", g.MinSize, g.MaxSize)
	}
	switch g.MaxFrom {
	case BoundProvider, BoundSchedule:
	case BoundConfig:
		if g.BoundsFrom != "" {
			return badDoc(p+".boundsFrom", "names a schedule (%q), but maxFrom is %q", g.BoundsFrom, g.MaxFrom)
		}
	default:
		return badDoc(p+".maxFrom", "must be %q or %q, or omitted for the provider (got %q)", BoundConfig, BoundSchedule, g.MaxFrom)
	}
	if _, fromNode := g.TemplateNode(); !fromNode && g.TemplateFrom != "" && g.TemplateFrom != TemplateFromProvider {
		return badDoc(p+".templateFrom", "must be %q or \"node NAME\", or omitted (got %q)", TemplateFromProvider, g.TemplateFrom)
	}
	if g.Headroom != nil {
		if err := g.Headroom.Check(); err != nil {
			return &DocumentError{Path: p + ".headroom", Err: err}
		}
	}
	if err := validatePrice(p+".price", g.Price); err != nil {
		return err
	}
	if err := checkResources(p+".template.allocatable", g.Template.Allocatable); err != nil {
		return err
	}
	for j, t := range g.Template.Taints {
		tp := p + ".template.taints[" + strconv.Itoa(j) + "]"
		if t.Key == "" {
			return badDoc(tp+".key", "must not be empty")
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return badDoc(tp+".effect", "must be NoSchedule, PreferNoSchedule or NoExecute (got %q)", t.Effect)
		}
	}
	return nil
}

// validateNodes checks node names are set and unique, that no two nodes
// claim one machine (a group would count it twice), and their quantities.
// It returns each node's index by name.
func validateNodes(nodes []corev1.Node) (map[string]int, error) {
	nodeAt := make(map[string]int, len(nodes))
	machineAt := make(map[string]int, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		np := "nodes[" + strconv.Itoa(i) + "]"
		if n.Name == "" {
			return nil, badDoc(np+".metadata.name", "must not be empty")
		}
		if j, dup := nodeAt[n.Name]; dup {
			return nil, badDoc(np+".metadata.name", "duplicate node %q (also nodes[%d])", n.Name, j)
		}
		nodeAt[n.Name] = i
		if id := n.Spec.ProviderID; id != "" {
			if j, dup := machineAt[id]; dup {
				return nil, badDoc(np+".spec.providerID", "%q is also nodes[%d]'s", id, j)
			}
			machineAt[id] = i
		}
		if err := checkResources(np+".status.allocatable", n.Status.Allocatable); err != nil {
			return nil, err
		}
		if err := checkResources(np+".status.capacity", n.Status.Capacity); err != nil {
			return nil, err
		}
	}
	return nodeAt, nil
}

// validatePods checks pod names are set and unique, that a bound pod's node
// is one of nodeAt's, and their quantities.
func validatePods(pods []corev1.Pod, paths podPaths, nodeAt map[string]int) error {
	dup, also := firstDuplicate(pods)
	// Pods of one controller share their trimmed spec: its quantities are
	// checked once, at the first pod that has it.
	checked := map[*corev1.Container]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Name == "" {
			return badDoc("pods["+strconv.Itoa(i)+"]"+paths.name, "must not be empty")
		}
		if i == dup {
			return badDoc("pods["+strconv.Itoa(i)+"]"+paths.name, "duplicate pod %s/%s (also pods[%d])", p.Namespace, p.Name, also)
		}
		if node := p.Spec.NodeName; node != "" {
			// The live reader leaves such pods out (DropUnplacedPods): in a
			// file it is a snapshot put together by hand, or cut short.
			if _, ok := nodeAt[node]; !ok {
				return badDoc("pods["+strconv.Itoa(i)+"]"+paths.nodeName, "%q is not a node of the snapshot", node)
			}
		}
		spec := &p.Spec
		if len(spec.Containers) > 0 {
			if checked[&spec.Containers[0]] {
				continue
			}
			checked[&spec.Containers[0]] = true
		}
		if err := checkPodResources("pods["+strconv.Itoa(i)+"].spec", spec); err != nil {
			return err
		}
	}
	return nil
}

// validatePDBs checks PDB names are set and unique within their namespace.
func validatePDBs(pdbs []policyv1.PodDisruptionBudget) error {
	at := make(map[string]int, len(pdbs))
	for i := range pdbs {
		b := &pdbs[i]
		p := "podDisruptionBudgets[" + strconv.Itoa(i) + "].metadata.name"
		if b.Name == "" {
			return badDoc(p, "must not be empty")
		}
		key := b.Namespace + "/" + b.Name
		if j, dup := at[key]; dup {
			return badDoc(p, "duplicate PodDisruptionBudget %s (also podDisruptionBudgets[%d])", key, j)
		}
		at[key] = i
	}
	return nil
}

// validateVolumes checks that every claim, volume and class is named once:
// a pod's claims are looked up by name.
func validateVolumes(s *Snapshot) error {
	check := func(list string, n int, name func(i int) (string, string)) error {
		at := make(map[string]int, n)
		for i := range n {
			ns, nm := name(i)
			p := list + "[" + strconv.Itoa(i) + "].metadata.name"
			if nm == "" {
				return &DocumentError{Path: p, Err: errors.New("must not be empty")}
			}
			key := nm
			if ns != "" {
				key = ns + "/" + nm
			}
			if j, dup := at[key]; dup {
				return &DocumentError{Path: p, Err: fmt.Errorf("duplicate %s (also %s[%d])", key, list, j)}
			}
			at[key] = i
		}
		return nil
	}
	if err := check("persistentVolumeClaims", len(s.PersistentVolumeClaims), func(i int) (string, string) {
		c := &s.PersistentVolumeClaims[i]
		return c.Namespace, c.Name
	}); err != nil {
		return err
	}
	if err := check("persistentVolumes", len(s.PersistentVolumes), func(i int) (string, string) {
		return "", s.PersistentVolumes[i].Name
	}); err != nil {
		return err
	}
	return check("storageClasses", len(s.StorageClasses), func(i int) (string, string) {
		return "", s.StorageClasses[i].Name
	})
}

// firstDuplicate returns the first pod (by index) whose namespace and name
// an earlier pod has, and that earlier pod's index; -1, -1 when there is
// none. It sorts indices rather than filling a map: a map of 150,000 names
// would cost a plan tens of megabytes at its peak.
func firstDuplicate(pods []corev1.Pod) (int, int) {
	order := make([]int32, len(pods))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		pa, pb := &pods[a], &pods[b]
		if c := strings.Compare(pa.Namespace, pb.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(pa.Name, pb.Name); c != 0 {
			return c
		}
		return int(a - b)
	})
	dup, also := -1, -1
	same := func(a, b int32) bool { return pods[a].Namespace == pods[b].Namespace && pods[a].Name == pods[b].Name }
	for k := 0; k < len(order); {
		j := k + 1
		for j < len(order) && same(order[k], order[j]) {
			j++
		}
		// A run is in index order: its second is the first repeat.
		if j-k > 1 && (dup < 0 || int(order[k+1]) < dup) {
			dup, also = int(order[k+1]), int(order[k])
		}
		k = j
	}
	return dup, also
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
