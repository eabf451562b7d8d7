package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/setup"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// startBed builds fns's bootstraps, then starts the test bed and dynalite
// with the state table. stop stops what was started, also after an error.
func startBed(ctx context.Context, fns []string, log *slog.Logger) (b *bed, stop func() error, err error) {
	var stops []func() error
	stop = func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		return errors.Join(errs...)
	}
	root, err := testbed.RepoRoot()
	if err != nil {
		return nil, stop, err
	}
	rie, err := sfnlocal.RIEPath()
	if err != nil {
		return nil, stop, err
	}
	work, err := os.MkdirTemp("", "nodetide-measure-")
	if err != nil {
		return nil, stop, fmt.Errorf("work directory: %w", err)
	}
	stops = append(stops, func() error { return os.RemoveAll(work) })

	// The build first, alone: on a first run (a cold build cache) it takes
	// minutes on a small machine, and run beside the bed's start and the
	// seeding it starved them past their readiness deadlines.
	if err := buildFunctions(ctx, root, work, fns, log); err != nil {
		return nil, stop, err
	}
	log.Info("starting the test bed")
	cp, err := testbed.Start(ctx)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, cp.Stop)
	db, err := testbed.StartDynalite(ctx)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, db.Stop)
	ddb, err := setup.DynamoDBClient(ctx, "", db.Endpoint, &setup.AWS{})
	if err != nil {
		return nil, stop, err
	}
	if err := state.CreateTable(ctx, ddb, stateTable); err != nil {
		return nil, stop, err
	}
	client, err := seedingClient(cp.Config)
	if err != nil {
		return nil, stop, err
	}
	return &bed{root: root, work: work, rie: rie, cp: cp, db: db, client: client, log: log}, stop, nil
}

// seedingClient is a client without the usual client-side throttle: seeding
// writes thousands of objects.
func seedingClient(cfg *rest.Config) (kubernetes.Interface, error) {
	rc := rest.CopyConfig(cfg)
	rc.QPS, rc.Burst = 5000, 10000
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("seeding client: %w", err)
	}
	return client, nil
}

// seed builds p on the bed (with the DaemonSet if daemonSet) on workers
// parallel writers, waiting longer for the controllers and kwok the larger
// it is; keepPaused leaves the Deployments paused (seeder.keepPaused), and
// settle, when set, bounds the wait for them to settle (seeder.settle).
func (b *bed) seed(ctx context.Context, p clusterPlan, daemonSet bool, workers int, keepPaused bool, settle time.Duration) error {
	tpl, err := workersTemplate(b.cp.KubeconfigPath, b.db.Endpoint, p.Spec.Nodes)
	if err != nil {
		return err
	}
	b.log.Info("seeding the cluster", "nodes", p.Spec.Nodes, "deployments", len(p.Deployments), "pods", p.summary(daemonSet).Pods())
	began := time.Now()
	sd := &seeder{client: b.client, template: tpl, log: b.log, workers: workers, slack: max(1, p.Spec.Nodes/200), keepPaused: keepPaused, settle: settle}
	if err := sd.seed(ctx, p, daemonSet); err != nil {
		return err
	}
	b.log.Info("cluster built", "took", time.Since(began).Round(time.Second))
	return nil
}

// workersTemplate is the template of the workers group the functions are
// configured with, which the seeded nodes follow.
func workersTemplate(kubeconfig, endpoint string, nodes int) (snapshot.Template, error) {
	cfg, err := config.Parse([]byte(functionConfig(kubeconfig, endpoint, nodes+50)), "measure")
	if err != nil {
		return snapshot.Template{}, fmt.Errorf("the functions' config: %w", err)
	}
	tpl, err := kwok.BlockOf(cfg.NodeGroups[0].Entry()).Template.Planner()
	if err != nil {
		return snapshot.Template{}, fmt.Errorf("the workers template: %w", err)
	}
	return tpl, nil
}
