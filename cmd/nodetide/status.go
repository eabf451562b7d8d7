package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/statustable"
)

// statusDoc is what `nodetide status` prints (statustable.Doc).
type statusDoc = statustable.Doc

func newStatusCmd(g *globals) *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The last evaluate cycle: problems, node groups and their health, unneeded nodes, running drains, errors",
		Example: `  nodetide status --config nodetide.yaml
  nodetide status --config nodetide.yaml -o json
  nodetide status --config nodetide.yaml --from configmap`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			src, err := readStatusFrom(ctx, g, cfg, from)
			if err != nil {
				return err
			}
			fmt.Fprintln(g.stderr, src.describe(time.Now().UTC()))
			now := time.Now().UTC()
			doc := statusDoc{Cluster: cfg.Cluster.Name, Status: src.status, DrainsReadAt: src.status.CycleAt}
			if src.store != nil {
				doc.FunctionBuilds, doc.FunctionBuildsError = readBuilds(ctx, src.statuses)
				if drains, omitted, err := evaluate.RunningDrains(ctx, src.store, 100); err != nil {
					doc.DrainsError = err.Error()
				} else {
					doc.Drains, doc.DrainsOmitted, doc.DrainsReadAt = drains, omitted, now
				}
			}
			switch g.output {
			case "json":
				return writeJSON(g.stdout, doc)
			case "yaml":
				out, err := yaml.Marshal(doc)
				if err != nil {
					return err
				}
				_, err = g.stdout.Write(out)
				return err
			}
			return writeStatusTable(g.stdout, doc, now)
		},
	}
	addOutputFlag(cmd, g, "table", "table", "json", "yaml")
	cmd.Flags().StringVar(&from, "from", sourceAuto, "where to read the status: configmap (the status ConfigMap, through the kubeconfig; no AWS credentials), dynamodb (the state table), or auto (the ConfigMap, else the table)")
	return cmd
}

// printStatus prints the status the cycle just wrote, from this process's
// store: the one way to see it with state.memory.
func (g *globals) printStatus(ctx context.Context, cluster string, ev *evaluate.Evaluator) {
	ss, ok := ev.Store.(state.StatusStore)
	if !ok {
		return
	}
	st, err := evaluate.ReadStatus(ctx, ss)
	if err != nil {
		fmt.Fprintf(g.stderr, "status: %v\n", err)
		return
	}
	if err := writeStatusTable(g.stderr, statusDoc{Cluster: cluster, Status: st, DrainsReadAt: st.CycleAt}, time.Now().UTC()); err != nil {
		fmt.Fprintf(g.stderr, "status: %v\n", err)
	}
}

// writeStatusTable prints the status for a person (statustable.Write).
func writeStatusTable(w io.Writer, d statusDoc, now time.Time) error {
	return statustable.Write(w, d, now)
}
