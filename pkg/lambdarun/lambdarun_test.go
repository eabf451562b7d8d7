package lambdarun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/lambdarun"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/metrics/metricstest"
	"github.com/nodetide/nodetide/pkg/setup"
)

const good = `cluster: {name: c1}
state: {memory: {}}
nodeGroups:
  - name: g
    provider: kwok
    minSize: 0
    maxSize: 2
    kwok: {template: {allocatable: {cpu: "2", memory: 4Gi}}}
`

func TestStart(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	echo := func(ctx context.Context, cfg *config.Config, _ *setup.AWS, _ *slog.Logger) (lambdarun.Handler, error) {
		return func(context.Context, json.RawMessage) (any, error) { return cfg.Cluster.Name, nil }, nil
	}
	cases := []struct {
		name  string
		env   map[string]string
		build lambdarun.Build
		want  string // the handler's answer, or the error's text
	}{
		{"config inline", map[string]string{setup.EnvConfig: good}, echo, "c1"},
		{"no config", nil, echo, "no config: set NODETIDE_CONFIG, NODETIDE_CONFIG_FILE or NODETIDE_CONFIG_PARAMETER"},
		{"bad config", map[string]string{setup.EnvConfig: good + "scaleUpp: {}\n"}, echo, "scaleUpp: unknown field"},
		{"missing file", map[string]string{setup.EnvConfigFile: "does-not-exist.yaml"}, echo, "does-not-exist.yaml"},
		{"build fails", map[string]string{setup.EnvConfig: good}, func(context.Context, *config.Config, *setup.AWS, *slog.Logger) (lambdarun.Handler, error) {
			return nil, errors.New("no cluster here")
		}, "no cluster here"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			built := false
			build := func(ctx context.Context, cfg *config.Config, a *setup.AWS, l *slog.Logger) (lambdarun.Handler, error) {
				built = true
				return tc.build(ctx, cfg, a, l)
			}
			h, err := lambdarun.Start(t.Context(), func(k string) string { return tc.env[k] }, build, log)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %q, want %q", err, tc.want)
				}
				if built && tc.name != "build fails" {
					t.Error("the handler was built from a config that did not load")
				}
				return
			}
			out, err := h(t.Context(), json.RawMessage(`{}`))
			if err != nil || out != tc.want {
				t.Fatalf("handler answered %v, %v; want %q", out, err, tc.want)
			}
		})
	}
}

// Every invocation's metrics are written when it returns, failed or not,
// and the next invocation starts from nothing.
func TestInstrumentWritesEachInvocationsMetrics(t *testing.T) {
	failing := errors.New("boom")
	h := func(ctx context.Context, payload json.RawMessage) (any, error) {
		metrics.From(ctx).Add(metrics.LeaseSkips, 1, nil)
		if string(payload) == `"fail"` {
			return nil, failing
		}
		return "ok", nil
	}
	var out bytes.Buffer
	wrapped := lambdarun.Instrument(h, "c1", &out, slog.New(slog.DiscardHandler))
	for i, payload := range []string{`"fail"`, `"ok"`} {
		out.Reset()
		res, err := wrapped(context.Background(), json.RawMessage(payload))
		if (payload == `"fail"`) != errors.Is(err, failing) || (err == nil && res != "ok") {
			t.Fatalf("invocation %d: %v, %v", i, res, err)
		}
		got, perr := metricstest.Parse(out.Bytes(), "c1")
		if perr != nil {
			t.Fatal(perr)
		}
		if got.Sum(metrics.LeaseSkips, nil) != 1 {
			t.Errorf("invocation %d published %v, want LeaseSkips 1", i, got)
		}
	}
}
