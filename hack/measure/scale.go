package main

// The read path at scale: evaluate's cycle (read, node groups, plan,
// status, state) against a loopback API server double
// (internal/fake/fakekubeapi) serving a generated cluster of N nodes and 30
// pods per node, shaped like real API-server output. The double runs in this
// process; the cycle runs in a child process (this binary again), so its
// peak RSS and CPU are its own.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/internal/fake/fakekubeapi"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/lambdarun"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

const (
	scaleChildArg = "-scale-child" // argv[1] of the child
	podsPerNode   = 30
	scaleBegin    = "<!-- scale: written by make measure (go run ./hack/measure -scale ...) -->"
	scaleEnd      = "<!-- scale end -->"
	// profileEnv tells the child where to write its cold cycle's profiles
	// (a path prefix), when set.
	profileEnv = "MEASURE_SCALE_PROFILE"
)

// scaleOptions are the -scale run's settings.
type scaleOptions struct {
	Scales []int // nodes
	Ticks  int   // warm reads
	Churn  int   // pod changes between two warm reads
	// MemoryMB is the function's memory, for GOMEMLIMIT as on Lambda: one
	// size for every scale, or one per scale.
	MemoryMB []int
	Out      string
	// Profile, when set, is the directory the child writes the cold
	// cycle's CPU and heap profiles to (for go tool pprof).
	Profile string

	load []string // the machine's load averages as the run began, if known
}

// loadAverages are the 1, 5 and 15 minute load averages (nil if unknown):
// other work on the machine slows the wall times, and the CPU times less.
func loadAverages() []string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	return f[:min(3, len(f))]
}

// memoryFor is the function memory the scale at index i runs with.
func (o scaleOptions) memoryFor(i int) int {
	if i < len(o.MemoryMB) {
		return o.MemoryMB[i]
	}
	return o.MemoryMB[len(o.MemoryMB)-1]
}

// readSample is one evaluate cycle, measured in the child.
type readSample struct {
	Phase    string        `json:"phase"`
	Wall     time.Duration `json:"wall"`     // the read's
	CPU      time.Duration `json:"cpu"`      // the read's
	TickWall time.Duration `json:"tickWall"` // the whole cycle's
	TickCPU  time.Duration `json:"tickCPU"`  // the whole cycle's
	HWM      int64         `json:"hwm"`
	Nodes    int           `json:"nodes"`
	Pods     int           `json:"pods"`
	PDBs     int           `json:"pdbs"`
	Listed   []string      `json:"listed"`
	Events   int           `json:"events"`
	Pending  int           `json:"pending"`
	Error    string        `json:"error,omitempty"`
}

func parseScales(s string) ([]int, error) { return parseInts(s, 1, 20000, "a node count") }

// parseInts parses a comma-separated list of integers from lo to hi.
func parseInts(s string, lo, hi int, what string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%q is not %s from %d to %d", f, what, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

// runScale measures each scale and writes the scale section of o.Out.
func runScale(ctx context.Context, o scaleOptions, log *slog.Logger) error {
	var sections []string
	o.load = loadAverages()
	for i, n := range o.Scales {
		log.Info("measuring the read path", "nodes", n, "pods", n*podsPerNode, "memoryMB", o.memoryFor(i))
		samples, err := measureScale(ctx, n, o.memoryFor(i), o)
		if err != nil {
			return fmt.Errorf("scale %d: %w", n, err)
		}
		sections = append(sections, scaleRows(samples, o.memoryFor(i))...)
	}
	return writeSection(o.Out, scaleBegin, scaleEnd, scaleMarkdown(o, sections))
}

// withScaleSection replaces doc's scale section with section, or adds it.
func withScaleSection(doc, section string) string {
	return withSection(doc, scaleBegin, scaleEnd, section)
}

// withSection replaces doc's section between begin and end with section.
// A section doc does not have yet goes before the first of the sections
// that follow it (the bed scale section, the scale section, the snapshot
// file's, in that order), or at the end.
func withSection(doc, begin, end, section string) string {
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i >= 0 && j > i {
		return doc[:i] + section + strings.TrimPrefix(doc[j+len(end):], "\n")
	}
	order := []string{bedScaleBegin, scaleBegin, strings.TrimPrefix(snapshotFileSection, "\n")}
	for _, next := range order[slices.Index(order, begin)+1:] {
		if k := strings.Index(doc, next); k >= 0 {
			return doc[:k] + section + "\n" + doc[k:]
		}
	}
	if doc != "" && !strings.HasSuffix(doc, "\n\n") {
		doc = strings.TrimRight(doc, "\n") + "\n\n"
	}
	return doc + section
}

// scaleSection returns doc's scale section, to carry over a full run.
func scaleSection(doc string) string { return markedSection(doc, scaleBegin, scaleEnd) }

// markedSection returns doc's section between begin and end, or "".
func markedSection(doc, begin, end string) string {
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return ""
	}
	return doc[i:j+len(end)] + "\n"
}

func measureScale(ctx context.Context, nodes, memoryMB int, o scaleOptions) ([]readSample, error) {
	srv, err := fakekubeapi.Start(fakekubeapi.Shape{Nodes: nodes, Pods: nodes * podsPerNode, Seed: 1,
		NodeLabels: map[string]string{kwok.GroupLabel: scaleGroup}, KeepEncoded: true})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, scaleChildArg, srv.URL, strconv.Itoa(nodes))
	cmd.Env = append(os.Environ(), "AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+strconv.Itoa(memoryMB))
	if o.Profile != "" {
		cmd.Env = append(cmd.Env, profileEnv+"="+filepath.Join(o.Profile, fmt.Sprintf("cold-%d", nodes)))
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		in.Close()
		cmd.Wait()
	}()
	out := bufio.NewScanner(outPipe)
	var samples []readSample
	for i := 0; i <= o.Ticks; i++ {
		phase := "cold"
		if i > 0 {
			phase = "warm"
			srv.Churn(o.Churn)
		}
		if _, err := fmt.Fprintln(in, phase); err != nil {
			return nil, fmt.Errorf("child: %w", err)
		}
		if !out.Scan() {
			return nil, fmt.Errorf("child ended: %v", out.Err())
		}
		var s readSample
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("child said %q: %w", out.Text(), err)
		}
		if s.Error != "" {
			return nil, fmt.Errorf("child: %s", s.Error)
		}
		samples = append(samples, s)
	}
	return samples, nil
}

// scaleGroup is the kwok node group that holds every node of the double.
const scaleGroup = "workers"

// timedReader is evaluate's cluster reader, timing each read.
type timedReader struct {
	r    *k8s.Reader
	pid  int
	last readSample // the read's fields of the last read
}

func (t *timedReader) Read(ctx context.Context) (k8s.Objects, k8s.ReadStats, error) {
	before, err := readCPU(t.pid)
	if err != nil {
		return k8s.Objects{}, k8s.ReadStats{}, err
	}
	start := time.Now()
	objs, st, err := t.r.Read(ctx)
	t.last.Wall = time.Since(start)
	after, cerr := readCPU(t.pid)
	if cerr != nil {
		return k8s.Objects{}, k8s.ReadStats{}, cerr
	}
	t.last.CPU = after.since(before)
	t.last.Nodes, t.last.Pods, t.last.PDBs = len(objs.Nodes), len(objs.Pods), len(objs.PodDisruptionBudgets)
	t.last.Listed, t.last.Events = st.Listed, st.Events
	return objs, st, err
}

// scaleEvaluator is evaluate's cycle as the function wires it, less the
// cloud: one kwok group holding every node of the double (its target and
// instances read from the cycle's read of the Nodes), state and status in
// memory, JSON logs to nowhere (formatted all the same), no drainer, no
// metrics.
func scaleEvaluator(client kubernetes.Interface, r *timedReader, nodes int) *evaluate.Evaluator {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
	g := kwok.New(client, scaleGroup, 0, 2*nodes, snapshot.Template{Allocatable: alloc})
	return &evaluate.Evaluator{
		Client: client, Reader: r,
		Groups:   func(context.Context) ([]providers.NodeGroup, error) { return []providers.NodeGroup{g}, nil },
		Store:    state.NewMemory("scale"),
		Settings: planner.DefaultSettings(),
		Log:      slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Holder:   "measure", LeaseTTL: time.Minute,
	}
}

// scaleChild runs an evaluate cycle each time a line arrives on stdin and
// reports one JSON line per cycle on stdout.
func scaleChild(url, nodeCount string) error {
	lambdarun.TuneGC(os.Getenv) // as the function's start-up does
	nodes, err := strconv.Atoi(nodeCount)
	if err != nil {
		return fmt.Errorf("node count: %w", err)
	}
	client, err := kubernetes.NewForConfig(k8s.ReadConfig(&rest.Config{Host: url, QPS: -1}))
	if err != nil {
		return err
	}
	pid := os.Getpid()
	tr := &timedReader{r: k8s.NewReader(client, slog.New(slog.DiscardHandler)), pid: pid}
	ev := scaleEvaluator(client, tr, nodes)
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		if in.Text() != "cold" {
			if err := resetHWM(pid); err != nil {
				return err
			}
		}
		before, err := readCPU(pid)
		if err != nil {
			return err
		}
		stopProfile, err := startProfile(in.Text())
		if err != nil {
			return err
		}
		start := time.Now()
		tr.last = readSample{}
		res, err := ev.Run(context.Background())
		wall := time.Since(start)
		after, cerr := readCPU(pid)
		if cerr != nil {
			return cerr
		}
		// After the CPU is read: writing the heap profile collects.
		if perr := stopProfile(); perr != nil {
			return perr
		}
		s := tr.last
		s.Phase, s.TickWall, s.TickCPU = in.Text(), wall, after.since(before)
		switch {
		case err != nil:
			s.Error = err.Error()
		case res.Plan == nil:
			s.Error = "no plan: " + res.Skipped
		default:
			s.Pending = len(res.Plan.Unschedulable)
		}
		if s.HWM, err = readHWM(pid); err != nil {
			return err
		}
		if err := enc.Encode(s); err != nil {
			return err
		}
	}
	return in.Err()
}

// startProfile starts a CPU profile of the cold cycle when profileEnv asks
// for one; the function it returns stops it and writes the heap profile
// (what the cycle allocated, and what is kept after it).
func startProfile(phase string) (func() error, error) {
	prefix := os.Getenv(profileEnv)
	if prefix == "" || phase != "cold" {
		return func() error { return nil }, nil
	}
	cpu, err := os.Create(prefix + ".cpu.pprof")
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, fmt.Errorf("profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := cpu.Close(); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
		heap, err := os.Create(prefix + ".heap.pprof")
		if err != nil {
			return fmt.Errorf("profile: %w", err)
		}
		runtime.GC() // the heap profile's in-use figures are as of the last collection
		if err := pprof.Lookup("allocs").WriteTo(heap, 0); err != nil {
			heap.Close()
			return fmt.Errorf("profile: %w", err)
		}
		return heap.Close()
	}, nil
}

// medianMax is the median and the maximum of xs, formatted.
func medianMax(xs []time.Duration) string {
	xs = slices.Sorted(slices.Values(xs))
	return ms(xs[len(xs)/2]) + " / " + ms(xs[len(xs)-1])
}

func scaleRows(samples []readSample, memoryMB int) []string {
	var rows []string
	cold := samples[0]
	rows = append(rows, fmt.Sprintf("| %d | %d | %d | %d MB | cold (LIST) | %s | %s | %s | %s | listed %s; %d pending |",
		cold.Nodes, cold.Pods, cold.PDBs, memoryMB, ms(cold.TickWall), ms(cold.TickCPU), ms(cold.CPU), mib(cold.HWM),
		strings.Join(cold.Listed, ", "), cold.Pending))
	warm := samples[1:]
	if len(warm) == 0 {
		return rows
	}
	walls, cpus, reads := make([]time.Duration, len(warm)), make([]time.Duration, len(warm)), make([]time.Duration, len(warm))
	var hwm int64
	var listed []string
	events := 0
	for i, s := range warm {
		walls[i], cpus[i], reads[i] = s.TickWall, s.TickCPU, s.CPU
		hwm = max(hwm, s.HWM)
		listed = append(listed, s.Listed...)
		events += s.Events
	}
	what := fmt.Sprintf("%d events per read", events/len(warm))
	if len(listed) > 0 {
		what += "; listed: " + strings.Join(listed, ", ")
	}
	rows = append(rows, fmt.Sprintf("| %d | %d | %d | %d MB | warm ×%d (watch catch-up) | %s | %s | %s | %s | %s |",
		warm[0].Nodes, warm[0].Pods, warm[0].PDBs, memoryMB, len(warm), medianMax(walls), medianMax(cpus), medianMax(reads), mib(hwm), what))
	return rows
}

func scaleMarkdown(o scaleOptions, rows []string) string {
	var b strings.Builder
	fmt.Fprintln(&b, scaleBegin)
	fmt.Fprintln(&b, "## Scale: evaluate's cycle against an API server double")
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "Measured on %s with %s, %d CPUs (%s). `go run ./hack/measure -scale %s -scale-memory %s` (part of `make measure`).\n",
		time.Now().UTC().Format("2006-01-02"), runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), cpuModel(),
		scaleList(o.Scales), scaleList(o.MemoryMB))
	if len(o.load) == 3 {
		fmt.Fprintf(&b, "The machine's load average was %s, %s and %s (1, 5 and 15 minutes) as the run began: other work on it "+
			"stretches the wall times, the CPU times much less.\n", o.load[0], o.load[1], o.load[2])
	}
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "A loopback API server double (`internal/fake/fakekubeapi`) serves a generated cluster: N nodes and %d pods per node "+
		"(Deployments of 20, every third with a PodDisruptionBudget), shaped like real API-server output (managedFields, env, "+
		"container statuses, labels and annotations; about 4 KB of JSON per pod). A child process runs evaluate's cycle "+
		"(`evaluate.Evaluator.Run`: the lease, `k8s.Reader` over protobuf, the node groups, `planner.Decide`, the status and the state "+
		"saved) with the garbage collector tuned as the Lambda start-up tunes it (`GOMEMLIMIT` from the function memory "+
		"in the table, `GOGC=30`). One kwok node group holds every node; its target and instances come from the cycle's read "+
		"of the Nodes, as for any kwok group. State, status and lease are in memory (no DynamoDB round trips), logs are "+
		"formatted as JSON and dropped, and nothing is acted on (no drainer; no pod is pending, so no scale-up). The cold cycle "+
		"lists everything in pages of 500, trimming each page as it arrives (the pods pruned on the wire first: decoded without "+
		"the fields trimming drops); each warm cycle follows %d pod changes (a third "+
		"deleted, created, updated) and one node and PDB update, and catches up by watch. **cycle wall** and **cycle CPU** "+
		"are the whole cycle's (the child's user + system time); **read CPU** is the part of it in `k8s.Reader.Read`; "+
		"**peak RSS** the child's VmHWM (over the process's life for cold; since the previous cycle for warm). The double "+
		"answers a watch's bookmark at once; a real API server sends it about a second in, which adds wall time, not CPU. "+
		"The double encodes every object once before the cycles (as an API server's watch cache holds its objects ready) "+
		"and serves lists from those bytes, so the cold wall time is mostly the cycle's own; still, the double runs on the "+
		"same cores.\n",
		podsPerNode, o.Churn)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| nodes | pods | PDBs | memory | cycle | cycle wall (median / max) | cycle CPU (median / max) | read CPU (median / max) | peak RSS | notes |")
	fmt.Fprintln(&b, "| ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |")
	for _, r := range rows {
		fmt.Fprintln(&b, r)
	}
	fmt.Fprintln(&b, scaleEnd)
	return b.String()
}

func scaleList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
