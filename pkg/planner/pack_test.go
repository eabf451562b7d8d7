package planner

import (
	"math/rand/v2"
	"testing"
)

// firstFit is the reference: per-pod first fit, pods in the given order,
// nodes in opening order, at most limit nodes.
func firstFit(capacity res, limit int64, open []res, pods []res) (placed []bool, opened int64) {
	nodes := append([]res(nil), open...)
	for _, p := range pods {
		ok := false
		for i := range nodes {
			if fitCount(nodes[i], p) > 0 {
				nodes[i] = nodes[i].sub(p)
				ok = true
				break
			}
		}
		if !ok && opened < limit && fitCount(capacity, p) > 0 {
			nodes = append(nodes, capacity.sub(p))
			opened++
			ok = true
		}
		placed = append(placed, ok)
	}
	return placed, opened
}

func TestPacker(t *testing.T) {
	capacity := res{cpu: 4000, mem: 16 << 30, pods: 110}
	type class struct {
		req    res
		n      int64
		placed int64
	}
	cases := []struct {
		name    string
		limit   int64
		upfront int64 // empty nodes already open
		classes []class
		opened  int64
	}{
		{"one class fills nodes", 10, 0, []class{{res{cpu: 1500, pods: 1}, 5, 5}}, 3},
		{"a limit stops opening", 2, 0, []class{{res{cpu: 1500, pods: 1}, 5, 4}}, 2},
		{"small pods fill the gaps", 10, 0, []class{{res{cpu: 3000, pods: 1}, 3, 3}, {res{cpu: 1000, pods: 1}, 4, 4}}, 4},
		{"open nodes are used first", 0, 2, []class{{res{cpu: 3000, pods: 1}, 3, 2}}, 0},
		{"pod slots count", 10, 0, []class{{res{pods: 1}, 300, 300}}, 3},
		{"too big for the template", 10, 0, []class{{res{cpu: 5000, pods: 1}, 1, 0}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := packer{cap: capacity, limit: tc.limit}
			if tc.upfront > 0 {
				p.runs = []run{{tc.upfront, capacity}}
			}
			for i, c := range tc.classes {
				if got := p.place(c.req, c.n); got != c.placed {
					t.Errorf("class %d placed %d, want %d", i, got, c.placed)
				}
			}
			if p.opened != tc.opened {
				t.Errorf("opened %d nodes, want %d", p.opened, tc.opened)
			}
		})
	}
}

// TestPackerMatchesFirstFit: packing whole classes over runs of identical
// nodes gives exactly what per-pod first fit gives.
func TestPackerMatchesFirstFit(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		capacity := res{cpu: int64(1 + r.IntN(8000)), mem: int64(1 + r.IntN(32000)), gpu: int64(r.IntN(3)), pods: int64(1 + r.IntN(30))}
		limit := int64(r.IntN(40))
		upcoming := int64(r.IntN(4))
		p := packer{cap: capacity, limit: limit}
		var open []res
		if upcoming > 0 {
			p.runs = []run{{upcoming, capacity}}
			for range upcoming {
				open = append(open, capacity)
			}
		}
		var pods []res
		var want []int64
		nClasses := 1 + r.IntN(6)
		type cls struct {
			req res
			n   int64
		}
		var classes []cls
		for range nClasses {
			c := cls{req: res{cpu: int64(r.IntN(3000)), mem: int64(r.IntN(9000)), gpu: int64(r.IntN(2)) * int64(r.IntN(2)), pods: 1}, n: int64(1 + r.IntN(60))}
			classes = append(classes, c)
			for range c.n {
				pods = append(pods, c.req)
			}
		}
		placed, opened := firstFit(capacity, limit, open, pods)
		k := 0
		for _, c := range classes {
			var n int64
			for range c.n {
				if placed[k] {
					n++
				}
				k++
			}
			want = append(want, n)
		}
		for j, c := range classes {
			if got := p.place(c.req, c.n); got != want[j] {
				t.Fatalf("case %d class %d: placed %d, first fit %d", i, j, got, want[j])
			}
		}
		if p.opened != opened {
			t.Fatalf("case %d: opened %d, first fit %d", i, p.opened, opened)
		}
	}
}
