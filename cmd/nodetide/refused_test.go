package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/state"
)

// TestStatusShowsARefusedScaleUp: `nodetide run --once` on the bed, its
// Auto Scaling group's SetDesiredCapacity refused with a ValidationError (its
// max lowered meanwhile); `nodetide status` then shows what docs/operations.md says:
// the error as the last error, the problems ScaleUpFailed and
// GroupBackedOff, the group BackedOff and ScaleUpFailed, the failed action,
// and no word of groups the cycle did not read; the pending pod has its
// NotTriggerScaleUp Event.
func TestStatusShowsARefusedScaleUp(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	db := testbed.DynamoDB(t)
	const table = "cli-refused"
	if err := state.CreateTable(ctx, db.Client(t), table); err != nil {
		t.Fatal(err)
	}
	d := fakeaws.New()
	t.Cleanup(d.Close)
	lt := fakeaws.LaunchTemplate{ID: "lt-0123456789abcdef0", Name: ns, InstanceTypes: []string{"m5.xlarge"}}
	d.AddLaunchTemplate(lt)
	d.AddGroup(fakeaws.Group{Name: ns, MaxSize: 2, LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: lt.ID, Version: "$Latest"},
		Tags: map[string]string{aws.TagTemplatePrefix + "label/pool": ns}})
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_AUTO_SCALING": d.URL(), "AWS_ENDPOINT_URL_EC2": d.URL(), "AWS_REGION": d.Region(),
		"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "not-a-secret",
	} {
		t.Setenv(k, v)
	}
	cfg := writeFile(t, "nodetide.yaml", fmt.Sprintf(`cluster: {name: prod, kubernetes: {kubeconfig: %s}}
state: {dynamodb: {table: %s, endpoint: %s}}
nodeGroups:
  - {name: %s, provider: aws, aws: {autoScalingGroup: %s}}
scaleUp: {pendingPodMinAge: 1s}
`, cp.KubeconfigPath, table, db.Endpoint, ns, ns))

	// One pending pod of 3 CPU: one m5.xlarge.
	owner, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: boolPtr(true)}}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": ns}, Containers: []corev1.Container{{Name: "c", Image: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}},
	}
	if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitPodsUnschedulable(t, ns, 1, time.Minute)
	time.Sleep(time.Second) // past pendingPodMinAge

	const refusal = "New SetDesiredCapacity value 1 is above max value 0 for the AutoScalingGroup."
	d.FailNext("SetDesiredCapacity", 1, fakeaws.ValidationError(refusal))
	if out, errOut, code := nodetide(t, "run", "--once", "--config", cfg); code != 0 {
		t.Fatalf("run --once: exit %d: %s\n%s", code, out, errOut)
	}
	if n := len(d.Requests("SetDesiredCapacity")); n != 1 {
		t.Fatalf("%d SetDesiredCapacity calls, want the one refused", n)
	}

	out, errOut, code := nodetide(t, "status", "--config", cfg)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	line := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}
	if l := line("Last error:   "); !strings.Contains(l, "ago): scaleUp "+ns+": ") || !strings.HasSuffix(l, "api error ValidationError: "+refusal) {
		t.Errorf("last error line %q, want the scale-up and the cloud's answer", l)
	}
	if l := line("Problem:      ScaleUpFailed"); l != "Problem:      ScaleUpFailed (1): "+ns+" (AboveMax)" {
		t.Errorf("ScaleUpFailed problem line %q", l)
	}
	if l := line("Problem:      GroupBackedOff"); !strings.HasPrefix(l, "Problem:      GroupBackedOff (1): "+ns+" until ") {
		t.Errorf("GroupBackedOff problem line %q", l)
	}
	if l := line(ns + " "); !strings.Contains(l, " BackedOff,ScaleUpFailed ") || !strings.Contains(l, "(in ") {
		t.Errorf("group row %q, want health BackedOff,ScaleUpFailed and its backoff to come", l)
	}
	if l := line("scaleUp "); !strings.Contains(l, ns) || !strings.Contains(l, "api error ValidationError") {
		t.Errorf("action row %q, want the failed scale-up with its error", l)
	}
	if strings.Contains(out, "did not read them") {
		t.Errorf("status says the cycle did not read the groups it read:\n%s", out)
	}

	evs, err := cp.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": "web"}.String()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs.Items {
		if e.Source.Component == "nodetide" {
			got = append(got, e.Type+" "+e.Reason+": "+e.Message)
		}
	}
	if want := "Normal NotTriggerScaleUp: pod didn't trigger scale-up: 1 in backoff after failed scale-up"; len(got) != 1 || got[0] != want {
		t.Errorf("the pod's nodetide events %q, want only %q", got, want)
	}
	if t.Failed() {
		t.Logf("status:\n%s", out)
	}
}
