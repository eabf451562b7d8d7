package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/schedule"
)

// DisruptionBudget bounds consolidation, in the shape of Karpenter's
// NodePool budgets: at most Nodes ("3", or "10%" of a group's nodes,
// rounded up) of each group it covers disrupted at once, drains under way
// included; with a Schedule (cron, in TimeZone) only for Duration after
// each time it fires.
type DisruptionBudget struct {
	Nodes      string    `yaml:"nodes"`
	Schedule   string    `yaml:"schedule"`
	Duration   *Duration `yaml:"duration"`
	TimeZone   string    `yaml:"timeZone"`
	NodeGroups []string  `yaml:"nodeGroups"`
}

// budgetNodes is a count or a whole percentage up to 100, as Karpenter's.
var budgetNodes = regexp.MustCompile(`^(?:(100|[0-9]{1,2})%|([0-9]+))$`)

// validateConsolidation checks scaleDown.consolidation and its budgets;
// names are the named groups.
func (c *Config) validateConsolidation(names map[string]string, errs *fieldErrors) {
	sd := c.ScaleDown
	switch sd.Consolidation {
	case "":
		if len(sd.DisruptionBudgets) > 0 {
			errs.add(0, "scaleDown.disruptionBudgets", "apply only to consolidation: set scaleDown.consolidation: delete, or remove them")
		}
		if sd.ReplaceMinSaving != nil {
			errs.add(0, "scaleDown.replaceMinSaving", "applies only with scaleDown.consolidation: replace")
		}
		return
	case planner.ConsolidationDelete:
		if sd.ReplaceMinSaving != nil {
			errs.add(0, "scaleDown.replaceMinSaving", "applies only with scaleDown.consolidation: replace")
		}
	case planner.ConsolidationReplace:
		// Written so NaN fails too; 1 would ask a replacement to cost nothing.
		if s := sd.ReplaceMinSaving; s != nil && !(*s > 0 && *s < 1) {
			errs.add(0, "scaleDown.replaceMinSaving", fmt.Sprintf("must be a share in (0, 1) of what the replaced nodes cost (0.2 is 20%%), got %v", *s))
		}
	default:
		errs.add(0, "scaleDown.consolidation", fmt.Sprintf("unknown value %q (use delete or replace)", sd.Consolidation))
		return
	}
	if sd.MaxConcurrentDrains != nil {
		errs.add(0, "scaleDown.maxConcurrentDrains", "does not apply with consolidation: bound removals with scaleDown.disruptionBudgets")
	}
	for i, b := range sd.DisruptionBudgets {
		path := fmt.Sprintf("scaleDown.disruptionBudgets[%d]", i)
		if _, err := b.planner(); err != nil {
			errs.add(0, path+"."+err.field, err.msg)
		}
		seen := map[string]bool{}
		for j, g := range b.NodeGroups {
			gp := fmt.Sprintf("%s.nodeGroups[%d]", path, j)
			switch _, known := names[g]; {
			case strings.TrimSpace(g) == "":
				errs.add(0, gp, "must not be empty")
			case seen[g]:
				errs.add(0, gp, fmt.Sprintf("node group %q listed twice", g))
			case !known && !c.hasDiscovery():
				errs.add(0, gp, fmt.Sprintf("%q names no node group", g))
			}
			seen[g] = true
		}
	}
}

// budgetError is what is wrong with one key of a budget.
type budgetError struct{ field, msg string }

// planner is the budget as the planner takes it.
func (b DisruptionBudget) planner() (planner.DisruptionBudget, *budgetError) {
	out := planner.DisruptionBudget{NodeGroups: b.NodeGroups}
	if b.Nodes == "" {
		return out, &budgetError{"nodes", `is required: a number of nodes ("3") or a percentage of a group's nodes ("10%")`}
	}
	m := budgetNodes.FindStringSubmatch(b.Nodes)
	if m == nil {
		return out, &budgetError{"nodes", fmt.Sprintf("must be a number of nodes (\"3\") or a percentage of a group's nodes from 0%% to 100%% (\"10%%\"), got %q", b.Nodes)}
	}
	n, err := strconv.Atoi(m[1] + m[2])
	if err != nil {
		return out, &budgetError{"nodes", fmt.Sprintf("%q is too large", b.Nodes)}
	}
	out.Nodes, out.Percent = n, m[1] != ""
	switch {
	case b.Schedule == "" && b.Duration != nil:
		return out, &budgetError{"duration", "applies only with schedule: set both, or neither (always active)"}
	case b.Schedule == "" && b.TimeZone != "":
		return out, &budgetError{"timeZone", "applies only with schedule"}
	case b.Schedule == "":
		return out, nil
	case b.Duration == nil || b.Duration.Duration <= 0:
		return out, &budgetError{"duration", "is required with schedule and must be above 0 (how long the budget holds after each time the schedule fires, e.g. 8h)"}
	}
	loc, err := schedule.LoadLocation(b.TimeZone)
	if err != nil {
		return out, &budgetError{"timeZone", err.Error()}
	}
	cron, err := schedule.ParseCron(b.Schedule, loc)
	if err != nil {
		return out, &budgetError{"schedule", err.Error()}
	}
	out.Schedule, out.Duration = &cron, b.Duration.Duration
	return out, nil
}

// budgets are the planner's budgets; the config has been validated.
func (sd ScaleDown) budgets() []planner.DisruptionBudget {
	var out []planner.DisruptionBudget
	for _, b := range sd.DisruptionBudgets {
		if pb, err := b.planner(); err == nil {
			out = append(out, pb)
		}
	}
	return out
}
