package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// synth synthesizes the stack for config from the release's bootstraps, as
// make synth does, and copies its template into dist. The template names
// each function's code by the CDK's asset hash, a hash of the bootstrap's
// contents, so reproducible bootstraps give a reproducible template.
func (r *releaser) synth(ctx context.Context, config string) error {
	cdk := filepath.Join(r.root, "node_modules", ".bin", "cdk")
	if _, err := os.Stat(cdk); err != nil {
		return fmt.Errorf("the template needs the CDK CLI in node_modules (make node-deps), or -no-template: %w", err)
	}
	out := filepath.Join(r.work, "cdk.out")
	cmd := exec.CommandContext(ctx, cdk, "synth", "--quiet",
		"-c", "config="+config, "-c", "buildDir="+filepath.Join(r.work, "build"), "--output", out)
	cmd.Dir = filepath.Join(r.root, "infra")
	cmd.Env = append(os.Environ(), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20", "CDK_DISABLE_CLI_TELEMETRY=true")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cdk synth of %s: %w", config, err)
	}
	templates, err := filepath.Glob(filepath.Join(out, "*.template.json"))
	if err != nil {
		return err
	}
	if len(templates) != 1 {
		return fmt.Errorf("cdk synth wrote %d templates, want 1", len(templates))
	}
	doc, err := os.ReadFile(templates[0])
	if err != nil {
		return err
	}
	if len(doc) == 0 {
		return errors.New("cdk synth wrote an empty template")
	}
	return os.WriteFile(filepath.Join(r.dist, filepath.Base(templates[0])), doc, 0o644)
}
