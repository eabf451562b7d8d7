package kubeevents_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/kubeevents"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// TestRecordOnTheAPIServer: a message over 1 KB is cut to 1 KB on a
// character boundary (events.k8s.io's limit, so the event reads the same in
// both APIs), an object name of 253 characters works; a repeat, also from a
// new process, counts on the same object.
func TestRecordOnTheAPIServer(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	name := strings.Repeat("p", 253)
	msg := strings.Repeat("é", 700) // 1,400 bytes
	ev := kubeevents.Event{Object: kubeevents.Pod(ns, name, "uid-1"), Type: corev1.EventTypeNormal,
		Reason: kubeevents.ReasonNotTriggerScaleUp, Message: msg}

	list := func() []corev1.Event {
		t.Helper()
		l, err := cp.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": name}.String(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	first := &kubeevents.Recorder{Client: cp.Client, Instance: "one"}
	if n := first.RecordAll(ctx, []kubeevents.Event{ev}); n != 1 {
		t.Fatalf("RecordAll wrote %d, want 1 (see the log)", n)
	}
	got := list()
	if len(got) != 1 {
		t.Fatalf("%d events, want 1", len(got))
	}
	e := got[0]
	if len(e.Message) > 1024 || !utf8.ValidString(e.Message) || !strings.HasSuffix(e.Message, "...") {
		t.Errorf("message of %d bytes, valid UTF-8 %t: want at most 1024, cut on a character, marked", len(e.Message), utf8.ValidString(e.Message))
	}
	if e.ReportingController != "nodetide" || e.ReportingInstance != "one" || e.Source.Component != "nodetide" || e.Count != 1 {
		t.Errorf("event: controller %q instance %q source %q count %d", e.ReportingController, e.ReportingInstance, e.Source.Component, e.Count)
	}

	first.Record(ctx, ev)
	if got := list(); len(got) != 1 || got[0].Count != 2 {
		t.Fatalf("after a repeat: %d events, count %d; want one, count 2", len(got), got[0].Count)
	}
	// A new process does not know the count: it patches the same object
	// (counting from 1 again) rather than add one.
	second := &kubeevents.Recorder{Client: cp.Client, Instance: "two"}
	second.Record(ctx, ev)
	if got := list(); len(got) != 1 || got[0].Count != 2 {
		t.Fatalf("after a repeat from a new process: %d events, want one, count 2", len(got))
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var r *kubeevents.Recorder
	r.Record(context.Background(), kubeevents.Event{})
	if n := r.RecordAll(context.Background(), []kubeevents.Event{{}}); n != 0 {
		t.Fatalf("nil recorder wrote %d", n)
	}
}
