package schedulerdiff

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// generateZonal is a zone-spread workload over one group per zone (one
// ASG per AZ, balanced): the plan grows each zone's group in as many rounds
// as the skew needs. Each zone's group has zero to two registered nodes,
// each full with one of the workload's pods; now and then a zone has a
// node of no group instead (a domain that cannot grow) or a group already
// near its max. Every pod takes a node of its own, so the zones' counts,
// not the scheduler's scoring, decide what fits.
func generateZonal(r *rand.Rand, idx int, ns string) trial {
	tr := trial{id: fmt.Sprintf("z%03d", idx), balance: true, template: map[string]testbed.Node{}}
	app := tr.id + "-a0"
	skew := int32(1 + r.IntN(2))
	c := corev1.TopologySpreadConstraint{MaxSkew: skew, TopologyKey: labelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
	if r.IntN(5) == 0 {
		c.MinDomains = new(int32(3))
	}
	mk := func(name string) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app},
				CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
				Annotations:       map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}},
			Spec: corev1.PodSpec{
				NodeSelector:              map[string]string{labelTrial: tr.id},
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{c},
				Containers: []corev1.Container{{Name: "c", Image: "fake", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: quantity("3"), corev1.ResourceMemory: quantity("128Mi")}}}},
			},
		}
	}
	bindOn := func(node string) {
		p := mk(node + "-b")
		p.Spec.NodeName = node
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
		tr.bound = append(tr.bound, p)
	}
	zones := []string{"za", "zb", "zc"}[:2+r.IntN(2)]
	for k, z := range zones {
		l := map[string]string{labelTrial: tr.id, labelZone: z}
		if k > 0 && r.IntN(5) == 0 {
			// A zone no group grows: its node anchors the spread.
			name := fmt.Sprintf("%s-s%d", tr.id, k)
			tr.nodes = append(tr.nodes, testbed.Node{Name: name, CPU: "4", Memory: "8Gi", Labels: l})
			bindOn(name)
			continue
		}
		name := fmt.Sprintf("%s-g%d", tr.id, k)
		l["nodetide.io/node-group"] = name
		existing := r.IntN(3)
		ng := snapshot.NodeGroup{
			Name: name, Provider: "kwok", TargetSize: existing, MaxSize: existing + 1 + r.IntN(4), Zones: []string{z},
			Template: snapshot.Template{Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: quantity("4"), corev1.ResourceMemory: quantity("8Gi"), corev1.ResourcePods: quantity("110")}, Labels: l},
		}
		for n := range existing {
			node := fmt.Sprintf("%s-n%d", name, n)
			tr.nodes = append(tr.nodes, testbed.Node{Name: node, CPU: "4", Memory: "8Gi", Labels: l})
			ng.Instances = append(ng.Instances, "kwok://"+node)
			bindOn(node)
		}
		tr.groups = append(tr.groups, ng)
		tr.template[name] = testbed.Node{CPU: "4", Memory: "8Gi", Labels: l}
	}
	for k := range 2 + r.IntN(7) {
		p := mk(fmt.Sprintf("%s-p%d", app, k))
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
		tr.pending = append(tr.pending, p)
	}
	return tr
}

// TestZoneSpreadRoundsMatchScheduler: zone spread over one group per zone
// on the real scheduler. The plan grows the zones' groups in several
// rounds; the scheduler must place as many of the workload's pods as the
// plan said fit, and no more.
func TestZoneSpreadRoundsMatchScheduler(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	var trs []trial
	var outs []outcome
	rounds := 0
	for i := range 40 {
		tr := generateZonal(rand.New(rand.NewPCG(2029, uint64(i))), i, ns)
		o := tr.outcome()
		for _, u := range o.plan.ScaleUp {
			if strings.Contains(u.Reason, "rounds") {
				rounds++
			}
		}
		trs = append(trs, tr)
		outs = append(outs, o)
	}
	if rounds < 10 {
		t.Fatalf("only %d scale-ups grown in several rounds: the generator lost its point", rounds)
	}
	t.Logf("%d scale-ups grown in several rounds", rounds)
	runBatch(t, cp, ns, "zonal", trs, outs)
}
