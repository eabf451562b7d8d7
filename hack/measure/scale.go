package main

// The read path at scale: evaluate's read and plan against a loopback API
// server double (internal/fake/fakekubeapi) serving a generated cluster of N nodes
// and 30 pods per node, shaped like real API-server output. The double runs
// in this process; the read runs in a child process (this binary again), so
// its peak RSS and CPU are its own.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/internal/fake/fakekubeapi"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/lambdarun"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

const (
	scaleChildArg = "-scale-child" // argv[1] of the child
	podsPerNode   = 30
	scaleBegin    = "<!-- scale: written by make measure (go run ./hack/measure -scale ...) -->"
	scaleEnd      = "<!-- scale end -->"
)

// scaleOptions are the -scale run's settings.
type scaleOptions struct {
	Scales   []int // nodes
	Ticks    int   // warm reads
	Churn    int   // pod changes between two warm reads
	MemoryMB int   // the function's memory, for GOMEMLIMIT as on Lambda
	Out      string
}

// readSample is one read and plan, measured in the child.
type readSample struct {
	Phase   string        `json:"phase"`
	Wall    time.Duration `json:"wall"`
	CPU     time.Duration `json:"cpu"`     // the read's
	PlanCPU time.Duration `json:"planCPU"` // planner.Decide's
	HWM     int64         `json:"hwm"`
	Nodes   int           `json:"nodes"`
	Pods    int           `json:"pods"`
	PDBs    int           `json:"pdbs"`
	Listed  []string      `json:"listed"`
	Events  int           `json:"events"`
	Pending int           `json:"pending"`
	Error   string        `json:"error,omitempty"`
}

func parseScales(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 20000 {
			return nil, fmt.Errorf("%q is not a node count from 1 to 20000", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// runScale measures each scale and writes the scale section of o.Out.
func runScale(ctx context.Context, o scaleOptions, log *slog.Logger) error {
	var sections []string
	for _, n := range o.Scales {
		log.Info("measuring the read path", "nodes", n, "pods", n*podsPerNode)
		samples, err := measureScale(ctx, n, o)
		if err != nil {
			return fmt.Errorf("scale %d: %w", n, err)
		}
		sections = append(sections, scaleRows(samples)...)
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

func measureScale(ctx context.Context, nodes int, o scaleOptions) ([]readSample, error) {
	srv, err := fakekubeapi.Start(fakekubeapi.Shape{Nodes: nodes, Pods: nodes * podsPerNode, Seed: 1})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, scaleChildArg, srv.URL)
	cmd.Env = append(os.Environ(), "AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+strconv.Itoa(o.MemoryMB))
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

// scaleChild reads and plans each time a line arrives on stdin and reports
// one JSON line per read on stdout.
func scaleChild(url string) error {
	lambdarun.TuneGC(os.Getenv) // as the function's start-up does
	client, err := kubernetes.NewForConfig(k8s.ReadConfig(&rest.Config{Host: url, QPS: -1}))
	if err != nil {
		return err
	}
	r := k8s.NewReader(client, slog.New(slog.DiscardHandler))
	pid := os.Getpid()
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		s := readSample{Phase: in.Text()}
		if s.Phase != "cold" {
			if err := resetHWM(pid); err != nil {
				return err
			}
		}
		before, err := readCPU(pid)
		if err != nil {
			return err
		}
		start := time.Now()
		objs, st, err := r.Read(context.Background())
		s.Wall = time.Since(start)
		read, cerr := readCPU(pid)
		if cerr != nil {
			return cerr
		}
		s.CPU = read.since(before)
		if err != nil {
			s.Error = err.Error()
		} else {
			plan := planner.Decide(snapshotOf(objs), planner.DefaultSettings(), time.Now())
			s.Pending = len(plan.Unschedulable)
		}
		planned, err := readCPU(pid)
		if err != nil {
			return err
		}
		s.PlanCPU = planned.since(read)
		if s.HWM, err = readHWM(pid); err != nil {
			return err
		}
		s.Nodes, s.Pods, s.PDBs = len(objs.Nodes), len(objs.Pods), len(objs.PodDisruptionBudgets)
		s.Listed, s.Events = st.Listed, st.Events
		if err := enc.Encode(s); err != nil {
			return err
		}
	}
	return in.Err()
}

// snapshotOf is evaluate's snapshot of objs with one node group holding
// every node, as the double's nodes are.
func snapshotOf(objs k8s.Objects) snapshot.Snapshot {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
	g := snapshot.NodeGroup{Name: "workers", Provider: "aws", MaxSize: 2 * len(objs.Nodes),
		Template: snapshot.Template{Allocatable: alloc}}
	for i := range objs.Nodes {
		g.Instances = append(g.Instances, objs.Nodes[i].Spec.ProviderID)
	}
	slices.Sort(g.Instances)
	g.TargetSize = len(g.Instances)
	return snapshot.Snapshot{CapturedAt: time.Now(), NodeGroups: []snapshot.NodeGroup{g},
		Nodes: objs.Nodes, Pods: objs.Pods, PodDisruptionBudgets: objs.PodDisruptionBudgets}
}

func scaleRows(samples []readSample) []string {
	var rows []string
	cold := samples[0]
	rows = append(rows, fmt.Sprintf("| %d | %d | %d | cold (LIST) | %s | %s | %s | %s | listed %s |",
		cold.Nodes, cold.Pods, cold.PDBs, ms(cold.Wall), ms(cold.CPU), ms(cold.PlanCPU), mib(cold.HWM), strings.Join(cold.Listed, ", ")))
	warm := samples[1:]
	if len(warm) == 0 {
		return rows
	}
	walls, cpus, plans := make([]time.Duration, len(warm)), make([]time.Duration, len(warm)), make([]time.Duration, len(warm))
	var hwm int64
	var listed []string
	events := 0
	for i, s := range warm {
		walls[i], cpus[i], plans[i] = s.Wall, s.CPU, s.PlanCPU
		hwm = max(hwm, s.HWM)
		listed = append(listed, s.Listed...)
		events += s.Events
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	slices.Sort(plans)
	what := fmt.Sprintf("%d events per read", events/len(warm))
	if len(listed) > 0 {
		what += "; listed: " + strings.Join(listed, ", ")
	}
	rows = append(rows, fmt.Sprintf("| %d | %d | %d | warm ×%d (watch catch-up) | %s / %s | %s / %s | %s | %s | %s |",
		warm[0].Nodes, warm[0].Pods, warm[0].PDBs, len(warm), ms(walls[len(walls)/2]), ms(walls[len(walls)-1]),
		ms(cpus[len(cpus)/2]), ms(cpus[len(cpus)-1]), ms(plans[len(plans)/2]), mib(hwm), what))
	return rows
}

func scaleMarkdown(o scaleOptions, rows []string) string {
	var b strings.Builder
	fmt.Fprintln(&b, scaleBegin)
	fmt.Fprintln(&b, "## Scale: evaluate's read path")
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "Measured on %s with %s, %d CPUs (%s). `go run ./hack/measure -scale %s` (part of `make measure`).\n",
		time.Now().UTC().Format("2006-01-02"), runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), cpuModel(), scaleList(o.Scales))
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "A loopback API server double (`internal/fake/fakekubeapi`) serves a generated cluster: N nodes and %d pods per node "+
		"(Deployments of 20, every third with a PodDisruptionBudget), shaped like real API-server output (managedFields, env, "+
		"container statuses, labels and annotations; about 4 KB of JSON per pod). A child process runs what evaluate runs "+
		"for a snapshot — `k8s.Reader` over protobuf, then `planner.Decide` — with the garbage collector tuned as the Lambda start-up tunes it "+
		"(`GOMEMLIMIT` from a %d MB function, `GOGC=50`). The cold read lists everything in pages of 500, trimming each page as "+
		"it arrives; each warm read follows %d pod changes (a third deleted, created, updated) and one node and PDB "+
		"update, and catches up by watch. **read wall** and **read CPU** are the read's (the child's user + system time); "+
		"**plan CPU** is `planner.Decide`'s on the result; **peak RSS** the child's "+
		"VmHWM (over the process's life for cold; since the previous read for warm). The double answers a watch's bookmark at "+
		"once; a real API server sends it about a second in, which adds wall time, not CPU. The cold wall time "+
		"includes the double building and encoding every object on the same cores, so it says little about a real "+
		"API server.\n",
		podsPerNode, o.MemoryMB, o.Churn)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| nodes | pods | PDBs | read | read wall (median / max) | read CPU (median / max) | plan CPU (median) | peak RSS | notes |")
	fmt.Fprintln(&b, "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |")
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
