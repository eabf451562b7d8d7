package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestLogFormat: a command logs JSON only when asked (--log-format json,
// -v) or when its log is its output (run); otherwise warnings and errors
// alone, as plain lines.
func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    globals
		info bool // an info record is written
		json bool // records are JSON
	}{
		{"default", globals{}, false, false},
		{"text", globals{logFormat: logText}, false, false},
		{"json", globals{logFormat: logJSON}, true, true},
		{"verbose", globals{verbose: true}, true, true},
		{"run", globals{jsonLogs: true}, true, true},
		{"run with text", globals{jsonLogs: true, logFormat: logText}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			g := tc.g
			g.stderr = &b
			log := g.logger()
			log.Info("cycle done", "groups", 2)
			if got := b.Len() > 0; got != tc.info {
				t.Errorf("info record written = %v, want %v: %q", got, tc.info, b.String())
			}
			b.Reset()
			log.Warn("template tag skipped", "asg", "workers")
			line := b.String()
			if tc.json != json.Valid([]byte(line)) {
				t.Errorf("warning %q: JSON = %v, want %v", line, !tc.json, tc.json)
			}
			if !tc.json && (strings.Contains(line, "time=") || !strings.Contains(line, "template tag skipped") || strings.Count(line, "\n") != 1) {
				t.Errorf("warning is not one plain line without a timestamp: %q", line)
			}
		})
	}
	if _, errOut, code := nodetide(t, "plan", "--log-format", "xml"); code == 0 || !strings.Contains(errOut, `--log-format "xml": use text or json`) {
		t.Errorf("bad --log-format: exit %d, %q", code, errOut)
	}
}
