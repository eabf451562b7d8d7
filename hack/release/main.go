// Command release builds a nodetide release into one directory (make release
// VERSION=x.y.z writes dist/): the CLI for linux and darwin on amd64 and
// arm64, the three Lambda functions' zips (linux/arm64 bootstraps, as
// deployed), the CloudFormation template synthesized for a sample config,
// and SHA256SUMS over them all.
//
// The same commit builds the same bytes: binaries are built with -trimpath,
// -buildvcs=false, an empty build ID and the version, commit and commit date
// from git (never the clock) stamped into pkg/buildinfo; zips have fixed
// times, modes and order; the template names the bootstraps by content hash.
// make release-check builds twice and compares.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	// Stopped, it stops its builds and still removes its work directory.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	version := fs.String("version", "", "the release's version, x.y.z or x.y.z-pre (required)")
	out := fs.String("out", "dist", "directory to write; must not exist or be empty, unless -replace")
	replace := fs.Bool("replace", false, "first delete the files of an earlier release in -out (only regular files; any other entry is an error)")
	config := fs.String("config", "nodetide.example.yaml", "the sample config the template is synthesized from")
	allowDirty := fs.Bool("allow-dirty", false, "build from a tree with uncommitted changes (stamped as modified; for checks, never for a release)")
	noTemplate := fs.Bool("no-template", false, "skip the template (it needs node_modules/aws-cdk)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := CheckVersion(*version); err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	st, err := gitStamp(ctx, root, *version)
	if err != nil {
		return err
	}
	if st.Modified && !*allowDirty {
		return errors.New("the tree has uncommitted changes: a release is built from a commit (commit or stash them; -allow-dirty builds one marked modified, for checks only)")
	}
	dist, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	if err := emptyDir(dist, *replace); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "nodetide-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	r := &releaser{root: root, dist: dist, work: work, stamp: st}
	if err := r.buildCLIs(ctx); err != nil {
		return err
	}
	if err := r.buildFunctions(ctx); err != nil {
		return err
	}
	if !*noTemplate {
		cfg, err := filepath.Abs(*config)
		if err != nil {
			return err
		}
		if err := r.synth(ctx, cfg); err != nil {
			return err
		}
	}
	sums, err := WriteSums(dist)
	if err != nil {
		return err
	}
	fmt.Printf("release %s (commit %s, %s): %d files and SHA256SUMS in %s\n", st.Version, st.Commit, st.Date, sums, *out)
	return nil
}

// emptyDir makes dir, refusing one that holds anything unless replace: a
// release directory holds that release's files alone. replace deletes an
// earlier release's files, and nothing else (no directory, no link).
func emptyDir(dir string, replace bool) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(entries) > 0 && !replace:
		return fmt.Errorf("%s is not empty: remove it first", dir)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s holds %s, which is not a release file: remove it by hand", dir, e.Name())
		}
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
