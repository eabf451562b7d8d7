package snapshot

import (
	"bytes"
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

// The compact form's pods are most of its bytes. Its pods entries are
// nodetide's own flat objects, so they are read by a parser of their own,
// straight from the stream, in one pass and without reflection: decoding
// each of 150,000 pods through encoding/json scanned it twice and cost
// most of a plan's time. The parser is strict (exact keys, none twice, none
// unknown, JSON syntax) and names each problem's path, line and column.
//
// pods must be the compact form's last key: once its array ends, the parser
// reads the end of the document itself.

// errPodsEnded tells the top-level reader that the pods parser has read the
// rest of the document.
var errPodsEnded = errors.New("pods ended the document")

// errShort is the parser running out of buffered input mid-entry; the
// entry is read again once more input is in.
var errShort = errors.New("short buffer")

var (
	compactPodKeys      = []string{"name", "namespace", "uid", "shape", "nodeName", "phase", "nominatedNodeName", "creationTimestamp", "deletionTimestamp", "scheduled", "pinnedNode"}
	compactScheduleKeys = []string{"status", "reason", "lastTransitionTime"}
)

const podKeyShape = 3 // index of "shape" in compactPodKeys

// compactPod is one pods entry as read.
type compactPod struct {
	seen                                             uint32
	name, namespace, uid, nodeName, phase, nominated string
	shape                                            int
	created, deleted                                 time.Time
	scheduled                                        bool
	schedStatus, schedReason                         string
	schedTime                                        time.Time
	pinnedNode                                       string
}

// podStream parses the pods array from the stream: buf[pos:] is input not
// yet parsed, buf[0] is at input offset base.
type podStream struct {
	src  *streamReader
	tr   *Trimmer
	buf  []byte
	pos  int
	base int64
	eof  bool
	// Where the parser is, for errors: in the list (entry < 0), at an
	// entry, or past the document (done). Paths are built only for errors.
	list  string
	entry int
	done  bool
}

// at is the path of sub (a path relative to the current entry).
func (p *podStream) at(sub string) string {
	if p.done {
		return sub
	}
	path := p.list
	if p.entry >= 0 {
		path += "[" + strconv.Itoa(p.entry) + "]"
	}
	if sub == "" {
		return path
	}
	return path + "." + sub
}

// readPods reads the pods value of a compact document and the end of the
// document, then returns errPodsEnded.
func (c *compactReader) readPods(path string, out *[]corev1.Pod) error {
	// The decoder has read the key; the colon and the rest are in its
	// buffer, then in the stream.
	rest, _ := io.ReadAll(c.d.dec.Buffered())
	p := &podStream{src: c.d.src, tr: c.d.tr, base: c.d.dec.InputOffset(), list: path, entry: -1}
	p.buf = append(make([]byte, 0, max(64<<10, 2*len(rest))), rest...)
	pods := make([]corev1.Pod, 0, c.hint(c.counts.Pods, len(`{"shape":0},`)))
	err := p.read(c, &pods)
	*out = pods
	if err != nil {
		return err
	}
	return errPodsEnded
}

func (p *podStream) read(c *compactReader, pods *[]corev1.Pod) error {
	if err := p.expect(':'); err != nil {
		return err
	}
	b, err := p.peekMore()
	if err != nil {
		return err
	}
	switch b {
	case 'n':
		if err := p.literalMore("null"); err != nil {
			return err
		}
	case '[':
		p.pos++
		var cp compactPod
		for i := 0; ; i++ {
			b, err := p.peekMore()
			if err != nil {
				return err
			}
			if b == ']' {
				p.pos++
				break
			}
			if i > 0 {
				if b != ',' {
					return p.syntax("after an array element")
				}
				p.pos++
			}
			p.entry = i
			if _, err := p.peekMore(); err != nil {
				return err
			}
			for {
				start := p.pos
				err := p.pod(&cp)
				if err == nil {
					break
				}
				if err != errShort {
					return err
				}
				if p.eof {
					return p.fieldErr("", len(p.buf), errors.New("unexpected end of document"))
				}
				p.pos = start
				if err := p.more(start); err != nil {
					return err
				}
			}
			if err := c.addPod(p, &cp, pods); err != nil {
				return err
			}
		}
	default:
		return p.fieldErr("", p.pos, fmt.Errorf("expected an array, got %s", p.kind()))
	}
	// The end of the document.
	p.done = true
	b, err = p.peekMore()
	if err != nil {
		return err
	}
	if b == ',' {
		return p.fieldErr("", p.pos, errors.New(`more keys after pods: pods must be the compact form's last key`))
	}
	if b != '}' {
		return p.syntax("after object key:value pair")
	}
	p.pos++
	for {
		p.ws()
		if p.pos < len(p.buf) {
			return p.fieldErr("", p.pos, errors.New("unexpected data after the document"))
		}
		if p.eof {
			return nil
		}
		if err := p.more(p.pos); err != nil {
			return err
		}
	}
}

// addPod makes the corev1.Pod an entry describes.
func (c *compactReader) addPod(ps *podStream, p *compactPod, pods *[]corev1.Pod) error {
	if p.seen&(1<<podKeyShape) == 0 {
		return &DocumentError{Path: ps.at("shape"), Err: errors.New("missing: every pod names its podShapes entry")}
	}
	if p.shape >= len(c.shapes) {
		return &DocumentError{Path: ps.at("shape"), Err: fmt.Errorf("no podShapes[%d]: %d shapes come before the pods (podShapes must come first)", p.shape, len(c.shapes))}
	}
	sh := c.shapes[p.shape]
	if len(*pods) == cap(*pods) {
		*pods = c.growPods(*pods)
	}
	*pods = append(*pods, corev1.Pod{})
	q := &(*pods)[len(*pods)-1]
	q.Name = p.name
	q.Namespace = p.namespace
	q.UID = types.UID(p.uid)
	q.CreationTimestamp = metav1.NewTime(p.created)
	if !p.deleted.IsZero() {
		t := metav1.NewTime(p.deleted)
		q.DeletionTimestamp = &t
	}
	q.Labels, q.Annotations, q.OwnerReferences = sh.labels, sh.annotations, sh.owners
	q.Spec = sh.spec
	q.Spec.NodeName = p.nodeName
	if p.pinnedNode != "" {
		if !pinnable(sh.spec.Affinity) {
			return &DocumentError{Path: ps.at("pinnedNode"), Err: fmt.Errorf("podShapes[%d] has no required node affinity whose terms all match metadata.name In [\"\"] to pin", p.shape)}
		}
		q.Spec.Affinity = pinAffinity(sh.spec.Affinity, p.pinnedNode)
	}
	q.Status.Phase = corev1.PodPhase(p.phase)
	q.Status.NominatedNodeName = p.nominated
	if p.scheduled {
		q.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionStatus(p.schedStatus),
			Reason: p.schedReason, LastTransitionTime: metav1.NewTime(p.schedTime),
		}}
	}
	return nil
}

// growPods makes room for more pods when the input's size did not let the
// counts size the list (a pipe): towards what counts says, four times
// larger a step, so a list of a kilobyte and more per pod does not end at
// up to twice its length, as appending would leave it.
func (c *compactReader) growPods(pods []corev1.Pod) []corev1.Pod {
	n := max(4*cap(pods), 1024)
	if c.hasCounts && c.counts.Pods > cap(pods) {
		n = min(n, c.counts.Pods)
	}
	grown := make([]corev1.Pod, len(pods), n)
	copy(grown, pods)
	return grown
}

// more reads more input, keeping buf[keep:] (pos stays on the same byte).
func (p *podStream) more(keep int) error {
	if p.eof {
		return nil
	}
	if keep > 0 {
		n := copy(p.buf, p.buf[keep:])
		p.buf = p.buf[:n]
		p.base += int64(keep)
		p.pos -= keep
	}
	if len(p.buf) == cap(p.buf) {
		p.buf = append(p.buf, make([]byte, cap(p.buf))...)[:len(p.buf)]
	}
	n, err := p.src.Read(p.buf[len(p.buf):cap(p.buf)])
	p.buf = p.buf[:len(p.buf)+n]
	if err == io.EOF {
		p.eof = true
		return nil
	}
	return err
}

// peekMore is the next byte after whitespace, reading more input as needed.
func (p *podStream) peekMore() (byte, error) {
	for {
		p.ws()
		if p.pos < len(p.buf) {
			return p.buf[p.pos], nil
		}
		if p.eof {
			return 0, p.fieldErr("", p.pos, errors.New("unexpected end of document"))
		}
		if err := p.more(p.pos); err != nil {
			return 0, err
		}
	}
}

func (p *podStream) expect(c byte) error {
	b, err := p.peekMore()
	if err != nil {
		return err
	}
	if b != c {
		return p.syntax(fmt.Sprintf("where %q was expected", c))
	}
	p.pos++
	return nil
}

func (p *podStream) literalMore(lit string) error {
	for len(p.buf)-p.pos < len(lit) && !p.eof {
		if err := p.more(p.pos); err != nil {
			return err
		}
	}
	if err := p.literal(lit); err == errShort {
		return p.fieldErr("", len(p.buf), errors.New("unexpected end of document"))
	} else if err != nil {
		return err
	}
	return nil
}

// fieldErr is a DocumentError at sub (relative to the entry), for the
// byte at buf offset at.
func (p *podStream) fieldErr(sub string, at int, err error) error {
	line, col := p.src.position(p.base + int64(at))
	return &DocumentError{Path: p.at(sub), Line: line, Column: col, Err: err}
}

func (p *podStream) syntax(context string) error {
	return p.fieldErr("", p.pos, fmt.Errorf("invalid character %q %s", p.buf[p.pos], context))
}

func (p *podStream) ws() {
	for p.pos < len(p.buf) {
		switch p.buf[p.pos] {
		case ' ', '\t', '\r', '\n':
			p.pos++
		default:
			return
		}
	}
}

// peek is the next byte after whitespace, or errShort.
func (p *podStream) peek() (byte, error) {
	p.ws()
	if p.pos >= len(p.buf) {
		return 0, errShort
	}
	return p.buf[p.pos], nil
}

// kind describes the value at pos.
func (p *podStream) kind() string {
	switch p.buf[p.pos] {
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
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "a number"
	}
	return fmt.Sprintf("%q", p.buf[p.pos])
}

// wrong is a value of the wrong type at pos (or a syntax error, when pos
// starts no JSON value).
func (p *podStream) wrong(path, want string) error {
	if strings.IndexByte(`"{[tfn-0123456789`, p.buf[p.pos]) < 0 {
		return p.fieldErr(path, p.pos, fmt.Errorf("invalid character %q looking for beginning of value", p.buf[p.pos]))
	}
	return p.fieldErr(path, p.pos, fmt.Errorf("expected %s, got %s", want, p.kind()))
}

func (p *podStream) literal(lit string) error {
	if len(p.buf)-p.pos < len(lit) {
		if bytes.HasPrefix([]byte(lit), p.buf[p.pos:]) {
			return errShort
		}
	} else if string(p.buf[p.pos:p.pos+len(lit)]) == lit {
		p.pos += len(lit)
		return nil
	}
	return p.fieldErr("", p.pos, fmt.Errorf("invalid literal: want %s", lit))
}

// object reads the object at path (relative to the entry) whose keys must
// be among known (at most 32), calling each at the key's value with the
// key's index; it returns the keys seen, by index.
func (p *podStream) object(path string, known []string, each func(key int) error) (uint32, error) {
	b, err := p.peek()
	if err != nil {
		return 0, err
	}
	if b != '{' {
		return 0, p.wrong(path, "an object")
	}
	p.pos++
	var seen uint32
	for n := 0; ; n++ {
		b, err := p.peek()
		if err != nil {
			return seen, err
		}
		if b == '}' {
			p.pos++
			return seen, nil
		}
		if n > 0 {
			if b != ',' {
				return seen, p.fieldErr(path, p.pos, fmt.Errorf("invalid character %q after object key:value pair", b))
			}
			p.pos++
			if b, err = p.peek(); err != nil {
				return seen, err
			}
		}
		if b != '"' {
			return seen, p.fieldErr(path, p.pos, fmt.Errorf("invalid character %q looking for beginning of object key string", b))
		}
		keyAt := p.pos
		key, i, err := p.key(path, known)
		if err != nil {
			return seen, err
		}
		if i < 0 {
			return seen, p.fieldErr(joinPath(path, key), keyAt, fmt.Errorf("%w (known: %s)", ErrUnknownKey, strings.Join(known, ", ")))
		}
		if seen&(1<<i) != 0 {
			return seen, p.fieldErr(joinPath(path, key), keyAt, ErrDuplicateKey)
		}
		seen |= 1 << i
		if b, err = p.peek(); err != nil {
			return seen, err
		}
		if b != ':' {
			return seen, p.fieldErr(joinPath(path, key), p.pos, fmt.Errorf("invalid character %q after object key", b))
		}
		p.pos++
		if _, err := p.peek(); err != nil {
			return seen, err
		}
		if err := each(i); err != nil {
			return seen, err
		}
	}
}

// rawString reads the string at pos, returning its text between the quotes
// and whether it needs decoding (escapes, invalid UTF-8 or control
// characters, which decoding reports).
func (p *podStream) rawString() (raw []byte, plain bool, err error) {
	i := p.pos + 1
	plain = true
	for {
		if i >= len(p.buf) {
			return nil, false, errShort
		}
		j := bytes.IndexByte(p.buf[i:], '"')
		if j < 0 {
			return nil, false, errShort
		}
		k := bytes.IndexByte(p.buf[i:i+j], '\\')
		if k < 0 {
			i += j
			break
		}
		plain = false
		i += k + 2
	}
	raw = p.buf[p.pos+1 : i]
	if plain {
		for _, c := range raw {
			if c < 0x20 || c >= utf8.RuneSelf {
				plain = false
				break
			}
		}
	}
	return raw, plain, nil
}

// key reads an object key and returns it with its index in known (-1:
// unknown). A known key, as written, is compared where it lies: a string
// made of every key of every pod was most of what a read threw away.
func (p *podStream) key(path string, known []string) (string, int, error) {
	at := p.pos
	raw, plain, err := p.rawString()
	if err != nil {
		return "", -1, err
	}
	if plain {
		for i, k := range known {
			if k == string(raw) {
				p.pos = at + len(raw) + 2
				return k, i, nil
			}
		}
	}
	key, err := p.str(path)
	if err != nil {
		return "", -1, err
	}
	return key, slices.Index(known, key), nil
}

// str reads a string as encoding/json decodes it.
func (p *podStream) str(path string) (string, error) {
	at := p.pos
	raw, plain, err := p.rawString()
	if err != nil {
		return "", err
	}
	p.pos = at + len(raw) + 2
	if plain {
		return string(raw), nil
	}
	var s string
	if err := json.Unmarshal(p.buf[at:p.pos], &s); err != nil {
		return "", p.fieldErr(path, at, fmt.Errorf("bad string: %w", err))
	}
	return s, nil
}

// internedStr reads a string many pods repeat (a namespace, a node name).
func (p *podStream) internedStr(path string) (string, error) {
	at := p.pos
	raw, plain, err := p.rawString()
	if err != nil {
		return "", err
	}
	if !plain {
		s, err := p.str(path)
		return p.tr.str(s), err
	}
	p.pos = at + len(raw) + 2
	if s, ok := p.tr.strs[string(raw)]; ok {
		return s, nil
	}
	return p.tr.str(string(raw)), nil
}

// stringValue reads a string or null ("").
func (p *podStream) stringValue(path string, interned bool) (string, error) {
	switch p.buf[p.pos] {
	case 'n':
		return "", p.literal("null")
	case '"':
		if interned {
			return p.internedStr(path)
		}
		return p.str(path)
	}
	return "", p.wrong(path, "a string")
}

// indexValue reads a non-negative integer that fits an int32.
func (p *podStream) indexValue(path string) (int, error) {
	start := p.pos
	end := start
	for end < len(p.buf) && isNumberByte(p.buf[end]) {
		end++
	}
	if end == len(p.buf) {
		return 0, errShort
	}
	if end == start {
		return 0, p.wrong(path, "a non-negative integer")
	}
	text := p.buf[start:end]
	n, err := strconv.ParseInt(string(text), 10, 32)
	if err != nil || n < 0 || len(text) > 1 && text[0] == '0' {
		return 0, p.fieldErr(path, start, fmt.Errorf("expected a non-negative integer, got %s", text))
	}
	p.pos = end
	return int(n), nil
}

// timeValue reads an RFC 3339 time as metav1.Time does (in local time);
// null reads as the zero time.
func (p *podStream) timeValue(path string) (time.Time, error) {
	start := p.pos
	if p.buf[p.pos] == 'n' {
		return time.Time{}, p.literal("null")
	}
	if p.buf[p.pos] == '"' {
		raw, plain, err := p.rawString()
		if err != nil {
			return time.Time{}, err
		}
		if t, ok := utcSeconds(raw); ok && plain {
			p.pos = start + len(raw) + 2
			return t.Local(), nil
		}
	}
	s, err := p.stringValue(path, false)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, p.fieldErr(path, start, fmt.Errorf("bad time %q: want RFC 3339, as 2026-11-30T10:00:00Z", s))
	}
	return t.Local(), nil
}

// utcSeconds reads the form nodetide writes, 2026-11-30T10:00:00Z, as
// time.Parse would, without making a string of it first (a plan reads
// one for every pod); anything else is left to time.Parse.
func utcSeconds(b []byte) (time.Time, bool) {
	if len(b) != len("2006-01-02T15:04:05Z") || b[4] != '-' || b[7] != '-' || b[10] != 'T' ||
		b[13] != ':' || b[16] != ':' || b[19] != 'Z' {
		return time.Time{}, false
	}
	num := func(from, to int) int {
		n := 0
		for _, c := range b[from:to] {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec := num(11, 13), num(14, 16), num(17, 19)
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC)
	if t.Day() != day { // past the month's end: time.Parse says so
		return time.Time{}, false
	}
	return t, true
}

// The paths of the keys of an entry, relative to it.
var compactScheduleKeyPaths = []string{"scheduled.status", "scheduled.reason", "scheduled.lastTransitionTime"}

// pod reads one entry at pos into cp.
func (p *podStream) pod(cp *compactPod) error {
	*cp = compactPod{}
	seen, err := p.object("", compactPodKeys, func(key int) error {
		var err error
		path := compactPodKeys[key]
		switch path {
		case "name":
			cp.name, err = p.stringValue(path, false)
		case "namespace":
			cp.namespace, err = p.stringValue(path, true)
		case "uid":
			cp.uid, err = p.stringValue(path, false)
		case "shape":
			cp.shape, err = p.indexValue(path)
		case "nodeName":
			cp.nodeName, err = p.stringValue(path, true)
		case "phase":
			cp.phase, err = p.stringValue(path, true)
		case "nominatedNodeName":
			cp.nominated, err = p.stringValue(path, true)
		case "creationTimestamp":
			cp.created, err = p.timeValue(path)
		case "deletionTimestamp":
			cp.deleted, err = p.timeValue(path)
		case "pinnedNode":
			cp.pinnedNode, err = p.stringValue(path, true)
		case "scheduled":
			if p.buf[p.pos] == 'n' {
				return p.literal("null")
			}
			cp.scheduled = true
			_, err = p.object(path, compactScheduleKeys, func(key int) error {
				var err error
				path := compactScheduleKeyPaths[key]
				switch compactScheduleKeys[key] {
				case "status":
					cp.schedStatus, err = p.stringValue(path, true)
				case "reason":
					cp.schedReason, err = p.stringValue(path, true)
				case "lastTransitionTime":
					cp.schedTime, err = p.timeValue(path)
				}
				return err
			})
		}
		return err
	})
	cp.seen = seen
	return err
}
