package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/nodetide/nodetide/pkg/evaluate"
)

func newAddCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "add GROUP N",
		Short:   "Add N nodes to a node group, within its maximum",
		Example: `  nodetide add workers 2 --config nodetide.yaml`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 || n > evaluate.MaxAdd {
				return fmt.Errorf("N must be a whole number from 1 to %d, got %q", evaluate.MaxAdd, args[1])
			}
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			ev, err := g.evaluator(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if _, err := ev.Add(cmd.Context(), args[0], n); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "node group %s: %d node(s) added\n", args[0], n)
			return nil
		},
	}
}
