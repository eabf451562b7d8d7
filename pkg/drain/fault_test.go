package drain_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodetide/nodetide/internal/testbed"
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
// back, and the count a person set meanwhile is kept as they set it.
func TestFaultStoppedExecutionIsRecovered(t *testing.T) {
	b, m, victim, exec := surgeHeld(t)
	ctx := context.Background()
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
	b.assertRestored(t, m.store, victim, "solo", 3) // the person's count, not the drain's
	// A new shutdown of the node is possible again.
	again, err := m.starter.Shutdown(ctx, drain.ShutdownRequest{Node: victim, Timeout: 30 * time.Second})
	if err != nil || again.AlreadyStarted {
		t.Fatalf("shutdown after recovery: %+v, %v", again, err)
	}
	if _, err := m.client.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: aws.String(again.ExecutionArn)}); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("stop the second drain: %v", err)
	}
}

// lossy makes every write to DynamoDB, but answers the lose-th one (counting
// from 1) as if the connection had dropped before the reply: the write
// landed, the caller does not know it.
type lossy struct {
	state.DynamoDBAPI
	mu      sync.Mutex
	n, lose int
	lost    string
}

func (l *lossy) landed(what string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if l.n == l.lose {
		l.lost = what
		return &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	}
	return nil
}

func (l *lossy) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := l.DynamoDBAPI.PutItem(ctx, in, o...)
	if err == nil {
		err = l.landed("PutItem " + keyOf(in.Item))
	}
	return out, err
}

func (l *lossy) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := l.DynamoDBAPI.UpdateItem(ctx, in, o...)
	if err == nil {
		err = l.landed("UpdateItem " + keyOf(in.Key) + " " + aws.ToString(in.UpdateExpression))
	}
	return out, err
}

func (l *lossy) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := l.DynamoDBAPI.DeleteItem(ctx, in, o...)
	if err == nil {
		err = l.landed("DeleteItem " + keyOf(in.Key))
	}
	return out, err
}

func keyOf(item map[string]dynamodbtypes.AttributeValue) string {
	if sk, ok := item["sk"].(*dynamodbtypes.AttributeValueMemberS); ok {
		return strings.SplitN(sk.Value, "#", 2)[0]
	}
	return "?"
}

// drive runs a drain as the state machine does: each step retried while it
// fails Transient (5 tries), any other failure caught into Rollback (20
// tries), Prepare's failures ending it as Rejected.
func (b *bed) drive(t *testing.T, s drain.State) (removed bool) {
	t.Helper()
	removed, _, _ = b.driveSteps(t, s, 0)
	return removed
}

// driveSteps is drive with each step try given perStep (none when zero), as
// the function's own deadline bounds one invocation. It also returns
// Prepare's failure (the drain then never began) and the error name of
// every failed step try, as the state machine's Retry and Catch see them.
func (b *bed) driveSteps(t *testing.T, s drain.State, perStep time.Duration) (removed bool, rejected error, names []string) {
	t.Helper()
	run := func(step string, tries int, retry func(error) bool) error {
		var err error
		for range tries {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if perStep > 0 {
				ctx, cancel = context.WithTimeout(ctx, perStep)
			}
			var out drain.State
			out, err = b.steps.Run(ctx, step, s)
			cancel()
			if err == nil {
				s = out
				return nil
			}
			names = append(names, step+":"+drain.ErrorName(err))
			if !retry(err) {
				return err
			}
		}
		return err
	}
	transient := func(err error) bool { return drain.ErrorName(err) == drain.ErrNameTransient }
	if err := run("Prepare", 5, transient); err != nil {
		return false, err, names
	}
	order := []string{"Cordon", "Surge", "Evict", "WaitReplacements", "Terminate", "RemoveNode", "Finish"}
	for i := 0; i < len(order); i++ {
		step := order[i]
		if err := run(step, 5, transient); err != nil {
			s.Error = &drain.ErrorInfo{Error: drain.ErrorName(err), Cause: err.Error()}
			if err := run("Rollback", 20, func(error) bool { return true }); err != nil {
				t.Fatalf("rollback failed: %v", err)
			}
			return false, nil, names
		}
		// The Choice states: loop on a step until it reports done.
		switch {
		case step == "Surge" && !s.SurgeDone, step == "Evict" && !s.Evicted, step == "WaitReplacements" && !s.Replaced:
			i--
		}
	}
	return true, nil, names
}

// A DynamoDB write that lands but whose answer is lost, at every write of
// a drain in turn: each drain still ends with its node removed or fully
// restored, and nothing left holding it.
func TestFaultLostDynamoDBWrites(t *testing.T) {
	for lose := 1; ; lose++ {
		b := newBed(t, 0, 2)
		b.steps.StepWait = -1
		db := testbed.DynamoDB(t)
		client := &lossy{DynamoDBAPI: db.Client(t), lose: lose}
		table := fmt.Sprintf("lossy-%d-%s", lose, b.pool)
		if err := state.CreateTable(context.Background(), client, table); err != nil {
			t.Fatal(err)
		}
		client.n = 0 // count the drain's writes only
		store := state.NewDynamoDB(client, table, b.pool)
		b.steps.Store = store
		b.deploy(t, "solo", 1, "")
		victim := b.podNode(t, "solo")
		removed := b.drive(t, b.start(victim, time.Minute, drain.PolicyAbort))
		if removed {
			if _, err := b.cp.Client.CoreV1().Nodes().Get(context.Background(), victim, metav1.GetOptions{}); err == nil {
				t.Errorf("lose write %d: the drain finished but node %s is still there", lose, victim)
			}
			if got := b.replicas(t, "solo"); got != 1 {
				t.Errorf("lose write %d: solo at %d replicas, want 1", lose, got)
			}
			if active, _, err := store.NodeDrain(context.Background(), victim); err != nil || active != "" {
				t.Errorf("lose write %d: node %s still held by %q (%v)", lose, victim, active, err)
			}
		} else {
			b.assertRestored(t, store, victim, "solo", 1)
		}
		t.Logf("lose write %d of %d (%s): removed %t", lose, client.n, client.lost, removed)
		if lose > client.n {
			break // every write of a whole drain has been lost once
		}
	}
}

// surgeHeld starts, on the real state machine, the drain of a group's only
// node, which holds a single-replica Deployment: the surge's replacement
// has nowhere to go and stays Pending, so the drain waits in its Surge loop
// (the function inside its Surge step) when this returns.
func surgeHeld(t *testing.T) (*bed, *machine, string, drain.Execution) {
	t.Helper()
	b := newBed(t, 0, 1)
	m := b.machine(t, b.cp.KubeconfigPath, 2*time.Minute, drain.PolicyAbort)
	b.deploy(t, "solo", 1, "")
	victim := b.nodes(t)[0].Name
	exec, err := m.starter.Shutdown(context.Background(), drain.ShutdownRequest{Node: victim})
	if err != nil {
		t.Fatal(err)
	}
	b.cp.WaitFor(t, time.Minute, "the surge", func(ctx context.Context) (bool, error) {
		return b.replicas(t, "solo") == 2, nil
	})
	return b, m, victim, exec
}
