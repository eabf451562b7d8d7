// Command nodetide is nodetide's CLI: offline planning of recorded snapshots,
// live snapshots, the evaluate cycle run in-process, manual scaling and config
// checks.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newRoot(stdout, stderr)
	cmd.SetArgs(args)
	c, err := cmd.ExecuteContextC(ctx)
	if err != nil {
		// cobra.NoArgs calls an extra argument an unknown command, which on
		// a command without subcommands sends the user looking for one.
		if c != nil && !c.HasSubCommands() && strings.HasPrefix(err.Error(), "unknown command ") {
			err = fmt.Errorf("%s takes no arguments, got %s", c.CommandPath(), strings.Join(quoted(c.Flags().Args()), " "))
		}
		msg := errorLine(err)
		if first, rest, ok := strings.Cut(msg, "\n"); ok {
			// A list of problems (a config's, a snapshot's): one a line,
			// under a line that says how many.
			lines := append([]string{first}, strings.Split(rest, "\n")...)
			msg = fmt.Sprintf("%d problems:\n  %s", len(lines), strings.Join(lines, "\n  "))
		}
		fmt.Fprintf(stderr, "nodetide: %s\n", msg)
		return 1
	}
	return 0
}

func quoted(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strconv.Quote(a)
	}
	return out
}

// errorLine is an error as the user reads it: what failed, on what, why.
// Wrapping at several layers can name the same thing twice in a row
// ("read snapshot: read snapshot: ...") or start with a bare "error";
// both only lengthen the line.
func errorLine(err error) string {
	parts := strings.Split(err.Error(), ": ")
	out := parts[:0]
	for _, p := range parts {
		if len(out) > 0 && p == out[len(out)-1] {
			continue
		}
		if len(out) == 0 && strings.EqualFold(p, "error") {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}
