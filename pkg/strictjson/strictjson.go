// Package strictjson decodes JSON into Go values the way a request that can
// change a cluster must be read: field names exactly as the struct's json
// tags spell them, no field given twice (at any depth), no unknown field, the
// right JSON type for each value and nothing after the document. Errors name
// the JSON path, as "schedule.nodeGroups[1].max: field given twice".
//
// encoding/json alone matches names in any case, lets the last of repeated
// fields win and, through json.Unmarshal's callers, is easy to leave
// trailing data after; each of those has let a request do what it did not
// appear to say.
//
// Values of types that decode themselves (json.Unmarshaler,
// encoding.TextUnmarshaler), json.RawMessage and interfaces are opaque: only
// their syntax and repeated fields are checked here, and a RawMessage is
// meant to be decoded strictly later, with its own type.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// ErrSyntax is wrapped by every error about the JSON text itself (broken,
// cut short, or followed by more), as opposed to its fields and values.
var ErrSyntax = errors.New("not valid JSON")

// Error is a problem at one place in the document.
type Error struct {
	// Path is where, as "nodeGroups[1].max"; empty for the document itself.
	Path string
	Msg  string
	// Err is what it wraps (ErrSyntax, or a value's own decoding error).
	Err error
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Decode checks data against v's type, then decodes it into v (a non-nil
// pointer). On error v may be partly set; callers discard it.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: Decode needs a non-nil pointer, got %T", v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := checkValue(dec, "", schemaOf(rv.Type().Elem())); err != nil {
		return err
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return &Error{Msg: fmt.Sprintf("unexpected data after the document, which ends at offset %d", end), Err: ErrSyntax}
		}
		return &Error{Msg: "after the document: " + strings.TrimPrefix(err.Error(), "json: "), Err: ErrSyntax}
	}
	if err := json.Unmarshal(data, v); err != nil {
		// Only values that decode themselves can still fail here.
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return &Error{Path: typeErr.Field, Msg: fmt.Sprintf("got a %s, want %s", typeErr.Value, typeErr.Type), Err: err}
		}
		return &Error{Msg: strings.TrimPrefix(err.Error(), "json: "), Err: err}
	}
	return nil
}

// kind is what a schema expects of a JSON value.
type kind int

const (
	kindAny    kind = iota // opaque: any value, repeated fields still refused
	kindObject             // a struct: exactly its fields
	kindMap                // an object with any keys
	kindArray
	kindString
	kindBool
	kindInt
	kindUint
	kindFloat
)

type schema struct {
	kind   kind
	goType reflect.Type
	fields map[string]*schema // kindObject
	elem   *schema            // kindMap, kindArray
	bits   int                // kindInt, kindUint, kindFloat
	length int                // a Go array's length, -1 for the rest
	// decoder: the type decodes itself (json.Unmarshaler or
	// encoding.TextUnmarshaler); it is tried here so its error has a path.
	decoder bool
	// nullable: null is accepted (a pointer, map, slice or opaque value);
	// a struct itself cannot be null.
	nullable bool
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	schemas             sync.Map // reflect.Type -> *schema
)

// schemaOf derives what JSON a Go type accepts, the way encoding/json
// decodes into it.
func schemaOf(t reflect.Type) *schema {
	if s, ok := schemas.Load(t); ok {
		return s.(*schema)
	}
	s := build(t, map[reflect.Type]*schema{})
	schemas.Store(t, s)
	return s
}

func build(t reflect.Type, building map[reflect.Type]*schema) *schema {
	if s, ok := building[t]; ok {
		return s // a recursive type: the same schema, filled in below
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType) {
		return &schema{kind: kindAny, goType: t, decoder: t.Kind() != reflect.Interface, length: -1}
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) || t.Implements(textUnmarshalerType) {
		return &schema{kind: kindString, goType: t, decoder: t.Kind() != reflect.Interface, length: -1}
	}
	s := &schema{goType: t, length: -1}
	building[t] = s
	switch t.Kind() {
	case reflect.Pointer:
		*s = *build(t.Elem(), building)
		s.nullable = true
	case reflect.Struct:
		s.kind = kindObject
		s.fields = map[string]*schema{}
		addFields(s.fields, t, building)
	case reflect.Map:
		s.kind = kindMap
		s.elem = build(t.Elem(), building)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(unmarshalerType) {
			s.kind = kindString // []byte is base64
			break
		}
		s.kind = kindArray
		s.elem = build(t.Elem(), building)
	case reflect.Array:
		s.kind = kindArray
		s.length = t.Len()
		s.elem = build(t.Elem(), building)
	case reflect.String:
		s.kind = kindString
	case reflect.Bool:
		s.kind = kindBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s.kind, s.bits = kindInt, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		s.kind, s.bits = kindUint, t.Bits()
	case reflect.Float32, reflect.Float64:
		s.kind, s.bits = kindFloat, t.Bits()
	default: // interfaces and what encoding/json refuses by itself
		s.kind = kindAny
	}
	return s
}

// addFields adds a struct's JSON fields: its own first, then those of
// embedded structs without a name, which encoding/json inlines (a name at a
// shallower depth wins, as there).
func addFields(fields map[string]*schema, t reflect.Type, building map[reflect.Type]*schema) {
	var inline []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				inline = append(inline, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs := build(ft, building)
		if hasOpt(opts, "string") {
			fs = &schema{kind: kindString, goType: ft} // ",string": a quoted scalar
		}
		fields[name] = fs
	}
	for _, et := range inline {
		sub := map[string]*schema{}
		addFields(sub, et, building)
		for name, fs := range sub {
			if _, taken := fields[name]; !taken {
				fields[name] = fs
			}
		}
	}
}

func hasOpt(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// checkValue reads one JSON value from dec and checks it against want.
func checkValue(dec *json.Decoder, path string, want *schema) error {
	if want.decoder {
		return checkDecoder(dec, path, want)
	}
	tok, err := dec.Token()
	if err != nil {
		return tokenError(path, err)
	}
	if tok == nil {
		if want.kind == kindObject && !want.nullable {
			return typeError(path, "null", want)
		}
		return nil // null leaves the value as it was, as in encoding/json
	}
	delim, isDelim := tok.(json.Delim)
	if isDelim && delim == '{' {
		if want.kind != kindObject && want.kind != kindMap && want.kind != kindAny {
			return typeError(path, "an object", want)
		}
		return checkObject(dec, path, want)
	}
	if isDelim && delim == '[' {
		if want.kind != kindArray && want.kind != kindAny {
			return typeError(path, "an array", want)
		}
		elem := want.elem
		if want.kind == kindAny {
			elem = want
		}
		for i := 0; dec.More(); i++ {
			if i == want.length {
				return &Error{Path: path, Msg: fmt.Sprintf("more than %d elements", want.length)}
			}
			if err := checkValue(dec, path+"["+strconv.Itoa(i)+"]", elem); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return tokenError(path, err)
		}
		return nil
	}
	return checkScalar(path, tok, want)
}

// checkDecoder checks a value whose type decodes itself: its JSON (no
// field given twice inside either), then the type's own decoding, so that
// its error names the path.
func checkDecoder(dec *json.Decoder, path string, want *schema) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return tokenError(path, err)
	}
	sub := json.NewDecoder(bytes.NewReader(raw))
	sub.UseNumber()
	if err := checkValue(sub, path, &schema{kind: kindAny, length: -1, nullable: true}); err != nil {
		return err
	}
	if string(raw) == "null" {
		return nil
	}
	v := reflect.New(want.goType).Interface()
	var err error
	if u, ok := v.(json.Unmarshaler); ok {
		err = u.UnmarshalJSON(raw)
	} else if u, ok := v.(encoding.TextUnmarshaler); ok {
		var text string
		if json.Unmarshal(raw, &text) != nil {
			return typeError(path, "a "+jsonKind(raw), want)
		}
		err = u.UnmarshalText([]byte(text))
	}
	if err != nil {
		return &Error{Path: path, Msg: err.Error(), Err: err}
	}
	return nil
}

// jsonKind names the JSON type of a valid value.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

func checkObject(dec *json.Decoder, path string, want *schema) error {
	seen := map[string]bool{}
	for dec.More() {
		keyTok, err := dec.Token()
		if err != nil {
			return tokenError(path, err)
		}
		key := keyTok.(string) // the decoder yields only string keys in objects
		field := join(path, key)
		sub := want
		switch want.kind {
		case kindObject:
			s, known := want.fields[key]
			if !known {
				return &Error{Path: field, Msg: "unknown field"}
			}
			sub = s
		case kindMap:
			sub = want.elem
		}
		if seen[key] {
			return &Error{Path: field, Msg: "field given twice"}
		}
		seen[key] = true
		if err := checkValue(dec, field, sub); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return tokenError(path, err)
	}
	return nil
}

func checkScalar(path string, tok json.Token, want *schema) error {
	switch v := tok.(type) {
	case string:
		if want.kind == kindString || want.kind == kindAny {
			return nil
		}
		return typeError(path, "a string", want)
	case bool:
		if want.kind == kindBool || want.kind == kindAny {
			return nil
		}
		return typeError(path, "a bool", want)
	case json.Number:
		var err error
		switch want.kind {
		case kindAny:
		case kindInt:
			_, err = strconv.ParseInt(string(v), 10, want.bits)
		case kindUint:
			_, err = strconv.ParseUint(string(v), 10, want.bits)
		case kindFloat:
			_, err = strconv.ParseFloat(string(v), want.bits)
		default:
			return typeError(path, "a number", want)
		}
		if err != nil {
			return typeError(path, "a number "+string(v), want)
		}
		return nil
	}
	return &Error{Path: path, Msg: fmt.Sprintf("unexpected %v", tok), Err: ErrSyntax}
}

func typeError(path, got string, want *schema) error {
	switch want.kind {
	case kindObject, kindMap:
		return &Error{Path: path, Msg: "want a JSON object, got " + got}
	case kindArray:
		return &Error{Path: path, Msg: "want a JSON array, got " + got}
	}
	return &Error{Path: path, Msg: fmt.Sprintf("got %s, want %s", got, want.goType)}
}

// tokenError names where the JSON broke off or went wrong.
func tokenError(path string, err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Path: path, Msg: "unexpected end of input", Err: ErrSyntax}
	}
	return &Error{Path: path, Msg: strings.TrimPrefix(err.Error(), "json: "), Err: ErrSyntax}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
