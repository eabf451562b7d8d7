package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

func newSnapshotCmd(g *globals) *cobra.Command {
	var file, form string
	var full bool
	cmd := &cobra.Command{
		Use:   "snapshot [-f FILE] [-o compact|full]",
		Short: "Record a snapshot of the live cluster, its node groups and the stored state",
		Long: `Record a snapshot of the live cluster, its node groups and the stored state.

The snapshot is written in the compact form (` + snapshot.FormatCompact + `): only what
the planner reads, with what the pods of one controller share written once. --full writes
nodes, pods and PDBs as the API serves them instead (-o full says the same). plan --snapshot
reads both.`,
		Example: `  nodetide snapshot --config nodetide.yaml -f snap.json
  nodetide snapshot --config nodetide.yaml -o full -f full.json
  nodetide snapshot --config nodetide.yaml | nodetide plan --snapshot -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch form {
			case snapshotCompact:
			case snapshotFull:
				full = true
			default:
				// -o named the file before it named the form.
				return fmt.Errorf("-o %q: a snapshot's form is compact or full; to write a file use --file %s", form, form)
			}
			if full && cmd.Flags().Changed("output") && form == snapshotCompact {
				return errors.New("--full and -o compact: give one form")
			}
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			ev, err := g.evaluator(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if _, err := ev.Store.LoadState(cmd.Context()); errors.Is(err, state.ErrNoTable) {
				// Before the first deploy there is no table and nothing
				// stored: the cluster as it is is what a user trying
				// nodetide out wants to plan. Any other error stays one.
				fmt.Fprintf(g.stderr, "snapshot: %v; recording no stored state (none exists before the first deploy)\n", err)
				undeployed := *cfg
				undeployed.State = config.State{Memory: &struct{}{}}
				if ev, err = g.evaluator(cmd.Context(), &undeployed); err != nil {
					return err
				}
			}
			if full {
				// The evaluator's reader trims as it reads; --full keeps the
				// objects as the API serves them.
				ev.Reader = k8s.NewReader(ev.Client, g.logger(), k8s.WithFull())
			}
			snap, _, err := ev.Snapshot(cmd.Context())
			if err != nil {
				return err
			}
			// A deleted Node's pods linger until they are collected; the
			// plan ignores them, and a snapshot file may not hold them.
			snap, dropped := planner.DropUnplacedPods(snap)
			if len(dropped) > 0 {
				fmt.Fprintf(g.stderr, "snapshot: %d pods bound to a node the read did not return (a deleted node's, not yet collected) left out: %s\n",
					len(dropped), strings.Join(dropped[:min(len(dropped), 10)], ", "))
			}
			var w io.Writer = g.stdout
			var f *os.File
			if file != "" && file != "-" {
				if f, err = os.Create(file); err != nil {
					return fmt.Errorf("write snapshot: %w", err)
				}
				defer f.Close()
				w = f
			}
			write := snapshot.WriteSnapshot
			if !full {
				write = snapshot.WriteCompactSnapshot
			}
			if err := write(w, snap); err != nil {
				return err
			}
			if f != nil {
				// A full disk may only show when the file is closed.
				if err := f.Close(); err != nil {
					return fmt.Errorf("write snapshot: %w", err)
				}
				fmt.Fprintf(g.stderr, "snapshot: %d node groups, %d nodes, %d pods, %d PDBs, %d claims, %d volumes, %d storage classes written to %s\n",
					len(snap.NodeGroups), len(snap.Nodes), len(snap.Pods), len(snap.PodDisruptionBudgets),
					len(snap.PersistentVolumeClaims), len(snap.PersistentVolumes), len(snap.StorageClasses), file)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "file to write; - or none for standard output")
	cmd.Flags().StringVarP(&form, "output", "o", snapshotCompact, "form of the snapshot: compact or full")
	_ = cmd.Flags().SetAnnotation("output", flagValues, []string{snapshotCompact, snapshotFull})
	cmd.Flags().BoolVar(&full, "full", false, "the full form (same as -o full)")
	return cmd
}

// The forms a snapshot is written in (-o).
const (
	snapshotCompact = "compact"
	snapshotFull    = "full"
)
