package lambdarun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nodetide/nodetide/internal/metricstest"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/lambdarun"
	"github.com/nodetide/nodetide/pkg/metrics"
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

func TestMemoryLimit(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		want   int64
		wantOK bool
	}{
		{name: "512 MB function", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, want: 483183820, wantOK: true},
		{name: "128 MB function", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128"}, want: 120795955, wantOK: true},
		{name: "GOMEMLIMIT set wins", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOMEMLIMIT": "300MiB"}},
		{name: "not on Lambda", env: map[string]string{}},
		{name: "not a number", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"}},
		{name: "zero", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := lambdarun.MemoryLimit(func(k string) string { return tc.env[k] })
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("MemoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestTuneGC(t *testing.T) {
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	})
	tests := []struct {
		name        string
		env         map[string]string
		wantLimit   int64
		wantPercent int
	}{
		{name: "on Lambda", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, wantLimit: 483183820, wantPercent: 30},
		{name: "GOGC set wins", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOGC": "200"}, wantLimit: 483183820, wantPercent: 100},
		{name: "GOMEMLIMIT set wins", env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOMEMLIMIT": "1GiB"}, wantLimit: math.MaxInt64, wantPercent: 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			lambdarun.TuneGC(func(k string) string { return tc.env[k] })
			if got := debug.SetGCPercent(100); got != tc.wantPercent {
				t.Errorf("GC percent %d, want %d", got, tc.wantPercent)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
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
	wrapped := lambdarun.Instrument(h, "c1", metrics.LevelFull, &out, slog.New(slog.DiscardHandler))
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

// At each level an invocation publishes what the level keeps: off, nothing
// at all, though the handler records as always.
func TestInstrumentLevels(t *testing.T) {
	h := func(ctx context.Context, _ json.RawMessage) (any, error) {
		m := metrics.From(ctx)
		m.Add(metrics.CycleCompleted, 1, nil)
		m.Gauge(metrics.TargetSize, metrics.Count, 3, metrics.Dims{metrics.DimNodeGroup: "g"})
		m.Add(metrics.Problems, 2, nil)
		return "ok", nil
	}
	tests := []struct {
		env                                   string
		wantCycles, wantTargets, wantProblems float64
		wantEmpty                             bool
	}{
		{env: "", wantCycles: 1, wantTargets: 3},
		{env: "full", wantCycles: 1, wantTargets: 3},
		{env: "essential", wantProblems: 2},
		{env: "off", wantEmpty: true},
	}
	for _, tc := range tests {
		t.Run(tc.env, func(t *testing.T) {
			level, err := lambdarun.MetricsLevel(func(k string) string { return map[string]string{lambdarun.EnvMetrics: tc.env}[k] })
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			res, err := lambdarun.Instrument(h, "c1", level, &out, slog.New(slog.DiscardHandler))(t.Context(), json.RawMessage(`{}`))
			if err != nil || res != "ok" {
				t.Fatalf("handler answered %v, %v", res, err)
			}
			if tc.wantEmpty {
				if out.Len() != 0 {
					t.Fatalf("%s=off wrote %q", lambdarun.EnvMetrics, out.String())
				}
				return
			}
			got, err := metricstest.Parse(out.Bytes(), "c1")
			if err != nil {
				t.Fatal(err)
			}
			c, g, p := got.Sum(metrics.CycleCompleted, nil), got.Sum(metrics.TargetSize, metrics.Dims{metrics.DimNodeGroup: "g"}), got.Sum(metrics.Problems, nil)
			if c != tc.wantCycles || g != tc.wantTargets || p != tc.wantProblems {
				t.Errorf("published CycleCompleted %v, TargetSize %v, Problems %v; want %v, %v, %v", c, g, p, tc.wantCycles, tc.wantTargets, tc.wantProblems)
			}
		})
	}
}

// A value that is not a level is refused, naming the variable.
func TestMetricsLevelRefusesUnknown(t *testing.T) {
	_, err := lambdarun.MetricsLevel(func(string) string { return "none" })
	if err == nil || !strings.Contains(err.Error(), `NODETIDE_METRICS: want full, essential or off, got "none"`) {
		t.Fatalf("error %v", err)
	}
}

// Raw hands the handler the payload exactly as it came, trailing data and
// emptiness included, and encodes the result as aws-lambda-go encodes a
// handler func's.
func TestRawPassesThePayloadAsItCame(t *testing.T) {
	var got []string
	h := lambdarun.Raw(func(_ context.Context, payload json.RawMessage) (any, error) {
		got = append(got, string(payload))
		return map[string]string{"html": "<a&b>"}, nil
	})
	payloads := []string{`{"action":"plan"} {"action":"add"}`, ``, `{"action":`, `{"a":1,"a":2}`}
	for _, p := range payloads {
		out, err := h.Invoke(t.Context(), []byte(p))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := lambda.NewHandler(func() (any, error) { return map[string]string{"html": "<a&b>"}, nil }).Invoke(t.Context(), nil)
		if string(out) != string(want) {
			t.Errorf("result %q, want %q as aws-lambda-go encodes it", out, want)
		}
	}
	if !slices.Equal(got, payloads) {
		t.Errorf("the handler saw %q, want %q", got, payloads)
	}
	failing := errors.New("boom")
	if _, err := lambdarun.Raw(func(context.Context, json.RawMessage) (any, error) { return nil, failing }).Invoke(t.Context(), nil); !errors.Is(err, failing) {
		t.Errorf("error %v, want the handler's", err)
	}
}
