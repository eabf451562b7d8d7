package config

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// fieldError is one problem in a config document.
type fieldError struct {
	line int
	path string
	msg  string
}

// fieldErrors collects problems; lines, filled by checkKeys, maps each path
// of the document to its line, so a problem found after decoding still
// names where it is.
type fieldErrors struct {
	list  []fieldError
	lines map[string]int
	// refused are the values checkKeys found wrong, set aside (as null)
	// before the checks of decoded values run.
	refused []*yaml.Node
}

func (e *fieldErrors) add(line int, path, msg string) {
	e.list = append(e.list, fieldError{line: line, path: path, msg: msg})
}

// refuse records a problem with the value n.
func (e *fieldErrors) refuse(n *yaml.Node, path, msg string) {
	e.add(n.Line, path, msg)
	e.refused = append(e.refused, n)
}

// covers reports whether a problem at path is already accounted for by one
// found before decoding: the same value, one inside it, or one holding it.
func (e *fieldErrors) covers(path string) bool {
	for _, fe := range e.list {
		if fe.path == path || fe.path == "(document)" || under(path, fe.path) || under(fe.path, path) {
			return true
		}
	}
	return false
}

// checkRest runs the checks of decoded values on a document checkKeys found
// problems in, with the refused values set aside as null, so that one run
// reports every problem (a typo and a min above max alike). What a refused
// value would have caused is not reported again.
func (e *fieldErrors) checkRest(doc *yaml.Node) {
	for _, n := range e.refused {
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
	}
	var cfg Config
	if doc.Decode(&cfg) != nil {
		return // e.g. a duplicate key: the first problems stand alone
	}
	more := fieldErrors{lines: e.lines}
	cfg.validate(&more)
	for _, fe := range more.list {
		if !e.covers(fe.path) {
			e.list = append(e.list, fe)
		}
	}
	slices.SortStableFunc(e.list, func(a, b fieldError) int { return cmp.Compare(e.lineOf(a.path, a.line), e.lineOf(b.path, b.line)) })
}

func under(path, parent string) bool {
	rest, ok := strings.CutPrefix(path, parent)
	return ok && (strings.HasPrefix(rest, ".") || strings.HasPrefix(rest, "["))
}

// lineOf is line when known, else the line of path's value, else of its
// nearest enclosing value in the document.
func (e *fieldErrors) lineOf(path string, line int) int {
	if line > 0 {
		return line
	}
	for p := path; p != ""; {
		if l, ok := e.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

func (e fieldErrors) join(source string) error {
	lines := make([]string, 0, len(e.list))
	for _, fe := range e.list {
		at := source
		if l := e.lineOf(fe.path, fe.line); l > 0 {
			at = fmt.Sprintf("%s:%d", source, l)
		}
		lines = append(lines, fmt.Sprintf("%s: %s: %s", at, fe.path, fe.msg))
	}
	return &Error{Problems: lines}
}

// Error lists every problem found in a config, one per line.
type Error struct{ Problems []string }

func (e *Error) Error() string { return strings.Join(e.Problems, "\n") }

// checkKeys walks a YAML node against the Go type it will be decoded into and
// reports keys the type does not have, with their path and line: yaml.v3's own
// strict mode names Go types, not the user's keys.
func checkKeys(n *yaml.Node, t reflect.Type, path string, errs *fieldErrors) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if path != "" {
		errs.lines[path] = n.Line
	}
	if t == typeOf[Expanders]() {
		checkExpanders(n, path, errs)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == typeOf[Duration]() {
			checkDuration(n, path, errs)
			return
		}
		if t == typeOf[StatusConfigMap]() && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
			return // false turns it off, true keeps the defaults
		}
		checkStruct(n, t, path, errs)
	case reflect.Slice:
		checkList(n, t, path, errs)
	case reflect.Map:
		checkMap(n, t, path, errs)
	default:
		checkScalar(n, t, path, errs)
	}
}

// isNull reports an explicit null, which leaves a field at its default.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// checkDuration is checked here, with the other problems, so a bad duration
// is reported with its path and line, not alone by the decoder.
func checkDuration(n *yaml.Node, path string, errs *fieldErrors) {
	var d Duration
	if isNull(n) {
		return
	}
	if err := d.UnmarshalYAML(n); err != nil {
		errs.refuse(n, orRoot(path), err.Error())
	}
}

// checkStruct refuses keys struct t does not have, and checks the others.
func checkStruct(n *yaml.Node, t reflect.Type, path string, errs *fieldErrors) {
	if n.Kind != yaml.MappingNode {
		if isNull(n) {
			return
		}
		errs.refuse(n, orRoot(path), fmt.Sprintf("must be a mapping, got %s", kindName(n)))
		return
	}
	fields := yamlFields(t)
	if t == typeOf[NodeGroup]() {
		blockFields(fields)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ft, ok := fields[k.Value]
		p := join(path, k.Value)
		if !ok {
			errs.add(k.Line, p, fmt.Sprintf("unknown field (known: %s)", knownList(fields)))
			continue
		}
		checkKeys(v, ft, p, errs)
	}
}

// checkList checks each item of a list of t's elements.
func checkList(n *yaml.Node, t reflect.Type, path string, errs *fieldErrors) {
	if n.Kind != yaml.SequenceNode {
		if isNull(n) {
			return
		}
		errs.refuse(n, orRoot(path), fmt.Sprintf("must be a list, got %s", kindName(n)))
		return
	}
	for i, item := range n.Content {
		checkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
	}
}

// checkMap refuses a duplicate key, naming the line of the first, and checks
// each value.
func checkMap(n *yaml.Node, t reflect.Type, path string, errs *fieldErrors) {
	if n.Kind != yaml.MappingNode {
		if isNull(n) {
			return
		}
		errs.refuse(n, orRoot(path), fmt.Sprintf("must be a mapping, got %s", kindName(n)))
		return
	}
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		p := join(path, k.Value)
		if prev, dup := seen[k.Value]; dup {
			errs.add(k.Line, p, fmt.Sprintf("duplicate key (also line %d)", prev))
			continue
		}
		seen[k.Value] = k.Line
		checkKeys(n.Content[i+1], t.Elem(), p, errs)
	}
}

// checkScalar checks a number, bool or string has the type its field wants.
func checkScalar(n *yaml.Node, t reflect.Type, path string, errs *fieldErrors) {
	switch t.Kind() {
	case reflect.Int:
		// yaml.v3 truncates a float into an int field (0.9 becomes 0): a
		// count must be written as a whole number.
		var v int
		if n.ShortTag() == "!!null" {
			return
		}
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
			errs.refuse(n, orRoot(path), fmt.Sprintf("must be %s, got %s", scalarName(t.Kind()), kindName(n)))
		}
	case reflect.Float64:
		var v float64
		if n.ShortTag() == "!!null" {
			return
		}
		if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			errs.refuse(n, orRoot(path), fmt.Sprintf("must be a finite number, got %s", kindName(n)))
		}
	case reflect.Bool, reflect.String:
		// Decode the scalar alone so a type error names the user's key.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			errs.refuse(n, orRoot(path), fmt.Sprintf("must be %s, got %s", scalarName(t.Kind()), kindName(n)))
		}
	}
}

func scalarName(k reflect.Kind) string {
	switch k {
	case reflect.Int:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	}
	return "a string"
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		out[tag] = f.Type
	}
	return out
}

func knownList(fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "something else"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(document)"
	}
	return path
}

func sortedKeys[M ~map[K]V, K cmp.Ordered, V any](m M) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
