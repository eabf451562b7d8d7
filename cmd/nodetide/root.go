package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	logFormat  string
	verbose    bool
	// jsonLogs is the default of a command whose logs are its output
	// (run); set before the command runs.
	jsonLogs bool
	stdout   io.Writer
	stderr   io.Writer
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "nodetide",
		Short: "Keep a Kubernetes cluster's nodes sized to its work, from outside the cluster",
		Example: `  nodetide config validate --config nodetide.yaml
  nodetide snapshot --config nodetide.yaml -f snap.json && nodetide plan --snapshot snap.json
  nodetide status --config nodetide.yaml`,
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
	pf.StringVar(&g.logFormat, "log-format", "", "logs on standard error: text (warnings and errors, one plain line each) or json (every log record, as the functions write them); default text, json for run")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "log every record as JSON on standard error (same as --log-format json)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if g.logFormat != "" && g.logFormat != logText && g.logFormat != logJSON {
			return fmt.Errorf("--log-format %q: use text or json", g.logFormat)
		}
		return nil
	}
	root.AddCommand(newPlanCmd(g), newSnapshotCmd(g), newRunCmd(g), newAddCmd(g), newConfigCmd(g),
		newShutdownCmd(g), newEnableCmd(g), newNodesCmd(g), newSchedulesCmd(g), newStatusCmd(g), newWebhookCmd(g), newVersionCmd(g),
		newUninstallCmd(g))
	return root
}

// flagValues annotates a flag with the values it takes (checked against
// the docs' command lines).
const flagValues = "nodetide.io/values"

// addOutputFlag adds -o for commands that print documents.
// Each command has a variable of its own: registering a flag writes its
// default into the variable at once, so one shared variable would take the
// default of whichever command registered last.
func addOutputFlag(cmd *cobra.Command, g *globals, def string, allowed ...string) {
	out := new(string)
	cmd.Flags().StringVarP(out, "output", "o", def, fmt.Sprintf("output format: %v", allowed))
	_ = cmd.Flags().SetAnnotation("output", flagValues, allowed)
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
	cfg, err := config.LoadFile(g.configPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("config %s: no such file (give one with --config FILE; examples/ in the nodetide repository has one per provider)", g.configPath)
	}
	return cfg, err
}

// Values of --log-format.
const (
	logText = "text"
	logJSON = "json"
)

// logger writes JSON records when asked for (--log-format json, -v, or a
// command such as run whose log is what an operator reads); otherwise
// only warnings and errors, as plain lines, so a person's terminal shows
// the command's own output.
func (g *globals) logger() *slog.Logger {
	if g.verbose || g.logFormat == logJSON || (g.logFormat == "" && g.jsonLogs) {
		return slog.New(slog.NewJSONHandler(g.stderr, nil))
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // a terminal line needs no timestamp
			}
			return a
		},
	}))
}

// evaluator wires an evaluate cycle from the config, as the function does.
func (g *globals) evaluator(ctx context.Context, cfg *config.Config) (*evaluate.Evaluator, error) {
	return setup.Evaluator(ctx, cfg, g.kubeconfig, &setup.AWS{}, g.logger(), setup.InstanceID("cli"))
}
