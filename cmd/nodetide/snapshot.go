package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/nodetide/nodetide/pkg/planner"
)

func newSnapshotCmd(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "snapshot [-o FILE]",
		Short: "Record a snapshot of the live cluster, its node groups and the stored state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			ev, err := g.evaluator(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			snap, _, err := ev.Snapshot(cmd.Context())
			if err != nil {
				return err
			}
			var w io.Writer = g.stdout
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return fmt.Errorf("write snapshot: %w", err)
				}
				defer f.Close()
				w = f
			}
			if err := planner.WriteSnapshot(w, snap); err != nil {
				return fmt.Errorf("write snapshot: %w", err)
			}
			if out != "" && out != "-" {
				fmt.Fprintf(g.stderr, "snapshot: %d node groups, %d nodes, %d pods, %d PDBs written to %s\n",
					len(snap.NodeGroups), len(snap.Nodes), len(snap.Pods), len(snap.PodDisruptionBudgets), out)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (default: standard output)")
	return cmd
}
