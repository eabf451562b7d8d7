package evaluate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/statusmap"
)

// countingDrainer records the drains it is asked to start.
type countingDrainer struct {
	mu    sync.Mutex
	nodes []string
}

func (d *countingDrainer) StartDrain(_ context.Context, down planner.ScaleDown, _ time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nodes = append(d.nodes, down.Node)
	return nil
}

func (d *countingDrainer) started() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.nodes...)
}

// A shadow cycle, with pods pending for one group and an empty node in
// another, changes nothing: the target stands, no drain starts, the stray
// cordon stays, no Event is written. Its status (stored and ConfigMap) and
// metrics say what it would have done. The same cycle with shadow off acts.
func TestShadowCycleChangesNothing(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := context.Background()
	ev := twoGroups(t, f)
	groups, err := ev.Groups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := groups[1]
	if err := other.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var nodes []corev1.Node
	f.cp.WaitFor(t, time.Minute, "2 nodes of the other group", func(ctx context.Context) (bool, error) {
		list, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + f.pool + "-other"})
		nodes = list.Items
		return err == nil && len(nodes) == 2, err
	})
	stray := nodes[0].Name
	if err := k8s.Cordon(ctx, f.cp.Client, stray, drain.TaintKey); err != nil {
		t.Fatal(err)
	}
	f.deploy(t, "big", 2, "3") // pending for the fixture's group: +2
	f.waitUnschedulable(t, 2)

	ev.Settings.ScaleDown.UnneededTime, ev.Settings.ScaleDown.DelayAfterAdd = 0, 0
	// The stray cordon counts as a drain under way; room for one more.
	ev.Settings.ScaleDown.MaxConcurrentDrains = 2
	ev.Events = f.recorder(f.cp.Client, nil)
	drainer := &countingDrainer{}
	ev.Drainer = drainer
	steps := &drain.Steps{Client: f.cp.Client, Store: f.store.(*state.Memory), StepWait: -1, Groups: ev.Groups}
	ev.Recoverer = &drain.Recovery{Steps: steps, SFN: noExecutions{}, Grace: time.Nanosecond,
		StateMachineArn: "arn:aws:states:us-east-1:000000000000:stateMachine:drain"}
	ev.StatusMap = &statusmap.Writer{Client: f.cp.Client, Namespace: f.ns, Name: statusCM, Cluster: "prod"}
	ev.Shadow = true

	m := metrics.New("prod", nil)
	res, err := ev.Run(metrics.NewContext(ctx, m))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.target(t); got != 0 {
		t.Errorf("shadow cycle changed the target to %d", got)
	}
	if n, err := other.TargetSize(ctx); err != nil || n != 2 {
		t.Errorf("other group's target %d (%v), want 2", n, err)
	}
	if got := drainer.started(); len(got) != 0 {
		t.Errorf("shadow cycle started drains of %v", got)
	}
	if res.Recovered != nil {
		t.Errorf("shadow cycle recovered %+v", res.Recovered)
	}
	if !tainted(t, f, stray) {
		t.Errorf("shadow cycle freed the stray cordon of %s", stray)
	}
	if got := f.podEvents(t, kubeevents.ReasonTriggeredScaleUp); len(got) != 0 {
		t.Errorf("shadow cycle recorded TriggeredScaleUp: %+v", got)
	}
	if got := scaleDownEvents(t, f); len(got) != 0 {
		t.Errorf("shadow cycle recorded ScaleDown: %+v", got)
	}

	var up, down int
	for _, a := range res.Actions {
		switch {
		case a.Kind == evaluate.KindShadow && a.Would == "scaleUp" && a.NodeGroup == f.pool && a.Delta == 2:
			up++
		case a.Kind == evaluate.KindShadow && a.Would == "drain" && a.NodeGroup == other.Name():
			down++
		default:
			t.Errorf("unexpected action %+v", a)
		}
	}
	if up != 1 || down == 0 {
		t.Fatalf("actions %+v, want a shadow scale-up of %s by 2 and a shadow drain in %s", res.Actions, f.pool, other.Name())
	}
	stored, err := evaluate.ReadStatus(ctx, f.store.(state.StatusStore))
	if err != nil {
		t.Fatal(err)
	}
	cm := statusMapOf(t, f)
	var inMap evaluate.Status
	if err := json.Unmarshal([]byte(cm.Data[statusmap.KeyJSON]), &inMap); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]evaluate.Status{"stored": stored, "ConfigMap": inMap} {
		if !st.Shadow || len(st.Actions) != len(res.Actions) || st.Actions[0].Kind != evaluate.KindShadow {
			t.Errorf("%s status: shadow %v, actions %+v, want the shadow actions %+v", name, st.Shadow, st.Actions, res.Actions)
		}
	}
	if text := cm.Data[statusmap.KeyText]; !strings.Contains(text, "Shadow:       true") || !strings.Contains(text, "shadow scaleUp") ||
		!strings.Contains(text, "shadow drain") {
		t.Errorf("status text lacks the shadow marker or actions:\n%s", text)
	}
	var emf bytes.Buffer
	for _, doc := range m.Documents() {
		if err := json.NewEncoder(&emf).Encode(doc); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(emf.String(), `"ShadowScaleUps":2`) || !strings.Contains(emf.String(), `"ShadowScaleDowns"`) ||
		strings.Contains(emf.String(), `"ScaleUpNodes"`) {
		t.Errorf("metrics lack ShadowScaleUps 2 / ShadowScaleDowns, or count a scale-up:\n%s", emf.String())
	}

	// Refused by hand, and nothing changes.
	if _, err := ev.Add(ctx, f.pool, 1); !errors.Is(err, evaluate.ErrShadow) || !strings.Contains(err.Error(), "evaluate.shadow is on") {
		t.Errorf("add in shadow mode: %v, want ErrShadow", err)
	}
	if got := f.target(t); got != 0 {
		t.Errorf("refused add changed the target to %d", got)
	}
	// A schedule's shrink would start drains: refused too.
	if _, err := ev.Shrink(ctx, map[string]int{other.Name(): 0}, "schedule night"); !errors.Is(err, evaluate.ErrShadow) {
		t.Errorf("shrink in shadow mode: %v, want ErrShadow", err)
	}
	if got := drainer.started(); len(got) != 0 {
		t.Errorf("refused shrink started drains of %v", got)
	}

	// The same cluster, shadow off: it acts.
	ev.Shadow = false
	res, err = ev.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.target(t); got != 2 {
		t.Errorf("acting cycle: target %d, want 2 (actions %+v)", got, res.Actions)
	}
	if tainted(t, f, stray) {
		t.Errorf("acting cycle left the stray cordon of %s", stray)
	}
	if got := drainer.started(); len(got) == 0 {
		t.Errorf("acting cycle started no drain (actions %+v)", res.Actions)
	}
	if got := f.podEvents(t, kubeevents.ReasonTriggeredScaleUp); len(got) != 2 {
		t.Errorf("acting cycle: %d TriggeredScaleUp events, want 2", len(got))
	}
	if st, err := evaluate.ReadStatus(ctx, f.store.(state.StatusStore)); err != nil || st.Shadow {
		t.Errorf("acting cycle's status: shadow %v (%v)", st.Shadow, err)
	}
}

func tainted(t *testing.T, f *fixture, node string) bool {
	t.Helper()
	n, err := f.cp.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range n.Spec.Taints {
		if tt.Key == drain.TaintKey {
			return true
		}
	}
	return n.Spec.Unschedulable
}

func scaleDownEvents(t *testing.T, f *fixture) []corev1.Event {
	t.Helper()
	list, err := f.cp.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Node", "reason": kubeevents.ReasonScaleDown}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, f.pool) {
			out = append(out, e)
		}
	}
	return out
}
