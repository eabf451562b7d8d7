package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/triggerlocal"
	"github.com/nodetide/nodetide/pkg/trigger"
)

// triggerGroup is the empty kwok group the trigger's trials scale up.
const triggerGroup = "trigger"

// triggerFigures is what the webhook trigger's trials measured.
type triggerFigures struct {
	Trials    int
	Latencies []time.Duration // pod marked Unschedulable → IncreaseSize, per trial
	// Calls is the requests the API server made to the endpoint, Cycles the
	// cycles the hints started (asynchronous invocations).
	Calls, Cycles int64
	// CallDurations and CycleDurations are the emulator's REPORT durations
	// of the URL invocations and of the triggered cycles, warm and cold.
	CallDurations, CycleDurations []time.Duration
	Gap                           time.Duration
}

// measureTrigger runs the webhook trigger on the seeded cluster: the API
// server calls the evaluate function (under the RIE, behind a local HTTPS
// endpoint translating to function URL events) on each FailedScheduling
// Event, and the cycle the hint starts scales an empty kwok group up. Each
// trial makes one pod only a new node of that group fits.
func measureTrigger(ctx context.Context, b *bed, o options) (*triggerFigures, error) {
	if o.TriggerTrials == 0 {
		return nil, nil
	}
	cfg := strings.Replace(functionConfig(b.cp.KubeconfigPath, b.db.Endpoint, 1000),
		"scaleUp: {pendingPodMinAge: 2s}", fmt.Sprintf(`  - name: %s
    provider: kwok
    minSize: 0
    maxSize: 5
    kwok:
      template:
        allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
        labels: {pool: %s}
scaleUp: {pendingPodMinAge: 0s}`, triggerGroup, triggerGroup), 1)
	dir := filepath.Join(b.work, "trigger")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	svc, err := triggerlocal.Start(ctx, triggerlocal.Options{RIE: b.rie, Bootstrap: bootstrapPath(b.work, "evaluate"),
		ConfigYAML: cfg, Dir: dir, Timeout: evaluateTimeout})
	if err != nil {
		return nil, err
	}
	defer svc.Stop()
	w, err := trigger.Webhook(svc.URL, svc.CAPEM)
	if err != nil {
		return nil, err
	}
	if err := trigger.Install(ctx, b.client, w); err != nil {
		return nil, err
	}
	defer func() { _, _ = trigger.Uninstall(context.Background(), b.client) }()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "trigger"}}
	if _, err := b.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("trigger namespace: %w", err)
	}
	if err := waitServiceAccount(ctx, b, ns.Name); err != nil {
		return nil, err
	}
	// The window is rounded up to a whole second and starts at the hint,
	// which may come a second or so after the trial began.
	f := &triggerFigures{Trials: o.TriggerTrials, Gap: trigger.DefaultMinGap + 2500*time.Millisecond}
	tr := triggerlocal.Trial{Client: b.client, Namespace: ns.Name, Group: triggerGroup,
		Selector: map[string]string{"pool": triggerGroup}, CPU: "3", Timeout: 2 * time.Minute}
	var last time.Time
	for i := range o.TriggerTrials {
		// A hint inside the previous trial's window waits for the window's
		// end (its trailing cycle): trials closer than that would measure
		// the rate limit, not the path.
		if wait := time.Until(last.Add(f.Gap)); wait > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
		}
		last = time.Now()
		lat, err := tr.Run(ctx, fmt.Sprintf("pending-%03d", i))
		if err != nil {
			return nil, fmt.Errorf("trial %d: %w\n%s", i, err, lastLines(svc.Logs(), 40))
		}
		f.Latencies = append(f.Latencies, lat)
		b.log.Info("trigger trial", "n", i, "latency", lat.Round(time.Millisecond))
	}
	f.Calls, f.Cycles = svc.Calls(), svc.Queued()
	// Instance 0 serves the URL, the others the cycles.
	logs, err := filepath.Glob(filepath.Join(dir, "evaluate-*.log"))
	if err != nil {
		return nil, err
	}
	slices.Sort(logs)
	for i, log := range logs {
		ds, err := reportDurations(log)
		if err != nil && i == 0 {
			return nil, err
		}
		if i == 0 {
			f.CallDurations = ds
		} else {
			f.CycleDurations = append(f.CycleDurations, ds...)
		}
	}
	if len(f.CycleDurations) == 0 {
		return nil, errors.New("no triggered cycle reported")
	}
	return f, nil
}

func waitServiceAccount(ctx context.Context, b *bed, ns string) error {
	return poll(ctx, time.Minute, "the default service account of "+ns, func(ctx context.Context) (bool, error) {
		_, err := b.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// reportDurations reads the REPORT lines of an emulator's log.
func reportDurations(path string) ([]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []time.Duration
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		r, ok, err := parseReport(sc.Text())
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r.Duration)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New(path + ": no REPORT line")
	}
	return out, nil
}

// percentile is the nearest-rank p-th percentile of ds (0 < p ≤ 100).
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// writeTrigger adds the trigger's section to the report.
func writeTrigger(b *strings.Builder, f *triggerFigures) {
	if f == nil {
		return
	}
	fmt.Fprintf(b, "\n## Webhook trigger: pending pod to scale-up\n\n")
	fmt.Fprintf(b, "The ValidatingWebhookConfiguration `nodetide webhook install` makes, installed in the same cluster; "+
		"the local API server calls an HTTPS endpoint (a test CA in `caBundle`) that turns each call into a function URL "+
		"event for the evaluate bootstrap under the emulator; its asynchronous self-invocation goes to a local Lambda "+
		"Invoke API that runs the cycle on one of two further instances (`internal/triggerlocal`). %d trials, at least %s apart "+
		"(a hint within %s of the last started cycle waits for the window's end: a pod pending that soon after another is scaled up to ~6 s later): each creates one pod that only a new node of the empty "+
		"kwok group `%s` fits, with `pendingPodMinAge: 0s`. **Latency** is from a watch seeing the scheduler mark the pod "+
		"Unschedulable to a watch seeing the group's first new Node (which the kwok provider creates inside IncreaseSize); "+
		"the cycle includes the snapshot of the whole cluster above.\n\n", f.Trials, f.Gap, trigger.DefaultMinGap, triggerGroup)
	fmt.Fprintf(b, "| measure | n | p50 | p95 | max |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, r := range []struct {
		name string
		ds   []time.Duration
	}{
		{"Unschedulable → IncreaseSize", f.Latencies},
		{"webhook call (URL invocation) duration", f.CallDurations},
		{"triggered cycle duration", f.CycleDurations},
	} {
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |\n", r.name, len(r.ds), ms(percentile(r.ds, 50)), ms(percentile(r.ds, 95)), ms(percentile(r.ds, 100)))
	}
	fmt.Fprintf(b, "\nThe API server called the endpoint %d times and the hints started %d cycles over the %d trials "+
		"(%.1f calls and %.2f cycles per pending pod; a trailing cycle's duration includes its wait for the end of its "+
		"window); the first call and the first cycle of each instance include its cold "+
		"start. Durations are the emulator's wall time on this machine, not modelled: the model above needs the CPU "+
		"time, which is not tapped here; the cycle is the tick's cycle (modelled above) plus one provider call.\n",
		f.Calls, f.Cycles, f.Trials, float64(f.Calls)/float64(f.Trials), float64(f.Cycles)/float64(f.Trials))
}
