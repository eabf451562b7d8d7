package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// buildinfoPkg is where the stamped variables live.
const buildinfoPkg = "github.com/nodetide/nodetide/pkg/buildinfo"

// Stamp is what a release build writes into pkg/buildinfo.
type Stamp struct {
	Version, Commit string
	// Date is the commit's committer time, UTC: from git, so that building
	// the same commit again gives the same bytes.
	Date     string
	Modified bool
	// Time is Date as a time, for the zips' entries.
	Time time.Time
}

// LDFlags are the linker flags of every release binary: stripped, no build
// ID (it hashes the inputs' paths and action IDs), and the stamp.
func (s Stamp) LDFlags() string {
	flags := []string{"-s", "-w", "-buildid=",
		"-X", buildinfoPkg + ".version=" + s.Version,
		"-X", buildinfoPkg + ".commit=" + s.Commit,
		"-X", buildinfoPkg + ".date=" + s.Date,
	}
	if s.Modified {
		flags = append(flags, "-X", buildinfoPkg+".modified=true")
	}
	return strings.Join(flags, " ")
}

// gitStamp reads HEAD's commit and committer time, and whether tracked
// files differ from it, in dir.
func gitStamp(ctx context.Context, dir, version string) (Stamp, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
			}
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	commit, err := git("rev-parse", "HEAD")
	if err != nil {
		return Stamp{}, err
	}
	ct, err := git("show", "-s", "--format=%ct", "HEAD")
	if err != nil {
		return Stamp{}, err
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return Stamp{}, fmt.Errorf("commit time %q: %w", ct, err)
	}
	// Untracked files count (a new .go file is built); ignored ones, dist/
	// and node_modules among them, do not.
	dirty, err := git("status", "--porcelain")
	if err != nil {
		return Stamp{}, err
	}
	t := time.Unix(secs, 0).UTC()
	return Stamp{Version: version, Commit: commit, Date: t.Format(time.RFC3339), Modified: dirty != "", Time: t}, nil
}
