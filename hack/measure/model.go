package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report is what the Lambda Runtime Interface Emulator prints after each
// invocation:
//
//	REPORT RequestId: ID\tInit Duration: 12.34 ms\tDuration: 56.78 ms\tBilled Duration: 57 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t
//
// Init Duration is there on the first invocation only; it times the
// emulator's own set-up, not the bootstrap's start, so the start-up is timed
// by the runtime tap instead. Memory Size and Max Memory Used are whatever
// the function was told, not measured, so they are not kept.
type report struct {
	RequestID string
	Init      time.Duration // zero when absent
	Duration  time.Duration
}

// parseReport parses one REPORT line; ok is false for any other line.
func parseReport(line string) (r report, ok bool, err error) {
	rest, found := strings.CutPrefix(strings.TrimSpace(line), "REPORT RequestId:")
	if !found {
		return report{}, false, nil
	}
	fields := strings.Split(rest, "\t")
	r.RequestID = strings.TrimSpace(fields[0])
	if r.RequestID == "" {
		return report{}, true, fmt.Errorf("REPORT line without a request id: %q", line)
	}
	var haveDuration bool
	for _, f := range fields[1:] {
		name, value, ok := strings.Cut(f, ":")
		if !ok {
			continue
		}
		var dst *time.Duration
		switch strings.TrimSpace(name) {
		case "Init Duration":
			dst = &r.Init
		case "Duration":
			dst, haveDuration = &r.Duration, true
		default:
			continue
		}
		ms, unit, _ := strings.Cut(strings.TrimSpace(value), " ")
		if unit != "ms" {
			return report{}, true, fmt.Errorf("REPORT %s %q: want milliseconds", strings.TrimSpace(name), value)
		}
		v, err := strconv.ParseFloat(ms, 64)
		if err != nil || v < 0 {
			return report{}, true, fmt.Errorf("REPORT %s %q: not a duration", strings.TrimSpace(name), value)
		}
		*dst = time.Duration(v * float64(time.Millisecond))
	}
	if !haveDuration {
		return report{}, true, fmt.Errorf("REPORT line without Duration: %q", line)
	}
	return r, true, nil
}

// logAccount attributes a function's output lines to invocations: those
// from "START RequestId: ID" to ID's REPORT line (one invocation at a time).
type logAccount struct {
	cur   string
	bytes map[string]int64
}

func newLogAccount() *logAccount { return &logAccount{bytes: map[string]int64{}} }

func (a *logAccount) add(line string) {
	if rest, ok := strings.CutPrefix(line, "START RequestId: "); ok {
		if f := strings.Fields(rest); len(f) > 0 {
			a.cur = f[0]
		}
	}
	if a.cur == "" {
		return
	}
	a.bytes[a.cur] += int64(len(line)) + 1 // and its newline
	if rep, ok, err := parseReport(line); ok && err == nil && rep.RequestID == a.cur {
		a.cur = ""
	}
}

// sample is one measured phase of a function: its start-up (init) or one
// invocation.
type sample struct {
	Function string
	// Action names what was run ("init", "tick", "plan", "step Evict", ...);
	// Cold marks the first invocation after init.
	Action string
	Cold   bool
	// Wall is the emulator's Duration; for init, from the bootstrap's exec
	// to its first request for work.
	Wall time.Duration
	// CPU is the function process's CPU time over the phase.
	CPU time.Duration
	// PeakRSS is the process's peak resident memory over the phase, bytes.
	PeakRSS int64
	// Kube counts the Kubernetes API requests made and the bytes they moved
	// (both directions, as on the wire: compressed when the API compressed).
	KubeRequests int
	KubeBytes    int64
	// DynamoDB requests, split as DynamoDB bills them.
	DDBReads, DDBWrites int
	// LogBytes is what the invocation wrote to its log, the emulator's
	// START, END and REPORT lines included (CloudWatch Logs bills the bytes).
	LogBytes int64
}

// lambdaMemoryFullCPU is the memory size at which a Lambda function gets one
// full vCPU; below it, CPU time is granted in proportion to memory.
const lambdaMemoryFullCPU = 1769

// lambdaDuration estimates how long a phase measured here lasts on Lambda
// with memMB of memory. The model: the time the process spent not on a CPU
// (waiting for the API, DynamoDB, timers) stays as measured, and its CPU
// time stretches by 1769/memMB below 1,769 MB, as Lambda's CPU share is
// proportional to memory (never faster than here: a local core counts as one
// Lambda vCPU, and work that ran on two cores here in parallel is charged
// in full to the one vCPU share).
func lambdaDuration(wall, cpu time.Duration, memMB int) time.Duration {
	if memMB <= 0 {
		return 0
	}
	off := max(wall-cpu, 0)
	scale := max(1, float64(lambdaMemoryFullCPU)/float64(memMB))
	return off + time.Duration(float64(cpu)*scale)
}

// network is the allowance for what loopback does not show: each request's
// round trip to a real endpoint, and moving the bytes.
type network struct {
	KubeRTT, DDBRTT time.Duration
	// Bandwidth in bytes per second.
	Bandwidth float64
	// InitCalls is the start-up's own AWS calls in Lambda (the config from
	// SSM, the EKS cluster's endpoint, secrets), which the test bed replaces
	// by an environment variable and a kubeconfig file.
	InitCalls time.Duration
}

// allowance is the assumed extra time of one phase on AWS, every request
// taken as sequential.
func (n network) allowance(s sample) time.Duration {
	d := time.Duration(s.KubeRequests)*n.KubeRTT + time.Duration(s.DDBReads+s.DDBWrites)*n.DDBRTT
	if n.Bandwidth > 0 {
		d += time.Duration(float64(s.KubeBytes) / n.Bandwidth * float64(time.Second))
	}
	if s.Action == actionInit {
		d += n.InitCalls
	}
	return d
}

// actionInit names the start-up phase.
const actionInit = "init"

// stats are the median and maximum of a set of values.
type stats[T int | int64 | time.Duration] struct{ Median, Max T }

func summarize[T int | int64 | time.Duration](vs []T) stats[T] {
	if len(vs) == 0 {
		return stats[T]{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return stats[T]{Median: med, Max: s[n-1]}
}

// row is the summary of one function's action.
type row struct {
	Function, Action string
	Cold             bool
	N                int
	Wall, CPU        stats[time.Duration]
	PeakRSS          int64
	KubeRequests     stats[int]
	KubeBytes        stats[int64]
	DDBReads         stats[int]
	DDBWrites        stats[int]
	LogBytes         stats[int64]
	// Modelled maps a memory size to the modelled duration on Lambda,
	// network allowance included, over the samples.
	Modelled  map[int]stats[time.Duration]
	Allowance stats[time.Duration]
}

// summarizeRows groups samples by function, action and coldness, in the
// order they first appear, and models each sample at every memory size.
func summarizeRows(samples []sample, memories []int, net network) []row {
	type key struct {
		fn, action string
		cold       bool
	}
	var order []key
	groups := map[key][]sample{}
	for _, s := range samples {
		k := key{s.Function, s.Action, s.Cold}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	// A function's rows together, and an action's first (cold) run next to
	// its warm ones.
	fnRank, actionRank := map[string]int{}, map[key]int{}
	for _, k := range order {
		if _, ok := fnRank[k.fn]; !ok {
			fnRank[k.fn] = len(fnRank)
		}
		ak := key{fn: k.fn, action: k.action}
		if _, ok := actionRank[ak]; !ok {
			actionRank[ak] = len(actionRank)
		}
	}
	slices.SortStableFunc(order, func(a, b key) int {
		if c := cmp.Compare(fnRank[a.fn], fnRank[b.fn]); c != 0 {
			return c
		}
		if c := cmp.Compare(actionRank[key{fn: a.fn, action: a.action}], actionRank[key{fn: b.fn, action: b.action}]); c != 0 {
			return c
		}
		switch {
		case a.cold == b.cold:
			return 0
		case a.cold:
			return -1
		}
		return 1
	})
	rows := make([]row, 0, len(order))
	for _, k := range order {
		ss := groups[k]
		r := row{Function: k.fn, Action: k.action, Cold: k.cold, N: len(ss), Modelled: map[int]stats[time.Duration]{}}
		var wall, cpu, allow []time.Duration
		var kreq, reads, writes []int
		var kbytes, logs []int64
		for _, s := range ss {
			wall, cpu = append(wall, s.Wall), append(cpu, s.CPU)
			kreq, kbytes = append(kreq, s.KubeRequests), append(kbytes, s.KubeBytes)
			reads, writes = append(reads, s.DDBReads), append(writes, s.DDBWrites)
			logs = append(logs, s.LogBytes)
			allow = append(allow, net.allowance(s))
			r.PeakRSS = max(r.PeakRSS, s.PeakRSS)
		}
		r.Wall, r.CPU, r.Allowance = summarize(wall), summarize(cpu), summarize(allow)
		r.KubeRequests, r.KubeBytes = summarize(kreq), summarize(kbytes)
		r.DDBReads, r.DDBWrites, r.LogBytes = summarize(reads), summarize(writes), summarize(logs)
		for _, m := range memories {
			var est []time.Duration
			for i, s := range ss {
				est = append(est, lambdaDuration(s.Wall, s.CPU, m)+allow[i])
			}
			r.Modelled[m] = summarize(est)
		}
		rows = append(rows, r)
	}
	return rows
}

// parseMemories reads a comma-separated list of memory sizes in MB, each
// within Lambda's 128-10,240 MB.
func parseMemories(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		m, err := strconv.Atoi(f)
		if err != nil || m < 128 || m > 10240 {
			return nil, fmt.Errorf("memory size %q: want a whole number of MB from 128 to 10240", f)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, errors.New("no memory sizes")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
