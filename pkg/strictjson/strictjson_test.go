package strictjson

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

type base struct {
	ID   string `json:"id"`
	Kind string `json:"kind,omitempty"`
}

type Extra struct {
	Note string `json:"note"`
}

type group struct {
	Name string `json:"name"`
	Max  *int   `json:"max,omitzero"`
}

type doc struct {
	base
	*Extra
	Action   string            `json:"action"`
	Count    int32             `json:"count,omitempty"`
	Ratio    float32           `json:"ratio,omitempty"`
	Size     uint8             `json:"size,omitempty"`
	On       bool              `json:"on,omitempty"`
	Quoted   int               `json:"quoted,string,omitempty"`
	Groups   []group           `json:"groups,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	ByName   map[string]group  `json:"byName,omitempty"`
	Raw      json.RawMessage   `json:"raw,omitempty"`
	Any      any               `json:"any,omitempty"`
	At       time.Time         `json:"at,omitzero"`
	Bytes    []byte            `json:"bytes,omitempty"`
	Pair     [2]int            `json:"pair,omitzero"`
	Ptr      *group            `json:"ptr,omitempty"`
	When     *selfDecoding     `json:"when,omitempty"`
	Level    slog.Level        `json:"level,omitempty"`
	Addr     netip.Addr        `json:"addr,omitzero"`
	Skipped  string            `json:"-"`
	Untagged string
	hidden   string
}

// selfDecoding takes any JSON.
type selfDecoding struct{ raw string }

func (s *selfDecoding) UnmarshalJSON(b []byte) error { s.raw = string(b); return nil }

func TestDecodeRefuses(t *testing.T) {
	cases := []struct {
		name, in, err string
		syntax        bool
	}{
		{"field twice", `{"action":"plan","action":"add"}`, "action: field given twice", false},
		{"field twice, nested", `{"groups":[{"name":"a"},{"name":"b","max":1,"max":9}]}`, "groups[1].max: field given twice", false},
		{"field twice in a map", `{"labels":{"a":"1","a":"2"}}`, "labels.a: field given twice", false},
		{"field twice in a map value", `{"byName":{"g":{"name":"g","name":"h"}}}`, "byName.g.name: field given twice", false},
		{"field twice in a raw message", `{"raw":{"x":{"y":1,"y":2}}}`, "raw.x.y: field given twice", false},
		{"field twice in an interface", `{"any":[{"k":1,"k":1}]}`, "any[0].k: field given twice", false},
		{"field twice, inlined", `{"id":"a","id":"b"}`, "id: field given twice", false},
		{"other case", `{"Action":"add"}`, "Action: unknown field", false},
		{"upper case", `{"COUNT":1}`, "COUNT: unknown field", false},
		{"other case, nested", `{"groups":[{"Name":"a"}]}`, "groups[0].Name: unknown field", false},
		{"unknown field", `{"actoin":"plan"}`, "actoin: unknown field", false},
		{"unknown nested field", `{"ptr":{"name":"a","min":1}}`, "ptr.min: unknown field", false},
		{"skipped field", `{"Skipped":"x"}`, "Skipped: unknown field", false},
		{"unexported field", `{"hidden":"x"}`, "hidden: unknown field", false},
		{"untagged in lower case", `{"untagged":"x"}`, "untagged: unknown field", false},
		{"trailing object", `{"action":"plan"} {"action":"add"}`, "unexpected data after the document, which ends at offset 17", true},
		{"trailing garbage", `{"action":"plan"} x`, "after the document", true},
		{"cut short", `{"action":`, "action: unexpected end of input", true},
		{"bad syntax", `{"action" "plan"}`, "invalid character", true},
		{"empty", ``, "unexpected end of input", true},
		{"null document", `null`, "want a JSON object, got null", false},
		{"array document", `[]`, "want a JSON object, got an array", false},
		{"string for int", `{"count":"2"}`, "count: got a string, want int32", false},
		{"fraction for int", `{"count":2.5}`, "count: got a number 2.5, want int32", false},
		{"int overflow", `{"count":9223372036854775807}`, "count: got a number 9223372036854775807, want int32", false},
		{"negative uint", `{"size":-1}`, "size: got a number -1, want uint8", false},
		{"float overflow", `{"ratio":1e39}`, "ratio: got a number 1e39, want float32", false},
		{"number for string", `{"action":1}`, "action: got a number, want string", false},
		{"bool for string", `{"action":true}`, "action: got a bool, want string", false},
		{"string for bool", `{"on":"true"}`, "on: got a string, want bool", false},
		{"object for list", `{"groups":{"name":"a"}}`, "groups: want a JSON array, got an object", false},
		{"scalar for element", `{"groups":[5]}`, "groups[0]: want a JSON object, got a number", false},
		{"null element", `{"groups":[null]}`, "groups[0]: want a JSON object, got null", false},
		{"array for map", `{"labels":[]}`, "labels: want a JSON object, got an array", false},
		{"number for quoted", `{"quoted":3}`, "quoted: got a number, want int", false},
		{"bad time", `{"at":"yesterday"}`, `at: parsing time "yesterday"`, false},
		{"number for time", `{"at":5}`, `at: Time.UnmarshalJSON`, false},
		{"field twice in a value that decodes itself", `{"when":{"a":1,"a":2}}`, `when.a: field given twice`, false},
		{"bad JSON-decoding value", `{"level":"LOUD"}`, `level: slog: level string "LOUD"`, false},
		{"bad text value", `{"addr":"1.2.3"}`, `addr: ParseAddr("1.2.3")`, false},
		{"number for text value", `{"addr":3}`, `addr: got a number, want netip.Addr`, false},
		{"bad array element", `{"pair":[1,"x"]}`, "pair[1]: got a string, want int", false},
		{"long array", `{"pair":[1,2,3]}`, "pair: more than 2 elements", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			err := Decode([]byte(tc.in), &d)
			if err == nil {
				t.Fatalf("Decode(%s) = %+v, want an error", tc.in, d)
			}
			if !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Decode(%s): %v, want it to mention %q", tc.in, err, tc.err)
			}
			if got := errors.Is(err, ErrSyntax); got != tc.syntax {
				t.Fatalf("Decode(%s): errors.Is(ErrSyntax) = %v, want %v", tc.in, got, tc.syntax)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	in := `{"id":"x","kind":"k","note":"n","action":"add","count":-3,"ratio":0.5,"size":255,"on":true,
		"quoted":"7","groups":[{"name":"a","max":2},{"name":"b","max":null}],"labels":{"a":"1","A":"2"},
		"byName":{"g":{"name":"g"}},"raw":{"Any":{"Case":[1,2]}},"any":{"k":[true,null]},
		"at":"2026-11-30T10:00:00Z","bytes":"aGk=","pair":[1,2],"ptr":null,"Untagged":"u","when":{"A":1},"level":"WARN","addr":"10.0.0.1"} `
	var got doc
	if err := Decode([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	two := 2
	want := doc{
		base: base{ID: "x", Kind: "k"}, Extra: &Extra{Note: "n"}, Action: "add", Count: -3, Ratio: 0.5, Size: 255,
		On: true, Quoted: 7, Groups: []group{{Name: "a", Max: &two}, {Name: "b"}},
		Labels: map[string]string{"a": "1", "A": "2"}, ByName: map[string]group{"g": {Name: "g"}},
		Raw: json.RawMessage(`{"Any":{"Case":[1,2]}}`), Any: map[string]any{"k": []any{true, nil}},
		At: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Bytes: []byte("hi"), Pair: [2]int{1, 2}, Untagged: "u",
		When: &selfDecoding{raw: `{"A":1}`}, Level: slog.LevelWarn, Addr: netip.MustParseAddr("10.0.0.1"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

type node struct {
	Name string  `json:"name"`
	Next *node   `json:"next,omitempty"`
	Kids []*node `json:"kids,omitempty"`
}

func TestRecursiveType(t *testing.T) {
	var n node
	if err := Decode([]byte(`{"name":"a","next":{"name":"b","kids":[{"name":"c"}]}}`), &n); err != nil {
		t.Fatal(err)
	}
	if n.Next.Kids[0].Name != "c" {
		t.Fatalf("decoded %+v", n)
	}
	err := Decode([]byte(`{"name":"a","next":{"name":"b","kids":[{"name":"c","nmae":"d"}]}}`), &n)
	if err == nil || err.Error() != "next.kids[0].nmae: unknown field" {
		t.Fatalf("error %v, want next.kids[0].nmae: unknown field", err)
	}
}

func TestDecodeNeedsPointer(t *testing.T) {
	var d doc
	if err := Decode([]byte(`{}`), d); err == nil {
		t.Fatal("Decode into a non-pointer: no error")
	}
}
