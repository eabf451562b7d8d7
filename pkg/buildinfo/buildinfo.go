// Package buildinfo is what a nodetide binary knows about its own build: the
// release version, commit and commit date that make release stamps at link
// time, else the version control information Go embeds in every build, and
// the Go toolchain and platform.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by make release with
// -X github.com/nodetide/nodetide/pkg/buildinfo.version=0.1.0 (and commit,
// date; modified=true for a check built from a modified tree); -X sets only
// string variables. Empty in any other build.
var (
	version  string
	commit   string
	date     string
	modified string
)

// Devel is the version of a build that make release did not stamp.
const Devel = "devel"

// Info describes one build.
type Info struct {
	// Version is the release's semantic version (0.1.0), or Devel.
	Version string `json:"version"`
	// Commit is the full commit hash it was built from, when known.
	Commit string `json:"commit,omitempty"`
	// Date is the commit's time (RFC 3339, UTC): a release's date comes
	// from git, never from the clock, so the same commit builds the same bytes.
	Date string `json:"date,omitempty"`
	// Modified says the tree had uncommitted changes: a Devel build's, or
	// a release check's (a release refuses to build from one).
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Read returns this binary's build.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return From(version, commit, date, modified, bi)
}

// From is the build described by the stamped values, or, when version is
// empty (an unstamped build), by bi's version control settings; bi may be nil.
func From(version, commit, date, modified string, bi *debug.BuildInfo) Info {
	in := Info{Version: version, Commit: commit, Date: date, Modified: modified == "true",
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil && bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	if version != "" {
		return in
	}
	in.Version, in.Commit, in.Date, in.Modified = Devel, "", "", false
	if bi == nil {
		return in
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.Date = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the build on one line, as --version and the functions' logs
// show it: "0.1.0 (commit 1a2b3c4d5e6f, 2026-12-01T10:00:00Z, go1.26.8
// linux/arm64)".
func (in Info) String() string {
	parts := make([]string, 0, 3)
	switch {
	case in.Commit == "":
		parts = append(parts, "no commit recorded")
	case in.Modified:
		parts = append(parts, "commit "+short(in.Commit)+" with uncommitted changes")
	default:
		parts = append(parts, "commit "+short(in.Commit))
	}
	if in.Date != "" {
		parts = append(parts, in.Date)
	}
	parts = append(parts, strings.TrimSpace(in.GoVersion+" "+in.Platform))
	return fmt.Sprintf("%s (%s)", in.Version, strings.Join(parts, ", "))
}

// Short is the version and, when known, the abbreviated commit: "0.1.0
// (1a2b3c4d5e6f)", "devel (1a2b3c4d5e6f, modified)".
func (in Info) Short() string {
	switch {
	case in.Commit == "":
		return in.Version
	case in.Modified:
		return in.Version + " (" + short(in.Commit) + ", modified)"
	}
	return in.Version + " (" + short(in.Commit) + ")"
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
