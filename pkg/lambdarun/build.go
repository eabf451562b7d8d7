package lambdarun

import (
	"context"
	"log/slog"
	"time"

	"github.com/nodetide/nodetide/pkg/buildinfo"
	"github.com/nodetide/nodetide/pkg/state"
)

// LogBuild logs the build the function runs, once at cold start, so its
// log group says which version ran when.
func LogBuild(log *slog.Logger, b buildinfo.Info) {
	log.Info("build", "version", b.Version, "commit", b.Commit, "date", b.Date, "modified", b.Modified,
		"goVersion", b.GoVersion, "platform", b.Platform)
}

// RecordBuild stores the build function started with for `nodetide status`
// (see state.RecordBuild: a write only when it changed) in store, when store
// keeps statuses. It is for drain and schedule; evaluate's cycle status
// carries its build. A failure is logged, never returned: the function's
// work does not depend on it.
func RecordBuild(ctx context.Context, store any, function string, log *slog.Logger) {
	ss, ok := store.(state.StatusStore)
	if !ok {
		return
	}
	b := buildinfo.Read()
	wrote, err := state.RecordBuild(ctx, ss, function, b, time.Now())
	switch {
	case err != nil:
		log.Warn("record build", "error", err.Error())
	case wrote:
		log.Info("recorded build", "version", b.Version, "commit", b.Commit)
	}
}
