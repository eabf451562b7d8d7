package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// meta describes a measurement run: where and on what it ran. Nothing in it
// may identify the machine (no paths, user or host names).
type meta struct {
	Date           time.Time
	GoVersion      string
	GOOS, GOARCH   string
	CPUs           int
	CPUModel       string
	Elapsed        time.Duration
	Cluster        clusterSummary
	PendingPods    int
	Schedules, Due int
	Drains         []drainCount
	DrainMaxWait   time.Duration
	Memories       []int
	Net            network
	Trigger        *triggerFigures
}

// writeMarkdown writes the measurement as infra/measurements.md.
func writeMarkdown(w io.Writer, m meta, rows []row) error {
	var b strings.Builder
	c := m.Cluster
	fmt.Fprintf(&b, "# Measured function sizes\n\n")
	fmt.Fprintf(&b, "Written by `make measure` (`hack/measure`); run it again rather than editing. Measured on %s\n",
		m.Date.UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "with %s %s/%s, %d CPUs (%s); the whole run took %s.\n\n",
		m.GoVersion, m.GOOS, m.GOARCH, m.CPUs, m.CPUModel, m.Elapsed.Round(time.Second))

	fmt.Fprintf(&b, "## What ran\n\n")
	fmt.Fprintf(&b, "- **Cluster** (the local test bed: etcd, kube-apiserver, controller-manager, scheduler, kwok): %d nodes "+
		"(%s CPU, %s memory, %d pods each) in node group `%s`; %d pods — %d of %d Deployments over %d namespaces "+
		"(%d of them single-replica) and %d of a DaemonSet; %d PodDisruptionBudgets; CPU requests %.0f%% of "+
		"allocatable on average, spread unevenly (%d nodes under the 50%% scale-down threshold).\n",
		c.Nodes, c.NodeCPU, c.NodeMemory, c.NodePods, c.Group, c.Pods(), c.DeploymentPods, c.Deployments, c.Namespaces,
		c.SingleReplica, c.DaemonSetPods, c.PDBs, 100*c.CPUUtilization, c.UnderThreshold)
	fmt.Fprintf(&b, "- **evaluate**: scheduled ticks with `evaluate.watchFor: 0s` (the cycle alone: snapshot, plan, "+
		"state saved; nothing pending, so nothing to act on), then `{\"action\":\"plan\"}` with %d pending pods that only "+
		"an empty second group fits (a scale-up decision).\n", m.PendingPods)
	fmt.Fprintf(&b, "- **schedule**: `put` of %d schedules, ticks with none due, `list`, then ticks with %d due "+
		"(each scales a Deployment and sets a node group's desired size, both already at that size).\n", m.Schedules, m.Due)
	var transitions, invocations []int
	for _, d := range m.Drains {
		transitions, invocations = append(transitions, d.Transitions), append(invocations, d.Invocations)
	}
	fmt.Fprintf(&b, "- **drain**: %d drains of busy nodes of `%s` (each running a single-replica Deployment's pod) "+
		"through the drain state machine run locally (`functions/drain/statemachine.asl.json`, its Wait states cut to %s): "+
		"cordon, surge, evictions through the Eviction API within the PodDisruptionBudgets, replacements scheduled and "+
		"Running, node removed. Per drain, from the execution history: %s state transitions and %s function invocations.\n",
		len(m.Drains), c.Group, m.DrainMaxWait, joinInts(transitions), joinInts(invocations))
	fmt.Fprintf(&b, "- Each function is built for this machine (`CGO_ENABLED=0 -trimpath -tags lambda.norpc "+
		"-ldflags \"-s -w\"`) and runs under the Lambda Runtime Interface Emulator, one instance each, from its "+
		"first (cold) invocation on. Its Kubernetes and DynamoDB traffic goes through counting proxies on loopback.\n\n")

	fmt.Fprintf(&b, "## Measured\n\n")
	b.WriteString("The first row after `init` is the cold invocation; the others are warm. **Duration**: the emulator's " +
		"`REPORT` Duration; for `init`, from the bootstrap's exec to its first request for work (the emulator's own " +
		"Init Duration covers only its set-up). **CPU**: the function process's user + system time over the phase " +
		"(the scheduler's per-thread run times, from procfs). **Peak RSS**: the process's `VmHWM` over the phase (the " +
		"emulator's \"Max Memory Used\" only repeats the configured size). Kubernetes requests and KiB (both " +
		"directions, as on the wire: compressed where the API server compressed), DynamoDB requests and log KiB (the " +
		"function's output from the emulator's START to its REPORT line) are medians.\n\n")
	b.WriteString("| function | phase | n | duration median / max | CPU median / max | peak RSS | Kubernetes requests | Kubernetes KiB | DynamoDB reads / writes | log KiB |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %s / %s | %s / %s | %s | %d | %s | %d / %d | %s |\n",
			r.Function, phaseName(r), r.N, ms(r.Wall.Median), ms(r.Wall.Max), ms(r.CPU.Median), ms(r.CPU.Max),
			mib(r.PeakRSS), r.KubeRequests.Median, kib(r.KubeBytes.Median), r.DDBReads.Median, r.DDBWrites.Median, kib(r.LogBytes.Median))
	}

	fmt.Fprintf(&b, "\n## Modelled on Lambda\n\n")
	fmt.Fprintf(&b, "Lambda gives a function CPU in proportion to its memory: one full vCPU at 1,769 MB. "+
		"The model: *duration(M) = (wall − cpu) + cpu × max(1, 1769 / M) + network allowance*, per run, then "+
		"median / max. Its assumptions:\n\n")
	fmt.Fprintf(&b, "- The time off the CPU (waiting for the API server and DynamoDB, the drain steps' own waits) is as "+
		"measured here, on loopback through the counting proxies. The API server, etcd, the controllers, kwok and "+
		"dynalite share this machine's %d CPUs with the function, so it likely waits longer for them than for EKS's "+
		"control plane (a busy control plane can be slower).\n", m.CPUs)
	fmt.Fprintf(&b, "- A core of this machine (%s, %s) counts as one Lambda vCPU (Graviton, arm64); no speed ratio is "+
		"applied. CPU time that ran on two cores at once here (the garbage collector) is charged in full to the single "+
		"share. Lambda may give the init phase more CPU than the memory share; the model does not count on it.\n",
		m.CPUModel, m.GOARCH)
	fmt.Fprintf(&b, "- **Network allowance — an assumption, not a measurement.** Loopback round trips take microseconds; "+
		"on AWS each Kubernetes request is taken to cost %s (an EKS endpoint in the same region), each DynamoDB request %s, "+
		"and the Kubernetes bytes move at %.0f MB/s, every request one after another. `init` adds %s for the start-up's "+
		"own AWS calls (the config from SSM, the EKS endpoint, secrets), which the test bed replaces by an environment "+
		"variable and a kubeconfig file.\n", ms(m.Net.KubeRTT), ms(m.Net.DDBRTT), m.Net.Bandwidth/1e6, ms(m.Net.InitCalls))
	b.WriteString("- Not modelled: Lambda's own start-up before the bootstrap runs (fetching the code, starting the sandbox); " +
		"a bigger or busier API server; evaluate's watch (billed as configured, `evaluate.watchFor`).\n\n")
	b.WriteString("| function | phase | network allowance |")
	for _, mem := range m.Memories {
		fmt.Fprintf(&b, " %d MB |", mem)
	}
	b.WriteString("\n| --- | --- | ---: |")
	for range m.Memories {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s / %s |", r.Function, phaseName(r), ms(r.Allowance.Median), ms(r.Allowance.Max))
		for _, mem := range m.Memories {
			e := r.Modelled[mem]
			fmt.Fprintf(&b, " %s / %s |", ms(e.Median), ms(e.Max))
		}
		b.WriteString("\n")
	}

	fmt.Fprintf(&b, "\n## Per function\n\n")
	b.WriteString("| function | RSS after init | peak RSS, any phase | CPU max, any invocation |\n| --- | ---: | ---: | ---: |\n")
	for _, fn := range functionsIn(rows) {
		var initRSS, peak int64
		var cpu time.Duration
		for _, r := range rows {
			if r.Function != fn {
				continue
			}
			peak = max(peak, r.PeakRSS)
			if r.Action == actionInit {
				initRSS = r.PeakRSS
			} else {
				cpu = max(cpu, r.CPU.Max)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", fn, mib(initRSS), mib(peak), ms(cpu))
	}
	b.WriteString("\nNot measured here: evaluate's watch (`evaluate.watchFor`: the memory of the pods watch, and the " +
		"cycles it starts, which are the cycle above) and its `run` or `add` acting on a provider; drain's hand-made " +
		"`shutdown` and `enable`, and its ForceDelete and Rollback steps; schedule's `get`, `delete` and `run`.\n")
	writeTrigger(&b, m.Trigger)
	_, err := io.WriteString(w, b.String())
	return err
}

// joinInts lists numbers: "12", "12 and 14", "12, 13 and 14".
func joinInts(vs []int) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, fmt.Sprint(v))
	}
	switch len(parts) {
	case 0:
		return "no"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func phaseName(r row) string {
	if r.Cold {
		return r.Action + " (first, after init)"
	}
	return r.Action
}

func functionsIn(rows []row) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Function] {
			seen[r.Function] = true
			out = append(out, r.Function)
		}
	}
	return out
}

// ms formats a duration in milliseconds: whole ones from 10 ms, one decimal
// below, seconds with two decimals from 10 s.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f ms", v)
	default:
		return fmt.Sprintf("%.1f ms", v)
	}
}

func mib(bytes int64) string { return fmt.Sprintf("%.0f MiB", float64(bytes)/(1<<20)) }

func kib(bytes int64) string {
	v := float64(bytes) / (1 << 10)
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
