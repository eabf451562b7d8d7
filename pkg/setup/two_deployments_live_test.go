package setup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/providers"
	awsprovider "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/schedulefire"
	"github.com/nodetide/nodetide/pkg/setup"
	"github.com/nodetide/nodetide/pkg/state"
)

// callLog sits between one deployment and the AWS double (Auto Scaling and
// EC2 both speak the Query protocol: a form body), so every call is known
// by the deployment that made it, its functions under the RIE included.
type callLog struct {
	srv   *httptest.Server
	mu    sync.Mutex
	forms []url.Values
}

func newCallLog(t *testing.T, target string) *callLog {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &callLog{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if form, err := url.ParseQuery(string(body)); err == nil {
			c.mu.Lock()
			c.forms = append(c.forms, form)
			c.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *callLog) all() []url.Values {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.forms)
}

// deployment is one nodetide deployment: its cluster, its Auto Scaling
// Group in the shared double, its config, its own drain state machine and
// its functions wired from the config as the Lambda mains wire them.
type deployment struct {
	cluster  string // cluster.name
	cp       *testbed.ControlPlane
	ns       string
	asg      string // the Auto Scaling Group's name
	group    string // the node group's name as nodetide reports it
	hook     string
	yaml     string
	calls    *callLog
	svc      *sfnlocal.Service
	machine  string // the drain state machine's ARN
	ev       *evaluate.Evaluator
	drain    *drain.Handler
	schedule *schedulefire.Handler
	firedAt  time.Time // its schedule night's lastFiredAt after its tick
}

// night is the deployment's schedule night as its function reads it.
func (tb *twoBed) night(t *testing.T, dep *deployment) schedule.Record {
	out, err := dep.schedule.Handle(context.Background(), json.RawMessage(`{"action":"get","name":"night"}`))
	rec, ok := out.(schedule.Record)
	if err != nil || !ok {
		t.Errorf("%s: get schedule night: %#v, %v", dep.cluster, out, err)
	}
	return rec
}

// twoBed is two deployments in one account: one AWS double, one table.
type twoBed struct {
	d     *fakeaws.Server
	table string
	db    *dynamodb.Client
	a, b  *deployment
	mu    sync.Mutex
	owner map[string]string // instance ID → cluster whose group launched it
}

func (tb *twoBed) ownerOf(id string) string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.owner[id]
}

// addMachineNode registers a machine of a deployment's group as a kwok node
// of its cluster, as a kubelet joining would.
func (tb *twoBed) addMachineNode(ctx context.Context, dep *deployment, in fakeaws.Instance) error {
	tb.mu.Lock()
	tb.owner[in.ID] = dep.cluster
	tb.mu.Unlock()
	n := testbed.NodeObject(testbed.Node{Name: dep.cluster + "-" + in.ID, CPU: "4", Memory: "16Gi",
		Labels: map[string]string{"pool": dep.cluster}, ProviderID: in.ProviderID()})
	_, err := dep.cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	return err
}

func buildDrainBootstrap(t *testing.T) string {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", path, "./functions/drain")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the drain function: %v\n%s", err, out)
	}
	return path
}

// newDeployment makes the deployment's group (machines as kwok nodes of
// its cluster, its own lifecycle hook), its config and its drain state
// machine, and wires its functions. The process-wide AWS endpoints are set
// to this deployment's for the wiring, which reads them once.
func (tb *twoBed) newDeployment(t *testing.T, cp *testbed.ControlPlane, cluster string, machines int, discovered bool, bootstrap string, db *testbed.Dynalite) *deployment {
	t.Helper()
	ctx := context.Background()
	dep := &deployment{cluster: cluster, cp: cp, ns: cp.Namespace(t), asg: cluster + "-workers", hook: config.LifecycleHookName(cluster)}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "pool=" + cluster})
	})
	tags := map[string]string{awsprovider.TagTemplatePrefix + "label/pool": cluster}
	entry := fmt.Sprintf("{name: workers, provider: aws, aws: {autoScalingGroup: %s}}", dep.asg)
	dep.group = "workers"
	if discovered {
		tags[awsprovider.TagEnabled] = "true"
		tags[awsprovider.TagClusterPrefix+cluster] = "owned"
		entry = fmt.Sprintf("{provider: aws, aws: {autoDiscovery: [%s, %s]}}", awsprovider.TagEnabled, awsprovider.TagClusterPrefix+cluster)
		dep.group = dep.asg
	}
	tb.d.AddLaunchConfiguration(dep.asg, "m5.xlarge")
	tb.d.AddGroup(fakeaws.Group{Name: dep.asg, MinSize: 1, MaxSize: 6, DesiredCapacity: machines, LaunchConfigurationName: dep.asg, Tags: tags})
	if err := tb.d.PutLifecycleHook(fakeaws.LifecycleHook{Group: dep.asg, Name: dep.hook, Transition: fakeaws.TransitionTerminating,
		DefaultResult: fakeaws.ResultContinue, HeartbeatTimeout: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	g, _ := tb.d.Group(dep.asg)
	for _, in := range g.Instances {
		if err := tb.addMachineNode(ctx, dep, in); err != nil {
			t.Fatal(err)
		}
	}
	dep.yaml = fmt.Sprintf(`cluster: {name: %s, kubernetes: {kubeconfig: %s}}
state: {dynamodb: {table: %s, endpoint: %s}}
scaleUp: {pendingPodMinAge: 0s}
scaleDown: {unneededTime: 0s, delayAfterAdd: 0s}
drain: {timeout: 2m}
nodeGroups:
  - %s
`, cluster, cp.KubeconfigPath, tb.table, db.Endpoint, entry)
	cfg, err := config.Parse([]byte(dep.yaml), cluster)
	if err != nil {
		t.Fatal(err)
	}
	dep.calls = newCallLog(t, tb.d.URL())
	dep.svc, err = sfnlocal.Start(ctx, sfnlocal.Options{
		Functions: []sfnlocal.Function{{Name: "drain", Bootstrap: bootstrap, Env: []string{"NODETIDE_CONFIG=" + dep.yaml,
			"AWS_ENDPOINT_URL_AUTO_SCALING=" + dep.calls.srv.URL, "AWS_ENDPOINT_URL_EC2=" + dep.calls.srv.URL}}},
		StateMachines: []sfnlocal.StateMachine{{Name: sfnlocal.DrainStateMachine, DefinitionFile: "../../functions/drain/statemachine.asl.json"}},
		MaxWait:       time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s drain function output:\n%s", cluster, dep.svc.FunctionLogs("drain"))
		}
		_ = dep.svc.Stop()
	})
	dep.machine = dep.svc.StateMachineArn[sfnlocal.DrainStateMachine]
	for k, v := range map[string]string{setup.EnvDrainStateMachine: dep.machine, "AWS_ENDPOINT_URL_SFN": dep.svc.Endpoint,
		"AWS_ENDPOINT_URL_AUTO_SCALING": dep.calls.srv.URL, "AWS_ENDPOINT_URL_EC2": dep.calls.srv.URL,
		"AWS_REGION": tb.d.Region(), "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"} {
		t.Setenv(k, v)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if dep.ev, err = setup.Evaluator(ctx, cfg, "", &setup.AWS{}, log, setup.InstanceID("evaluate")); err != nil {
		t.Fatal(err)
	}
	if dep.drain, err = setup.Drain(ctx, cfg, "", &setup.AWS{}, log); err != nil {
		t.Fatal(err)
	}
	if dep.schedule, err = setup.Schedules(ctx, cfg, "", &setup.AWS{}, log); err != nil {
		t.Fatal(err)
	}
	// The SDK reads AWS_ENDPOINT_URL_* when a client is made, and the
	// providers' clients are made on the first listing: list now, while
	// the environment is this deployment's.
	for _, list := range []func(context.Context) ([]providers.NodeGroup, error){dep.ev.Groups, dep.drain.Steps.Groups, dep.schedule.Applier.Groups} {
		if _, err := list(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return dep
}

// Two nodetide deployments in one AWS account and region, one state table:
// cluster alpha's named group and cluster bravo's discovered one live in
// one Auto Scaling double. Both evaluate, scale up and down, fire a
// schedule of the same name and get every cloud event (EventBridge of one
// account sends each rule's matches to each deployment), all at once.
// Neither calls anything on the other's groups, machines or lifecycle
// actions, each keeps its state under its own cluster's key, and bravo's
// lifecycle action is completed exactly once, by bravo, once its drain
// moved the pods.
func TestTwoDeploymentsInOneAccount(t *testing.T) {
	if testing.Short() {
		t.Skip("bed test")
	}
	ctx := context.Background()
	cpA := testbed.Cluster(t)
	cpB, err := testbed.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cpB.Stop() })
	db := testbed.DynamoDB(t)
	nsA := cpA.Namespace(t)
	tail := nsA[len(nsA)-5:]
	tb := &twoBed{d: fakeaws.New(fakeaws.WithAutoBoot()), table: "two-" + tail, db: db.Client(t), owner: map[string]string{}}
	t.Cleanup(tb.d.Close)
	if err := state.CreateTable(ctx, tb.db, tb.table); err != nil {
		t.Fatal(err)
	}
	bootstrap := buildDrainBootstrap(t)
	a := tb.newDeployment(t, cpA, "alpha-"+tail, 2, false, bootstrap, db)
	b := tb.newDeployment(t, cpB, "bravo-"+tail, 3, true, bootstrap, db)
	tb.a, tb.b = a, b
	byASG := map[string]*deployment{a.asg: a, b.asg: b}
	tb.d.OnLaunch(func(e fakeaws.Event) {
		if dep := byASG[e.Group]; dep != nil {
			if err := tb.addMachineNode(context.Background(), dep, e.Instance); err != nil {
				t.Errorf("register machine %s: %v", e.Instance.ID, err)
			}
		}
	})
	if err := tb.d.SetSpot(b.asg); err != nil {
		t.Fatal(err)
	}

	// bravo's lifecycle victim runs a pod its drain must move first.
	deployPods(t, b, "keep", 1, "100m")
	cpB.WaitPodsRunning(t, b.ns, "app=keep", 1, 2*time.Minute)
	lcNode := podNodes(t, b, "app=keep")[0]
	lcMachine := machineOf(t, b, lcNode)
	spotMachine, healthMachine := "", machineOf(t, a, nodeNames(t, a)[0])
	for _, n := range nodeNames(t, b) {
		if n != lcNode {
			spotMachine = machineOf(t, b, n)
			break
		}
	}
	lc := podsAtTermination(t, tb.d, b, lcMachine, lcNode)

	var wg sync.WaitGroup
	for _, dep := range []*deployment{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); tb.cycle(t, dep) }()
	}
	var token string
	var results map[string][]drain.InterruptResult
	wg.Add(1)
	go func() { defer wg.Done(); token, results = tb.cloudEvents(t, lcMachine, spotMachine, healthMachine) }()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, dep := range []*deployment{a, b} {
		waitExecutions(t, dep)
	}

	tb.checkResults(t, results)
	tb.checkCalls(t)
	if act, _ := tb.d.Action(token); act.Result != fakeaws.ResultContinue {
		t.Errorf("bravo's lifecycle action ended %q, want CONTINUE", act.Result)
	}
	for _, dep := range []*deployment{a, b} {
		want := 0
		if dep == b {
			want = 1
		}
		completes, beats := 0, 0
		for _, f := range dep.calls.all() {
			if f.Get("LifecycleActionToken") != token {
				continue
			}
			switch f.Get("Action") {
			case "CompleteLifecycleAction":
				completes++
			case "RecordLifecycleActionHeartbeat":
				beats++
			}
		}
		if completes != want || (dep == a && beats != 0) {
			t.Errorf("%s completed bravo's lifecycle action %d times (want %d) and heartbeat it %d times", dep.cluster, completes, want, beats)
		}
	}
	if left, seen := lc(); !seen || left != 0 {
		t.Errorf("bravo's lifecycle machine terminated (%v) with %d pods still on its node, want it terminated after the drain moved them", seen, left)
	}
	tb.checkTable(t)
	for _, dep := range []*deployment{a, b} {
		if got := tb.night(t, dep).LastFiredAt; !got.Equal(dep.firedAt) {
			t.Errorf("%s's schedule night last fired %s, after its own tick %s: the other's tick touched it", dep.cluster, got, dep.firedAt)
		}
	}
	for _, dep := range []*deployment{a, b} {
		for _, n := range nodesOf(t, dep) {
			if n.Spec.Unschedulable {
				t.Errorf("%s: node %s left cordoned with every drain ended", dep.cluster, n.Name)
			}
		}
	}
}

// cycle is one deployment's own work: evaluate scales its group up for
// pending pods, its schedule "night" is put and fired, then the pods go and
// evaluate scales down through its drain state machine.
func (tb *twoBed) cycle(t *testing.T, dep *deployment) {
	ctx := context.Background()
	nodes := len(nodeNames(t, dep))
	deployPods(t, dep, "wide", int32(nodes+1), "3") // one more than fits
	dep.cp.WaitPodsUnschedulable(t, dep.ns, 1, 2*time.Minute)
	if !tb.evaluateUntil(t, dep, "scaleUp", func() bool { return len(runningPods(t, dep, "app=wide")) == nodes+1 }) {
		t.Errorf("%s: evaluate never scaled its group up for the pending pod", dep.cluster)
	}

	// Due every minute: put now, the scheduler's tick a minute on (the
	// handler's clock with it), so the next minute's fire time is due.
	put := fmt.Sprintf(`{"action":"put","schedule":{"name":"night","cron":"* * * * *","nodeGroups":[{"name":%q,"min":1,"max":5}]}}`, dep.group)
	if _, err := dep.schedule.Handle(ctx, json.RawMessage(put)); err != nil {
		t.Errorf("%s schedule put: %v", dep.cluster, err)
	}
	later := time.Now().Add(65 * time.Second)
	dep.schedule.Now = func() time.Time { return time.Now().Add(65 * time.Second) }
	tick := strings.ReplaceAll(tb.event(t, "schedule-scheduled.json", "", "", dep), "2026-11-30T08:00:00Z", later.UTC().Format(time.RFC3339))
	if out, err := dep.schedule.Handle(ctx, json.RawMessage(tick)); err != nil {
		t.Errorf("%s schedule tick: %#v, %v", dep.cluster, out, err)
	}
	rec := tb.night(t, dep)
	if len(rec.Schedule.NodeGroups) != 1 || rec.Schedule.NodeGroups[0].Name != dep.group || rec.LastFiredAt.IsZero() {
		t.Errorf("%s: schedule night after the tick: %+v, want its own group, fired", dep.cluster, rec)
	}
	dep.firedAt = rec.LastFiredAt

	if err := dep.cp.Client.AppsV1().Deployments(dep.ns).Delete(ctx, "wide", metav1.DeleteOptions{}); err != nil {
		t.Error(err)
		return
	}
	if !tb.evaluateUntil(t, dep, "drain", func() bool { return false }) {
		t.Errorf("%s: evaluate never scaled its group down", dep.cluster)
	}
}

// evaluateUntil runs evaluate cycles (bounded) until one took an action of
// kind and done holds; every action must be of the deployment's own group.
func (tb *twoBed) evaluateUntil(t *testing.T, dep *deployment, kind string, done func() bool) bool {
	ctx := context.Background()
	seen := false
	deadline := time.Now().Add(3 * time.Minute)
	for round := 0; round < 60 && time.Now().Before(deadline); round++ {
		res, err := dep.ev.Run(ctx)
		if err != nil {
			t.Logf("%s evaluate: %v", dep.cluster, err)
		}
		for _, act := range res.Actions {
			if act.NodeGroup != dep.group {
				t.Errorf("%s evaluate acted on group %q: %+v", dep.cluster, act.NodeGroup, act)
			}
			if act.Kind == kind && act.Error == "" {
				seen = true
			}
		}
		if seen && done() {
			return true
		}
		time.Sleep(time.Second)
	}
	return seen
}

// cloudEvents scales in bravo's machine lcMachine (its hook holds it) and
// warns of its Spot machine, and schedules alpha's machine for retirement;
// each event goes to both drain functions at once. It returns the
// lifecycle action's token and each deployment's results.
func (tb *twoBed) cloudEvents(t *testing.T, lcMachine, spotMachine, healthMachine string) (string, map[string][]drain.InterruptResult) {
	act, err := tb.d.ScaleIn(tb.b.asg, lcMachine)
	if err != nil {
		t.Error(err)
		return "", nil
	}
	if _, err := tb.d.InterruptSpot(spotMachine, "terminate"); err != nil {
		t.Error(err)
		return "", nil
	}
	events := []string{
		tb.event(t, "drain-lifecycle-terminate.json", lcMachine, act.Token, tb.b),
		tb.event(t, "drain-spot-interruption.json", spotMachine, "", tb.b),
		tb.event(t, "drain-scheduled-retirement.json", healthMachine, "", tb.a),
	}
	var mu sync.Mutex
	results := map[string][]drain.InterruptResult{}
	for _, ev := range events {
		var wg sync.WaitGroup
		for _, dep := range []*deployment{tb.a, tb.b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := dep.drain.Handle(context.Background(), json.RawMessage(ev))
				res, ok := out.([]drain.InterruptResult)
				if err != nil || !ok || len(res) != 1 {
					t.Errorf("%s drain function: %#v, %v", dep.cluster, out, err)
					return
				}
				mu.Lock()
				results[dep.cluster] = append(results[dep.cluster], res[0])
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	return act.Token, results
}

// event is a sample event about machine as EventBridge sends it now, of
// dep's group and hook.
func (tb *twoBed) event(t *testing.T, file, machine, token string, dep *deployment) string {
	data, err := os.ReadFile("../../events/" + file)
	if err != nil {
		t.Error(err)
		return ""
	}
	s := string(data)
	for old, new := range map[string]string{"i-0123456789abcdef0": machine, "87654321-4321-4321-4321-210987654321": token,
		"nodetide-drain-prod": dep.hook, "prod-workers": dep.asg, "2026-11-30T10:00:00Z": time.Now().UTC().Format(time.RFC3339)} {
		s = strings.ReplaceAll(s, old, new)
	}
	return s
}

// checkResults: each deployment drains its own machines and ignores the
// other's events, saying why.
func (tb *twoBed) checkResults(t *testing.T, results map[string][]drain.InterruptResult) {
	t.Helper()
	for _, dep := range []*deployment{tb.a, tb.b} {
		for _, r := range results[dep.cluster] {
			mine := tb.ownerOf(r.InstanceID) == dep.cluster
			switch {
			case mine && r.Action != "drain" && r.Action != "joined":
				t.Errorf("%s on its own machine's %q: %+v, want a drain", dep.cluster, r.Event, r)
			case !mine && r.Action != "ignored":
				t.Errorf("%s on the other deployment's %q: %+v, want ignored", dep.cluster, r.Event, r)
			case !mine && strings.Contains(r.Event, "Lifecycle") && !strings.Contains(r.Reason, "is not this deployment's"):
				t.Errorf("%s ignored the other's lifecycle action for %q, want: not this deployment's hook", dep.cluster, r.Reason)
			case !mine && !strings.Contains(r.Event, "Lifecycle") && r.Reason != "no node has this machine":
				t.Errorf("%s ignored the other's %q for %q, want: no node has this machine", dep.cluster, r.Event, r.Reason)
			}
		}
		if n := len(results[dep.cluster]); n != 3 {
			t.Errorf("%s answered %d of the 3 events", dep.cluster, n)
		}
	}
}

// checkCalls: every Auto Scaling and EC2 call a deployment made, from any
// of its functions, names only its own group and machines.
func (tb *twoBed) checkCalls(t *testing.T) {
	t.Helper()
	for _, dep := range []*deployment{tb.a, tb.b} {
		actions := map[string]int{}
		for _, f := range dep.calls.all() {
			actions[f.Get("Action")]++
			for k, vs := range f {
				for _, v := range vs {
					switch {
					case k == "AutoScalingGroupName" || strings.HasPrefix(k, "AutoScalingGroupNames."):
						if v != dep.asg {
							t.Errorf("%s called %s on group %s", dep.cluster, f.Get("Action"), v)
						}
					case k == "InstanceId" || strings.HasPrefix(k, "InstanceIds.") || strings.HasPrefix(k, "InstanceId."):
						if o := tb.ownerOf(v); o != dep.cluster {
							t.Errorf("%s called %s on machine %s of %q", dep.cluster, f.Get("Action"), v, o)
						}
					case k == "LifecycleHookName" && v != dep.hook:
						t.Errorf("%s called %s with hook %s", dep.cluster, f.Get("Action"), v)
					}
				}
			}
		}
		t.Logf("%s AWS calls: %v", dep.cluster, actions)
		if actions["SetDesiredCapacity"] == 0 || actions["CompleteLifecycleAction"]+actions[terminateCall] == 0 {
			t.Errorf("%s made no size change or removal at all: %v", dep.cluster, actions)
		}
	}
}

const terminateCall = "TerminateInstanceInAutoScalingGroup"

// checkTable: every item of the shared table is under one of the two
// clusters' keys and names nothing of the other (its cluster, group,
// nodes or machines); each cluster has its drains and its schedule.
func (tb *twoBed) checkTable(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	keys := map[string]*deployment{"CLUSTER#" + tb.a.cluster: tb.a, "CLUSTER#" + tb.b.cluster: tb.b}
	other := map[*deployment]*deployment{tb.a: tb.b, tb.b: tb.a}
	sks := map[string][]string{}
	p := dynamodb.NewScanPaginator(tb.db, &dynamodb.ScanInput{TableName: &tb.table, ConsistentRead: awssdk.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Items {
			pk, sk := attrString(item["pk"]), attrString(item["sk"])
			dep := keys[pk]
			if dep == nil {
				t.Errorf("item %s %s is under neither cluster's key", pk, sk)
				continue
			}
			sks[dep.cluster] = append(sks[dep.cluster], sk)
			text := attrString(&ddbtypes.AttributeValueMemberM{Value: item})
			them := other[dep]
			if strings.Contains(text, them.cluster) {
				t.Errorf("%s's item %s names the other deployment: %s", dep.cluster, sk, text)
			}
			tb.mu.Lock()
			for id, o := range tb.owner {
				if o == them.cluster && strings.Contains(text, id) {
					t.Errorf("%s's item %s names the other's machine %s: %s", dep.cluster, sk, id, text)
				}
			}
			tb.mu.Unlock()
		}
	}
	for _, dep := range []*deployment{tb.a, tb.b} {
		t.Logf("%s items: %v", dep.cluster, sks[dep.cluster])
		if !slices.ContainsFunc(sks[dep.cluster], func(s string) bool { return strings.HasPrefix(s, "DRAIN#") }) ||
			!slices.Contains(sks[dep.cluster], "SCHEDULE#night") {
			t.Errorf("%s keeps no drain or no schedule night under its key: %v", dep.cluster, sks[dep.cluster])
		}
	}
}

// attrString spells out an attribute value with everything it holds.
func attrString(v ddbtypes.AttributeValue) string {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return v.Value
	case *ddbtypes.AttributeValueMemberN:
		return v.Value
	case *ddbtypes.AttributeValueMemberSS:
		return strings.Join(v.Value, ",")
	case *ddbtypes.AttributeValueMemberB:
		return string(v.Value)
	case *ddbtypes.AttributeValueMemberM:
		parts := make([]string, 0, len(v.Value))
		for k, e := range v.Value {
			parts = append(parts, k+"="+attrString(e))
		}
		slices.Sort(parts)
		return "{" + strings.Join(parts, " ") + "}"
	case *ddbtypes.AttributeValueMemberL:
		parts := make([]string, 0, len(v.Value))
		for _, e := range v.Value {
			parts = append(parts, attrString(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// waitExecutions waits until no drain of the deployment runs.
func waitExecutions(t *testing.T, dep *deployment) {
	t.Helper()
	client := dep.svc.Client(context.Background())
	dep.cp.WaitFor(t, 5*time.Minute, dep.cluster+"'s drains to end", func(ctx context.Context) (bool, error) {
		out, err := client.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: &dep.machine, StatusFilter: sfntypes.ExecutionStatusRunning})
		return err == nil && len(out.Executions) == 0, err
	})
}

// podsAtTermination counts, when the machine starts terminating, the pods
// still on its node.
func podsAtTermination(t *testing.T, d *fakeaws.Server, dep *deployment, machine, node string) func() (int, bool) {
	var mu sync.Mutex
	left, seen := -1, false
	d.OnTerminate(func(e fakeaws.Event) {
		if e.Instance.ID != machine {
			return
		}
		pods, err := dep.cp.Client.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		mu.Lock()
		defer mu.Unlock()
		seen = true
		if err != nil {
			t.Errorf("list pods at termination: %v", err)
			return
		}
		left = 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				left++
			}
		}
	})
	return func() (int, bool) { mu.Lock(); defer mu.Unlock(); return left, seen }
}

func deployPods(t *testing.T, dep *deployment, name string, replicas int32, cpu string) {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"pool": dep.cluster},
					Containers: []corev1.Container{{Name: "app", Image: "app",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
				},
			},
		},
	}
	if _, err := dep.cp.Client.AppsV1().Deployments(dep.ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Error(err)
	}
}

func runningPods(t *testing.T, dep *deployment, selector string) []corev1.Pod {
	list, err := dep.cp.Client.CoreV1().Pods(dep.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Error(err)
		return nil
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func podNodes(t *testing.T, dep *deployment, selector string) []string {
	var out []string
	for _, p := range runningPods(t, dep, selector) {
		out = append(out, p.Spec.NodeName)
	}
	return out
}

func nodesOf(t *testing.T, dep *deployment) []corev1.Node {
	list, err := dep.cp.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "pool=" + dep.cluster})
	if err != nil {
		t.Error(err)
		return nil
	}
	return list.Items
}

func nodeNames(t *testing.T, dep *deployment) []string {
	var out []string
	for _, n := range nodesOf(t, dep) {
		out = append(out, n.Name)
	}
	return out
}

func machineOf(t *testing.T, dep *deployment, node string) string {
	t.Helper()
	n, err := dep.cp.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
}
