package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/schedulefire"
	"github.com/nodetide/nodetide/pkg/setup"
)

func newSchedulesCmd(g *globals) *cobra.Command {
	cmd := groupCmd(&cobra.Command{Use: "schedules", Short: "Create, inspect, check and run scheduled scaling",
		Example: "  nodetide schedules validate examples/day-night.json\n  nodetide schedules list --config nodetide.yaml"})
	cmd.AddCommand(newSchedulesCreateCmd(g), newSchedulesListCmd(g), newSchedulesGetCmd(g), newSchedulesDeleteCmd(g),
		newSchedulesRunCmd(g), newSchedulesValidateCmd(g), newSchedulesNextCmd(g))
	return cmd
}

// newSchedulesCreateCmd stores the schedules of a file.
func newSchedulesCreateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "create FILE",
		Short:   "Store the schedules of FILE (one document, as scalerd's, or a JSON array); an existing one of the same name is replaced",
		Example: `  nodetide schedules create examples/day-night.json --config nodetide.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := readSchedules(args[0])
			if err != nil {
				return err
			}
			groups, err := g.checkScheduleGroups(cmd, list)
			if err != nil {
				return err
			}
			for _, n := range groups.notes {
				fmt.Fprintf(g.stderr, "%s: note: %s\n", args[0], n)
			}
			if len(groups.problems) > 0 {
				// Nothing is stored unless every schedule of the file is valid.
				for _, p := range groups.problems {
					fmt.Fprintf(g.stderr, "%s: %s\n", args[0], p)
				}
				return fmt.Errorf("%s: %d problem(s), nothing stored", args[0], len(groups.problems))
			}
			h, err := g.scheduleStore(cmd.Context())
			if err != nil {
				return err
			}
			for _, s := range list {
				rec, err := h.Put(cmd.Context(), s)
				if err != nil {
					return fmt.Errorf("schedule %q: %w", s.Name, err)
				}
				fmt.Fprintf(g.stdout, "schedule %s: stored (version %d)\n", s.Name, rec.Version)
			}
			return nil
		},
	}
}

// newSchedulesListCmd lists the stored schedules and the sizes fired ones hold.
func newSchedulesListCmd(g *globals) *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List the stored schedules (the table also shows the node-group sizes fired schedules hold)",
		Example: `  nodetide schedules list --config nodetide.yaml
  nodetide schedules list --config nodetide.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := g.scheduleStore(cmd.Context())
			if err != nil {
				return err
			}
			recs, err := h.Store.ListSchedules(cmd.Context())
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.printDoc(recs)
			}
			if err := writeSchedulesTable(g, recs, time.Now()); err != nil {
				return err
			}
			overrides, err := h.Store.Overrides(cmd.Context())
			if err != nil {
				return err
			}
			return writeOverridesTable(g, overrides)
		},
	}
	addOutputFlag(list, g, "table", "table", "json", "yaml")
	return list
}

// newSchedulesGetCmd shows one stored schedule.
func newSchedulesGetCmd(g *globals) *cobra.Command {
	get := &cobra.Command{
		Use:     "get NAME",
		Short:   "Show one stored schedule and its fire history",
		Example: `  nodetide schedules get night --config nodetide.yaml -o yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.scheduleStore(cmd.Context())
			if err != nil {
				return err
			}
			rec, err := h.Store.GetSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.printDoc(rec)
			}
			return writeSchedulesTable(g, []schedule.Record{rec}, time.Now())
		},
	}
	addOutputFlag(get, g, "table", "table", "json", "yaml")
	return get
}

// newSchedulesDeleteCmd deletes a stored schedule.
func newSchedulesDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a stored schedule and the node-group sizes it set",
		Example: `  nodetide schedules delete night --config nodetide.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.scheduleStore(cmd.Context())
			if err != nil {
				return err
			}
			del, err := h.Delete(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "schedule %s: deleted\n", args[0])
			if len(del.ClearedOverrides) > 0 {
				fmt.Fprintf(g.stdout, "node groups back to their configured bounds: %s\n", strings.Join(del.ClearedOverrides, ", "))
			}
			return nil
		},
	}
}

// newSchedulesRunCmd applies a stored schedule now.
func newSchedulesRunCmd(g *globals) *cobra.Command {
	runCmd := &cobra.Command{
		Use:     "run NAME",
		Short:   "Apply a stored schedule now (its next fire time still fires)",
		Example: `  nodetide schedules run night --config nodetide.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.scheduleConfig()
			if err != nil {
				return err
			}
			h, err := setup.Schedules(cmd.Context(), cfg, g.kubeconfig, &setup.AWS{}, g.logger())
			if err != nil {
				return err
			}
			res, err := h.Run(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.output != "table" {
				if err := g.printDoc(res); err != nil {
					return err
				}
				return res.Err()
			}
			writeResult(g, res)
			return res.Err()
		},
	}
	addOutputFlag(runCmd, g, "table", "table", "json", "yaml")
	return runCmd
}

// newSchedulesValidateCmd checks a schedule file without storing it.
func newSchedulesValidateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a schedule file; prints every problem and exits non-zero if there are any",
		Example: `  nodetide schedules validate examples/day-night.json
  nodetide schedules validate examples/day-night.json --config nodetide.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			list, err := schedule.ParseList(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			var problems []string
			if err := schedule.ValidateList(list, nil); err != nil {
				var verr *schedule.ValidationError
				if !errors.As(err, &verr) {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				for _, p := range verr.Problems {
					problems = append(problems, p.Error())
				}
			}
			groups, err := g.checkScheduleGroups(cmd, list)
			if err != nil {
				return err
			}
			for _, n := range groups.notes {
				fmt.Fprintf(g.stderr, "%s: note: %s\n", args[0], n)
			}
			problems = append(problems, groups.problems...)
			if len(problems) > 0 {
				for _, p := range problems {
					fmt.Fprintf(g.stderr, "%s: %s\n", args[0], p)
				}
				return fmt.Errorf("%s: %d problem(s)", args[0], len(problems))
			}
			fmt.Fprintf(g.stdout, "%s: %d schedule(s), valid\n", args[0], len(list))
			return nil
		},
	}
}

// newSchedulesNextCmd prints a schedule file's next fire times.
func newSchedulesNextCmd(g *globals) *cobra.Command {
	var from string
	var count int
	next := &cobra.Command{
		Use:   "next FILE",
		Short: "Print the next fire times of the schedules in FILE, one RFC 3339 time a line in each one's time zone (-o json|yaml: a list per schedule)",
		Example: `  nodetide schedules next examples/day-night.json --count 3
  nodetide schedules next examples/day-night.json --from 2027-03-27T00:00:00Z -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if count < 1 {
				return fmt.Errorf("--count %d: must be at least 1", count)
			}
			start := time.Now()
			if from != "" {
				t, err := time.Parse(time.RFC3339, from)
				if err != nil {
					return fmt.Errorf("--from %q: want an RFC 3339 time such as 2027-03-27T00:00:00Z", from)
				}
				start = t
			}
			list, err := readSchedules(args[0])
			if err != nil {
				return err
			}
			type fireTimes struct {
				Schedule string   `json:"schedule"`
				Next     []string `json:"next"`
			}
			var doc []fireTimes
			for _, s := range list {
				c, err := s.ParseCron()
				if err != nil {
					return fmt.Errorf("schedule %q: %w", s.Name, err)
				}
				ft := fireTimes{Schedule: s.Name, Next: []string{}}
				t := start
				for range count {
					if t = c.Next(t); t.IsZero() {
						break
					}
					ft.Next = append(ft.Next, t.Format(time.RFC3339))
				}
				doc = append(doc, ft)
			}
			if g.output != "table" {
				return g.printDoc(doc)
			}
			for _, ft := range doc {
				if len(doc) > 1 {
					fmt.Fprintf(g.stdout, "# %s\n", ft.Schedule)
				}
				for _, t := range ft.Next {
					fmt.Fprintln(g.stdout, t)
				}
			}
			return nil
		},
	}
	next.Flags().StringVar(&from, "from", "", "list fire times after this RFC 3339 time (default now)")
	next.Flags().IntVar(&count, "count", 5, "how many fire times")
	addOutputFlag(next, g, "table", "table", "json", "yaml")
	return next
}

// readSchedules parses and validates a schedule file.
func readSchedules(path string) ([]schedule.Schedule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	list, err := schedule.ParseList(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := schedule.ValidateList(list, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return list, nil
}

// groupCheck is what checking a schedule file's group names against the
// config found.
type groupCheck struct {
	problems []string // unknown groups of a config whose groups are all named
	notes    []string // names a config with discovered groups may still have at run time
}

// checkScheduleGroups checks the node groups the schedules name against the
// config's, when there is a config: --config given, or the default file
// present. Groups discovered at run time (tags, a cluster's pools, a
// Kamatera INI in a secret) can't be listed offline; a name that is not
// one of the named groups is then a note, not an error.
func (g *globals) checkScheduleGroups(cmd *cobra.Command, list []schedule.Schedule) (groupCheck, error) {
	var res groupCheck
	if !cmd.Flags().Changed("config") {
		if _, err := os.Stat(g.configPath); errors.Is(err, os.ErrNotExist) {
			return res, nil
		}
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return res, err
	}
	summaries, err := describeGroups(cfg)
	if err != nil {
		return res, err
	}
	var known, discovered []string
	for _, gs := range summaries {
		if strings.HasPrefix(gs.Name, "(") {
			discovered = append(discovered, gs.Name)
		} else {
			known = append(known, gs.Name)
		}
	}
	for i, s := range list {
		for j, ng := range s.NodeGroups {
			if slices.Contains(known, ng.Name) || ng.Name == "" {
				continue
			}
			at := fmt.Sprintf("schedule %q: [%d].nodeGroups[%d].name", s.Name, i, j)
			if len(discovered) > 0 {
				res.notes = append(res.notes, fmt.Sprintf("%s: %q is not a group %s names; its groups %s are found at run time and can't be checked offline",
					at, ng.Name, g.configPath, strings.Join(discovered, ", ")))
				continue
			}
			res.problems = append(res.problems, fmt.Sprintf("%s: unknown node group %q (%s defines %s)", at, ng.Name, g.configPath, listOrNone(known)))
		}
	}
	return res, nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "no node groups"
	}
	return strings.Join(names, ", ")
}

// scheduleConfig loads the config and refuses in-memory state, which can't
// keep schedules from one command to the next.
func (g *globals) scheduleConfig() (*config.Config, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	if cfg.State.DynamoDB == nil {
		return nil, errors.New("schedules are kept in state.dynamodb; state.memory lasts only as long as one command (a local DynamoDB such as dynalite works)")
	}
	return cfg, nil
}

// scheduleStore is a handler for the store actions only (no cluster).
func (g *globals) scheduleStore(ctx context.Context) (*schedulefire.Handler, error) {
	cfg, err := g.scheduleConfig()
	if err != nil {
		return nil, err
	}
	store, err := setup.ScheduleStore(ctx, cfg, &setup.AWS{})
	if err != nil {
		return nil, err
	}
	return &schedulefire.Handler{Store: store}, nil
}

func (g *globals) printDoc(v any) error {
	if g.output == "yaml" {
		out, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = g.stdout.Write(out)
		return err
	}
	return writeJSON(g.stdout, v)
}

func writeSchedulesTable(g *globals, recs []schedule.Record, now time.Time) error {
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tTIMEZONE\tVERSION\tLAST FIRED\tNEXT")
	for _, r := range recs {
		tz := r.Schedule.Timezone
		if tz == "" {
			tz = "UTC"
		}
		last, nextAt := "-", "-"
		if !r.LastFiredAt.IsZero() {
			last = r.LastFiredAt.Format(time.RFC3339)
		}
		if c, err := r.Schedule.ParseCron(); err == nil {
			if t := c.Next(now); !t.IsZero() {
				nextAt = t.Format(time.RFC3339)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Schedule.Name, r.Schedule.Cron, tz, strconv.FormatInt(r.Version, 10), last, nextAt)
	}
	return tw.Flush()
}

// writeOverridesTable shows what bounds fired schedules hold on node groups,
// which is what evaluate and drain keep to.
func writeOverridesTable(g *globals, overrides []schedule.Override) error {
	if len(overrides) == 0 {
		return nil
	}
	opt := func(v *int) string {
		if v == nil {
			return "-"
		}
		return strconv.Itoa(*v)
	}
	fmt.Fprintln(g.stdout)
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE GROUP	SET BY	MIN	MAX	DESIRED (ONCE)	FIRED")
	for _, o := range overrides {
		fmt.Fprintf(tw, "%s	%s	%s	%s	%s	%s\n", o.Group, o.Source(), opt(o.Min), opt(o.Max), opt(o.Desired), o.FiredAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func writeResult(g *globals, res schedule.Result) {
	for _, c := range res.Changes {
		from := "?"
		if c.From != nil {
			from = strconv.Itoa(*c.From)
		}
		target := string(c.Kind) + " " + c.Name
		if c.Namespace != "" {
			target = string(c.Kind) + " " + c.Namespace + "/" + c.Name
		}
		line := fmt.Sprintf("%s: %s -> %d %s", target, from, c.To, c.Outcome)
		if c.Min != nil && c.Max != nil {
			line += fmt.Sprintf(" (bounds %d..%d)", *c.Min, *c.Max)
		}
		if c.Message != "" {
			line += ": " + c.Message
		}
		fmt.Fprintln(g.stdout, line)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(g.stdout, "note: "+n)
	}
}
