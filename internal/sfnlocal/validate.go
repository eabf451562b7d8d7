package sfnlocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// ValidateASL checks an Amazon States Language definition file with the
// repository's asl-validator (npm, run by node), the way a deploy would
// reject it. The file may hold ${Key} placeholders, as the files CDK loads
// with DefinitionSubstitutions do: each is replaced first, a key ending in
// "Arn" by a Lambda function ARN (so Task resources pass the ARN check) and
// any other by its own name. It takes about a second and a half.
func ValidateASL(ctx context.Context, path string) error {
	root, err := repoRoot()
	if err != nil {
		return fmt.Errorf("validate %s: %w", path, err)
	}
	if err := checkNodeModules(root, "asl-validator"); err != nil {
		return fmt.Errorf("validate %s: %w", path, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("validate %s: node (Node.js 20 or later) is not on PATH: %w", path, err)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	placeholder := regexp.MustCompile(`\$\{([^}]*)\}`)
	filled := placeholder.ReplaceAllStringFunc(string(text), func(m string) string {
		key := m[2 : len(m)-1]
		if strings.HasSuffix(key, "Arn") {
			return FunctionARN(strings.TrimSuffix(strings.TrimSuffix(key, "Arn"), "Function"))
		}
		return key
	})
	tmp, err := os.CreateTemp("", "nodetide-asl-*.json")
	if err != nil {
		return fmt.Errorf("validate %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(filled); err != nil {
		tmp.Close()
		return fmt.Errorf("validate %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("validate %s: %w", path, err)
	}

	cli := filepath.Join(root, "node_modules", "asl-validator", "dist", "bin", "asl-validator.js")
	cmd := exec.CommandContext(ctx, node, cli, "--json-path", tmp.Name())
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		// The validator's report names the temporary copy; name the file.
		report := strings.ReplaceAll(strings.TrimSpace(out.String()), tmp.Name(), path)
		return fmt.Errorf("validate %s: invalid definition:\n%s", path, report)
	default:
		return fmt.Errorf("validate %s: asl-validator: %w: %s", path, err, strings.TrimSpace(out.String()))
	}
}
