package setup

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/schedule"
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
func Schedules(ctx context.Context, cfg *config.Config, kubeconfig string, a *AWS, log *slog.Logger) (*schedule.Handler, error) {
	store, err := ScheduleStore(ctx, cfg, a)
	if err != nil {
		return nil, err
	}
	client, err := Kubernetes(ctx, cfg, kubeconfig, a)
	if err != nil {
		return nil, err
	}
	return &schedule.Handler{
		Store:   store,
		Applier: &schedule.Applier{Client: client, Groups: NodeGroups(cfg, client, a), Log: log},
		Log:     log,
	}, nil
}
