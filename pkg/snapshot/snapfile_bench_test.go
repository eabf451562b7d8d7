//go:build linux

package snapshot_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The snapshot file benchmarks: a 5,000-node, 150,000-pod cluster written
// in both forms, the full one shaped like real API output (managed fields,
// env, probes, statuses, images), read in-process and planned by the CLI.

// addAPIFields gives the cluster what API objects carry that the planner
// reads too (UIDs, the labels controllers and cloud providers set, node
// pressure conditions), so both forms hold them.
func addAPIFields(s *snapshot.Snapshot) {
	for i := range s.Nodes {
		n := &s.Nodes[i]
		n.UID = types.UID(fmt.Sprintf("6f1c2a4e-%04x-4e0b-9c1d-%012x", i%0xffff, i))
		for k, v := range map[string]string{
			"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
			"beta.kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m6i.2xlarge",
			"topology.kubernetes.io/region": "eu-west-1", "eks.amazonaws.com/nodegroup": n.Labels["pool"],
		} {
			n.Labels[k] = v
		}
		since := metav1.NewTime(snapshottest.T0.Add(-48 * time.Hour))
		n.Status.Conditions = append([]corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastTransitionTime: since},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastTransitionTime: since},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastTransitionTime: since},
		}, n.Status.Conditions...)
		n.Status.Capacity = n.Status.Allocatable
	}
	labels := map[string]map[string]string{}
	for i := range s.Pods {
		p := &s.Pods[i]
		p.UID = types.UID(fmt.Sprintf("0b7e9d2c-%04x-4a1f-8e3b-%012x", i%0xffff, i))
		app := p.Labels["app"]
		l, ok := labels[app]
		if !ok {
			l = map[string]string{"app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop",
				"app.kubernetes.io/version": "1.24.3", "pod-template-hash": fmt.Sprintf("%x", len(app)*7919)}
			labels[app] = l
		}
		p.Labels = l
	}
}

var (
	benchManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{},"f:app.kubernetes.io/version":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"4a5b\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"LOG_LEVEL\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{".":{},"f:httpGet":{".":{},"f:path":{},"f:port":{}}},"f:name":{},"f:ports":{},"f:resources":{".":{},"f:limits":{},"f:requests":{}},"f:terminationMessagePath":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`)}},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", Subresource: "status",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.0.0.1\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`)}},
	}
	benchEnv = func() []corev1.EnvVar {
		var env []corev1.EnvVar
		for _, name := range []string{"LOG_LEVEL", "HTTP_PORT", "DATABASE_HOST", "DATABASE_NAME", "CACHE_URL", "FEATURE_FLAGS", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME", "REGION", "TIMEOUT_SECONDS"} {
			env = append(env, corev1.EnvVar{Name: name, Value: "value-of-" + name})
		}
		return append(env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}})
	}()
	benchImages = func() []corev1.ContainerImage {
		var images []corev1.ContainerImage
		for i := range 40 {
			images = append(images, corev1.ContainerImage{SizeBytes: int64(20_000_000 + i*1_000_000), Names: []string{
				fmt.Sprintf("123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app-%02d@sha256:%064x", i, i),
				fmt.Sprintf("123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app-%02d:1.24.%d", i, i)}})
		}
		return images
	}()
)

// withAPIBulk returns p with what the API serves and the planner never
// reads.
func withAPIBulk(p corev1.Pod, i int) corev1.Pod {
	p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	p.ResourceVersion = fmt.Sprint(1_000_000 + i)
	p.GenerateName = p.Name[:len(p.Name)-7]
	p.ManagedFields = benchManagedFields
	ann := map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-29T08:00:00Z", "prometheus.io/scrape": "true", "prometheus.io/port": "9090"}
	for k, v := range p.Annotations {
		ann[k] = v
	}
	p.Annotations = ann
	p.Spec.Containers = append([]corev1.Container(nil), p.Spec.Containers...)
	for j := range p.Spec.Containers {
		c := &p.Spec.Containers[j]
		c.Image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/" + c.Name + ":1.24.3"
		c.ImagePullPolicy = corev1.PullIfNotPresent
		c.Env = benchEnv
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
		c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
		c.ReadinessProbe = c.LivenessProbe
		c.VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
		c.TerminationMessagePath = "/dev/termination-log"
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	grace := int64(30)
	p.Spec.TerminationGracePeriodSeconds = &grace
	p.Spec.DNSPolicy = corev1.DNSClusterFirst
	p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	p.Spec.ServiceAccountName = "default"
	p.Spec.SecurityContext = &corev1.PodSecurityContext{}
	since := metav1.NewTime(snapshottest.T0.Add(-time.Hour))
	if p.Spec.NodeName != "" {
		p.Status.HostIP = fmt.Sprintf("10.1.%d.%d", i/250%250, i%250)
		p.Status.PodIP = fmt.Sprintf("10.2.%d.%d", i/250%250, i%250)
		p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
		p.Status.StartTime = &since
		p.Status.QOSClass = corev1.PodQOSBurstable
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: since},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: since},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: since},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: since},
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "app", Ready: true, Image: "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app:1.24.3",
			ImageID:     "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			ContainerID: fmt.Sprintf("containerd://%064x", i), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: since}},
		}}
	} else {
		p.Status.Conditions = append([]corev1.PodCondition(nil), p.Status.Conditions...)
		for j := range p.Status.Conditions {
			p.Status.Conditions[j].Message = "0/5000 nodes are available: 5000 Insufficient cpu. preemption: 0/5000 nodes are available: 5000 No preemption victims found for incoming pod."
		}
	}
	return p
}

func withNodeBulk(n corev1.Node, i int) corev1.Node {
	n.TypeMeta = metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}
	n.ResourceVersion = fmt.Sprint(2_000_000 + i)
	n.ManagedFields = benchManagedFields
	n.Status.Images = benchImages
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250)}, {Type: corev1.NodeHostName, Address: n.Name}}
	n.Status.NodeInfo = corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", i), KernelVersion: "6.1.112", OSImage: "Amazon Linux 2023", ContainerRuntimeVersion: "containerd://1.7.22", KubeletVersion: "v1.31.2", OperatingSystem: "linux", Architecture: "amd64"}
	return n
}

// writeAPIShapedFull writes s in the full form with withAPIBulk and
// withNodeBulk applied, an object at a time.
func writeAPIShapedFull(path string, s snapshot.Snapshot) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := snapshot.WriteFullWith(f, s, withNodeBulk, withAPIBulk); err != nil {
		return err
	}
	return f.Close()
}

// snapshotFiles returns functions that write the 5,000-node cluster in
// each form into dir on first use, so a run of one form writes only it.
// The cluster is built for each (the same, from its seed) and not kept, so
// it does not weigh on the reads measured.
func snapshotFiles(b *testing.B, dir string) (full, compact func() string) {
	cluster := func() snapshot.Snapshot {
		s := snapshottest.Synthetic(5000, 30, 0.05, 5000)
		addAPIFields(&s)
		return s
	}
	var fullPath, compactPath string
	full = func() string {
		if fullPath == "" {
			fullPath = filepath.Join(dir, "full.json")
			if err := writeAPIShapedFull(fullPath, cluster()); err != nil {
				b.Fatal(err)
			}
		}
		return fullPath
	}
	compact = func() string {
		if compactPath == "" {
			compactPath = filepath.Join(dir, "compact.json")
			f, err := os.Create(compactPath)
			if err != nil {
				b.Fatal(err)
			}
			if err := snapshot.WriteCompactSnapshot(f, cluster()); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
		return compactPath
	}
	return full, compact
}

// peakHeap runs f and returns the most heap its objects took above what
// they took before, sampled as it runs.
func peakHeap(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	peak := <-done
	return max(peak, base) - base
}

// BenchmarkSnapshotFile reads the 5,000-node, 150,000-pod snapshot in each
// form in-process (MB/s of the file, allocations, peak heap), and times
// `nodetide plan --snapshot` on each with GOMAXPROCS=1 (wall time, CPU
// time, peak resident set), checking that both forms plan alike.
func BenchmarkSnapshotFile(b *testing.B) {
	dir := b.TempDir()
	full, compact := snapshotFiles(b, dir)
	forms := []struct {
		name string
		path func() string
	}{{"compact", compact}, {"full", full}}
	for _, form := range forms {
		b.Run("read/form="+form.name, func(b *testing.B) {
			path := form.path()
			fi, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(fi.Size())
			b.ReportAllocs()
			var peak uint64
			var pods int
			var cpu time.Duration
			for b.Loop() {
				start := snapshottest.CPUTime()
				peak = max(peak, peakHeap(func() {
					f, err := os.Open(path)
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					s, err := snapshot.ReadSnapshot(f)
					if err != nil {
						b.Fatal(err)
					}
					pods = len(s.Pods)
				}))
				cpu += snapshottest.CPUTime() - start
			}
			b.ReportMetric(float64(fi.Size())/1e6, "file-MB")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(pods), "pods")
		})
	}

	bin := filepath.Join(dir, "nodetide")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/nodetide/nodetide/cmd/nodetide").CombinedOutput(); err != nil {
		b.Skipf("cannot build the CLI: %v\n%s", err, out)
	}
	plans := map[string][]byte{}
	for _, form := range forms {
		b.Run("cli-plan/form="+form.name, func(b *testing.B) {
			var maxRSS int64
			var cpu time.Duration
			for b.Loop() {
				cmd := exec.Command(bin, "plan", "--snapshot", form.path(), "-o", "json")
				cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				hwm := watchHWM(cmd.Process.Pid)
				if err := cmd.Wait(); err != nil {
					b.Fatalf("plan: %v\n%s", err, stderr.String())
				}
				maxRSS = max(maxRSS, hwm())
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				plans[form.name] = stdout.Bytes()
			}
			b.ReportMetric(float64(maxRSS)/(1<<20), "peak-rss-MiB")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
	if c, f := plans["compact"], plans["full"]; c != nil && f != nil && !bytes.Equal(c, f) {
		b.Fatalf("the two forms plan differently:\n--- compact\n%.3000s\n--- full\n%.3000s", c, f)
	}
}

// watchHWM samples the peak resident set (VmHWM) of process pid until it
// exits; the returned function stops and returns the last sample, in bytes.
// The child's rusage cannot tell it: on Linux a child's ru_maxrss starts
// from its parent's peak when it execs, and this benchmark's own peak is
// gigabytes.
func watchHWM(pid int) func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			if data, err := os.ReadFile(path); err == nil {
				for line := range strings.Lines(string(data)) {
					if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						if n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64); err == nil {
							peak.Store(max(peak.Load(), n<<10))
						}
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak.Load()
	}
}
