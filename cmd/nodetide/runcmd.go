package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/schedulefire"
	"github.com/nodetide/nodetide/pkg/setup"
)

// runOptions are nodetide run's flags, once defaults are applied.
type runOptions struct {
	interval          time.Duration
	once, status, emf bool
}

func newRunCmd(g *globals) *cobra.Command {
	var opts runOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the evaluate cycle, and with DynamoDB state the schedule tick, in this process on a timer (local or long-running use)",
		Example: `  nodetide run --config nodetide.yaml --interval 30s
  nodetide run --config nodetide.yaml --once --status --log-format text`,
		Long: `Run the evaluate cycle, and with DynamoDB state the schedule tick, in this process on a timer.

Removals start drain executions on the state machine NODETIDE_DRAIN_STATE_MACHINE_ARN names
(AWS_ENDPOINT_URL_SFN points at a local Step Functions service, such as make up's); without it
they are planned and logged, not acted on. From a checkout of the repository,
go run ./hack/localrun [flags] runs this command with the drain state machine run locally.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("interval") && opts.interval < time.Second {
				return fmt.Errorf("--interval %s: must be at least 1s", opts.interval)
			}
			// The loop's log is what an operator follows.
			g.jsonLogs = true
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("interval") {
				opts.interval = cfg.EvaluateSettings().Interval
			}
			ev, err := g.evaluator(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// Schedules live in DynamoDB; with state in memory there are none.
			var sched *schedulefire.Handler
			if cfg.State.DynamoDB != nil {
				if sched, err = setup.SchedulesWith(ctx, cfg, &setup.AWS{}, ev, g.logger()); err != nil {
					return err
				}
			}
			if !cmd.Flags().Changed("emf") {
				// In Lambda stdout is the log group, which reads EMF; at a
				// terminal the documents are noise.
				opts.emf = os.Getenv("AWS_LAMBDA_FUNCTION_NAME") != ""
			}
			return g.runCycles(ctx, cfg, ev, sched, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.interval, "interval", 0, "time between cycles (default: the config's evaluate.interval, 1m unless set)")
	cmd.Flags().BoolVar(&opts.once, "once", false, "run one cycle and exit")
	cmd.Flags().BoolVar(&opts.status, "status", false, "after each cycle, print what nodetide status shows (works with state.memory too)")
	cmd.Flags().BoolVar(&opts.emf, "emf", false, "write each cycle's metrics to stdout as CloudWatch Embedded Metric Format documents (default: only when run in AWS Lambda)")
	return cmd
}

// runCycles runs the evaluate cycle and the schedule tick (sched may be
// nil) every interval until ctx ends, or once.
func (g *globals) runCycles(ctx context.Context, cfg *config.Config, ev *evaluate.Evaluator, sched *schedulefire.Handler, opts runOptions) error {
	tick := time.NewTicker(opts.interval)
	defer tick.Stop()
	for {
		m := metrics.New(cfg.Cluster.Name, nil)
		if !opts.emf {
			m = nil // records nothing
		}
		ctx := metrics.NewContext(ctx, m)
		res, err := ev.Run(ctx)
		switch {
		case err != nil:
			fmt.Fprintf(g.stderr, "cycle failed: %v\n", err)
		case res.Plan != nil:
			fmt.Fprintf(g.stderr, "cycle: %d scale-ups, %d removals, %d unschedulable pods\n",
				len(res.Plan.ScaleUp), len(res.Plan.ScaleDown), len(res.Plan.Unschedulable))
		}
		if opts.status {
			g.printStatus(ctx, cfg.Cluster.Name, ev)
		}
		if sched != nil {
			if serr := g.scheduleTick(ctx, sched); serr != nil && err == nil {
				err = serr
			}
		}
		if werr := m.Write(g.stdout); werr != nil {
			fmt.Fprintf(g.stderr, "%v\n", werr)
		}
		if opts.once {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// scheduleTick fires the schedules due now, as the schedule function's
// EventBridge tick does, and says what each did.
func (g *globals) scheduleTick(ctx context.Context, h *schedulefire.Handler) error {
	res, err := h.Tick(ctx)
	if err != nil {
		fmt.Fprintf(g.stderr, "schedule tick failed: %v\n", err)
		return err
	}
	for _, r := range res.Schedules {
		fmt.Fprintf(g.stderr, "schedule %s: %s", r.Schedule, r.Action)
		if !r.FireAt.IsZero() {
			fmt.Fprintf(g.stderr, " (%s)", r.FireAt.Format(time.RFC3339))
		}
		fmt.Fprintln(g.stderr)
		for _, c := range r.Changes {
			fmt.Fprintf(g.stderr, "  %s %s -> %d %s %s\n", c.Kind, c.Name, c.To, c.Outcome, c.Message)
		}
		if err := r.Err(); err != nil {
			fmt.Fprintf(g.stderr, "  %v\n", err)
		}
	}
	for _, e := range res.Errors {
		fmt.Fprintf(g.stderr, "schedule tick: %s\n", e)
	}
	return nil
}
