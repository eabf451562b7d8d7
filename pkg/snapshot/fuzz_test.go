package snapshot_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
)

// FuzzReadSnapshot: snapshot.ReadSnapshot never panics, and a snapshot it accepts
// (in either form) is one nodetide can write, whose quantities the planner
// can count, which reads back to the same document, and whose compact form
// plans alike.
func FuzzReadSnapshot(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "planner", "testdata", "*", "snapshot.json"))
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		s, err := snapshot.ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			f.Fatal(err)
		}
		var compact bytes.Buffer
		if err := snapshot.WriteCompactSnapshot(&compact, s); err != nil {
			f.Fatal(err)
		}
		f.Add(compact.Bytes())
	}
	f.Add([]byte(`{"capturedAt": "2026-11-30T10:00:00Z", "pods": [{"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e309"}}}]}}]}`))
	f.Add([]byte(`{"capturedAt": "2026-11-30T10:00:00Z", "nodeGroups": [{"name": "g", "maxSize": 2, "template": {"allocatable": {"cpu": 4}}}]}`))
	f.Add([]byte(`{"capturedAt": "2026-11-30T10:00:00Z", "state": {"replacing": {"r-1": {"nodeGroup": "g", "delta": 1, "nodes": ["a"], ` +
		`"since": "2026-11-30T09:50:00+01:00", "drained": "2026-11-30T09:55:00.5+01:00", "receivers": ["b", "c"]}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := snapshot.ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			return
		}
		checkCountable(t, s)
		var first bytes.Buffer
		if err := snapshot.WriteSnapshot(&first, s); err != nil {
			t.Fatalf("accepted snapshot cannot be written: %v", err)
		}
		again, err := snapshot.ReadSnapshot(bytes.NewReader(first.Bytes()))
		if err != nil {
			t.Fatalf("written snapshot does not read back: %v\n%s", err, first.String())
		}
		var second bytes.Buffer
		if err := snapshot.WriteSnapshot(&second, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.Bytes(), second.Bytes()) {
			t.Fatalf("write, read, write differs:\n%s\n---\n%s", first.String(), second.String())
		}
		var compact bytes.Buffer
		if err := snapshot.WriteCompactSnapshot(&compact, s); err != nil {
			t.Fatalf("accepted snapshot cannot be written compact: %v", err)
		}
		fromCompact, err := snapshot.ReadSnapshot(bytes.NewReader(compact.Bytes()))
		if err != nil {
			t.Fatalf("compact form does not read back: %v\n%s", err, compact.String())
		}
		if got, want := planJSON(t, fromCompact, planner.DefaultSettings()), planJSON(t, s, planner.DefaultSettings()); got != want {
			t.Fatalf("compact form plans differently:\n--- got\n%s\n--- want\n%s", got, want)
		}
	})
}

// checkCountable fails t if an accepted snapshot holds a quantity the
// planner cannot count.
func checkCountable(t *testing.T, s snapshot.Snapshot) {
	t.Helper()
	check := func(what string, l map[string]error) {
		for name, err := range l {
			if err != nil {
				t.Fatalf("accepted %s %s: %v", what, name, err)
			}
		}
	}
	for _, g := range s.NodeGroups {
		m := map[string]error{}
		for name, q := range g.Template.Allocatable {
			m[string(name)] = snapshot.CheckQuantity(q)
		}
		check("template allocatable", m)
	}
	for _, p := range s.Pods {
		m := map[string]error{}
		for _, c := range append(append([]corev1.Container(nil), p.Spec.Containers...), p.Spec.InitContainers...) {
			for name, q := range c.Resources.Requests {
				m[c.Name+"/"+string(name)] = snapshot.CheckQuantity(q)
			}
			for name, q := range c.Resources.Limits {
				m[c.Name+"/limit/"+string(name)] = snapshot.CheckQuantity(q)
			}
		}
		check("pod "+p.Name, m)
	}
	for _, n := range s.Nodes {
		m := map[string]error{}
		for name, q := range n.Status.Allocatable {
			m[string(name)] = snapshot.CheckQuantity(q)
		}
		check("node "+n.Name, m)
	}
}
