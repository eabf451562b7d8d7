package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nodetide/nodetide/pkg/state"
)

// recordedBuilds are the functions that record the build they start with
// (evaluate's is in its cycle status).
var recordedBuilds = []string{"drain", "schedule"}

// readBuilds reads the builds drain and schedule last started with; one not
// recorded yet is left out, an unreadable one is named in the error.
func readBuilds(ctx context.Context, store state.StatusStore) (map[string]state.FunctionBuild, string) {
	builds := map[string]state.FunctionBuild{}
	var errs []string
	for _, fn := range recordedBuilds {
		b, err := state.ReadBuild(ctx, store, fn)
		switch {
		case errors.Is(err, state.ErrNoStatus):
		case err != nil:
			errs = append(errs, err.Error())
		default:
			builds[fn] = b
		}
	}
	return builds, strings.Join(errs, "; ")
}

// writeVersions writes the version each function last ran: evaluate's from
// the cycle, drain's and schedule's from their records (when read).
func writeVersions(w io.Writer, d statusDoc) {
	parts := []string{"evaluate " + orNone(buildShort(d))}
	if d.FunctionBuilds != nil {
		for _, fn := range recordedBuilds {
			if b, ok := d.FunctionBuilds[fn]; ok {
				parts = append(parts, fn+" "+b.Build.Short())
			} else {
				parts = append(parts, fn+" not recorded")
			}
		}
	}
	fmt.Fprintf(w, "Versions:     %s\n", strings.Join(parts, ", "))
	if d.FunctionBuildsError != "" {
		fmt.Fprintf(w, "Versions error: %s\n", d.FunctionBuildsError)
	}
}

func buildShort(d statusDoc) string {
	if d.Build == nil {
		return "" // a status written before builds were recorded
	}
	return d.Build.Short()
}
