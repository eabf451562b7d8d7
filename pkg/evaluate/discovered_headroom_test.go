package evaluate_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/planner"
	ngaws "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/state"
)

// TestDiscoveredGroupKeepsHeadroom: two ASGs found by cluster-autoscaler's
// discovery tag through the AWS double; the config's top-level headroom
// list gives one of them a spare node and names a group that does not
// exist. The group with headroom grows to one empty node and keeps it when
// scale-down takes the other group's empty node; the missing group is
// logged once a cycle and listed in the status, and the cycle succeeds.
func TestDiscoveredGroupKeepsHeadroom(t *testing.T) {
	f := newFixture(t, 0, 3, nil)
	ctx := t.Context()
	spare, other, gone := f.pool+"-spare", f.pool+"-other", f.pool+"-gone"

	d := fakeaws.New()
	t.Cleanup(d.Close)
	d.AddLaunchTemplate(fakeaws.LaunchTemplate{ID: "lt-0123456789abcdef0", Name: f.pool, InstanceTypes: []string{"m5.xlarge"}})
	for name, desired := range map[string]int{spare: 0, other: 1} {
		d.AddGroup(fakeaws.Group{Name: name, MinSize: 0, MaxSize: 3, DesiredCapacity: desired,
			LaunchTemplate: &fakeaws.LaunchTemplateRef{Name: f.pool, Version: "$Latest"},
			Tags:           map[string]string{"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/node-template/label/pool": f.pool}})
	}
	as, ec2c := ngaws.NewClients(awssdk.Config{
		Region:       d.Region(),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", ""),
		BaseEndpoint: awssdk.String(d.URL()),
	})
	cfg, err := config.Parse([]byte(`
cluster: {name: c}
state: {memory: {}}
nodeGroups:
  - provider: aws
    aws: {autoDiscovery: [k8s.io/cluster-autoscaler/enabled]}
headroom:
  - {nodeGroup: `+spare+`, nodes: 1}
  - {nodeGroup: `+gone+`, nodes: 2}
`), "nodetide.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ngaws.New(as, ec2c, ngaws.Options{AutoDiscovery: ngaws.BlockOf(cfg.NodeGroups[0].Entry()).AutoDiscovery})
	if err != nil {
		t.Fatal(err)
	}
	client := testbed.DynamoDB(t).Client(t)
	if err := state.CreateTable(ctx, client, "discovered-headroom"); err != nil {
		t.Fatal(err)
	}
	store := state.NewDynamoDB(client, "discovered-headroom", f.pool)

	// register makes a Node of every machine of the group that has none.
	registered := map[string]bool{}
	register := func(group string) {
		t.Helper()
		g, _ := d.Group(group)
		for _, in := range g.Instances {
			if !registered[in.ID] {
				registered[in.ID] = true
				f.cp.AddNode(t, testbed.Node{Name: f.pool + "-" + in.ID, CPU: "4", Memory: "16Gi",
					Labels: map[string]string{"pool": f.pool}, ProviderID: in.ProviderID()})
			}
		}
		f.cp.WaitFor(t, 2*time.Minute, "nodes Ready", func(ctx context.Context) (bool, error) {
			nodes, err := f.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + f.pool})
			if err != nil {
				return false, err
			}
			ready := 0
			for _, nd := range nodes.Items {
				for _, c := range nd.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			return ready == len(registered), nil
		})
	}
	var logs bytes.Buffer
	run := func(what string, set func(*planner.Settings)) (*planner.Plan, evaluate.Status) {
		t.Helper()
		ev := f.evaluator("discovered")
		ev.Groups, ev.Store, ev.Headroom = p.NodeGroups, store, cfg.Headroom()
		ev.Log = slog.New(slog.NewJSONHandler(&logs, nil))
		if set != nil {
			set(&ev.Settings)
		}
		res, err := ev.Run(ctx)
		if err != nil {
			t.Fatalf("%s: Run: %v", what, err)
		}
		st, err := evaluate.ReadStatus(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(st.Problems, func(p evaluate.Problem) bool {
			return p.Kind == evaluate.ProblemHeadroomGroupNotFound && p.Count == 1 && strings.Contains(p.Detail, gone)
		}) {
			t.Errorf("%s: status problems %+v, want the missing group", what, st.Problems)
		}
		if n := strings.Count(logs.String(), "headroom for node groups not found"); n != 1 || !strings.Contains(logs.String(), gone) {
			t.Errorf("%s: %d warnings of the missing group, want 1:\n%s", what, n, logs.String())
		}
		logs.Reset()
		return res.Plan, st
	}
	headroomOf := func(st evaluate.Status, group string) *evaluate.GroupHeadroom {
		for _, g := range st.NodeGroups {
			if g.Name == group {
				return g.Headroom
			}
		}
		t.Fatalf("status has no group %s: %+v", group, st.NodeGroups)
		return nil
	}

	register(other)
	plan, st := run("empty group", nil)
	if len(plan.ScaleUp) != 1 || plan.ScaleUp[0].NodeGroup != spare || plan.ScaleUp[0].Delta != 1 ||
		plan.ScaleUp[0].Reason != "headroom: 1 spare node wanted, 0 free" {
		t.Fatalf("empty group: scale-up %+v, want %s +1 for its headroom", plan.ScaleUp, spare)
	}
	if g, _ := d.Group(spare); g.DesiredCapacity != 1 {
		t.Fatalf("empty group: desired capacity %d, want 1", g.DesiredCapacity)
	}
	want := evaluate.GroupHeadroom{Rule: "1 spare node", Free: "0 free", Need: 1, Adding: 1}
	if h := headroomOf(st, spare); h == nil || *h != want {
		t.Errorf("empty group: status headroom %+v, want %+v", h, want)
	}
	if h := headroomOf(st, other); h != nil {
		t.Errorf("empty group: %s has a headroom in the status: %+v", other, h)
	}

	// Both nodes are empty and may go at once: only the one beyond the
	// headroom does.
	register(spare)
	plan, st = run("scale-down", func(s *planner.Settings) { s.ScaleDown.UnneededTime, s.ScaleDown.DelayAfterAdd = 0, 0 })
	if len(plan.ScaleUp) != 0 {
		t.Errorf("scale-down: scaled up again: %+v", plan.ScaleUp)
	}
	if len(plan.ScaleDown) != 1 || plan.ScaleDown[0].NodeGroup != other {
		t.Errorf("scale-down: removals %+v, want only the node of %s", plan.ScaleDown, other)
	}
	spareNode := ""
	for id := range registered {
		if g, _ := d.Group(spare); len(g.Instances) == 1 && g.Instances[0].ID == id {
			spareNode = f.pool + "-" + id
		}
	}
	if _, unneeded := plan.State.UnneededSince[spareNode]; !unneeded {
		t.Errorf("scale-down: %s not unneeded (%v): the test would not show the headroom keeping it", spareNode, plan.State.UnneededSince)
	}
	want = evaluate.GroupHeadroom{Rule: "1 spare node", Free: "1 free", Met: true}
	if h := headroomOf(st, spare); h == nil || *h != want {
		t.Errorf("scale-down: status headroom %+v, want %+v", h, want)
	}
}
