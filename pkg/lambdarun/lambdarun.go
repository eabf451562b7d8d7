// Package lambdarun is the cold start the three Lambda functions share: a
// JSON logger on stdout, the config read from the environment (inline, a
// file or an SSM parameter), the handler built once, each invocation's
// metrics written as EMF documents on stdout (as many as NODETIDE_METRICS
// lets: full, essential or none), and a start-up failure that
// ends the process loudly instead of failing every invocation obscurely.
package lambdarun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nodetide/nodetide/pkg/buildinfo"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/setup"
)

// Handler serves one invocation.
type Handler func(ctx context.Context, payload json.RawMessage) (any, error)

// Build wires a function's handler from the loaded config.
type Build func(ctx context.Context, cfg *config.Config, a *setup.AWS, log *slog.Logger) (Handler, error)

// Run starts the function named name: it builds the handler once and
// serves invocations until the runtime stops the process.
func Run(name string, build Build) {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", name)
	// Libraries and providers that log to the default logger (warnings
	// about a skipped template tag, say) reach CloudWatch as JSON too.
	slog.SetDefault(log)
	LogBuild(log, buildinfo.Read())
	if limit, percent := TuneGC(os.Getenv); limit > 0 || percent > 0 {
		log.Info("garbage collector", "memoryLimitBytes", limit, "gcPercent", percent)
	}
	level, err := MetricsLevel(os.Getenv)
	var h Handler
	var cfg *config.Config
	if err == nil {
		h, cfg, err = start(context.Background(), os.Getenv, build, log)
	}
	if err != nil {
		// Lambda reports the failed start on the invocation and retries it
		// with a new cold start; the log line says why.
		log.Error("start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(Raw(Instrument(h, cfg.Cluster.Name, level, os.Stdout, log)))
}

// Raw is a Handler as the Lambda runtime's lambda.Handler: Invoke gets the
// payload's bytes exactly as they came. A handler func given to lambda.Start
// gets its argument through aws-lambda-go's own decoder instead, which reads
// only the first JSON value (`{"action":"plan"} {...}` would run the plan)
// and answers an empty or cut-short payload with a bare EOF: the strict
// parsing in each function's ParseEvent must see all of it.
type Raw Handler

// Invoke serves one invocation and encodes its result as aws-lambda-go
// encodes a handler func's (no HTML escaping, no newline after).
func (h Raw) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := h(ctx, json.RawMessage(payload))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("encode the result: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// EnvMetrics sets what the functions publish: full (the default), essential
// or off (see metrics.Level). The stack sets it from its monitoring option.
const EnvMetrics = "NODETIDE_METRICS"

// MetricsLevel reads EnvMetrics, once, at start: a value that is not a
// level fails the start rather than publishing what nobody chose.
func MetricsLevel(getenv func(string) string) (metrics.Level, error) {
	l, err := metrics.ParseLevel(getenv(EnvMetrics))
	if err != nil {
		return "", fmt.Errorf("%s: %w", EnvMetrics, err)
	}
	return l, nil
}

// Start loads the config as getenv names it and builds the handler.
func Start(ctx context.Context, getenv func(string) string, build Build, log *slog.Logger) (Handler, error) {
	h, _, err := start(ctx, getenv, build, log)
	return h, err
}

func start(ctx context.Context, getenv func(string) string, build Build, log *slog.Logger) (Handler, *config.Config, error) {
	a := &setup.AWS{}
	cfg, err := setup.LoadConfig(ctx, getenv, a)
	if err != nil {
		return nil, nil, err
	}
	h, err := build(ctx, cfg, a, log)
	return h, cfg, err
}

// Instrument gives each invocation of h a metrics.Recorder for cluster and
// writes what level keeps of it to w as EMF documents when it returns,
// failed or not: in Lambda, w is stdout, which CloudWatch Logs reads the
// metrics from. At metrics.LevelOff the invocation gets no Recorder (which
// records nothing) and nothing is written.
func Instrument(h Handler, cluster string, level metrics.Level, w io.Writer, log *slog.Logger) Handler {
	if level == metrics.LevelOff {
		return h
	}
	return func(ctx context.Context, payload json.RawMessage) (any, error) {
		m := metrics.New(cluster, nil)
		m.SetLevel(level)
		out, err := h(metrics.NewContext(ctx, m), payload)
		if werr := m.Write(w); werr != nil {
			log.Warn("metrics", "error", werr.Error())
		}
		return out, err
	}
}

// gcPercent lets the heap grow to 1.3× what a collection left live instead
// of Go's default 2×: a large read's peak RSS (pods kept between invocations
// plus the garbage of the pages being read, and a warm cycle's plan on top)
// is what sizes the function, and the extra collections cost little now
// that a read makes little garbage. At 5,000 nodes against the API server
// double, 30 against 50 took the cold peak from 415–430 MiB to 370–375 and
// the warm from 460–476 to 390–415, for about 10 % more CPU cold and none
// warm.
const gcPercent = 30

// TuneGC sets the Go runtime's memory limit (MemoryLimit) and, unless GOGC is
// set, its GC percentage to gcPercent. It returns what it set (0 for
// unchanged).
func TuneGC(getenv func(string) string) (limit int64, percent int) {
	if l, ok := MemoryLimit(getenv); ok {
		debug.SetMemoryLimit(l)
		limit = l
	}
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
		percent = gcPercent
	}
	return limit, percent
}

// memoryShare is the part of the function's memory the Go heap may grow to
// before the collector works harder; the rest is for stacks, the runtime and
// buffers outside the heap.
const memoryShare = 0.9

// MemoryLimit is the Go runtime's soft memory limit for a function given
// AWS_LAMBDA_FUNCTION_MEMORY_SIZE MB (Lambda's MB are MiB): 90 % of it, so
// the collector runs before Lambda ends the process for exceeding its memory.
// It is false when GOMEMLIMIT is set (the runtime obeys that) or the size is
// unknown.
func MemoryLimit(getenv func(string) string) (int64, bool) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	mb, err := strconv.ParseInt(getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), 10, 64)
	if err != nil || mb <= 0 || mb > 1<<20 {
		return 0, false
	}
	return int64(float64(mb<<20) * memoryShare), true
}
