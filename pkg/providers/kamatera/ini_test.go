package kamatera

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseINI(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []iniEntry
	}{
		{
			name: "comments, sections, case",
			src:  "; comment\n# comment\n[Global]\nCluster-Name = prod ; trailing\n[nodegroup \"Ng1\"] # c\n",
			want: []iniEntry{
				{line: 3, section: "global"},
				{line: 4, section: "global", key: "cluster-name", value: "prod"},
				{line: 5, section: "nodegroup", sub: "Ng1", hasSub: true},
			},
		},
		{
			name: "quotes keep comment characters and spaces",
			src:  "[global]\na = \"x ; y # z\"\nb = \"  padded  \"\nc = a\"b c\"d\nd = \"\"\n",
			want: []iniEntry{
				{line: 1, section: "global"},
				{line: 2, section: "global", key: "a", value: "x ; y # z"},
				{line: 3, section: "global", key: "b", value: "  padded  "},
				{line: 4, section: "global", key: "c", value: "ab cd"},
				{line: 5, section: "global", key: "d", value: ""},
			},
		},
		{
			name: "unquoted comment characters end the value; inner spaces stay",
			src:  "[global]\npassword = Abc#123\nssh-key = ssh-rsa AAAA  user@host   \n",
			want: []iniEntry{
				{line: 1, section: "global"},
				{line: 2, section: "global", key: "password", value: "Abc"},
				{line: 3, section: "global", key: "ssh-key", value: "ssh-rsa AAAA  user@host"},
			},
		},
		{
			name: "escapes and continuation",
			src:  "[global]\na = \"q\\\"b\\\\s\\tt\\nn\"\nb = one \\\n  two\nc = after\n",
			want: []iniEntry{
				{line: 1, section: "global"},
				{line: 2, section: "global", key: "a", value: "q\"b\\s\tt\nn"},
				{line: 3, section: "global", key: "b", value: "one   two"},
				{line: 5, section: "global", key: "c", value: "after"},
			},
		},
		{
			name: "blank keys, empty values, CRLF and BOM",
			src:  "\ufeff[nodegroup \"a\\\"b\"]\r\ndailybackup\r\ndisk =\r\n",
			want: []iniEntry{
				{line: 1, section: "nodegroup", sub: "a\"b", hasSub: true},
				{line: 2, section: "nodegroup", sub: "a\"b", hasSub: true, key: "dailybackup", blank: true},
				{line: 3, section: "nodegroup", sub: "a\"b", hasSub: true, key: "disk", value: ""},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseINI([]byte(tt.src))
			if err != nil {
				t.Fatalf("parseINI: line %d: %s", err.line, err.msg)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseINIErrors(t *testing.T) {
	tests := []struct {
		name, src string
		line      int
		msg       string
	}{
		{"key before section", "a = 1\n", 1, "before any section"},
		{"missing equals", "[global]\na 1\n", 2, "expected '='"},
		{"unterminated quote", "[global]\n\na = \"open\n", 3, "no closing quote"},
		{"bad escape", "[global]\na = \"\\q\"\n", 2, "unknown escape"},
		{"backslash mid value", "[global]\na = x\\y\n", 2, `unquoted '\'`},
		{"continuation at end of file", "[global]\na = x\\", 2, "past the end"},
		{"header without name", "[ ]\n", 1, "section name"},
		{"header not closed", "[global\n", 1, "expected ']'"},
		{"text after header", "[global] x\n", 1, "after the section header"},
		{"empty subsection", "[nodegroup \"\"]\n", 1, "empty subsection"},
		{"unterminated subsection", "[nodegroup \"x]\n", 1, "no closing quote"},
		{"illegal start", "[global]\n=x\n", 2, "expected a section header or a key"},
		{"underscore in key", "[global]\ncluster_name = x\n", 2, "expected '='"},
		{"NUL", "[global]\na = \x00\n", 2, "NUL"},
		{"invalid UTF-8", "[global]\n\na = \xff\n", 3, "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseINI([]byte(tt.src))
			if err == nil {
				t.Fatal("want an error")
			}
			if err.line != tt.line || !strings.Contains(err.msg, tt.msg) {
				t.Errorf("got line %d %q, want line %d containing %q", err.line, err.msg, tt.line, tt.msg)
			}
		})
	}
}
