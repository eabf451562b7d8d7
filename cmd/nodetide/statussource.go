package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/setup"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/statusmap"
)

// Values of `nodetide status --from`.
const (
	sourceAuto      = "auto"
	sourceConfigMap = "configmap"
	sourceDynamoDB  = "dynamodb"
)

// statusSource is a status and where it was read.
type statusSource struct {
	status evaluate.Status
	from   string    // "ConfigMap kube-system/nodetide-status", "DynamoDB table t"
	at     time.Time // when it was written
	// fallback says why auto did not read the ConfigMap.
	fallback string
	// store reads the running drains now, statuses the functions' builds;
	// nil for the ConfigMap, whose drains are the cycle's.
	store    state.DrainStore
	statuses state.StatusStore
}

// describe says where the status came from and how old it is.
func (s statusSource) describe(now time.Time) string {
	out := fmt.Sprintf("Read from %s, written %s", s.from, statusClockAt(now, s.at))
	if s.fallback != "" {
		out += " (the status ConfigMap was not read: " + s.fallback + ")"
	}
	return out
}

func statusClockAt(now, t time.Time) string {
	return t.UTC().Format(time.RFC3339) + " (" + now.Sub(t).Round(time.Second).String() + " ago)"
}

// readStatusFrom reads the status from the source --from names; auto tries
// the ConfigMap (no AWS credentials needed), then the state table.
func readStatusFrom(ctx context.Context, g *globals, cfg *config.Config, from string) (statusSource, error) {
	switch from {
	case sourceConfigMap:
		return statusFromConfigMap(ctx, g, cfg)
	case sourceDynamoDB:
		return statusFromTable(ctx, cfg)
	case sourceAuto:
		src, err := statusFromConfigMap(ctx, g, cfg)
		if err == nil {
			return src, nil
		}
		src, terr := statusFromTable(ctx, cfg)
		if terr != nil {
			return statusSource{}, fmt.Errorf("%w (and the status ConfigMap: %v)", terr, err)
		}
		src.fallback = err.Error()
		return src, nil
	}
	return statusSource{}, fmt.Errorf("--from %q: use one of %s, %s, %s", from, sourceAuto, sourceConfigMap, sourceDynamoDB)
}

// statusFromConfigMap reads the status ConfigMap through the kubeconfig
// (--kubeconfig, cluster.kubernetes.kubeconfig, else kubectl's), never the
// config's AWS-based access, so it needs no AWS credentials.
func statusFromConfigMap(ctx context.Context, g *globals, cfg *config.Config) (statusSource, error) {
	ns, name, ok := cfg.StatusConfigMapRef()
	if !ok {
		return statusSource{}, errors.New("status.configMap is false in the config")
	}
	path := g.kubeconfig
	if k := cfg.Cluster.Kubernetes.Kubeconfig; path == "" && k != "" {
		path = k
		if !filepath.IsAbs(path) {
			path = filepath.Join(cfg.Dir, path)
		}
	}
	rc, err := k8s.FromKubeconfigFile(path, cfg.Cluster.Kubernetes.Context)
	if err != nil {
		return statusSource{}, err
	}
	rc.Timeout = 15 * time.Second
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return statusSource{}, fmt.Errorf("kubernetes client: %w", err)
	}
	stored, err := statusmap.Read(ctx, client, ns, name)
	if err != nil {
		return statusSource{}, err
	}
	if stored.Cluster != cfg.Cluster.Name {
		return statusSource{}, fmt.Errorf("status ConfigMap %s/%s is cluster %q's, not %q's", ns, name, stored.Cluster, cfg.Cluster.Name)
	}
	return statusSource{status: stored.Status, from: fmt.Sprintf("ConfigMap %s/%s", ns, name), at: stored.WrittenAt}, nil
}

// statusFromTable reads the status from the DynamoDB state table.
func statusFromTable(ctx context.Context, cfg *config.Config) (statusSource, error) {
	if cfg.State.Memory != nil {
		return statusSource{}, errors.New("the status is kept in state.dynamodb: with state.memory it lives only inside the `nodetide run` process, which prints it after each cycle with --status and writes the status ConfigMap (or use a local DynamoDB such as dynalite)")
	}
	store, err := setup.Store(ctx, cfg, &setup.AWS{})
	if err != nil {
		return statusSource{}, err
	}
	ss, ok := store.(state.StatusStore)
	if !ok {
		return statusSource{}, errors.New("this state store keeps no status")
	}
	st, err := evaluate.ReadStatus(ctx, ss)
	if errors.Is(err, state.ErrNoStatus) {
		return statusSource{}, fmt.Errorf("no evaluate cycle has written a status for cluster %s in table %s yet (is the evaluate function running?)", cfg.Cluster.Name, cfg.State.DynamoDB.Table)
	}
	if err != nil {
		return statusSource{}, err
	}
	return statusSource{status: st, from: "DynamoDB table " + cfg.State.DynamoDB.Table, at: st.CycleAt, store: store, statuses: ss}, nil
}
