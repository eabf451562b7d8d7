package planner

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func keyPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func sign(n int) int { return cmp.Compare(n, 0) }

// compareKeys orders pods as their "ns/name" strings do, byte by byte.
func TestCompareKeys(t *testing.T) {
	tests := []struct {
		name       string
		a, b       [2]string // namespace, name
		want       int
		wantString bool // the same as comparing "ns/name"
	}{
		{name: "same namespace, by name", a: [2]string{"a", "x"}, b: [2]string{"a", "y"}, want: -1},
		{name: "same pod", a: [2]string{"a", "x"}, b: [2]string{"a", "x"}, want: 0},
		{name: "namespaces differ first", a: [2]string{"b", "a"}, b: [2]string{"a", "z"}, want: 1},
		{name: "'-' sorts before '/'", a: [2]string{"a-b", "z"}, b: [2]string{"a", "a"}, want: -1},
		{name: "'/' sorts before a letter", a: [2]string{"a", "z"}, b: [2]string{"ab", "a"}, want: -1},
		{name: "longer namespace first argument", a: [2]string{"ab", "a"}, b: [2]string{"a", "z"}, want: 1},
		{name: "empty namespace (cluster-scoped)", a: [2]string{"", "n1"}, b: [2]string{"a", "n0"}, want: -1},
		{name: "digits before '/'", a: [2]string{"team-1", "p"}, b: [2]string{"team", "p"}, want: -1},
		// Not a valid namespace: the key itself decides.
		{name: "namespace with a '/'", a: [2]string{"a", "b"}, b: [2]string{"a/x", "a"}, want: -1},
		{name: "namespace with a '/', reversed", a: [2]string{"a/x", "a"}, b: [2]string{"a", "b"}, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := keyPod(tc.a[0], tc.a[1]), keyPod(tc.b[0], tc.b[1])
			if got := sign(compareKeys(a, b)); got != tc.want {
				t.Errorf("compareKeys(%s, %s) = %d, want %d", podKey(a), podKey(b), got, tc.want)
			}
			if got, str := sign(compareKeys(a, b)), strings.Compare(podKey(a), podKey(b)); got != str {
				t.Errorf("compareKeys(%s, %s) = %d, but the keys compare %d", podKey(a), podKey(b), got, str)
			}
			if got := sign(compareKeys(b, a)); got != -tc.want {
				t.Errorf("compareKeys(%s, %s) = %d, want %d", podKey(b), podKey(a), got, -tc.want)
			}
		})
	}
	// Every pair of a mix of prefixes agrees with the keys' order.
	names := []string{"", "a", "a-b", "a.b", "ab", "a0", "b", "team", "team-1", "team-10"}
	for _, na := range names {
		for _, nb := range names {
			a, b := keyPod(na, "p"), keyPod(nb, "q")
			if got, want := sign(compareKeys(a, b)), strings.Compare(podKey(a), podKey(b)); got != want {
				t.Errorf("compareKeys(%s, %s) = %d, want %d", podKey(a), podKey(b), got, want)
			}
		}
	}
}

// sortRuns sorts whatever it is given; a few sorted runs it merges,
// stably.
func TestSortRuns(t *testing.T) {
	type item struct{ key, seq int }
	runs := func(lens ...int) []int { // descending starts make each run its own
		var out []int
		for r, n := range lens {
			for i := range n {
				out = append(out, (len(lens)-r)*100+i*2)
			}
		}
		return out
	}
	tests := []struct {
		name   string
		keys   []int
		stable bool // equal keys keep their order (a merge; more runs are sorted)
	}{
		{name: "empty", keys: nil, stable: true},
		{name: "one", keys: []int{5}, stable: true},
		{name: "sorted", keys: []int{1, 2, 2, 3, 9}, stable: true},
		{name: "two runs", keys: runs(3, 4), stable: true},
		{name: "three runs (an odd one out in a round)", keys: runs(2, 5, 1), stable: true},
		{name: "runs with equal keys", keys: []int{1, 3, 3, 5, 0, 3, 3, 9, 3}, stable: true},
		{name: "eight runs, the most merged", keys: runs(1, 2, 3, 1, 2, 3, 1, 2), stable: true},
		{name: "nine runs, sorted instead", keys: runs(1, 2, 3, 1, 2, 3, 1, 2, 2)},
		{name: "reversed", keys: []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := make([]item, len(tc.keys))
			for i, k := range tc.keys {
				s[i] = item{k, i}
			}
			want := slices.Clone(s)
			byKey := func(a, b item) int { return cmp.Compare(a.key, b.key) }
			slices.SortStableFunc(want, byKey)
			sortRuns(s, byKey)
			if !tc.stable {
				if !slices.IsSortedFunc(s, byKey) || len(s) != len(want) {
					t.Errorf("got %v, want sorted", s)
				}
				return
			}
			if !slices.Equal(s, want) {
				t.Errorf("got %v, want %v", s, want)
			}
		})
	}
}
