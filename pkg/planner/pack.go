package planner

import "slices"

// run is a stretch of identical template nodes, in the order they were
// opened: n nodes with free capacity each.
type run struct {
	n    int64
	free res
}

// packer does first-fit onto template nodes, keeping runs of identical
// nodes as one entry. Pods of one equivalence class are placed together:
// per-pod first fit would fill the first node of the first run that has room
// up to how many fit, then the next node, and so on, so a run that takes the
// class is split into at most three runs (filled, one partly filled,
// untouched). The result is exactly per-pod first fit at a cost independent
// of the pod count.
type packer struct {
	cap    res   // free capacity of a new node (allocatable minus DaemonSets)
	limit  int64 // how many more nodes may be opened
	opened int64
	runs   []run
}

// place puts up to count pods of req onto open nodes, then onto new ones,
// and returns how many it placed.
func (p *packer) place(req res, count int64) int64 {
	var placed int64
	for i := 0; i < len(p.runs) && count > 0; i++ {
		r := &p.runs[i]
		k := fitCount(r.free, req)
		if k == 0 {
			continue
		}
		full := count / k
		if full >= r.n {
			placed += r.n * k
			count -= r.n * k
			r.free = r.free.sub(req.mul(k))
			continue
		}
		rem := count - full*k
		orig := *r
		var parts []run
		if full > 0 {
			parts = append(parts, run{full, orig.free.sub(req.mul(k))})
		}
		left := orig.n - full
		if rem > 0 {
			parts = append(parts, run{1, orig.free.sub(req.mul(rem))})
			left--
		}
		if left > 0 {
			parts = append(parts, run{left, orig.free})
		}
		p.runs = slices.Replace(p.runs, i, i+1, parts...)
		placed += count
		count = 0
	}
	if count == 0 {
		return placed
	}
	k := fitCount(p.cap, req)
	avail := p.limit - p.opened
	if k == 0 || avail <= 0 {
		return placed
	}
	full := min(count/k, avail)
	if full > 0 {
		p.runs = append(p.runs, run{full, p.cap.sub(req.mul(k))})
		p.opened += full
		placed += full * k
		count -= full * k
	}
	if count > 0 && count < k && p.opened < p.limit {
		p.runs = append(p.runs, run{1, p.cap.sub(req.mul(count))})
		p.opened++
		placed += count
	}
	return placed
}
