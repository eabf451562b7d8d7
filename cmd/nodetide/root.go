package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/nodetide/nodetide/pkg/buildinfo"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/setup"
)

// globals are the flags every command shares (kubectl style).
type globals struct {
	kubeconfig string
	configPath string
	output     string
	stdout     io.Writer
	stderr     io.Writer
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "nodetide",
		Short:         "Keep a Kubernetes cluster's nodes sized to its work, from outside the cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version: the one-line form of nodetide version.
		Version: buildinfo.Read().String(),
	}
	root.SetVersionTemplate("nodetide {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig file (overrides the config's cluster access)")
	pf.StringVar(&g.configPath, "config", "nodetide.yaml", "nodetide config file")
	root.AddCommand(newPlanCmd(g), newSnapshotCmd(g), newRunCmd(g), newAddCmd(g), newConfigCmd(g),
		newShutdownCmd(g), newEnableCmd(g), newNodesCmd(g), newSchedulesCmd(g), newStatusCmd(g), newWebhookCmd(g), newVersionCmd(g),
		newUninstallCmd(g))
	return root
}

// addOutputFlag adds -o for commands that print documents.
// Each command has a variable of its own: registering a flag writes its
// default into the variable at once, so one shared variable would take the
// default of whichever command registered last.
func addOutputFlag(cmd *cobra.Command, g *globals, def string, allowed ...string) {
	out := new(string)
	cmd.Flags().StringVarP(out, "output", "o", def, fmt.Sprintf("output format: %v", allowed))
	cmd.PreRunE = func(*cobra.Command, []string) error {
		g.output = *out
		for _, a := range allowed {
			if g.output == a {
				return nil
			}
		}
		return fmt.Errorf("--output %q: use one of %v", g.output, allowed)
	}
}

func (g *globals) loadConfig() (*config.Config, error) {
	return config.LoadFile(g.configPath)
}

func (g *globals) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(g.stderr, nil))
}

// evaluator wires an evaluate cycle from the config, as the function does.
func (g *globals) evaluator(ctx context.Context, cfg *config.Config) (*evaluate.Evaluator, error) {
	return setup.Evaluator(ctx, cfg, g.kubeconfig, &setup.AWS{}, g.logger(), setup.InstanceID("cli"))
}
