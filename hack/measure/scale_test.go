package main

import (
	"io"
	"testing"
)

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

// TestWithSectionOrder: a section the document does not have yet goes
// before the sections that follow the main run's, so each run keeps the
// others' and the document reads in the same order whatever ran first.
func TestWithSectionOrder(t *testing.T) {
	bedSec := bedScaleBegin + "\nbed\n" + bedScaleEnd + "\n"
	scaleSec := scaleBegin + "\nscale\n" + scaleEnd + "\n"
	main := "# Measured\n\nrows\n\n"
	snap := "## Snapshot file\n\nkept\n"
	tests := []struct{ name, doc, begin, end, sec, want string }{
		{"bed before scale", main + scaleSec + "\n" + snap, bedScaleBegin, bedScaleEnd, bedSec, main + bedSec + "\n" + scaleSec + "\n" + snap},
		{"scale after bed", main + bedSec + "\n" + snap, scaleBegin, scaleEnd, scaleSec, main + bedSec + "\n" + scaleSec + "\n" + snap},
		{"bed before the snapshot file", main + snap, bedScaleBegin, bedScaleEnd, bedSec, main + bedSec + "\n" + snap},
		{"bed replaced", main + bedScaleBegin + "\nold\n" + bedScaleEnd + "\n\n" + scaleSec, bedScaleBegin, bedScaleEnd, bedSec, main + bedSec + "\n" + scaleSec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := withSection(tc.doc, tc.begin, tc.end, tc.sec)
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if markedSection(got, tc.begin, tc.end) != tc.sec {
				t.Errorf("section not found again in\n%s", got)
			}
		})
	}
}

func TestBedScaleFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"-bed-scale", "1000"}, true},
		{[]string{"-bed-scale", "-1"}, false},
		{[]string{"-bed-scale", "2"}, false}, // planCluster wants 3 nodes at least
		{[]string{"-bed-scale", "1000", "-scale", "5000"}, false},
	} {
		o, err := parseFlags(tc.args, io.Discard)
		if (err == nil) != tc.ok {
			t.Errorf("%v: %v, want ok %t", tc.args, err, tc.ok)
		}
		if err == nil && o.BedScale != 1000 {
			t.Errorf("%v: bed scale %d", tc.args, o.BedScale)
		}
	}
}

// -scale-memory gives one function memory for every scale, or one per scale.
func TestScaleMemoryFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []int // memory per scale; nil: refused
	}{
		{[]string{"-scale", "5000"}, []int{512}},
		{[]string{"-scale", "5000,10000", "-scale-memory", "1024"}, []int{1024, 1024}},
		{[]string{"-scale", "5000,10000", "-scale-memory", "512,1024"}, []int{512, 1024}},
		{[]string{"-scale", "5000,10000", "-scale-memory", "512,1024,2048"}, nil},
		{[]string{"-scale", "5000", "-scale-memory", "64"}, nil},
		{[]string{"-scale", "5000", "-scale-memory", "lots"}, nil},
	} {
		o, err := parseFlags(tc.args, io.Discard)
		if (err == nil) != (tc.want != nil) {
			t.Errorf("%v: %v, want ok %t", tc.args, err, tc.want != nil)
			continue
		}
		for i := range tc.want {
			if got := o.Scale.memoryFor(i); got != tc.want[i] {
				t.Errorf("%v: scale %d runs with %d MB, want %d", tc.args, i, got, tc.want[i])
			}
		}
	}
}
