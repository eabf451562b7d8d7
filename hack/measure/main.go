// Command measure sizes nodetide's three Lambda functions from measured
// runs: it starts the local test bed (a real control plane with kwok nodes,
// dynalite), fills it with a realistically sized cluster, runs each
// function's bootstrap under the Lambda Runtime Interface Emulator and
// sends it the events it gets in production — evaluate's tick and plan,
// schedule's put, tick and list, and the drain state machine's steps
// through real drains — and records per invocation the emulator's
// duration, the process's CPU time and peak memory, and its API and
// DynamoDB traffic. It writes the figures, and what they model to on
// Lambda at each memory size, as markdown (infra/measurements.md). Run it
// with `make measure`; it stops everything it started, also on Ctrl-C.
// Last, it times scale-ups through the webhook trigger (pkg/trigger): pod
// marked Unschedulable to IncreaseSize, over -trigger-trials pods.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	Out        string
	Cluster    clusterSpec
	DaemonSet  bool
	Pending    int
	Ticks      int // warm evaluate ticks after the cold one
	Plans      int
	Schedules  int
	Runs       int // schedule ticks and lists of each kind
	Drains     int
	DrainWait  time.Duration
	Memories   []int
	Net        network
	MemoryList string
	// Scale, when set, measures only the read path at these scales.
	Scale scaleOptions
	// BedScale, when set, measures only evaluate on a test bed cluster of
	// this many nodes.
	BedScale int
	// BedMemoryMB is the evaluate function's memory in the bed run (its
	// GOMEMLIMIT follows it, as on Lambda).
	BedMemoryMB int
	// TriggerTrials: scale-ups through the webhook trigger (0: none).
	TriggerTrials int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Out, "out", "infra/measurements.md", "markdown file to write (- for standard output)")
	fs.IntVar(&o.Cluster.Nodes, "nodes", 200, "kwok nodes (8 CPU, 32 GiB, 110 pods each)")
	fs.IntVar(&o.Cluster.Pods, "pods", 4000, "Deployment pods (the DaemonSet adds one per node)")
	fs.IntVar(&o.Cluster.PodsPerDeployment, "pods-per-deployment", 20, "average replicas per Deployment")
	fs.IntVar(&o.Cluster.Namespaces, "namespaces", 10, "namespaces the Deployments are spread over")
	fs.Float64Var(&o.Cluster.Utilization, "utilization", 0.55, "average CPU requests over allocatable")
	fs.Float64Var(&o.Cluster.SingleFraction, "single-replica", 0.1, "fraction of Deployments with one replica")
	fs.Float64Var(&o.Cluster.PDBFraction, "pdbs", 0.3, "fraction of multi-replica Deployments with a PodDisruptionBudget")
	fs.Uint64Var(&o.Cluster.Seed, "seed", 1, "seed of the cluster layout")
	fs.BoolVar(&o.DaemonSet, "daemonset", true, "run a DaemonSet pod on every node")
	fs.IntVar(&o.Pending, "pending", 20, "pending pods for evaluate's plan (12 CPU each: only the empty group fits them)")
	fs.IntVar(&o.Ticks, "ticks", 10, "warm evaluate ticks after the first")
	fs.IntVar(&o.Plans, "plans", 5, "evaluate plan invocations")
	fs.IntVar(&o.Schedules, "schedules", 5, "stored schedules")
	fs.IntVar(&o.Runs, "runs", 5, "schedule ticks and lists of each kind")
	fs.IntVar(&o.Drains, "drains", 2, "nodes drained through the state machine")
	fs.DurationVar(&o.DrainWait, "drain-max-wait", 2*time.Second, "cap on the state machine's Wait states and retry pauses")
	fs.IntVar(&o.TriggerTrials, "trigger-trials", 50, "scale-ups through the webhook trigger, each timed from Unschedulable to IncreaseSize (0: none)")
	fs.StringVar(&o.MemoryList, "memory", "128,256,384,512,1024,1769", "memory sizes (MB) to model, comma-separated")
	fs.DurationVar(&o.Net.KubeRTT, "kube-rtt", 5*time.Millisecond, "assumed round trip per Kubernetes API request on AWS")
	fs.DurationVar(&o.Net.DDBRTT, "dynamodb-rtt", 8*time.Millisecond, "assumed round trip per DynamoDB request on AWS")
	var mbps float64
	fs.Float64Var(&mbps, "bandwidth", 25, "assumed Kubernetes API throughput on AWS, MB/s")
	fs.DurationVar(&o.Net.InitCalls, "init-calls", 100*time.Millisecond, "assumed time of the start-up's AWS calls on Lambda")
	var scales string
	fs.StringVar(&scales, "scale", "", "measure only evaluate's read path against an API server double at these node counts (30 pods per node), e.g. 1000,5000; writes the scale section of -out")
	fs.IntVar(&o.BedMemoryMB, "bed-memory", 256, "the evaluate function's memory in MB for -bed-scale (the stack's evaluateMemoryMB; GOMEMLIMIT follows it)")
	fs.IntVar(&o.BedScale, "bed-scale", 0, "measure only evaluate against a cluster of this many nodes (30 pods per node) built on the test bed, e.g. 1000; writes the bed scale section of -out (-pending sets its pending pods)")
	fs.IntVar(&o.Scale.Ticks, "scale-ticks", 5, "warm reads after the cold one, with -scale")
	fs.IntVar(&o.Scale.Churn, "scale-churn", 300, "pod changes before each warm read, with -scale")
	fs.StringVar(&o.Scale.Profile, "scale-profile", "", "with -scale, write each cold cycle's CPU and heap profiles to this directory (cold-N.cpu.pprof, cold-N.heap.pprof)")
	memories := "512"
	fs.StringVar(&memories, "scale-memory", memories, "evaluate's memory (MB) for GOMEMLIMIT, with -scale: one for every scale, or one per scale, e.g. 512,1024")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Scale.Out = o.Out
	if scales != "" {
		var err error
		if o.Scale.Scales, err = parseScales(scales); err != nil {
			return o, fmt.Errorf("-scale: %w", err)
		}
		if o.Scale.MemoryMB, err = parseInts(memories, 128, 10240, "a function memory in MB"); err != nil {
			return o, fmt.Errorf("-scale-memory: %w", err)
		}
		if len(o.Scale.MemoryMB) != 1 && len(o.Scale.MemoryMB) != len(o.Scale.Scales) {
			return o, fmt.Errorf("-scale-memory: %d sizes for %d scales: give one, or one per scale", len(o.Scale.MemoryMB), len(o.Scale.Scales))
		}
		if o.Scale.Ticks < 1 || o.Scale.Churn < 0 {
			return o, errors.New("-scale-ticks must be at least 1, -scale-churn at least 0")
		}
	}
	if o.BedScale < 0 || o.BedScale > 0 && o.Scale.Scales != nil {
		return o, errors.New("-bed-scale must be a node count, and not given with -scale")
	}
	if o.BedScale > 0 {
		if o.BedMemoryMB < 128 || o.BedMemoryMB > 10240 {
			return o, fmt.Errorf("-bed-memory: want 128 to 10240 MB, got %d", o.BedMemoryMB)
		}
		if _, err := planCluster(bedScaleSpec(o.BedScale)); err != nil {
			return o, fmt.Errorf("-bed-scale: %w", err)
		}
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var err error
	if o.Memories, err = parseMemories(o.MemoryList); err != nil {
		return o, fmt.Errorf("-memory: %w", err)
	}
	if mbps <= 0 {
		return o, errors.New("-bandwidth must be positive")
	}
	o.Net.Bandwidth = mbps * 1e6
	switch {
	case o.Pending < 1, o.Ticks < 1, o.Plans < 1, o.Schedules < 1, o.Runs < 1, o.Drains < 1:
		return o, errors.New("-pending, -ticks, -plans, -schedules, -runs and -drains must each be at least 1")
	case o.TriggerTrials < 0:
		return o, errors.New("-trigger-trials must not be negative")
	case o.DrainWait <= 0:
		return o, errors.New("-drain-max-wait must be positive")
	}
	if _, err := planCluster(o.Cluster); err != nil {
		return o, err
	}
	return o, nil
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if len(os.Args) == 4 && os.Args[1] == scaleChildArg {
		if err := scaleChild(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "measure: read-path child:", err)
			os.Exit(1)
		}
		return
	}
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Error("measure", "error", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	switch {
	case o.Scale.Scales != nil:
		err = runScale(ctx, o.Scale, log)
	case o.BedScale > 0:
		err = runBedScale(ctx, o, log)
	default:
		err = run(ctx, o, log)
	}
	stop()
	if err != nil {
		log.Error("measure failed", "error", err)
		os.Exit(1)
	}
}

// cpuModel is the processor's name, for the report.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return "unknown CPU"
}

// writeOut writes the report to path (or standard output for "-"),
// replacing the file only once it is complete.
func writeOut(path string, write func(io.Writer) error) error {
	if path == "-" {
		return write(os.Stdout)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".measurements-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func newMeta(o options, p clusterPlan, drains []drainCount, elapsed time.Duration) meta {
	return meta{
		Date: time.Now(), GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		CPUs: runtime.NumCPU(), CPUModel: cpuModel(), Elapsed: elapsed,
		Cluster: p.summary(o.DaemonSet), PendingPods: o.Pending, Schedules: o.Schedules, Due: o.Schedules,
		Drains: drains, DrainMaxWait: o.DrainWait, Memories: o.Memories, Net: o.Net,
	}
}
