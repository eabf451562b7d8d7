package drain_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/state"
)

// cuttable is a TCP proxy to the API server that a test can cut (every
// connection closed, new ones refused) and restore, as a network outage
// between the drain function and the cluster would.
type cuttable struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newCuttable(t *testing.T, target string) *cuttable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cuttable{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	c.serve(ln)
	t.Cleanup(c.cut)
	return c
}

func (c *cuttable) serve(ln net.Listener) {
	c.mu.Lock()
	c.ln = ln
	c.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", c.target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns[in], c.conns[out] = true, true
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

func (c *cuttable) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln != nil {
		c.ln.Close()
		c.ln = nil
	}
	for conn := range c.conns {
		conn.Close()
	}
	clear(c.conns)
}

func (c *cuttable) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.serve(ln)
}

// kubeconfigVia is the admin kubeconfig with the server moved to addr (the
// certificate's 127.0.0.1 still matches).
func (b *bed) kubeconfigVia(t *testing.T, addr string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(b.cp.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		cl.Server = "https://" + addr
	}
	path := filepath.Join(t.TempDir(), "via-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func (b *bed) apiServerAddr(t *testing.T) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(b.cp.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			t.Fatal(err)
		}
		return u.Host
	}
	t.Fatal("no cluster in the kubeconfig")
	return ""
}

func (b *bed) waitCordoned(t *testing.T, node string) {
	t.Helper()
	b.cp.WaitFor(t, time.Minute, node+" cordoned by the drain", func(ctx context.Context) (bool, error) {
		n, err := b.cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && n.Spec.Unschedulable && ours(n) == 1, err
	})
}

// assertRestored checks what every fault must end in when the node stays:
// schedulable, no draining taint, the Deployment at the count the person
// left, and no drain holding the node.
func (b *bed) assertRestored(t *testing.T, store state.DrainStore, node, app string, replicas int32) {
	t.Helper()
	n := b.node(t, node)
	if n.Spec.Unschedulable || ours(n) != 0 {
		t.Errorf("node %s not restored: unschedulable %t, taints %v", node, n.Spec.Unschedulable, n.Spec.Taints)
	}
	if app != "" {
		if got := b.replicas(t, app); got != replicas {
			t.Errorf("%s replicas = %d, want %d", app, got, replicas)
		}
	}
	if active, _, err := store.NodeDrain(context.Background(), node); err != nil || active != "" {
		t.Errorf("node %s still held by drain %q (%v)", node, active, err)
	}
}

// A 15 s loss of the API server in the middle of a drain: the step in
// flight fails, the rollback outlasts the outage, and the node ends
// restored with nothing held.
func TestFaultAPIServerOutageMidDrain(t *testing.T) {
	b := newBed(t, 0, 1)
	proxy := newCuttable(t, b.apiServerAddr(t))
	m := b.machine(t, b.kubeconfigVia(t, proxy.addr), 2*time.Minute, drain.PolicyAbort)
	m.starter.Surge = false
	b.deploy(t, "guarded", 1, "")
	b.pdb(t, "guarded", "guarded", 1) // the drain waits in its Evict loop
	victim := b.nodes(t)[0].Name
	exec, err := m.starter.Shutdown(context.Background(), drain.ShutdownRequest{Node: victim})
	if err != nil {
		t.Fatal(err)
	}
	b.waitCordoned(t, victim)
	proxy.cut()
	time.Sleep(15 * time.Second) // the outage itself, not a wait for a condition
	proxy.restore(t)
	out := m.wait(t, exec.ExecutionArn)
	if out.Status != sfntypes.ExecutionStatusFailed || aws.ToString(out.Error) == "RollbackFailed" {
		t.Fatalf("execution %s %s: %s; want rolled back", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
	}
	b.assertRestored(t, m.store, victim, "guarded", 1)
	rec, err := m.store.GetDrain(context.Background(), victim, exec.Name)
	if err != nil || rec.Status != state.DrainRolledBack {
		t.Errorf("drain record %+v (%v), want rolled back", rec, err)
	}
}

// A drain stopped by hand (StopExecution) mid-surge leaves the node
// cordoned and the Deployment grown; recovery, as the next evaluate cycle
// or the drain function on the status-change event runs it, gives both
// back, and a person's replica change made meanwhile survives.
func TestFaultStoppedExecutionIsRecovered(t *testing.T) {
	b := newBed(t, 0, 1)
	m := b.machine(t, b.cp.KubeconfigPath, 2*time.Minute, drain.PolicyAbort)
	b.deploy(t, "solo", 1, "")
	victim := b.nodes(t)[0].Name
	ctx := context.Background()
	exec, err := m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: victim})
	if err != nil {
		t.Fatal(err)
	}
	// One node: the surge's replacement stays Pending, so the drain waits
	// in its Surge loop.
	b.cp.WaitFor(t, time.Minute, "the surge", func(ctx context.Context) (bool, error) {
		return b.replicas(t, "solo") == 2, nil
	})
	b.scaleTo(t, "solo", 3) // a person adds one meanwhile
	if _, err := m.client.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: aws.String(exec.ExecutionArn)}); err != nil {
		t.Fatal(err)
	}
	if out := m.wait(t, exec.ExecutionArn); out.Status != sfntypes.ExecutionStatusAborted {
		t.Fatalf("execution %s, want ABORTED", out.Status)
	}
	if n := b.node(t, victim); !n.Spec.Unschedulable {
		t.Fatal("the stopped drain left the node schedulable; the test needs the fault")
	}
	r := &drain.Recovery{
		Steps: &drain.Steps{Client: b.cp.Client, Store: m.store, Groups: b.steps.Groups},
		SFN:   m.client, StateMachineArn: m.starter.StateMachineArn,
	}
	res, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.RolledBack) != 1 {
		t.Errorf("recovered %+v, want the stopped drain rolled back", res)
	}
	b.assertRestored(t, m.store, victim, "solo", 2)
	// A new shutdown of the node is possible again.
	again, err := m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: victim, Timeout: 30 * time.Second})
	if err != nil || again.AlreadyStarted {
		t.Fatalf("shutdown after recovery: %+v, %v", again, err)
	}
	if _, err := m.client.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: aws.String(again.ExecutionArn)}); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("stop the second drain: %v", err)
	}
}
