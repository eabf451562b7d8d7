package main

import (
	"strings"
	"testing"
)

// TestRefusedArguments: arguments that would act on more than asked (every
// node, a wrapped count) exit non-zero before any config or cluster is
// read; the config file named does not even exist.
func TestRefusedArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"enable"}, "give the NODE to enable, or --all for every cordoned node"},
		{[]string{"enable", ""}, "NODE: empty node name"},
		{[]string{"enable", " "}, `NODE: " " is not a node name`},
		{[]string{"enable", "n1", "--all"}, "give a NODE or --all, not both"},
		{[]string{"shutdown", ""}, "NODE: empty node name"},
		{[]string{"shutdown", "n1", "--timeout", "2562047h"}, "--timeout: must be a duration from 30s to 24h0m0s"},
		{[]string{"shutdown", "n1", "--timeout", "10s"}, "--timeout: must be a duration from 30s to 24h0m0s"},
		{[]string{"add", "workers", "9223372036854775807"}, "N must be a whole number from 1 to 1000"},
		{[]string{"add", "workers", "1001"}, "N must be a whole number from 1 to 1000"},
		{[]string{"add", "workers", "0"}, "N must be a whole number from 1 to 1000"},
		{[]string{"enable", "n1", "--all", "--force"}, "give a NODE or --all, not both"},
		{[]string{"enable", "--all", "--force"}, "--force ends the drain holding one NODE"},
		// A mistyped subcommand is an error, not the help and success.
		{[]string{"config", "valdate"}, `unknown command "valdate" for "nodetide config" (one of: validate)`},
		{[]string{"schedules", "lst"}, `unknown command "lst" for "nodetide schedules"`},
	} {
		args := append(tc.args, "--config", "/nonexistent/nodetide.yaml")
		out, errOut, code := nodetide(t, args...)
		if code == 0 || !strings.Contains(errOut, tc.err) {
			t.Errorf("nodetide %s: exit %d, stdout %q, stderr %q; want an error mentioning %q", strings.Join(tc.args, " "), code, out, errOut, tc.err)
		}
	}
}

// TestHelpReadsAsWritten: usage text shows no stray value names (cobra
// takes a back-quoted word in a flag's usage as its value's name) and one
// default per flag.
func TestHelpReadsAsWritten(t *testing.T) {
	for _, cmd := range [][]string{{"run", "--help"}, {"plan", "--help"}} {
		out, _, code := nodetide(t, cmd...)
		if code != 0 {
			t.Fatalf("nodetide %s: exit %d", strings.Join(cmd, " "), code)
		}
		for _, bad := range []string{"--local-drains make", "--snapshot nodetide", "(default 1m0s)"} {
			if strings.Contains(out, bad) {
				t.Errorf("nodetide %s shows %q:\n%s", strings.Join(cmd, " "), bad, out)
			}
		}
	}
}
