package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Platforms the CLI is released for.
var cliPlatforms = []struct{ GOOS, GOARCH string }{
	{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"},
}

// functions are the Lambda functions, each built from ./functions/<name>.
var functions = []string{"evaluate", "drain", "schedule"}

type releaser struct {
	root, dist, work string
	stamp            Stamp
}

func (r *releaser) buildCLIs(ctx context.Context) error {
	for _, p := range cliPlatforms {
		out := filepath.Join(r.dist, "nodetide-"+p.GOOS+"-"+p.GOARCH)
		if err := GoBuild(ctx, r.root, p.GOOS, p.GOARCH, r.stamp, nil, out, "./cmd/nodetide"); err != nil {
			return err
		}
	}
	return nil
}

// buildFunctions builds each function's bootstrap as deployed (linux/arm64,
// lambda.norpc, as make build does) into work/build/<fn>/bootstrap, where
// the template is synthesized from, and zips it into dist/<fn>.zip.
func (r *releaser) buildFunctions(ctx context.Context) error {
	for _, fn := range functions {
		bootstrap := filepath.Join(r.work, "build", fn, "bootstrap")
		if err := GoBuild(ctx, r.root, "linux", "arm64", r.stamp, []string{"lambda.norpc"}, bootstrap, "./functions/"+fn); err != nil {
			return err
		}
		if err := ZipFiles(filepath.Join(r.dist, fn+".zip"), r.stamp.Time, map[string]string{"bootstrap": bootstrap}); err != nil {
			return fmt.Errorf("function %s: %w", fn, err)
		}
	}
	return nil
}

// GoBuild builds pkg for goos/goarch into out so that the same source gives
// the same bytes: no cgo, no paths (-trimpath), no VCS lookup (the stamp
// carries the commit), no build ID, and an environment that sets every
// variable that changes the code generated (GOFLAGS, GOAMD64, GOARM64,
// GOEXPERIMENT) rather than inherit it.
func GoBuild(ctx context.Context, dir, goos, goarch string, st Stamp, tags []string, out, pkg string) error {
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", st.LDFlags(), "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(ctx, goCmd(), append(args, pkg)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch,
		"GOFLAGS=", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w", pkg, goos, goarch, err)
	}
	return nil
}

// goCmd is the go command: GO from make, else go on PATH.
func goCmd() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}
