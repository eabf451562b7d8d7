package setup

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/schedulefire"
	"github.com/nodetide/nodetide/pkg/state"
)

// ScheduleStore returns where the config keeps schedules: the DynamoDB
// table, or, for state.memory, a store that lives only as long as this
// process.
func ScheduleStore(ctx context.Context, cfg *config.Config, a *AWS) (state.ScheduleStore, error) {
	if cfg.State.Memory != nil {
		return state.NewMemorySchedules(cfg.Cluster.Name), nil
	}
	d := cfg.State.DynamoDB
	if d == nil {
		return nil, fmt.Errorf("state: neither dynamodb nor memory is set")
	}
	client, err := DynamoDBClient(ctx, d.Region, d.Endpoint, a)
	if err != nil {
		return nil, err
	}
	return state.NewDynamoDB(client, d.Table, cfg.Cluster.Name), nil
}

// Schedules wires the schedule function: the schedule store, and the
// cluster and node groups fired schedules are applied to.
func Schedules(ctx context.Context, cfg *config.Config, kubeconfig string, a *AWS, log *slog.Logger) (*schedulefire.Handler, error) {
	ev, err := Evaluator(ctx, cfg, kubeconfig, a, log, InstanceID("schedule"))
	if err != nil {
		return nil, err
	}
	return SchedulesWith(ctx, cfg, a, ev, log)
}

// SchedulesWith wires the schedule handler around an evaluate cycle (its
// cluster client, and its drainer for shrinking groups), as `nodetide run`
// shares one.
func SchedulesWith(ctx context.Context, cfg *config.Config, a *AWS, ev *evaluate.Evaluator, log *slog.Logger) (*schedulefire.Handler, error) {
	store, err := ScheduleStore(ctx, cfg, a)
	if err != nil {
		return nil, err
	}
	client := ev.Client
	applier := &schedulefire.Applier{
		Client: client,
		// The configured bounds: a fired schedule replaces the override.
		Groups:    NodeGroups(cfg, client, a, nil, guardOf(ev.Store, ev.Holder)),
		Overrides: store,
		Log:       log,
	}
	if ev.Drainer != nil {
		applier.Shrinker = shrinker{ev}
	}
	return &schedulefire.Handler{Store: store, Applier: applier, Log: log}, nil
}

// shrinker lets a schedule remove nodes through the evaluate cycle's
// planner and drains.
type shrinker struct{ ev *evaluate.Evaluator }

func (s shrinker) Shrink(ctx context.Context, sizes map[string]int, from string) ([]schedulefire.Removal, error) {
	res, err := s.ev.Shrink(ctx, sizes, from)
	if err != nil {
		return nil, err
	}
	out := make([]schedulefire.Removal, 0, len(res.Actions))
	for _, a := range res.Actions {
		r := schedulefire.Removal{NodeGroup: a.NodeGroup, Node: a.Node, Error: a.Error}
		if a.Kind == "decreaseTarget" {
			r.Delta = -a.Delta // the action's delta is the (negative) change in size
		}
		out = append(out, r)
	}
	return out, nil
}
