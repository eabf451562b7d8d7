package main

import (
	"context"
	"errors"
	"strings"

	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/statustable"
)

// recordedBuilds are the functions that record the build they start with
// (evaluate's is in its cycle status).
var recordedBuilds = statustable.RecordedBuilds

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
