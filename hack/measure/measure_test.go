package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseReport(t *testing.T) {
	for name, tc := range map[string]struct {
		line    string
		want    report
		ok, bad bool
	}{
		"cold": {
			line: "REPORT RequestId: 7f3a\tInit Duration: 0.12 ms\tDuration: 1316.58 ms\tBilled Duration: 1317 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t",
			want: report{RequestID: "7f3a", Init: 120 * time.Microsecond, Duration: 1316580 * time.Microsecond}, ok: true,
		},
		"warm": {
			line: "REPORT RequestId: abc\tDuration: 8.30 ms\tBilled Duration: 9 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t",
			want: report{RequestID: "abc", Duration: 8300 * time.Microsecond}, ok: true,
		},
		"short form": {
			line: "REPORT RequestId: x\tDuration: 125.46 ms\n",
			want: report{RequestID: "x", Duration: 125460 * time.Microsecond}, ok: true,
		},
		"other line":  {line: `{"level":"INFO","msg":"drain step"}`},
		"end line":    {line: "END RequestId: abc"},
		"no duration": {line: "REPORT RequestId: abc\tBilled Duration: 9 ms", ok: true, bad: true},
		"no id":       {line: "REPORT RequestId: \tDuration: 1 ms", ok: true, bad: true},
		"bad unit":    {line: "REPORT RequestId: a\tDuration: 1 s", ok: true, bad: true},
		"bad number":  {line: "REPORT RequestId: a\tDuration: x ms", ok: true, bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok, err := parseReport(tc.line)
			if ok != tc.ok || (err != nil) != tc.bad {
				t.Fatalf("ok %t err %v, want ok %t error %t", ok, err, tc.ok, tc.bad)
			}
			if !tc.bad && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestLambdaDuration(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		wall, cpu time.Duration
		mem       int
		want      time.Duration
	}{
		{1000 * ms, 200 * ms, 1769, 1000 * ms},         // a full vCPU: as measured
		{1000 * ms, 200 * ms, 3538, 1000 * ms},         // more than one: never faster
		{1000 * ms, 200 * ms, 884, 800*ms + 400226244}, // half a vCPU: CPU time × 1769/884 (2.00113)
		{1000 * ms, 0, 128, 1000 * ms},                 // waiting only
		{100 * ms, 150 * ms, 1769, 150 * ms},           // ran on two cores: off-CPU time is not negative
		{0, 10 * ms, 128, 138203125},                   // 10 ms × 13.8203125
		{time.Second, time.Second, 0, 0},               // no memory, no model
	} {
		if got := lambdaDuration(tc.wall, tc.cpu, tc.mem); got != tc.want {
			t.Errorf("lambdaDuration(%v, %v, %d) = %v, want %v", tc.wall, tc.cpu, tc.mem, got, tc.want)
		}
	}
}

func TestAllowance(t *testing.T) {
	n := network{KubeRTT: 5 * time.Millisecond, DDBRTT: 8 * time.Millisecond, Bandwidth: 25e6, InitCalls: 100 * time.Millisecond}
	s := sample{Action: "tick", KubeRequests: 15, KubeBytes: 2_500_000, DDBReads: 2, DDBWrites: 2}
	// 15 × 5 ms + 4 × 8 ms + 2.5 MB / 25 MB/s
	if got, want := n.allowance(s), 75*time.Millisecond+32*time.Millisecond+100*time.Millisecond; got != want {
		t.Errorf("allowance %v, want %v", got, want)
	}
	if got := n.allowance(sample{Action: actionInit}); got != 100*time.Millisecond {
		t.Errorf("init allowance %v, want the init calls' 100ms", got)
	}
}

func TestSummarize(t *testing.T) {
	if got := summarize([]int{5, 1, 3}); got != (stats[int]{Median: 3, Max: 5}) {
		t.Errorf("odd: %+v", got)
	}
	if got := summarize([]time.Duration{4, 1, 3, 2}); got != (stats[time.Duration]{Median: 2, Max: 4}) {
		t.Errorf("even (mean of the middle two, rounded down): %+v", got)
	}
	if got := summarize[int64](nil); got != (stats[int64]{}) {
		t.Errorf("empty: %+v", got)
	}
}

func TestSummarizeRows(t *testing.T) {
	ms := time.Millisecond
	samples := []sample{
		{Function: "evaluate", Action: actionInit, Wall: 100 * ms, CPU: 100 * ms, PeakRSS: 30 << 20},
		{Function: "evaluate", Action: "tick", Cold: true, Wall: 900 * ms, CPU: 400 * ms, PeakRSS: 90 << 20},
		{Function: "evaluate", Action: "tick", Wall: 600 * ms, CPU: 200 * ms, PeakRSS: 120 << 20, KubeRequests: 10},
		{Function: "evaluate", Action: "tick", Wall: 500 * ms, CPU: 300 * ms, PeakRSS: 110 << 20, KubeRequests: 20},
	}
	rows := summarizeRows(samples, []int{1769}, network{KubeRTT: ms})
	if len(rows) != 3 {
		t.Fatalf("%d rows, want init, cold tick, warm tick", len(rows))
	}
	warm := rows[2]
	if warm.N != 2 || warm.Cold || warm.PeakRSS != 120<<20 || warm.Wall != (stats[time.Duration]{550 * ms, 600 * ms}) ||
		warm.KubeRequests != (stats[int]{15, 20}) {
		t.Errorf("warm tick row %+v", warm)
	}
	// Modelled per run, then summarised: 600+10 and 500+20 ms.
	if got := warm.Modelled[1769]; got != (stats[time.Duration]{565 * ms, 610 * ms}) {
		t.Errorf("modelled %+v", got)
	}
}

func TestSummarizeRowsOrder(t *testing.T) {
	var samples []sample
	for _, a := range []struct {
		action string
		cold   bool
	}{{actionInit, false}, {"step Prepare", true}, {"step Cordon", false}, {"step Prepare", false}, {"step Cordon", false}} {
		samples = append(samples, sample{Function: "drain", Action: a.action, Cold: a.cold})
	}
	samples = append(samples, sample{Function: "schedule", Action: actionInit})
	var got []string
	for _, r := range summarizeRows(samples, []int{128}, network{}) {
		got = append(got, r.Function+" "+phaseName(r))
	}
	want := []string{"drain init", "drain step Prepare (first, after init)", "drain step Prepare", "drain step Cordon", "schedule init"}
	if !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
}

func TestLogAccount(t *testing.T) {
	a := newLogAccount()
	for _, line := range []string{
		"before any invocation",
		"START RequestId: a Version: $LATEST",
		`{"msg":"plan"}`,
		"END RequestId: a",
		"REPORT RequestId: a\tDuration: 1.00 ms\t",
		"between",
		"START RequestId: b Version: $LATEST",
		"REPORT RequestId: b\tDuration: 2.00 ms\t",
	} {
		a.add(line)
	}
	wantA := int64(len("START RequestId: a Version: $LATEST") + len(`{"msg":"plan"}`) + len("END RequestId: a") +
		len("REPORT RequestId: a\tDuration: 1.00 ms\t") + 4)
	if a.bytes["a"] != wantA || len(a.bytes) != 2 {
		t.Errorf("bytes %v, want a=%d and b", a.bytes, wantA)
	}
}

func TestParseMemories(t *testing.T) {
	got, err := parseMemories(" 512,128,512 ,1769")
	if err != nil || !slices.Equal(got, []int{128, 512, 1769}) {
		t.Errorf("got %v %v", got, err)
	}
	for _, bad := range []string{"", "64", "10241", "1e3", ","} {
		if _, err := parseMemories(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseProc(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 50.
	stat := []byte("4242 (boot (strap) x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 50 0 0 20 0 9 0 100 0 0")
	if got, err := parseStatCPU(stat); err != nil || got != 3*time.Second {
		t.Errorf("parseStatCPU = %v %v, want 3s", got, err)
	}
	if comm, ppid, ok := statCommPPID(stat); !ok || comm != "boot (strap) x" || ppid != 1 {
		t.Errorf("statCommPPID = %q %d %t", comm, ppid, ok)
	}
	if _, err := parseStatCPU([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("short stat accepted")
	}
	status := []byte("Name:\tbootstrap\nVmPeak:\t 1300000 kB\nVmHWM:\t  134144 kB\nVmRSS:\t   99000 kB\n")
	if got, err := parseStatusKB(status, "VmHWM"); err != nil || got != 134144<<10 {
		t.Errorf("VmHWM = %d %v", got, err)
	}
	if _, err := parseStatusKB(status, "VmSwap"); err == nil {
		t.Error("missing key accepted")
	}
	if got, err := parseSchedstat([]byte("5940526 7783748 4\n")); err != nil || got != 5940526 {
		t.Errorf("schedstat = %v %v", got, err)
	}
	// Per-thread time wins unless it lost more than two ticks to ended
	// threads.
	a, b := cpuSample{sched: 0, ticks: 0}, cpuSample{sched: 12 * time.Millisecond, ticks: 10 * time.Millisecond}
	if got := b.since(a); got != 12*time.Millisecond {
		t.Errorf("since = %v, want the exact 12ms", got)
	}
	c := cpuSample{sched: 5 * time.Millisecond, ticks: 40 * time.Millisecond}
	if got := c.since(a); got != 40*time.Millisecond {
		t.Errorf("since = %v, want the ticks' 40ms", got)
	}
}

func TestDDBKind(t *testing.T) {
	for target, want := range map[string]string{
		"DynamoDB_20120810.GetItem": "read", "DynamoDB_20120810.Query": "read",
		"DynamoDB_20120810.PutItem": "write", "DynamoDB_20120810.UpdateItem": "write", "DynamoDB_20120810.DeleteItem": "write",
		"DynamoDB_20120810.DescribeTable": "other", "": "other",
	} {
		if got := ddbKind(target); got != want {
			t.Errorf("ddbKind(%q) = %s, want %s", target, got, want)
		}
	}
}

func TestPlanCluster(t *testing.T) {
	spec := clusterSpec{Nodes: 50, Pods: 1000, PodsPerDeployment: 20, Namespaces: 4, Utilization: 0.55,
		SingleFraction: 0.1, PDBFraction: 0.3, Seed: 7}
	p, err := planCluster(spec)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := planCluster(spec)
	if !slices.EqualFunc(p.Deployments, again.Deployments, func(a, b plannedDeployment) bool {
		return a.Name == b.Name && a.Replicas == b.Replicas && a.CPUMilli == b.CPUMilli && slices.Equal(a.Nodes, b.Nodes)
	}) {
		t.Error("not deterministic for a seed")
	}
	pods, single, onNode := 0, 0, make([]int, spec.Nodes)
	for _, d := range p.Deployments {
		if d.Replicas < 1 || len(d.Nodes) != d.Replicas || !strings.HasPrefix(d.Namespace, "team-") {
			t.Errorf("deployment %+v", d)
		}
		if d.Replicas == 1 {
			single++
		}
		pods += d.Replicas
		for _, n := range d.Nodes {
			onNode[n]++
		}
	}
	if pods != spec.Pods || len(p.Deployments) != 50 || single != 5 {
		t.Errorf("%d pods in %d deployments, %d single-replica; want 1000, 50, 5", pods, len(p.Deployments), single)
	}
	for n := range spec.Nodes {
		if p.NodeCPU[n] > nodeCPUMilli || p.NodeMemory[n] > nodeMemoryMi || onNode[n] != p.NodePods[n] || p.NodePods[n] >= nodePodCapacity {
			t.Errorf("node %d over capacity or miscounted: cpu %d mem %d pods %d/%d", n, p.NodeCPU[n], p.NodeMemory[n], p.NodePods[n], onNode[n])
		}
	}
	s := p.summary(true)
	if s.CPUUtilization < 0.5 || s.CPUUtilization > 0.6 || s.UnderThreshold == 0 || s.UnderThreshold == spec.Nodes {
		t.Errorf("utilisation %.2f with %d nodes under 50%%: want about 0.55, unevenly spread", s.CPUUtilization, s.UnderThreshold)
	}
	if s.Pods() != 1050 {
		t.Errorf("%d pods with the DaemonSet, want 1050", s.Pods())
	}
	for _, bad := range []clusterSpec{
		{Nodes: 2, Pods: 100, PodsPerDeployment: 20, Namespaces: 1, Utilization: 0.5},
		{Nodes: 10, Pods: 100, PodsPerDeployment: 20, Namespaces: 1, Utilization: 0.95},
		{Nodes: 3, Pods: 1000, PodsPerDeployment: 20, Namespaces: 1, Utilization: 0.5},
	} {
		if _, err := planCluster(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestDrainCandidates(t *testing.T) {
	p := clusterPlan{
		Spec:     clusterSpec{Nodes: 4},
		NodePods: []int{10, 30, 20, 5},
		Deployments: []plannedDeployment{
			{Replicas: 1, Nodes: []int{3}}, {Replicas: 1, Nodes: []int{2}}, {Replicas: 2, Nodes: []int{1, 0}},
		},
	}
	if got := drainCandidates(p, 3); !slices.Equal(got, []string{"worker-002", "worker-003", "worker-001"}) {
		t.Errorf("got %v: want nodes with a single-replica pod first, busiest first", got)
	}
}

// TestKeptSection: a run of measure keeps the snapshot file section that
// make bench's figures fill in, and only that.
func TestKeptSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "measurements.md")
	if got := keptSection(path); got != "" {
		t.Errorf("no file: kept %q", got)
	}
	doc := "# Measured function sizes\n\n## Measured\n\n| a |\n\n## Snapshot file\n\nfigures\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := keptSection(path), "\n## Snapshot file\n\nfigures\n"; got != want {
		t.Errorf("kept %q, want %q", got, want)
	}
}
