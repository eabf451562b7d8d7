package sfnlocal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// DrainStateMachine is the name the local drain state machine has.
const DrainStateMachine = "drain"

// StartDrain runs nodetide's own drain state machine locally, for `make
// demo`, `make up` and hack/localrun: it builds the drain function for
// this machine from the repository at root ("" finds it from the working
// directory) (functions/drain), and serves
// functions/drain/statemachine.asl.json with its tasks on that bootstrap,
// which reads configYAML. Stop removes the build too.
func StartDrain(ctx context.Context, root, configYAML string, maxWait time.Duration) (*Service, error) {
	if root == "" {
		r, err := repoRoot()
		if err != nil {
			return nil, fmt.Errorf("local drain: %w", err)
		}
		root = r
	}
	dir, err := os.MkdirTemp("", "nodetide-drain-")
	if err != nil {
		return nil, fmt.Errorf("local drain: %w", err)
	}
	bootstrap := filepath.Join(dir, "bootstrap")
	build := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", bootstrap, "./functions/drain")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("local drain: build the drain function: %v\n%s", err, out)
	}
	svc, err := Start(ctx, Options{
		Functions:     []Function{{Name: "drain", Bootstrap: bootstrap, Env: []string{"NODETIDE_CONFIG=" + configYAML}}},
		StateMachines: []StateMachine{{Name: DrainStateMachine, DefinitionFile: filepath.Join(root, "functions", "drain", "statemachine.asl.json")}},
		MaxWait:       maxWait,
		Root:          root,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	svc.cleanup = append(svc.cleanup, func() { os.RemoveAll(dir) })
	return svc, nil
}
