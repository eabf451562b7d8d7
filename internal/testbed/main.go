// Package testbed starts the real services nodetide's integration tests run
// against: a Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) with kwok faking the kubelets, and
// dynalite for DynamoDB. Everything listens on free loopback ports and is
// stopped, with its temporary files removed, when the test binary ends.
package testbed

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
)

// shared holds the services a test binary shares between its tests; they are
// started on first use and stopped by Main.
var shared struct {
	mu    sync.Mutex
	stops []func() error
}

// onExit registers a stop function run by Main (last registered, first run).
func onExit(stop func() error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.stops = append(shared.stops, stop)
}

func stopAll() {
	shared.mu.Lock()
	stops := shared.stops
	shared.stops = nil
	shared.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		if err := stops[i](); err != nil {
			fmt.Fprintf(os.Stderr, "testbed: stop: %v\n", err)
		}
	}
}

// Main runs a package's tests and then stops every shared service, also when
// the run is interrupted. Use it from TestMain:
//
//	func TestMain(m *testing.M) { testbed.Main(m) }
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main without the exit, for a TestMain that has more to stop.
func Run(m *testing.M) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		stopAll()
		fmt.Fprintf(os.Stderr, "testbed: stopped on %v\n", s)
		os.Exit(2)
	}()
	code := m.Run()
	stopAll()
	return code
}

// Integration marks a test of the integration lane: one that needs the local
// control plane, the local Step Functions service or function bootstraps
// under the Lambda RIE. Under -short (make test-unit) it skips the test,
// saying why; make test runs it. Tests that only need dynalite or the
// clouds' HTTP fakes are unit-lane tests and are not marked.
func Integration(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("integration test (%s): skipped under -short; make test runs it", why)
	}
}
