package k8s

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestCompareKeysIsStorageOrder(t *testing.T) {
	// The API server lists by "namespace/name", byte by byte: "a-b/x"
	// comes before "a/x" because '-' < '/'.
	keys := []objKey{{"a", "x"}, {"a-b", "x"}, {"a", "a"}, {"ab", "a"}, {"", "n1"}, {"", "n0"}, {"a.b", "z"}}
	slices.SortFunc(keys, compareKeys)
	var got []string
	for _, k := range keys {
		got = append(got, k.namespace+"/"+k.name)
	}
	want := slices.Clone(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

func TestCacheApplyKeepsOrderAndIndex(t *testing.T) {
	pod := func(ns, name, label string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"v": label}}}
	}
	tests := []struct {
		name    string
		changes map[objKey]*corev1.Pod
		want    []string
	}{
		{name: "nothing", changes: nil, want: []string{"a/p1=0", "a/p3=0", "b/p1=0"}},
		{name: "update in place", changes: map[objKey]*corev1.Pod{{"a", "p3"}: pod("a", "p3", "1")},
			want: []string{"a/p1=0", "a/p3=1", "b/p1=0"}},
		{name: "delete first and last", changes: map[objKey]*corev1.Pod{{"a", "p1"}: nil, {"b", "p1"}: nil},
			want: []string{"a/p3=0"}},
		{name: "add front, middle, back", changes: map[objKey]*corev1.Pod{
			{"a", "p0"}: pod("a", "p0", "n"), {"a", "p2"}: pod("a", "p2", "n"), {"c", "p"}: pod("c", "p", "n")},
			want: []string{"a/p0=n", "a/p1=0", "a/p2=n", "a/p3=0", "b/p1=0", "c/p=n"}},
		{name: "delete, add and update at once", changes: map[objKey]*corev1.Pod{
			{"a", "p3"}: nil, {"a", "p4"}: pod("a", "p4", "n"), {"b", "p1"}: pod("b", "p1", "2"), {"zz", "gone"}: nil},
			want: []string{"a/p1=0", "a/p4=n", "b/p1=2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(podKind(fake.NewClientset()), nil)
			c.items = []corev1.Pod{*pod("a", "p1", "0"), *pod("a", "p3", "0"), *pod("b", "p1", "0")}
			c.index = map[objKey]int{{"a", "p1"}: 0, {"a", "p3"}: 1, {"b", "p1"}: 2}
			c.apply(tc.changes)
			var got []string
			for i, p := range c.items {
				got = append(got, fmt.Sprintf("%s/%s=%s", p.Namespace, p.Name, p.Labels["v"]))
				if c.index[objKey{p.Namespace, p.Name}] != i {
					t.Errorf("index of %s/%s is %d, want %d", p.Namespace, p.Name, c.index[objKey{p.Namespace, p.Name}], i)
				}
			}
			if !slices.Equal(got, tc.want) || len(c.index) != len(c.items) {
				t.Errorf("items %v (index of %d), want %v", got, len(c.index), tc.want)
			}
		})
	}
}

func TestSortByKey(t *testing.T) {
	pod := func(ns, name, v string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"v": v}}}
	}
	tests := []struct {
		name string
		in   []corev1.Pod
		want []string
	}{
		{name: "empty", want: nil},
		{name: "sorted stays", in: []corev1.Pod{pod("a", "p1", "0"), pod("a", "p2", "0"), pod("b", "p1", "0")},
			want: []string{"a/p1=0", "a/p2=0", "b/p1=0"}},
		{name: "reversed", in: []corev1.Pod{pod("b", "p1", "0"), pod("a", "p2", "0"), pod("a", "p1", "0")},
			want: []string{"a/p1=0", "a/p2=0", "b/p1=0"}},
		{name: "storage order, not field order", in: []corev1.Pod{pod("a", "x", "0"), pod("a-b", "x", "0")},
			want: []string{"a-b/x=0", "a/x=0"}},
		{name: "cycles of several lengths", in: []corev1.Pod{pod("", "e", "0"), pod("", "a", "0"), pod("", "d", "0"),
			pod("", "b", "0"), pod("", "c", "0"), pod("", "g", "0"), pod("", "f", "0")},
			want: []string{"/a=0", "/b=0", "/c=0", "/d=0", "/e=0", "/f=0", "/g=0"}},
		{name: "equal keys keep their order", in: []corev1.Pod{pod("b", "p", "0"), pod("a", "p", "1"), pod("a", "p", "2")},
			want: []string{"a/p=1", "a/p=2", "b/p=0"}},
	}
	key := podKind(fake.NewClientset()).key
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items := slices.Clone(tc.in)
			index := sortByKey(items, key)
			var got []string
			for i, p := range items {
				got = append(got, fmt.Sprintf("%s/%s=%s", p.Namespace, p.Name, p.Labels["v"]))
				if j, ok := index[objKey{p.Namespace, p.Name}]; !ok || items[j].Namespace != p.Namespace || items[j].Name != p.Name {
					t.Errorf("index of %s/%s (item %d) is %d (%v)", p.Namespace, p.Name, i, j, ok)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
		})
	}
}

// The check that a list is in key order reads each key once and copies no
// object: a comparison by value copied two whole objects, moved to the
// heap, per comparison (at 150,000 pods, 370 MB of garbage per cold read).
func TestSortByKeyAllocatesPerList(t *testing.T) {
	items := make([]corev1.Pod, 1000)
	for i := range items {
		items[i].Namespace, items[i].Name = "ns", fmt.Sprintf("p%04d", i)
	}
	key := podKind(fake.NewClientset()).key
	allocs := testing.AllocsPerRun(5, func() { sortByKey(items, key) })
	// The keys and the index: a handful of allocations, whatever the length.
	if allocs > 50 {
		t.Errorf("%v allocations to check 1000 sorted pods, want a few per list, not per pod", allocs)
	}
}
