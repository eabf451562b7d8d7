package main

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/planner"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := groupCmd(&cobra.Command{Use: "config", Short: "Work with nodetide.yaml", Example: "  nodetide config validate --config nodetide.yaml"})
	validate := &cobra.Command{
		Use:   "validate",
		Short: "Load the config and print the node groups it defines, or every problem found",
		Example: `  nodetide config validate --config nodetide.yaml
  nodetide config validate --config nodetide.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			groups, err := describeGroups(cfg)
			if err != nil {
				return err
			}
			byName := byNameHeadroom(cfg)
			doc := map[string]any{"nodeGroups": groups}
			if len(byName) > 0 {
				doc["headroom"] = byName
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
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPROVIDER\tMIN\tMAX\tHEADROOM")
			for _, ng := range groups {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ng.Name, ng.Provider, orDash(ng.MinSize), orDash(ng.MaxSize), cmp.Or(ng.Headroom, "-"))
			}
			if len(byName) > 0 {
				fmt.Fprintln(tw)
				fmt.Fprintln(tw, "HEADROOM OF GROUP\tRULE")
				for _, h := range byName {
					fmt.Fprintf(tw, "%s\t%s\n", h.NodeGroup, h.Rule)
				}
			}
			return tw.Flush()
		},
	}
	addOutputFlag(validate, g, "table", "table", "json", "yaml")
	cmd.AddCommand(validate)
	return cmd
}

// groupSummary is one node group a config defines; sizes the provider
// decides are null.
type groupSummary struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	MinSize  *int   `json:"minSize"`
	MaxSize  *int   `json:"maxSize"`
	// Headroom is the group's headroom rule, when the config gives it one.
	Headroom string `json:"headroom,omitempty"`
}

// namedHeadroom is an entry of the config's top-level headroom list.
type namedHeadroom struct {
	NodeGroup string `json:"nodeGroup"`
	Rule      string `json:"rule"`
}

// byNameHeadroom lists the top-level headroom entries: for groups that
// discovery names, which validate does not look up.
func byNameHeadroom(cfg *config.Config) []namedHeadroom {
	rules := cfg.Headroom()
	out := make([]namedHeadroom, 0, len(cfg.Headrooms))
	for _, h := range cfg.Headrooms {
		out = append(out, namedHeadroom{NodeGroup: h.NodeGroup, Rule: planner.HeadroomWords(rules[h.NodeGroup])})
	}
	return out
}

func describeGroups(cfg *config.Config) ([]groupSummary, error) {
	out := make([]groupSummary, 0, len(cfg.NodeGroups))
	rules := cfg.Headroom()
	for i, ng := range cfg.NodeGroups {
		k, ok := config.ProviderKind(ng.Provider)
		if !ok {
			return nil, fmt.Errorf("nodeGroups[%d].provider: unknown provider %q", i, ng.Provider)
		}
		groups, err := k.Describe(ng.Entry(), fmt.Sprintf("nodeGroups[%d]", i), cfg.Dir)
		if err != nil {
			return nil, err
		}
		for _, g := range groups {
			gs := groupSummary{Name: g.Name, Provider: ng.Provider, MinSize: g.MinSize, MaxSize: g.MaxSize}
			if h, ok := rules[ng.Name]; ok && ng.Name != "" {
				gs.Headroom = planner.HeadroomWords(h)
			}
			out = append(out, gs)
		}
	}
	return out, nil
}

func orDash(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// groupCmd makes a command that only holds subcommands refuse an unknown
// one (cobra alone prints the help and succeeds, so a typo looks like
// success to a script).
func groupCmd(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		names := make([]string, 0, len(cmd.Commands()))
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		msg := fmt.Sprintf("unknown command %q for %q (one of: %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return errors.New(msg)
	}
	return cmd
}
