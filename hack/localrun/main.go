// Command localrun runs `nodetide run` with nodetide's drain state machine
// run locally, so the cycle's removals become drain executions as they do in
// AWS, from a checkout of this repository:
//
//	go run ./hack/localrun --config nodetide.yaml --interval 10s [other nodetide run flags]
//
// It builds the CLI and the drain function for this machine, starts the
// local Step Functions service (internal/sfnlocal, which needs make testbed
// and npm ci) and runs `nodetide run` with the arguments given, pointed at it
// through NODETIDE_DRAIN_STATE_MACHINE_ARN and AWS_ENDPOINT_URL_SFN. The
// harness is development tooling, so the shipped CLI does not link it.
// Everything it starts dies with it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"

	"github.com/nodetide/nodetide/internal/childproc"
	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/setup"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs `nodetide run args...` with the local drain state machine and
// returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := localRun(ctx, args, stdout, stderr)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	default:
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
}

// usage is what -h prints; nodetide run's flags are nodetide run's.
const usage = `usage: go run ./hack/localrun [nodetide run flags]

Runs nodetide run with nodetide's drain state machine run locally, so the cycle's
removals are drained as in AWS. The config must keep state in state.dynamodb (dynalite
works) and name the kubeconfig itself (no --kubeconfig): the drain function reads it too.
Needs make testbed and npm ci. nodetide run's flags: go run ./cmd/nodetide run --help
`

func localRun(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	if wantsHelp(args) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	path, err := configPath(args)
	if err != nil {
		return err
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		return err
	}
	if cfg.State.DynamoDB == nil {
		return fmt.Errorf("%s: state: the drain runs in another process, so state must be state.dynamodb (a local DynamoDB such as dynalite works)", path)
	}
	yaml, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the config: %w", err)
	}
	env, err := awsEnv(ctx)
	if err != nil {
		return err
	}
	root, err := testbed.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "nodetide-localrun-")
	if err != nil {
		return fmt.Errorf("build directory: %w", err)
	}
	defer os.RemoveAll(dir)
	cli := filepath.Join(dir, "nodetide")
	build := exec.CommandContext(ctx, "go", "build", "-o", cli, "./cmd/nodetide")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the CLI: %w\n%s", err, out)
	}

	svc, err := sfnlocal.StartDrain(ctx, root, string(yaml), 0)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.Stop()) }()
	fmt.Fprintf(stderr, "local drain state machine at %s\n", svc.Endpoint)

	cmd := exec.Command(cli, append([]string{"run"}, args...)...)
	cmd.Env = append(os.Environ(), append(env,
		setup.EnvDrainStateMachine+"="+svc.StateMachineArn[sfnlocal.DrainStateMachine],
		"AWS_ENDPOINT_URL_SFN="+svc.Endpoint)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	p, err := childproc.Start(ctx, "nodetide run", cmd, childproc.Options{})
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		// nodetide run ends its cycle on SIGTERM; the grace covers one
		// in flight.
		if err := p.Stop(context.Background(), 30*time.Second); err != nil {
			return err
		}
		return nil
	}
	if st := p.State(); st != nil && !st.Success() {
		return &exec.ExitError{ProcessState: st}
	}
	return nil
}

func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "--help":
			return true
		}
	}
	return false
}

// configPath finds the config file among nodetide run's arguments, as the
// CLI reads --config. The drain function reads the same file, so a
// --kubeconfig given only to the CLI would send the two to different
// clusters.
func configPath(args []string) (string, error) {
	path := "nodetide.yaml"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(a, "=")
		switch name {
		case "--kubeconfig":
			return "", errors.New("--kubeconfig: put the kubeconfig in the config (cluster.kubernetes.kubeconfig) so the drain function reaches the same cluster")
		case "--config":
			if !hasValue {
				if i+1 == len(args) {
					return "", errors.New("--config: needs a file")
				}
				i++
				value = args[i]
			}
			path = value
		}
	}
	return path, nil
}

// awsEnv gives the CLI a region and placeholder keys for the local Step
// Functions service when the environment has none, and leaves real ones
// alone: the same credentials reach the config's DynamoDB table.
func awsEnv(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Quiet: without credentials the SDK warns about the instance metadata
	// service it tried last.
	ac, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithLogger(logging.Nop{}))
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	var env []string
	if ac.Region == "" {
		env = append(env, "AWS_REGION="+sfnlocal.Region)
	}
	if ac.Credentials == nil {
		env = append(env, "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local")
	} else if _, err := ac.Credentials.Retrieve(ctx); err != nil {
		env = append(env, "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local")
	}
	return env, nil
}
