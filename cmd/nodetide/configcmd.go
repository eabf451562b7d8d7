package main

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers/kamatera"
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
		if ng.Kamatera != nil && ng.Kamatera.CloudConfigSecret != "" {
			// The INI is in Secrets Manager, which validate does not contact.
			out = append(out, groupSummary{Name: "(from secret " + ng.Kamatera.CloudConfigSecret + ")", Provider: ng.Provider})
			continue
		}
		if ng.Kamatera != nil {
			// The INI names the groups and their sizes; reading it contacts no cloud.
			path := ng.Kamatera.CloudConfig
			if cfg.Dir != "" && !filepath.IsAbs(path) {
				path = filepath.Join(cfg.Dir, path)
			}
			cc, err := kamatera.LoadCloudConfig(path)
			if err != nil {
				return nil, fmt.Errorf("nodeGroups[%d].kamatera.cloudConfig: %w", i, err)
			}
			for _, kg := range cc.NodeGroups {
				lo, hi := kg.MinSize, kg.MaxSize
				out = append(out, groupSummary{Name: kg.Name, Provider: ng.Provider, MinSize: &lo, MaxSize: &hi})
			}
			continue
		}
		name := ng.Name
		switch {
		case name != "":
		case ng.AWS != nil && ng.AWS.AutoScalingGroup != "":
			name = ng.AWS.AutoScalingGroup
		case ng.AWS != nil:
			name = fmt.Sprintf("(discovered by tags %v)", ng.AWS.AutoDiscovery)
		case ng.Scaleway != nil && ng.Scaleway.Pool != "":
			name = ng.Scaleway.Pool
		default:
			name = "(discovered)"
		}
		gs := groupSummary{Name: name, Provider: ng.Provider, MinSize: ng.MinSize, MaxSize: ng.MaxSize}
		if h, ok := rules[ng.Name]; ok && ng.Name != "" {
			gs.Headroom = planner.HeadroomWords(h)
		}
		out = append(out, gs)
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
