package snapshot_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func planJSON(t *testing.T, s snapshot.Snapshot, set planner.Settings) string {
	t.Helper()
	var b bytes.Buffer
	if err := planner.WritePlan(&b, planner.Decide(s, set, s.CapturedAt)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestTrimDropsBulkAndShares: what the planner never reads is gone, and pods
// of one controller share their labels and spec.
func TestTrimDropsBulkAndShares(t *testing.T) {
	full := func(name string) corev1.Pod {
		p := snapshottest.Pod("shop/"+name, "500m", "1Gi", snapshottest.OwnedBy("ReplicaSet", "rs-1"), snapshottest.PodLabels("app", "shop", "tier", "web"),
			snapshottest.Annotate("cluster-autoscaler.kubernetes.io/safe-to-evict", "true"), snapshottest.On("n1"))
		p.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"big":"blob"}`
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SECRET_NAME", Value: "x"}}
		p.Spec.Containers[0].Image = "shop:1"
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 8080, HostPort: 8080}}
		// The service account token volume is named per pod, as the API
		// server's admission names it.
		p.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "kube-api-access-" + name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "shop:1"}}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
		return p
	}
	a, b := full("a"), full("b")
	tr := snapshot.NewTrimmer()
	ta, tb := tr.Pod(&a), tr.Pod(&b)

	if len(ta.ManagedFields) != 0 || len(ta.Status.ContainerStatuses) != 0 || len(ta.Status.Conditions) != 0 {
		t.Errorf("bulk kept: managedFields %d, containerStatuses %d, conditions %d",
			len(ta.ManagedFields), len(ta.Status.ContainerStatuses), len(ta.Status.Conditions))
	}
	if c := ta.Spec.Containers[0]; len(c.Env) != 0 || c.Image != "" || len(c.Ports) != 1 || c.Ports[0].HostPort != 8080 {
		t.Errorf("container kept %+v, want only requests and the host port", c)
	}
	if _, ok := ta.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok || ta.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "true" {
		t.Errorf("annotations %v: want only the ones nodetide reads", ta.Annotations)
	}
	if v := ta.Spec.Volumes; len(v) != 1 || v[0].Name != "tmp" || v[0].EmptyDir == nil {
		t.Errorf("volumes %+v: want local storage kept, the volumes nothing reads dropped", v)
	}
	if reflect.ValueOf(ta.Labels).UnsafePointer() != reflect.ValueOf(tb.Labels).UnsafePointer() ||
		&ta.Spec.Containers[0] != &tb.Spec.Containers[0] || &ta.Spec.Volumes[0] != &tb.Spec.Volumes[0] {
		t.Error("pods of one ReplicaSet do not share labels, containers and volumes")
	}
	if ta.Name != "a" || tb.Name != "b" || tb.Spec.NodeName != "n1" {
		t.Errorf("per-pod fields lost: %s %s %s", ta.Name, tb.Name, tb.Spec.NodeName)
	}

	// A pod of the same owner that differs is not forced into the shape.
	c := full("c")
	c.Labels["tier"] = "canary"
	c.Spec.Containers[0].Resources.Requests = snapshottest.Resources("2", "1Gi")
	tc := tr.Pod(&c)
	if tc.Labels["tier"] != "canary" || tc.Spec.Containers[0].Resources.Requests.Cpu().String() != "2" {
		t.Errorf("differing pod got the shared shape: labels %v, requests %v", tc.Labels, tc.Spec.Containers[0].Resources.Requests)
	}
	// The trimmed pod still round-trips as a Pod.
	if _, err := json.Marshal(tc); err != nil {
		t.Fatal(err)
	}
}

// A DaemonSet's pods, each pinned to its node by required node affinity,
// share one shape and keep their own pins.
func TestTrimSharesPinnedDaemonSetPods(t *testing.T) {
	pinned := func(name, node string) corev1.Pod {
		p := snapshottest.Pod("kube-system/"+name, "50m", "64Mi", snapshottest.Daemon("ds-agent"), snapshottest.On(node))
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}},
				MatchFields:      []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}}}
		return p
	}
	a, b := pinned("agent-a", "n1"), pinned("agent-b", "n2")
	tr := snapshot.NewTrimmer()
	ta, tb := tr.Pod(&a), tr.Pod(&b)
	if &ta.Spec.Containers[0] != &tb.Spec.Containers[0] {
		t.Error("the DaemonSet's pods do not share their containers")
	}
	for _, c := range []struct{ full, trimmed *corev1.Pod }{{&a, &ta}, {&b, &tb}} {
		if !reflect.DeepEqual(c.trimmed.Spec.Affinity, c.full.Spec.Affinity) {
			t.Errorf("pod %s: affinity %+v, want %+v", c.full.Name, c.trimmed.Spec.Affinity, c.full.Spec.Affinity)
		}
	}
}
