package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/setup"
)

func newShutdownCmd(g *globals) *cobra.Command {
	var wait, belowMin, force bool
	var policy string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "shutdown NODE",
		Short: "Drain and remove one node gracefully (a drain state machine execution)",
		Example: `  nodetide shutdown ip-10-0-1-4.eu-west-1.compute.internal --wait --config nodetide.yaml
  nodetide shutdown NODE --policy force --timeout 10m --config nodetide.yaml
  nodetide shutdown NODE --below-min --force --config nodetide.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if policy != "" && policy != drain.PolicyAbort && policy != drain.PolicyForce {
				return fmt.Errorf("--policy %q: use abort or force", policy)
			}
			if err := drain.CheckNodeName(args[0]); err != nil {
				return fmt.Errorf("NODE: %w", err)
			}
			if cmd.Flags().Changed("timeout") {
				if err := drain.CheckShutdownTimeout(timeout); err != nil {
					return fmt.Errorf("--timeout: %w", err)
				}
			}
			ctx := cmd.Context()
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			a := &setup.AWS{}
			h, err := setup.Drain(ctx, cfg, g.kubeconfig, a, g.logger())
			if err != nil {
				return err
			}
			if _, err := h.Steps.Client.CoreV1().Nodes().Get(ctx, args[0], metav1.GetOptions{}); err != nil {
				return fmt.Errorf("node %s: %w", args[0], err)
			}
			exec, err := h.Starter.Shutdown(ctx, drain.ShutdownRequest{Node: args[0], Policy: policy, Timeout: timeout, BelowMin: belowMin, Force: force})
			if err != nil {
				return err
			}
			verb := "started"
			if exec.AlreadyStarted {
				verb = "already running"
			}
			fmt.Fprintf(g.stdout, "node %s: drain %s (execution %s)\n", exec.Node, verb, exec.ExecutionArn)
			if !wait {
				return nil
			}
			return watchDrain(ctx, g, h, exec)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the drain until it ends, pod by pod")
	cmd.Flags().StringVar(&policy, "policy", "", "at the deadline: abort (roll back) or force (delete what remains); default from config")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "drain deadline; default from config")
	cmd.Flags().BoolVar(&belowMin, "below-min", false, "allow going below the group's effective minimum")
	cmd.Flags().BoolVar(&force, "force", false, "drain even a node that must not be disrupted (bare or local-storage pods, do-not-disrupt, ...)")
	return cmd
}

// watchDrain prints the pods left on the node and the execution's status
// until it ends; a failed or rolled-back drain is an error.
func watchDrain(ctx context.Context, g *globals, h *drain.Handler, exec drain.Execution) error {
	client := h.Starter.SFN
	lastPods := -1
	lastState := ""
	for {
		out, err := client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(exec.ExecutionArn)})
		if err != nil {
			return fmt.Errorf("follow drain: %w", err)
		}
		pods, err := h.Steps.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + exec.Node})
		if err == nil && len(pods.Items) != lastPods {
			lastPods = len(pods.Items)
			fmt.Fprintf(g.stdout, "%s  %d pod(s) on %s\n", time.Now().Format("15:04:05"), lastPods, exec.Node)
			for _, p := range pods.Items {
				status := string(p.Status.Phase)
				if p.DeletionTimestamp != nil {
					status = "Terminating"
				}
				fmt.Fprintf(g.stdout, "          %s/%s %s\n", p.Namespace, p.Name, status)
			}
		}
		if st := string(out.Status); st != lastState {
			lastState = st
			fmt.Fprintf(g.stdout, "%s  execution %s\n", time.Now().Format("15:04:05"), st)
		}
		switch out.Status {
		case sfntypes.ExecutionStatusSucceeded:
			fmt.Fprintf(g.stdout, "node %s: drained and removed\n", exec.Node)
			return nil
		case sfntypes.ExecutionStatusFailed, sfntypes.ExecutionStatusAborted, sfntypes.ExecutionStatusTimedOut:
			return fmt.Errorf("drain of node %s %s: %s: %s", exec.Node, out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func newEnableCmd(g *globals) *cobra.Command {
	var all, force bool
	cmd := &cobra.Command{
		Use:   "enable NODE | --all",
		Short: "Make a node (or, with --all, every cordoned node) schedulable again",
		Example: `  nodetide enable NODE --config nodetide.yaml
  nodetide enable --all --config nodetide.yaml
  nodetide enable NODE --force --config nodetide.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// "Every node" is asked for by name, never inferred from a
			// missing or empty argument.
			switch {
			case all && len(args) == 1:
				return fmt.Errorf("give a NODE or --all, not both")
			case force && all:
				return fmt.Errorf("--force ends the drain holding one NODE; it does not go with --all")
			case !all && len(args) == 0:
				return fmt.Errorf("give the NODE to enable, or --all for every cordoned node")
			case len(args) == 1:
				if err := drain.CheckNodeName(args[0]); err != nil {
					return fmt.Errorf("NODE: %w", err)
				}
			}
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			h, err := setup.Drain(cmd.Context(), cfg, g.kubeconfig, &setup.AWS{}, g.logger())
			if err != nil {
				return err
			}
			var res drain.EnableResult
			switch {
			case all:
				res, err = h.EnableAll(cmd.Context())
			case force:
				if h.Recovery == nil {
					return fmt.Errorf("--force: no drain state machine is configured (%s)", setup.EnvDrainStateMachine)
				}
				ended, ferr := h.Recovery.Force(cmd.Context(), args[0])
				if ferr != nil {
					return ferr
				}
				for _, d := range ended.RolledBack {
					fmt.Fprintf(g.stdout, "drain %s: ended and rolled back\n", d)
				}
				if len(ended.Completed) > 0 {
					// Its machine was gone already: the node is removed, not enabled.
					fmt.Fprintf(g.stdout, "drain %s: completed, its machine was already terminated, the node is removed\n", ended.Completed[0])
					return nil
				}
				res, err = h.Enable(cmd.Context(), args[0])
			default:
				res, err = h.Enable(cmd.Context(), args[0])
			}
			if err != nil {
				return err
			}
			for _, n := range res.Enabled {
				fmt.Fprintf(g.stdout, "node %s: schedulable\n", n)
			}
			for _, n := range res.Skipped {
				fmt.Fprintf(g.stdout, "node %s: left cordoned, a drain is running\n", n)
			}
			if len(res.Enabled)+len(res.Skipped) == 0 {
				fmt.Fprintln(g.stdout, "no cordoned nodes")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "enable every cordoned node (nodes a running drain holds are left to it)")
	cmd.Flags().BoolVar(&force, "force", false, "first end the drain holding NODE, stopping its execution, and roll it back from its record (for a drain you know is stuck)")
	return cmd
}
