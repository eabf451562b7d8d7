package snapshot_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestCompactPodsReadWithFewAllocations: each pod a compact snapshot adds
// costs two allocations (its name and UID), not one per key and timestamp:
// at 150,000 pods each allocation per pod is megabytes at the plan's peak.
func TestCompactPodsReadWithFewAllocations(t *testing.T) {
	doc := func(pods int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"format": "nodetide.io/snapshot-compact/v1", "capturedAt": "2026-11-30T10:00:00Z",
		  "nodes": [`)
		for i := range 10 {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"metadata": {"name": "node-%d"}}`, i)
		}
		b.WriteString(`],
		  "podShapes": [{"labels": {"app": "web"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}],
		  "pods": [`)
		for i := range pods {
			if i > 0 {
				b.WriteString(",\n")
			}
			fmt.Fprintf(&b, `{"name": "web-5d9f8-%05d", "namespace": "shop", "uid": "0b7e9d2c-0000-4a1f-8e3b-%012d", "shape": 0, "nodeName": "node-%d", "phase": "Running", "creationTimestamp": "2026-11-30T09:00:00Z"}`, i, i, i%10)
		}
		b.WriteString("]}")
		return b.Bytes()
	}
	allocs := func(pods int) float64 {
		d := doc(pods)
		return testing.AllocsPerRun(3, func() {
			if _, err := snapshot.ReadSnapshot(bytes.NewReader(d)); err != nil {
				t.Fatal(err)
			}
		})
	}
	const n = 2000
	if perPod := (allocs(2*n) - allocs(n)) / n; perPod > 2.2 {
		t.Errorf("%.1f allocations per pod, want 2", perPod)
	}
}

func TestUTCSecondsReadsAsTimeParse(t *testing.T) {
	for _, s := range []string{
		"2026-11-30T10:00:00Z", "2024-02-29T23:59:59Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
		"2026-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
		"2026-11-00T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T10:60:00Z", "2026-11-30T10:00:60Z",
		"2026-11-3xT10:00:00Z", "2026-11-30 10:00:00Z", "2026-11-30T10:00:00z", "+026-11-30T10:00:00Z",
		"2026-11-30T10:00:00.5Z", "2026-11-30T10:00:00+01:00", "2026-11-30T10:00:00",
	} {
		want, werr := time.Parse(time.RFC3339, s)
		got, ok := snapshot.UTCSeconds([]byte(s))
		switch {
		case ok && (werr != nil || !got.Equal(want) || got.Location() != want.Location()):
			t.Errorf("snapshot.UTCSeconds(%q) = %v, time.Parse = %v, %v", s, got, want, werr)
		case !ok && werr == nil && len(s) == len("2006-01-02T15:04:05Z") && strings.HasSuffix(s, "Z"):
			t.Errorf("snapshot.UTCSeconds(%q) left to time.Parse a time in the form it reads", s)
		}
	}
}

// TestCompactReadsEscapedKeys: a key written with escapes is still the key
// it spells.
func TestCompactReadsEscapedKeys(t *testing.T) {
	doc := `{"format": "nodetide.io/snapshot-compact/v1", "capturedAt": "2026-11-30T10:00:00Z",
	  "podShapes": [{"spec": {"containers": [{"name": "c"}]}}],
	  "pods": [{"na\u006de": "b", "namespace": "d", "shape": 0, "creation\u0054imestamp": "2026-11-30T09:00:00Z"}]}`
	s, err := snapshot.ReadSnapshot(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Pods[0]; p.Name != "b" || !p.CreationTimestamp.Time.Equal(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("pod %s created %v", p.Name, p.CreationTimestamp)
	}
}

func TestTrimmerSharesNodeResourceLists(t *testing.T) {
	list := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	node := func(name string, alloc corev1.ResourceList) corev1.Node {
		n := corev1.Node{}
		n.Name = name
		n.Status.Allocatable, n.Status.Capacity = alloc, alloc
		return n
	}
	tr := snapshot.NewTrimmer()
	a, b := node("a", list("8", "32Gi")), node("b", list("8", "32Gi"))
	c, d := node("c", list("16", "32Gi")), node("d", list("8", "34359738368"))
	ta, tb, tc, td := tr.Node(&a), tr.Node(&b), tr.Node(&c), tr.Node(&d)
	same := func(x, y corev1.ResourceList) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	if !same(ta.Status.Allocatable, tb.Status.Allocatable) || !same(ta.Status.Capacity, tb.Status.Allocatable) {
		t.Error("nodes with equal lists do not share them")
	}
	// Equal in value but written differently: kept apart, so each node
	// writes back as it was read.
	if same(ta.Status.Allocatable, tc.Status.Allocatable) || same(ta.Status.Allocatable, td.Status.Allocatable) {
		t.Error("different lists shared")
	}
	if q := td.Status.Allocatable[corev1.ResourceMemory]; q.String() != "34359738368" {
		t.Errorf("memory reads %s, want it as written", q.String())
	}

	// Bounded: past snapshot.MaxSharedLists distinct lists, new ones are kept as
	// they are.
	for i := range snapshot.MaxSharedLists + 10 {
		n := node("n", list(resource.NewMilliQuantity(int64(1000+i), resource.DecimalSI).String(), "1Gi"))
		tr.Node(&n)
	}
	if tr.SharedLists() > snapshot.MaxSharedLists {
		t.Errorf("%d lists kept, want at most %d", tr.SharedLists(), snapshot.MaxSharedLists)
	}
}

func TestCheckQuantityBounds(t *testing.T) {
	for _, tc := range []struct {
		q  string
		ok bool
	}{
		{"100m", true}, {"32Gi", true}, {"0", true}, {"1e-9", true}, {"999999999999999", true},
		{"1e15", true}, {"9223372036854775807m", true}, {"9223372036854775", true},
		{"9223372036854775808m", false}, {"9223372036854776", false}, {"1e16", false}, {"1e309", false},
		{"-1", false}, {"-100m", false},
	} {
		err := snapshot.CheckQuantity(resource.MustParse(tc.q))
		if (err == nil) != tc.ok {
			t.Errorf("CheckQuantity(%s) = %v, want ok %t", tc.q, err, tc.ok)
		}
	}
	// A read checks every node's lists: ordinary amounts cost nothing.
	q := resource.MustParse("32Gi")
	if n := testing.AllocsPerRun(10, func() { _ = snapshot.CheckQuantity(q) }); n != 0 {
		t.Errorf("CheckQuantity(32Gi) allocates %.0f times", n)
	}
}
