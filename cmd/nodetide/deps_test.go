package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// testTooling are the packages that start processes, fake clouds or exist
// for tests; the shipped binaries must not link them.
var testTooling = []string{
	"github.com/nodetide/nodetide/internal/", // all of it is test and development tooling
	"testing",
	"net/http/httptest",
}

// TestShippedBinariesLinkNoTestTooling: the CLI and the three functions,
// built for this machine and as the Lambda bootstraps are built, depend on no
// test or development tooling.
func TestShippedBinariesLinkNoTestTooling(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		args     []string
		packages []string
	}{
		{"this machine", nil, nil, []string{"./cmd/nodetide", "./functions/..."}},
		{"Lambda", []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64"}, []string{"-tags", "lambda.norpc"}, []string{"./functions/..."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, tc.args...), tc.packages...)
			cmd := exec.Command("go", args...)
			cmd.Dir = "../.."
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go %s: %v", strings.Join(args, " "), err)
			}
			for _, dep := range strings.Fields(string(out)) {
				for _, bad := range testTooling {
					if dep == bad || strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad) {
						t.Errorf("%s links %s", strings.Join(tc.packages, " "), dep)
					}
				}
			}
		})
	}
}
