package setup

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"github.com/nodetide/nodetide/pkg/config"
	awsprovider "github.com/nodetide/nodetide/pkg/providers/aws"
)

// AutoScalingGroup is one Auto Scaling Group the config manages, with a
// client for its region.
type AutoScalingGroup struct {
	// Entry is the config entry that names or discovers it
	// (nodeGroups[i]).
	Entry string
	Name  string
	// Discovered: found by the entry's tags, not named by it.
	Discovered bool
	Client     *autoscaling.Client
}

// AutoScalingGroups lists the Auto Scaling Groups of the config's aws
// entries as evaluate finds them: named groups by name, discovered ones by
// their tags (autoscaling:DescribeAutoScalingGroups only).
func AutoScalingGroups(ctx context.Context, cfg *config.Config, a *AWS) ([]AutoScalingGroup, error) {
	var out []AutoScalingGroup
	for i, g := range cfg.NodeGroups {
		if g.Provider != awsprovider.ProviderName {
			continue
		}
		path := fmt.Sprintf("nodeGroups[%d]", i)
		p, as, err := awsprovider.NewEntry(ctx, buildDeps(cfg, nil, a), path, g.Entry())
		if err != nil {
			return nil, err
		}
		groups, err := p.NodeGroups(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, ng := range groups {
			asg, ok := ng.(*awsprovider.Group)
			if !ok {
				return nil, fmt.Errorf("%s: node group %s is not an Auto Scaling group", path, ng.Name())
			}
			out = append(out, AutoScalingGroup{Entry: path, Name: asg.AutoScalingGroupName(), Discovered: awsprovider.BlockOf(g.Entry()).AutoScalingGroup == "", Client: as})
		}
	}
	return out, nil
}
