package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestErrorLine: an error reads once as what failed, on what and why;
// wrapping that repeats a layer, or a bare leading "error", is dropped.
func TestErrorLine(t *testing.T) {
	base := errors.New("open snap.json: no such file or directory")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{base, "open snap.json: no such file or directory"},
		{fmt.Errorf("read snapshot: %w", fmt.Errorf("read snapshot: %w", base)), "read snapshot: open snap.json: no such file or directory"},
		{fmt.Errorf("error: %w", base), "open snap.json: no such file or directory"},
		{errors.New("schedule night: nodeGroups[0].name: error"), "schedule night: nodeGroups[0].name: error"},
	} {
		if got := errorLine(tc.err); got != tc.want {
			t.Errorf("errorLine(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
	// A list of problems: counted, one a line.
	bad := writeFile(t, "nodetide.yaml", "cluster: {}\nstate: {memory: {}}\nnodeGroups: [{name: g, provider: kwok, minSize: 3, maxSize: 2, kwok: {template: {allocatable: {cpu: 2, memory: 1Gi}}}}]\n")
	if _, errOut, code := nodetide(t, "config", "validate", "--config", bad); code != 1 ||
		errOut != "nodetide: 2 problems:\n  "+bad+":1: cluster.name: is required\n  "+bad+":3: nodeGroups[0]: minSize 3 is greater than maxSize 2\n" {
		t.Errorf("config problems: exit %d, stderr %q", code, errOut)
	}
	// A missing config says what to do.
	if _, errOut, code := nodetide(t, "add", "g", "1", "--config", "/nonexistent/nodetide.yaml"); code != 1 ||
		errOut != "nodetide: config /nonexistent/nodetide.yaml: no such file (give one with --config FILE; examples/ in the nodetide repository has one per provider)\n" {
		t.Errorf("missing config: exit %d, stderr %q", code, errOut)
	}
	// Through the CLI: one prefix, the program's name.
	_, errOut, code := nodetide(t, "plan", "--snapshot", "/nonexistent/snap.json")
	if code != 1 || !strings.HasPrefix(errOut, "nodetide: read snapshot: open /nonexistent/snap.json: ") || strings.Contains(errOut, "error:") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestOutputFormats: every command that prints data takes -o table, json
// and yaml (a manifest has no table); snapshot's -o is its form, and the
// file it writes is --file.
func TestOutputFormats(t *testing.T) {
	snap := "../../pkg/planner/testdata/headroom/snapshot.json"
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plan", "--snapshot", snap, "-o", "yaml"}, 0, "scaleUp:"},
		{[]string{"plan", "--snapshot", snap, "-o", "table"}, 0, "NODE GROUP"},
		{[]string{"plan", "--snapshot", snap, "-o", "xml"}, 1, `--output "xml": use one of [table json yaml]`},
		{[]string{"schedules", "next", "../../examples/day-night.json", "--from", "2027-03-29T00:00:00Z", "--count", "1", "-o", "json"}, 0,
			"\"schedule\": \"day\",\n    \"next\": [\n      \"2027-03-29T08:00:00+02:00\"\n    ]"},
		{[]string{"schedules", "next", "../../examples/day-night.json", "--from", "2027-03-29T00:00:00Z", "--count", "1"}, 0,
			"# night\n2027-03-29T20:00:00+02:00\n# day\n2027-03-29T08:00:00+02:00\n"},
		{[]string{"nodes", "-o", "xml"}, 1, `--output "xml": use one of [table json yaml]`},
		{[]string{"webhook", "manifest", "--url", "https://example.com/", "-o", "table"}, 1, `--output "table": use one of [yaml json]`},
		{[]string{"snapshot", "-o", "snap.json"}, 1, `-o "snap.json": a snapshot's form is compact or full; to write a file use --file snap.json`},
		{[]string{"snapshot", "--full", "-o", "compact"}, 1, "--full and -o compact: give one form"},
	} {
		args := tc.args
		if tc.code != 0 {
			// Refused before any config is read.
			args = append(args, "--config", "/nonexistent/nodetide.yaml")
		}
		out, errOut, code := nodetide(t, args...)
		where := errOut
		if tc.code == 0 {
			where = out
		}
		if code != tc.code || !strings.Contains(where, tc.want) {
			t.Errorf("nodetide %s: exit %d, stdout %.200q, stderr %q; want exit %d mentioning %q", strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.want)
		}
	}
}
