package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/internal/childproc"
)

// Versions of the binaries the bed runs; hack/testbed-build.sh builds them
// into a directory named after them.
const (
	kubernetesVersion = "v1.37.2"
	kwokVersion       = "v0.8.0"
)

// Files Dir must hold.
var bedFiles = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"}

const (
	startAttempts = 3
	// stopGrace is how long a child gets to exit on SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
	// readyTimeout bounds each readiness wait of Start.
	readyTimeout = time.Minute
	pollInterval = 50 * time.Millisecond
)

// Dir locates the test bed's binaries: $NODETIDE_TESTBED_DIR, else the cache
// directory hack/testbed-build.sh builds into. It fails, saying how to build
// them, if any is missing.
func Dir() (string, error) {
	dir := os.Getenv("NODETIDE_TESTBED_DIR")
	if dir == "" {
		cache := os.Getenv("NODETIDE_CACHE")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("locate the test bed binaries: %w (set NODETIDE_TESTBED_DIR)", err)
			}
			cache = filepath.Join(home, ".cache", "nodetide")
		}
		dir = filepath.Join(cache, "testbed", "k8s-"+kubernetesVersion+"-kwok-"+kwokVersion)
	}
	var missing []string
	for _, f := range bedFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("test bed binaries missing in %s (%s): run `make testbed` (hack/testbed-build.sh) once to build them",
			dir, strings.Join(missing, ", "))
	}
	return dir, nil
}

// ControlPlane is a running local Kubernetes control plane: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, and kwok faking the
// kubelets of nodes annotated kwok.x-k8s.io/node=fake.
type ControlPlane struct {
	// KubeconfigPath is an admin kubeconfig for the cluster.
	KubeconfigPath string
	// Config is the admin client configuration.
	Config *rest.Config
	// Client is an admin client.
	Client kubernetes.Interface

	dir     string
	spawner *childproc.Spawner
	procs   []*childproc.Process // in start order

	stopOnce sync.Once
	stopErr  error
}

// Start starts a control plane on free loopback ports and returns once it is
// ready: the apiserver serves, the controller-manager has created the default
// ServiceAccount and the scheduler schedules. Call Stop when done.
func Start(ctx context.Context) (*ControlPlane, error) {
	bin, err := Dir()
	if err != nil {
		return nil, err
	}
	if _, err := sweepStale(os.TempDir()); err != nil {
		// Leftovers only cost disk space; they must not fail this run.
		fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
	}
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, bin)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts || ctx.Err() != nil {
			return nil, fmt.Errorf("start the test control plane (attempt %d): %w", attempt, err)
		}
	}
}

func start(ctx context.Context, bin string) (_ *ControlPlane, err error) {
	dir, err := makeTempDir()
	if err != nil {
		return nil, err
	}
	c := &ControlPlane{dir: dir, spawner: childproc.NewSpawner()}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()

	keys, err := writePKI(dir)
	if err != nil {
		return nil, err
	}
	ports, err := childproc.FreePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	apiPort := strconv.Itoa(ports[2])
	if err := c.connect("https://127.0.0.1:"+apiPort, keys); err != nil {
		return nil, err
	}

	env := childEnv()
	if err := c.startEtcd(ctx, bin, env, etcdURL, peerURL); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, bin, env, etcdURL, apiPort, keys); err != nil {
		return nil, err
	}
	cm, scheduler, err := c.startComponents(ctx, bin, env, keys)
	if err != nil {
		return nil, err
	}

	if err := c.waitServiceAccount(ctx, metav1.NamespaceDefault, cm); err != nil {
		return nil, err
	}
	if err := c.probeScheduler(ctx, scheduler); err != nil {
		return nil, err
	}
	for _, p := range c.procs {
		if p.Exited() {
			return nil, exitError(p)
		}
	}
	return c, nil
}

// The components' kubeconfigs, in the bed's directory.
const (
	controllerManagerKubeconfig = "controller-manager.kubeconfig"
	schedulerKubeconfig         = "scheduler.kubeconfig"
)

// connect writes the kubeconfigs of the admin and the components for the
// apiserver at server, and makes the admin's client.
func (c *ControlPlane) connect(server string, keys *pki) error {
	c.KubeconfigPath = filepath.Join(c.dir, "admin.kubeconfig")
	for _, kc := range []struct{ path, user, token string }{
		{c.KubeconfigPath, "admin", keys.adminToken},
		{filepath.Join(c.dir, controllerManagerKubeconfig), "system:kube-controller-manager", keys.controllerMgrToken},
		{filepath.Join(c.dir, schedulerKubeconfig), "system:kube-scheduler", keys.schedulerToken},
	} {
		if err := writeKubeconfig(kc.path, server, keys.caPEM, kc.user, kc.token); err != nil {
			return err
		}
	}
	c.Config = &rest.Config{
		Host:            server,
		BearerToken:     keys.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: keys.caPEM},
		// Tests create objects in bursts; client-side throttling would only
		// slow them down against a private apiserver.
		QPS:   200,
		Burst: 400,
	}
	var err error
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return fmt.Errorf("create the admin client: %w", err)
	}
	return nil
}

// startEtcd starts a single-member etcd and waits until it is healthy.
func (c *ControlPlane) startEtcd(ctx context.Context, bin string, env []string, etcdURL, peerURL string) error {
	etcd, err := c.run(ctx, bin, "etcd", env,
		"--name=testbed",
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=testbed="+peerURL,
		// The data is thrown away; syncing it to disk would only slow tests.
		"--unsafe-no-fsync=true",
		// A single member elects itself only after an election timeout;
		// the default second is a second of every start-up.
		"--heartbeat-interval=10",
		"--election-timeout=100",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	return waitHTTP(ctx, etcd, etcdURL+"/health", nil, "")
}

// startAPIServer starts kube-apiserver on apiPort and waits until it is
// ready.
func (c *ControlPlane) startAPIServer(ctx context.Context, bin string, env []string, etcdURL, apiPort string, keys *pki) error {
	apiserver, err := c.run(ctx, bin, "kube-apiserver", env,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+apiPort,
		// The default reconciler refuses a loopback advertise address.
		"--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(c.dir, "apiserver-certs"),
		"--tls-cert-file="+keys.servingCert,
		"--tls-private-key-file="+keys.servingKey,
		"--client-ca-file="+keys.caCert,
		"--token-auth-file="+keys.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer="+serviceIssuer,
		"--service-account-key-file="+keys.saPub,
		"--service-account-signing-key-file="+keys.saKey,
		"--service-cluster-ip-range="+serviceCIDR,
		"--enable-priority-and-fairness=false",
		"--allow-privileged=true",
		"--profiling=false",
	)
	if err != nil {
		return err
	}
	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(keys.caPEM)
	return waitHTTP(ctx, apiserver, c.Config.Host+"/readyz", &tls.Config{RootCAs: caPool}, keys.adminToken)
}

// startComponents starts what only needs the apiserver, together: the
// controller-manager, the scheduler and kwok. It does not wait for them.
func (c *ControlPlane) startComponents(ctx context.Context, bin string, env []string, keys *pki) (cm, scheduler *childproc.Process, err error) {
	cm, err = c.run(ctx, bin, "kube-controller-manager", env,
		"--kubeconfig="+filepath.Join(c.dir, controllerManagerKubeconfig),
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--leader-elect=false",
		"--service-account-private-key-file="+keys.saKey,
		"--root-ca-file="+keys.caCert,
		// Its default is a system directory, which it would try to create.
		"--flex-volume-plugin-dir="+filepath.Join(c.dir, "flexvolume"),
		"--profiling=false",
	)
	if err != nil {
		return nil, nil, err
	}
	scheduler, err = c.run(ctx, bin, "kube-scheduler", env,
		"--kubeconfig="+filepath.Join(c.dir, schedulerKubeconfig),
		"--secure-port=0",
		"--leader-elect=false",
		"--profiling=false",
	)
	if err != nil {
		return nil, nil, err
	}
	kwokEnv := childEnv("KWOK_WORKDIR=" + filepath.Join(c.dir, "kwok")) // instead of ~/.kwok
	if _, err := c.run(ctx, bin, "kwok", kwokEnv,
		"--kubeconfig="+c.KubeconfigPath,
		"--config="+filepath.Join(bin, "kwok-stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"="+kwokNodeAnnotationValue,
		// Left to its defaults, kwok renews no node Leases, and the
		// controller-manager marks its nodes NotReady (and taints them
		// unreachable) after the node-monitor grace period.
		"--node-lease-duration-seconds=40",
	); err != nil {
		return nil, nil, err
	}
	return cm, scheduler, nil
}

// run starts one component from the binaries directory.
func (c *ControlPlane) run(ctx context.Context, bin, name string, env []string, args ...string) (*childproc.Process, error) {
	p, err := startProcess(ctx, c.spawner, c.dir, name, filepath.Join(bin, name), args, env)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// Stop stops every process of the control plane (SIGTERM, then SIGKILL after
// a grace period) and removes its directory. It may be called more than once.
func (c *ControlPlane) Stop() error {
	c.stopOnce.Do(func() {
		// In reverse start order, one at a time: etcd and the apiserver each
		// hold out for their clients to go, so stopping them together costs
		// the whole grace period; in order it takes about a second.
		var errs []error
		for i := len(c.procs) - 1; i >= 0; i-- {
			errs = append(errs, c.procs[i].Stop(context.Background(), stopGrace))
		}
		// Only now: the children die with the spawner's thread.
		if c.spawner != nil {
			c.spawner.Close()
		}
		if c.dir != "" {
			if err := os.RemoveAll(c.dir); err != nil {
				errs = append(errs, fmt.Errorf("remove the test bed directory: %w", err))
			}
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// shared control plane of this test binary.
var cluster struct {
	once sync.Once
	cp   *ControlPlane
	err  error
}

// Cluster returns the control plane shared by the tests of this test binary,
// starting it on first use; Main stops it at the end. It fails the test if
// the control plane can't start. Tests sharing it should work in their own
// namespaces (Namespace) and on their own nodes (AddNode). Under -short it
// skips the test (see Integration).
func Cluster(t testing.TB) *ControlPlane {
	t.Helper()
	Integration(t, "runs on the local control plane")
	cluster.once.Do(func() {
		// Not the test's context: the control plane outlives the test.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		began := time.Now()
		cluster.cp, cluster.err = Start(ctx)
		if cluster.err == nil {
			onExit(cluster.cp.Stop)
			t.Logf("testbed: control plane ready in %v (kubeconfig %s)", time.Since(began).Round(time.Millisecond), cluster.cp.KubeconfigPath)
		}
	})
	if cluster.err != nil {
		t.Fatalf("testbed: %v", cluster.err)
	}
	return cluster.cp
}

// waitHTTP polls url until it answers 200, failing early if p exits.
func waitHTTP(ctx context.Context, p *childproc.Process, url string, tlsConfig *tls.Config, token string) error {
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConfig},
	}
	defer client.CloseIdleConnections()
	var last string
	err := poll(ctx, readyTimeout, p, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s %s (last answer: %s): %w", p.Name(), url, last, err)
	}
	return nil
}

// waitServiceAccount waits for the "default" ServiceAccount of ns, which the
// controller-manager creates; pods are refused until it exists.
func (c *ControlPlane) waitServiceAccount(ctx context.Context, ns string, cm *childproc.Process) error {
	err := poll(ctx, readyTimeout, cm, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("wait for the default ServiceAccount in namespace %s: %w", ns, err)
	}
	return nil
}

// probeScheduler proves the scheduler works: a pod that fits no node must be
// marked unschedulable by it. The pod is removed afterwards.
func (c *ControlPlane) probeScheduler(ctx context.Context, scheduler *childproc.Process) error {
	pods := c.Client.CoreV1().Pods(metav1.NamespaceDefault)
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "testbed-scheduler-probe"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "probe", Image: "probe"}},
			// No node will ever carry this label.
			NodeSelector:                 map[string]string{"testbed.nodetide.io/probe": "never"},
			AutomountServiceAccountToken: new(false),
		},
	}
	if _, err := pods.Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the scheduler probe pod: %w", err)
	}
	err := poll(ctx, readyTimeout, scheduler, func(ctx context.Context) (bool, error) {
		pod, err := pods.Get(ctx, probe.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return podUnschedulable(pod), nil
	})
	if err != nil {
		return fmt.Errorf("wait for the scheduler to mark its probe pod unschedulable: %w", err)
	}
	if err := pods.Delete(ctx, probe.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		return fmt.Errorf("delete the scheduler probe pod: %w", err)
	}
	return nil
}

func podUnschedulable(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// poll calls cond every pollInterval until it returns true or an error, the
// timeout passes, or p (when not nil) exits, which is reported with the end
// of its log.
func poll(ctx context.Context, timeout time.Duration, p *childproc.Process, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if p != nil && p.Exited() {
			return exitError(p)
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			if p != nil {
				return fmt.Errorf("%w; end of the %s log:\n%s", ctx.Err(), p.Name(), p.LogTail(logTailLines))
			}
			return ctx.Err()
		case <-ticker.C:
		}
	}
}
