package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/statustable"
)

func newPlanCmd(g *globals) *cobra.Command {
	var snapshotPath string
	cmd := &cobra.Command{
		Use:   "plan --snapshot FILE",
		Short: "Plan offline from a recorded snapshot (what evaluate would decide)",
		Example: `  nodetide plan --snapshot snap.json
  nodetide plan --snapshot snap.json --config nodetide.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if snapshotPath == "" {
				return fmt.Errorf("--snapshot is required (record one with `nodetide snapshot`)")
			}
			settings := planner.DefaultSettings()
			if cmd.Flags().Changed("config") {
				cfg, err := g.loadConfig()
				if err != nil {
					return err
				}
				settings = cfg.Settings()
			}
			snap, err := readSnapshot(snapshotPath)
			if err != nil {
				return err
			}
			plan := planner.Decide(snap, settings, snap.CapturedAt)
			switch g.output {
			case "json":
				return planner.WritePlan(g.stdout, plan)
			case "yaml":
				// The same document as -o json, keys and all.
				var b bytes.Buffer
				if err := planner.WritePlan(&b, plan); err != nil {
					return err
				}
				return writeYAML(g.stdout, b.Bytes())
			}
			return writePlanTable(g.stdout, plan)
		},
	}
	cmd.Flags().StringVar(&snapshotPath, "snapshot", "", "snapshot file (JSON, compact or full form, as nodetide snapshot writes it); - for stdin")
	addOutputFlag(cmd, g, "table", "table", "json", "yaml")
	return cmd
}

func readSnapshot(path string) (snapshot.Snapshot, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return snapshot.Snapshot{}, fmt.Errorf("read snapshot: %w", err)
		}
		defer f.Close()
		r = f
	}
	snap, err := snapshot.ReadSnapshot(r)
	if err != nil {
		return snapshot.Snapshot{}, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return snap, nil
}

func writePlanTable(w io.Writer, p planner.Plan) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE GROUP\tNODES\tTARGET\tCPU\tMEMORY\tHEADROOM")
	for _, g := range p.NodeGroups {
		room := "-"
		if h := g.Headroom; h != nil {
			room = statustable.HeadroomCell(h.Rule, h.Free, h.Met, h.Need, h.Adding, h.Blocked)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f%%\t%.0f%%\t%s\n", g.Name, g.Nodes, g.TargetSize, 100*g.CPUUtilization, 100*g.MemoryUtilization, room)
	}
	writeCost(tw, p.Cost)
	fmt.Fprintln(tw)
	if len(p.ScaleUp) == 0 {
		fmt.Fprintln(tw, "Scale up: none")
	} else {
		fmt.Fprintln(tw, "SCALE UP\tDELTA\tNEW TARGET\tPODS\tREASON")
		for _, u := range p.ScaleUp {
			fmt.Fprintf(tw, "%s\t+%d\t%d\t%d\t%s\n", u.NodeGroup, u.Delta, u.NewTargetSize, len(u.Pods), u.Reason)
		}
		if p.Assignment != "" {
			fmt.Fprintf(tw, "Pods: %s\n", p.Assignment)
		}
	}
	for _, d := range p.DecreaseTarget {
		fmt.Fprintf(tw, "Decrease target of %s by %d to %d: %s\n", d.NodeGroup, d.Delta, d.NewTargetSize, d.Reason)
	}
	fmt.Fprintln(tw)
	if len(p.ScaleDown) == 0 {
		fmt.Fprintln(tw, "Scale down: none")
	} else {
		fmt.Fprintln(tw, "SCALE DOWN\tNODE\tREASON")
		for _, d := range p.ScaleDown {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", d.NodeGroup, d.Node, d.Reason)
		}
	}
	if len(p.Unschedulable) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "UNSCHEDULABLE POD\tREASON")
		for _, u := range p.Unschedulable {
			fmt.Fprintf(tw, "%s\t%s\n", u.Pod, u.Reason)
		}
	}
	writeReplaceTable(tw, p)
	writeReplaceNotTakenTable(tw, p)
	writeKeptTable(tw, p)
	if n := len(p.State.UnneededSince); n > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "UNNEEDED NODE\tSINCE")
		for _, name := range sortedKeys(p.State.UnneededSince) {
			fmt.Fprintf(tw, "%s\t%s\n", name, p.State.UnneededSince[name].Format("2006-01-02T15:04:05Z07:00"))
		}
	}
	return tw.Flush()
}

// writeCost prints what the priced groups cost once the plan is carried
// out (NODES is now → after where the plan changes it), the totals now and
// after with the change, and which groups have no price (never counted as
// free).
func writeCost(w io.Writer, c *planner.Cost) {
	if c == nil {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "COST\tNODES\tPER NODE-HOUR\tPER HOUR\tPER MONTH")
	for _, g := range c.NodeGroups {
		nodes := strconv.Itoa(g.Nodes)
		if g.NodesNow != g.Nodes {
			nodes = fmt.Sprintf("%d → %d", g.NodesNow, g.Nodes)
		}
		fmt.Fprintf(w, "%s\t%s\t%g %s\t%.4f %s\t%.2f %s\n", g.NodeGroup, nodes, g.PerNodeHour, g.Currency, g.PerHour, g.Currency, g.PerMonth, g.Currency)
	}
	for i, t := range c.Totals {
		if i < len(c.Now) && i < len(c.Change) && c.Change[i].PerHour != 0 {
			fmt.Fprintf(w, "total now\t\t\t%.4f %s\t%.2f %s\n", c.Now[i].PerHour, t.Currency, c.Now[i].PerMonth, t.Currency)
			fmt.Fprintf(w, "total after plan\t\t\t%.4f %s\t%.2f %s\n", t.PerHour, t.Currency, t.PerMonth, t.Currency)
			fmt.Fprintf(w, "change\t\t\t%+.4f %s\t%+.2f %s\n", c.Change[i].PerHour, t.Currency, c.Change[i].PerMonth, t.Currency)
			continue
		}
		fmt.Fprintf(w, "total\t\t\t%.4f %s\t%.2f %s\n", t.PerHour, t.Currency, t.PerMonth, t.Currency)
	}
	for _, name := range c.NoPrice {
		fmt.Fprintf(w, "%s\t\tno price\t\t\n", name)
	}
}

// writeReplaceTable lists the consolidation replacements the plan starts,
// keeps waiting, drains or gives up.
func writeReplaceTable(w io.Writer, p planner.Plan) {
	if len(p.Replace) == 0 {
		return
	}
	fmt.Fprintln(w)
	statustable.ReplaceRows(w, p.Replace)
}

// writeReplaceNotTakenTable says why consolidation replace started no
// replacement, and how many more reasons -o json lists.
func writeReplaceNotTakenTable(w io.Writer, p planner.Plan) {
	if len(p.ReplaceNotTaken) == 0 {
		return
	}
	fmt.Fprintln(w)
	statustable.ReplaceNotTakenRows(w, p.ReplaceNotTaken)
	if n := p.ReplaceNotTakenOmitted; n > 0 {
		fmt.Fprintf(w, "... and %d more, not listed (the plan lists at most %d)\n", n, planner.MaxReplaceNotTaken)
	}
}

// maxKeptRows bounds the KEPT section: the plan lists the nodes kept for
// a reason other than being busy first.
const maxKeptRows = 20

// writeKeptTable lists the nodes scale-down keeps, and why.
func writeKeptTable(w io.Writer, p planner.Plan) {
	if len(p.Kept) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "KEPT NODE\tNODE GROUP\tCODE\tREASON")
	for _, k := range p.Kept[:min(len(p.Kept), maxKeptRows)] {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k.Node, k.NodeGroup, k.Code, k.Reason)
	}
	if more := len(p.Kept) - min(len(p.Kept), maxKeptRows) + p.KeptOmitted; more > 0 {
		fmt.Fprintf(w, "... and %d more kept nodes (-o json lists %d, keptCounts counts all)\n", more, len(p.Kept))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// writeYAML prints a JSON document as YAML.
func writeYAML(w io.Writer, doc []byte) error {
	out, err := yaml.JSONToYAML(doc)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
