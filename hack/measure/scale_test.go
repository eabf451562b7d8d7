package main

import "testing"

func TestWithScaleSection(t *testing.T) {
	sec := scaleBegin + "\nnew\n" + scaleEnd + "\n"
	tests := []struct{ name, doc, want string }{
		{name: "empty file", doc: "", want: sec},
		{name: "appended", doc: "# Measured\n\nrows\n", want: "# Measured\n\nrows\n\n" + sec},
		{name: "replaced in place", doc: "# M\n\n" + scaleBegin + "\nold\n" + scaleEnd + "\ntail\n", want: "# M\n\n" + sec + "tail\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := withScaleSection(tc.doc, sec); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
			if got := scaleSection(withScaleSection(tc.doc, sec)); got != sec {
				t.Errorf("section carried over: %q, want %q", got, sec)
			}
		})
	}
}

func TestParseScales(t *testing.T) {
	if got, err := parseScales("1000, 5000"); err != nil || len(got) != 2 || got[1] != 5000 {
		t.Errorf("parseScales = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "1000,", "30000"} {
		if _, err := parseScales(bad); err == nil {
			t.Errorf("parseScales(%q) accepted", bad)
		}
	}
}
