package shadowcompare

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// yamlStatusDoc is a status in the shape cluster-autoscaler 1.30 and later
// writes (clusterstate/api's ClusterAutoscalerStatus as YAML).
const yamlStatusDoc = `time: 2026-12-03 10:00:00.5 +0000 UTC
autoscalerStatus: Running
clusterWide:
  health:
    status: Healthy
    nodeCounts:
      registered: {total: 4, ready: 4, notStarted: 0}
      longUnregistered: 0
      unregistered: 0
    lastProbeTime: "2026-12-03T10:00:00Z"
    lastTransitionTime: "2026-12-03T09:00:00Z"
  scaleUp:
    status: InProgress
    lastProbeTime: "2026-12-03T10:00:00Z"
  scaleDown:
    status: CandidatesPresent
    candidates: 1
nodeGroups:
- name: workers
  health:
    status: Healthy
    nodeCounts:
      registered: {total: 3, ready: 3, notStarted: 0}
      longUnregistered: 0
      unregistered: 0
    cloudProviderTarget: 3
    minSize: 1
    maxSize: 10
  scaleUp:
    status: InProgress
  scaleDown:
    status: CandidatesPresent
    candidates: 1
- name: gpu
  health:
    status: Healthy
    cloudProviderTarget: 0
    minSize: 0
    maxSize: 4
  scaleUp: {status: NoActivity}
  scaleDown: {status: NoCandidates}
`

// textStatusDoc is a status in the text cluster-autoscaler wrote before 1.30.
const textStatusDoc = `Cluster-autoscaler status at 2026-12-03 10:00:00.5 +0000 UTC:
Cluster-wide:
  Health:      Healthy (ready=4 unready=0 notStarted=0 longNotStarted=0 registered=4 longUnregistered=0)
               LastProbeTime:      2026-12-03 10:00:00 +0000 UTC
               LastTransitionTime: 2026-12-03 09:00:00 +0000 UTC
  ScaleUp:     InProgress (ready=4 registered=4)
  ScaleDown:   CandidatesPresent (candidates=1)

NodeGroups:
  Name:        workers
  Health:      Healthy (ready=3 unready=0 notStarted=0 longNotStarted=0 registered=3 longUnregistered=0 cloudProviderTarget=3 (minSize=1, maxSize=10))
               LastProbeTime:      2026-12-03 10:00:00 +0000 UTC
  ScaleUp:     InProgress (ready=3 cloudProviderTarget=3)
  ScaleDown:   CandidatesPresent (candidates=1)

  Name:        gpu
  Health:      Healthy (ready=0 unready=0 notStarted=0 longNotStarted=0 registered=0 longUnregistered=0 cloudProviderTarget=0 (minSize=0, maxSize=4))
  ScaleUp:     NoActivity (ready=0 cloudProviderTarget=0)
  ScaleDown:   NoCandidates (candidates=0)
`

func statusMap(doc string, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler-status", Annotations: annotations},
		Data:       map[string]string{StatusKey: doc},
	}
}

func TestParseStatus(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 500_000_000, time.UTC)
	noTime := strings.Replace(yamlStatusDoc, "time: 2026-12-03 10:00:00.5 +0000 UTC\n", "", 1)
	annotated := map[string]string{LastUpdatedAnnotation: "2026-12-03 10:00:00.5 +0000 UTC"}
	cases := []struct {
		name    string
		cm      *corev1.ConfigMap
		want    map[string]int
		wantErr string
	}{
		{name: "yaml", cm: statusMap(yamlStatusDoc, nil), want: map[string]int{"workers": 3, "gpu": 0}},
		{name: "text", cm: statusMap(textStatusDoc, nil), want: map[string]int{"workers": 3, "gpu": 0}},
		{name: "yaml time from the annotation", cm: statusMap(noTime, annotated), want: map[string]int{"workers": 3, "gpu": 0}},
		{name: "yaml without any time", cm: statusMap(noTime, nil), wantErr: "no status time"},
		{name: "no groups", cm: statusMap("autoscalerStatus: Running\ntime: 2026-12-03 10:00:00.5 +0000 UTC\n", nil), want: map[string]int{}},
		{name: "initializing", cm: statusMap("autoscalerStatus: Initializing\n", annotated), wantErr: "is Initializing, not Running"},
		{name: "no status key", cm: &corev1.ConfigMap{Data: map[string]string{"other": "x"}}, wantErr: `no "status" key`},
		{name: "not yaml", cm: statusMap("{{{", annotated), wantErr: "neither cluster-autoscaler's YAML nor its text"},
		{name: "a list, not a document", cm: statusMap("- a\n- b\n", annotated), wantErr: "neither"},
		{name: "group without target", cm: statusMap(strings.Replace(yamlStatusDoc, "cloudProviderTarget: 3", "minSizeX: 3", 1), nil), wantErr: `"workers" has no cloudProviderTarget`},
		{name: "target not a number", cm: statusMap(strings.Replace(yamlStatusDoc, "cloudProviderTarget: 3", "cloudProviderTarget: three", 1), nil), wantErr: "neither"},
		{name: "negative target", cm: statusMap(strings.Replace(yamlStatusDoc, "cloudProviderTarget: 3", "cloudProviderTarget: -3", 1), nil), wantErr: "negative"},
		{name: "group twice", cm: statusMap(strings.Replace(yamlStatusDoc, "name: gpu", "name: workers", 1), nil), wantErr: "listed twice"},
		{name: "group without name", cm: statusMap(strings.Replace(yamlStatusDoc, "name: gpu", "name: ''", 1), nil), wantErr: "without a name"},
		{name: "bad time", cm: statusMap(strings.Replace(yamlStatusDoc, "time: 2026-12-03 10:00:00.5 +0000 UTC", "time: yesterday", 1), nil), wantErr: "is not a time"},
		{name: "text without target", cm: statusMap(strings.Replace(textStatusDoc, "cloudProviderTarget=3 (", "(", 1), nil), wantErr: `"workers": Health has no cloudProviderTarget`},
		{name: "text name without health", cm: statusMap(textStatusDoc+"\n  Name:        late\n", nil), wantErr: `"late" has no Health line`},
		{name: "text bad time", cm: statusMap(strings.Replace(textStatusDoc, "2026-12-03 10:00:00.5 +0000 UTC:", "soon:", 1), nil), wantErr: "is not a time"},
		{name: "too large", cm: statusMap(strings.Repeat("x", maxStatusBytes+1), nil), wantErr: "more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseStatus(tc.cm)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !st.At.Equal(at) || len(st.Targets) != len(tc.want) {
				t.Fatalf("status %+v, want at %s targets %v", st, at, tc.want)
			}
			for g, n := range tc.want {
				if got, ok := st.Targets[g]; !ok || got != n {
					t.Errorf("target of %s: %d (%v), want %d", g, got, ok, n)
				}
			}
		})
	}
}

func TestParseScaleUp(t *testing.T) {
	cases := []struct {
		msg     string
		want    []ScaleUp
		wantErr string
	}{
		{msg: "pod triggered scale-up: [{workers 1->3 (max: 10)}]", want: []ScaleUp{{Group: "workers", From: 1, To: 3, Max: 10}}},
		{msg: "pod triggered scale-up: [{workers 1->3 (max: 10)} {gpu 0->1 (max: 4)}]",
			want: []ScaleUp{{Group: "workers", From: 1, To: 3, Max: 10}, {Group: "gpu", From: 0, To: 1, Max: 4}}},
		{msg: "pod triggered scale-up: [{my asg 2->4 (max: 4)}]", want: []ScaleUp{{Group: "my asg", From: 2, To: 4, Max: 4}}},
		{msg: "pod triggered scale-up: []", wantErr: "names no node group"},
		{msg: "pod didn't trigger scale-up: ...", wantErr: "is not"},
		{msg: "pod triggered scale-up: [{workers 1->3}]", wantErr: "cannot read"},
		{msg: "pod triggered scale-up: [{workers 3->1 (max: 10)}]", wantErr: "is no scale-up"},
		{msg: "pod triggered scale-up: [{workers 1->30 (max: 10)}]", wantErr: "is no scale-up"},
		{msg: "pod triggered scale-up: [{workers 1->3 (max: 10)} trailing]", wantErr: "cannot read"},
		{msg: "pod triggered scale-up: [{workers 1->99999999999999999999 (max: 10)}]", wantErr: "out of range"},
	}
	for _, tc := range cases {
		got, err := ParseScaleUp(tc.msg)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want one containing %q", tc.msg, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%q: %+v, %v; want %+v", tc.msg, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: [%d] %+v, want %+v", tc.msg, i, got[i], tc.want[i])
			}
		}
	}
}

func caEvent(name, reason, kind, object, msg string, at time.Time) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: object, Namespace: "default"},
		Reason:         reason, Message: msg, Source: corev1.EventSource{Component: Component},
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
	}
}

func TestObserve(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 30, 0, time.UTC)
	since := now.Add(-time.Minute)
	in := now.Add(-10 * time.Second)
	up := "pod triggered scale-up: [{workers 1->3 (max: 10)}]"
	nodetide := caEvent("nt", ReasonTriggeredScaleUp, "Pod", "p9", "pod triggered scale-up: workers +2 (1->3)", in)
	nodetide.Source.Component = "nodetide"
	events := []corev1.Event{
		caEvent("a", ReasonTriggeredScaleUp, "Pod", "p1", up, in),
		caEvent("b", ReasonTriggeredScaleUp, "Pod", "p2", up, in.Add(time.Second)), // the same scale-up
		caEvent("old", ReasonTriggeredScaleUp, "Pod", "p3", "pod triggered scale-up: [{workers 0->1 (max: 10)}]", since.Add(-time.Second)),
		caEvent("c", ReasonScaleDown, "Node", "n1", ScaleDownMessage, in),
		caEvent("pod", ReasonScaleDown, "Pod", "p4", "deleting pod for node scale down", in), // not a node
		nodetide,
	}
	obs := Observe(statusMap(yamlStatusDoc, nil), nil, events, since, now, 0)
	if len(obs.Problems) != 0 || obs.Status == nil || obs.Status.Targets["workers"] != 3 {
		t.Fatalf("observed %+v", obs)
	}
	if len(obs.ScaleUps) != 1 || obs.ScaleUps[0].To != 3 || !obs.ScaleUps[0].At.Equal(in.Add(time.Second)) {
		t.Errorf("scale-ups %+v, want one of workers to 3 at its last Event", obs.ScaleUps)
	}
	if len(obs.ScaleDowns) != 1 || !obs.ScaleDowns["n1"].Equal(in) {
		t.Errorf("scale-downs %+v, want n1", obs.ScaleDowns)
	}

	bad := caEvent("d", ReasonTriggeredScaleUp, "Pod", "p5", "pod triggered scale-up: [{workers ??}]", in)
	untimed := caEvent("e", ReasonScaleDown, "Node", "n2", ScaleDownMessage, time.Time{})
	obs = Observe(statusMap(yamlStatusDoc, nil), nil, []corev1.Event{bad, untimed}, since, now, 10*time.Second)
	if len(obs.Problems) != 2 || !strings.Contains(obs.Problems[0], "is cluster-autoscaler running?") ||
		!strings.Contains(obs.Problems[1], "2 cluster-autoscaler Event(s) unreadable") {
		t.Errorf("problems %q, want a stale status and 2 unreadable Events", obs.Problems)
	}
	obs = Observe(nil, errNotFound, nil, since, now, 0)
	if obs.Status != nil || len(obs.Problems) != 1 || !strings.Contains(obs.Problems[0], "not found") {
		t.Errorf("missing ConfigMap: %+v", obs)
	}
}

type notFound struct{}

func (notFound) Error() string { return `configmaps "cluster-autoscaler-status" not found` }

var errNotFound error = notFound{}
