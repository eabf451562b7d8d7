package config

import (
	"fmt"
	"reflect"
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

type fieldErrors []fieldError

func (e *fieldErrors) add(line int, path, msg string) {
	*e = append(*e, fieldError{line: line, path: path, msg: msg})
}

func (e fieldErrors) join(source string) error {
	lines := make([]string, 0, len(e))
	for _, fe := range e {
		at := source
		if fe.line > 0 {
			at = fmt.Sprintf("%s:%d", source, fe.line)
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
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if t == typeOf[Duration]() || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
				return
			}
			errs.add(n.Line, orRoot(path), fmt.Sprintf("must be a mapping, got %s", kindName(n)))
			return
		}
		fields := yamlFields(t)
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
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
				return
			}
			errs.add(n.Line, orRoot(path), fmt.Sprintf("must be a list, got %s", kindName(n)))
			return
		}
		for i, item := range n.Content {
			checkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
				return
			}
			errs.add(n.Line, orRoot(path), fmt.Sprintf("must be a mapping, got %s", kindName(n)))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkKeys(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), errs)
		}
	case reflect.Int, reflect.Float64, reflect.Bool, reflect.String:
		// Decode the scalar alone so a type error names the user's key.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			errs.add(n.Line, orRoot(path), fmt.Sprintf("must be %s, got %s", scalarName(t.Kind()), kindName(n)))
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
