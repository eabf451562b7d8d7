package planner

// hopTrace records, when a decision is traced, where the scale-down
// simulation moves each pod: a pod moved onto a node the simulation
// removes later moves on with that node's own pods. Untraced, it does
// nothing.
type hopTrace struct {
	m  *model
	tr *trace
	// on[n] are the pods moved onto node n so far; cur the pods of the
	// node being tried.
	on  map[int32][]int32
	cur []int32
}

func newHopTrace(m *model, tr *trace) *hopTrace {
	if tr == nil {
		return nil
	}
	return &hopTrace{m: m, tr: tr, on: map[int32][]int32{}}
}

// start begins a candidate node.
func (h *hopTrace) start() {
	if h != nil {
		h.cur = h.cur[:0]
	}
}

// moving notes a pod of the candidate that must move.
func (h *hopTrace) moving(pi int32) {
	if h != nil {
		h.cur = append(h.cur, pi)
	}
}

// moved records that node ni went, its own pods and those moved onto it
// placed by moves (counts per class).
func (h *hopTrace) moved(ni int32, moves []move) {
	if h == nil {
		return
	}
	pods := append(h.cur, h.on[ni]...)
	delete(h.on, ni)
	used := make([]bool, len(pods))
	for _, mv := range moves {
		dest := h.m.nodes[mv.node].node.Name
		left := mv.n
		for i, pi := range pods {
			if left == 0 {
				break
			}
			if used[i] || h.m.classOf(pi) != mv.class {
				continue
			}
			used[i] = true
			left--
			key := h.m.keyOf(pi)
			h.tr.hops[key] = append(h.tr.hops[key], dest)
			h.on[mv.node] = append(h.on[mv.node], pi)
		}
	}
}
