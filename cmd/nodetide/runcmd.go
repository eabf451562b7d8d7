package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newRunCmd(g *globals) *cobra.Command {
	var interval time.Duration
	var once bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the evaluate cycle in this process on a timer (local or long-running use)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("interval") && interval < time.Second {
				return fmt.Errorf("--interval %s: must be at least 1s", interval)
			}
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("interval") {
				interval = cfg.EvaluateSettings().Interval
			}
			ev, err := g.evaluator(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				res, err := ev.Run(ctx)
				switch {
				case err != nil:
					fmt.Fprintf(g.stderr, "cycle failed: %v\n", err)
				case res.Plan != nil:
					fmt.Fprintf(g.stderr, "cycle: %d scale-ups, %d removals, %d unschedulable pods\n",
						len(res.Plan.ScaleUp), len(res.Plan.ScaleDown), len(res.Plan.Unschedulable))
				}
				if once {
					return err
				}
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
			}
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", time.Minute, "time between cycles (default: the config's evaluate.interval)")
	cmd.Flags().BoolVar(&once, "once", false, "run one cycle and exit")
	return cmd
}
