// Package statustable is the status of the last evaluate cycle as a person
// reads it: the table `nodetide status` prints and the status ConfigMap's
// text holds.
package statustable

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/shadowcompare"
	"github.com/nodetide/nodetide/pkg/state"
)

// Doc is what `nodetide status` prints: the last evaluate cycle's status,
// its running drains replaced by the ones read now when that works.
type Doc struct {
	Cluster string `json:"cluster"`
	evaluate.Status
	// DrainsReadAt is when Drains were read: now, or the cycle's time when
	// the live read failed (DrainsError says why).
	DrainsReadAt time.Time `json:"drainsReadAt"`
	DrainsError  string    `json:"drainsError,omitempty"`
	// FunctionBuilds are the builds drain and schedule last started with
	// (evaluate's is the cycle's build).
	FunctionBuilds      map[string]state.FunctionBuild `json:"functionBuilds,omitempty"`
	FunctionBuildsError string                         `json:"functionBuildsError,omitempty"`
}

// RecordedBuilds are the functions that record the build they start with
// (evaluate's is in its cycle status).
var RecordedBuilds = []string{"drain", "schedule"}

// Write prints the status for a person; times are absolute
// (UTC) with how long ago they were, as of now.
func Write(w io.Writer, d Doc, now time.Time) error {
	c := statusClock{now: now}
	writeStatusSummary(w, d, c)
	for _, section := range []func(io.Writer, Doc, statusClock) error{
		writeGroupsTable, writeUnneededTable, writeReplaceTable, writeReplaceNotTakenTable, writeKeptTable, writeDrainsTable, writeActionsTable, writeCompareTable,
	} {
		if err := section(w, d, c); err != nil {
			return err
		}
	}
	return nil
}

// statusClock writes instants as RFC 3339 with their distance from now, so a
// reader sees at a glance how stale each one is.
type statusClock struct{ now time.Time }

func (c statusClock) at(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if d := c.now.Sub(t); d < 0 {
		return t.UTC().Format(time.RFC3339) + " (in " + age(-d) + ")"
	}
	return t.UTC().Format(time.RFC3339) + " (" + age(c.now.Sub(t)) + " ago)"
}

func (c statusClock) atp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return c.at(*t)
}

// writeStatusSummary writes the cycle's outcome, errors and problems.
func writeStatusSummary(w io.Writer, d Doc, c statusClock) {
	fmt.Fprintf(w, "Cluster:      %s\n", d.Cluster)
	writeVersions(w, d)
	fmt.Fprintf(w, "Last cycle:   %s, took %s\n", c.at(d.CycleAt), d.Duration)
	if d.Shadow {
		fmt.Fprintln(w, "Shadow:       true (evaluate.shadow: the actions are what it would have done; nothing was changed)")
	}
	if d.Error != "" {
		fmt.Fprintf(w, "Cycle error:  %s\n", d.Error)
	}
	if d.LastError != nil {
		fmt.Fprintf(w, "Last error:   %s: %s\n", c.at(d.LastError.At), d.LastError.Message)
	} else {
		fmt.Fprintf(w, "Last error:   none\n")
	}
	if groupsNotRead(d.Status) {
		fmt.Fprintf(w, "Node groups as of %s (the last cycle did not read them)\n", c.at(d.GroupsAt))
	}
	fmt.Fprintf(w, "Unschedulable pods: %d\n", d.UnschedulablePods)
	writeCostLines(w, d.Cost)
	// What the essential monitoring level's alarm fires on.
	if len(d.Problems) == 0 {
		fmt.Fprintln(w, "Problems:     none")
	}
	for _, p := range d.Problems {
		fmt.Fprintf(w, "Problem:      %s (%d): %s\n", p.Kind, p.Count, p.Detail)
	}
}

// writeCostLines says what the priced groups cost now and once the plan is
// carried out, per currency, and how many groups no figure counts.
func writeCostLines(w io.Writer, c *evaluate.StatusCost) {
	if c == nil {
		return
	}
	for i, now := range c.Now {
		line := fmt.Sprintf("%.4f %s/h (%.2f %s/month)", now.PerHour, now.Currency, now.PerMonth, now.Currency)
		if i < len(c.AfterPlan) && i < len(c.Change) && c.Change[i].PerHour != 0 {
			after, ch := c.AfterPlan[i], c.Change[i]
			line += fmt.Sprintf("; after the plan %.4f %s/h (%.2f %s/month), %+.4f %s/h (%+.2f %s/month)",
				after.PerHour, after.Currency, after.PerMonth, after.Currency, ch.PerHour, ch.Currency, ch.PerMonth, ch.Currency)
		}
		fmt.Fprintf(w, "Cost:         %s\n", line)
	}
	if c.NoPrice > 0 {
		fmt.Fprintf(w, "Cost:         %d node groups have no price and are not counted\n", c.NoPrice)
	}
}

// groupsNotRead reports whether the last cycle failed before it read the
// node groups, so they are an earlier cycle's. A cycle reads them during its
// run: GroupsAt (the snapshot's capture) falls after the cycle began, which
// is CycleAt (its end) less Duration, not at CycleAt itself. A millisecond
// covers Duration's rounding.
func groupsNotRead(st evaluate.Status) bool {
	took, err := time.ParseDuration(st.Duration)
	if err != nil {
		took = 0
	}
	return st.GroupsAt.Before(st.CycleAt.Add(-took - time.Millisecond))
}

// writeGroupsTable writes one row per node group.
func writeGroupsTable(w io.Writer, d Doc, c statusClock) error {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// PRICE only when a group has one: most clusters' tables stay as they were.
	priced := false
	for _, g := range d.NodeGroups {
		priced = priced || g.Price != nil
	}
	header := "NODE GROUP\tPROVIDER\tMIN\tMAX\tTARGET\tREGISTERED\tREADY\tHEALTH\tBACKOFF UNTIL\tLAST SCALE-UP\tLAST SCALE-DOWN\tCPU\tMEM\tHEADROOM"
	if priced {
		header += "\tPRICE"
	}
	fmt.Fprintln(tw, header)
	for _, g := range d.NodeGroups {
		health := "Healthy"
		if len(g.Health) > 0 {
			health = strings.Join(g.Health, ",")
		}
		room := "-"
		if h := g.Headroom; h != nil {
			room = HeadroomCell(h.Rule, h.Free, h.Met, h.Need, h.Adding, h.Blocked)
		}
		row := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.0f%%\t%.0f%%\t%s", g.Name, g.Provider, g.MinSize, g.MaxSize,
			g.TargetSize, g.Registered, g.Ready, health, c.atp(g.BackoffUntil), c.atp(g.LastScaleUp), c.atp(g.LastScaleDown),
			100*g.CPUUtilization, 100*g.MemoryUtilization, room)
		if priced {
			price := "no price"
			if p := g.Price; p != nil {
				price = fmt.Sprintf("%g %s/h (%s)", p.PerNodeHour, p.Currency, p.Source)
			}
			row += "\t" + price
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	more(w, d.NodeGroupsOmitted, "node groups")
	return nil
}

// writeUnneededTable writes the nodes scale-down is counting down on.
func writeUnneededTable(w io.Writer, d Doc, c statusClock) error {
	fmt.Fprintln(w)
	if len(d.Unneeded) == 0 {
		fmt.Fprintln(w, "No unneeded nodes.")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "UNNEEDED NODE\tNODE GROUP\tSINCE")
		for _, u := range d.Unneeded {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Node, orNone(u.NodeGroup), c.at(u.Since))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	more(w, d.UnneededOmitted, "unneeded nodes")
	return nil
}

// writeKeptTable writes the counts of the nodes scale-down keeps, per
// group and code, and the first of them with why.
func writeKeptTable(w io.Writer, d Doc, _ statusClock) error {
	if len(d.KeptCounts) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	var groups []string
	for i, kc := range d.KeptCounts {
		if i == 0 || d.KeptCounts[i-1].NodeGroup != kc.NodeGroup {
			groups = append(groups, kc.NodeGroup+":")
		} else {
			groups[len(groups)-1] += ","
		}
		groups[len(groups)-1] += fmt.Sprintf(" %d %s", kc.Nodes, kc.Code)
	}
	fmt.Fprintf(w, "Kept nodes:   %s\n", strings.Join(groups, "; "))
	if len(d.Kept) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEPT NODE\tNODE GROUP\tCODE\tREASON")
	for _, k := range d.Kept {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Node, k.NodeGroup, k.Code, k.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	more(w, d.KeptOmitted, "kept nodes")
	return nil
}

// writeReplaceTable writes the cycle's consolidation replacements.
func writeReplaceTable(w io.Writer, d Doc, _ statusClock) error {
	if len(d.Replacing) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	ReplaceRows(tw, d.Replacing)
	if err := tw.Flush(); err != nil {
		return err
	}
	more(w, d.ReplacingOmitted, "replacements")
	return nil
}

// ReplaceRows writes a header and one row per replacement, for a
// tabwriter: `nodetide plan` shows them as the status does.
func ReplaceRows(tw io.Writer, rs []planner.Replace) {
	fmt.Fprintln(tw, "REPLACE\tPHASE\tNEW NODES\tOLD NODES\tSAVING\tREASON")
	for _, r := range rs {
		saving := "-"
		if r.Currency != "" {
			saving = fmt.Sprintf("%.4f %s/h", r.Saving, r.Currency)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d of %s\t%s\t%s\t%s\n", r.ID, r.Phase, r.Delta, r.NodeGroup, strings.Join(r.Nodes, ","), saving, r.Reason)
	}
}

// writeReplaceNotTakenTable writes why the cycle started no replacement.
func writeReplaceNotTakenTable(w io.Writer, d Doc, _ statusClock) error {
	if len(d.ReplaceNotTaken) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	ReplaceNotTakenRows(tw, d.ReplaceNotTaken)
	if err := tw.Flush(); err != nil {
		return err
	}
	more(w, d.ReplaceNotTakenOmitted, "reasons no replacement was started")
	return nil
}

// ReplaceNotTakenRows writes a header and one row per reason no
// replacement was started, for a tabwriter: the group of the old nodes
// and the first of them ("-" for the plan as a whole), the group of the
// new nodes ("-" for none), the code and the reason. `nodetide plan`
// shows them as the status does.
func ReplaceNotTakenRows(tw io.Writer, rs []planner.ReplaceNotTaken) {
	fmt.Fprintln(tw, "NOT REPLACED\tNODES\tBY GROUP\tCODE\tREASON")
	for _, r := range rs {
		nodes := "-"
		if len(r.Nodes) > 0 {
			nodes = r.Nodes[0]
		}
		if len(r.Nodes) > 1 {
			nodes += fmt.Sprintf(" +%d", len(r.Nodes)-1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", orNone(r.NodeGroup), nodes, orNone(r.With), r.Code, r.Reason)
	}
}

// writeDrainsTable writes the running drains, saying so when they are the
// last cycle's because reading them now failed.
func writeDrainsTable(w io.Writer, d Doc, c statusClock) error {
	fmt.Fprintln(w)
	switch {
	case d.DrainsError != "":
		fmt.Fprintf(w, "Running drains as of the last cycle (reading them now failed: %s):\n", d.DrainsError)
	case len(d.Drains) == 0:
		fmt.Fprintln(w, "No running drains.")
	}
	if len(d.Drains) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DRAINING NODE\tNODE GROUP\tPHASE\tSTARTED\tDEADLINE\tDRAIN")
		for _, dr := range d.Drains {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", dr.Node, dr.NodeGroup, orNone(dr.Phase), c.at(dr.StartedAt), c.at(dr.Deadline), dr.ID)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	more(w, d.DrainsOmitted, "running drains")
	return nil
}

// writeActionsTable writes what the last cycle did, if anything.
func writeActionsTable(w io.Writer, d Doc, _ statusClock) error {
	if len(d.Actions) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LAST CYCLE'S ACTION\tNODE GROUP\tNODE\tDELTA\tERROR")
	for _, a := range d.Actions {
		kind := a.Kind
		if a.Would != "" {
			kind += " " + a.Would
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", kind, a.NodeGroup, orNone(a.Node), a.Delta, orNone(a.Error))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	more(w, d.ActionsOmitted, "actions")
	return nil
}

// writeCompareTable writes a shadow cycle's comparison with
// cluster-autoscaler: the verdict, then one row per group.
func writeCompareTable(w io.Writer, d Doc, c statusClock) error {
	cmp := d.ShadowCompare
	if cmp == nil {
		return nil
	}
	verdict := "disagree"
	if cmp.Agree {
		verdict = "agree"
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Beside cluster-autoscaler: %s (its actions since %s; its status of %s)\n", verdict, c.at(cmp.Since), c.at(cmp.StatusAt))
	for _, p := range cmp.Problems {
		fmt.Fprintf(w, "Not read:     %s\n", p)
	}
	if len(cmp.Unattributed) > 0 {
		fmt.Fprintf(w, "Removed by cluster-autoscaler, not read by nodetide: %s\n", strings.Join(cmp.Unattributed, ", "))
		more(w, cmp.UnattributedOmitted, "nodes")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE GROUP\tAGREE\tNODETIDE WOULD\tCLUSTER-AUTOSCALER DID\tWHY NOT")
	for _, g := range cmp.Groups {
		fmt.Fprintf(tw, "%s\t%t\t%s\t%s\t%s\n", g.NodeGroup, g.Agree, sideCell(g.Nodetide), sideCell(g.CA), orNone(g.Why))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	more(w, cmp.GroupsOmitted, "node groups")
	return nil
}

// sideCell is one scaler's part in a group: "target 3 (up 2)", with the
// nodes it removes.
func sideCell(s shadowcompare.Side) string {
	if s.Target == nil {
		return "-"
	}
	out := fmt.Sprintf("target %d", *s.Target)
	if s.Direction != shadowcompare.DirNone {
		out += fmt.Sprintf(" (%s %d)", s.Direction, s.Size)
	}
	if len(s.Removals) > 0 {
		out += ", removing " + strings.Join(s.Removals, " ")
		if s.RemovalsOmitted > 0 {
			out += fmt.Sprintf(" and %d more", s.RemovalsOmitted)
		}
	}
	return out
}

// HeadroomCell is a group's headroom for a table: the rule, what the group
// has, and what is done about it ("2 spare nodes (1 free, scaling up +1)").
func HeadroomCell(rule, free string, met bool, need, adding int, blocked string) string {
	var now string
	switch {
	case met:
		now = "met"
	case adding > 0 && adding < need:
		now = fmt.Sprintf("scaling up +%d of %d: %s", adding, need, blocked)
	case adding > 0:
		now = fmt.Sprintf("scaling up +%d", adding)
	case blocked != "":
		now = "short: " + blocked
	default:
		now = "short"
	}
	return fmt.Sprintf("%s (%s, %s)", rule, free, now)
}

func more(w io.Writer, n int, what string) {
	if n > 0 {
		fmt.Fprintf(w, "... and %d more %s, not shown\n", n, what)
	}
}

// age is a duration as kubectl prints ages: 45s, 12m, 3h, 2d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeVersions writes the version each function last ran: evaluate's from
// the cycle, drain's and schedule's from their records (when read).
func writeVersions(w io.Writer, d Doc) {
	parts := []string{"evaluate " + orNone(buildShort(d))}
	if d.FunctionBuilds != nil {
		for _, fn := range RecordedBuilds {
			if b, ok := d.FunctionBuilds[fn]; ok {
				parts = append(parts, fn+" "+b.Build.Short())
			} else {
				parts = append(parts, fn+" not recorded")
			}
		}
	}
	fmt.Fprintf(w, "Versions:     %s\n", strings.Join(parts, ", "))
	if d.FunctionBuildsError != "" {
		fmt.Fprintf(w, "Versions error: %s\n", d.FunctionBuildsError)
	}
}

func buildShort(d Doc) string {
	if d.Build == nil {
		return "" // a status written before builds were recorded
	}
	return d.Build.Short()
}
