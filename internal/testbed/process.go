package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nodetide/nodetide/internal/childproc"
)

// errPortInUse marks a start failure caused by a port another process took
// between our probe and the child's bind; Start and StartDynalite retry
// those.
var errPortInUse = errors.New("port already in use")

// logTailLines is how much of a component's log errors quote.
const logTailLines = 30

// startProcess runs bin with args, output to dir/<name>.log, forked by the
// bed's spawner, whose thread outlives every child of the bed (see
// childproc.Spawner). It records the pid in dir/<name>.pid so a later run
// can sweep the process if this test binary is killed before it could clean
// up.
func startProcess(ctx context.Context, sp *childproc.Spawner, dir, name, bin string, args, env []string) (*childproc.Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	p, err := childproc.Start(ctx, name, cmd, childproc.Options{Log: filepath.Join(dir, name+".log"), Spawner: sp})
	if err != nil {
		return nil, err
	}
	pidFile := filepath.Join(dir, name+".pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(p.PID())), 0o600); err != nil {
		err = fmt.Errorf("write %s pid file: %w", name, err)
		return nil, errors.Join(err, p.Stop(context.Background(), 0))
	}
	return p, nil
}

// exitError describes an unexpected exit, with the end of the process's log
// (that is where the reason is), marked errPortInUse when it failed to bind.
func exitError(p *childproc.Process) error {
	tail := p.LogTail(logTailLines)
	// Not the log's path: Stop removes it with the bed's directory.
	err := fmt.Errorf("%s exited (%v); end of its log:\n%s", p.Name(), p.State(), tail)
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
}

// childEnv is the environment the children run with: ours, minus variables
// that would point them at another cluster or etcd than the flags say.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "KWOK_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
