package statusmap

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/shadowcompare"
)

// worstStatus is a status with every list at its cap and every name and
// message at its longest, as a cycle of 5,000 nodes and 800 groups writes it
// (see evaluate's TestStatusFitsOneItemAt5000Nodes).
func worstStatus() evaluate.Status {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	long := func(prefix string, i int) string {
		return fmt.Sprintf("%s-%05d-%s", prefix, i, strings.Repeat("x", 240))
	}
	msg := strings.Repeat("é", 150) // 300 bytes, the clip
	st := evaluate.Status{CycleAt: now, Duration: "1m59.999s", Holder: "evaluate-0123456789ab", Error: msg,
		LastError: &evaluate.StatusError{At: now, Message: msg}, GroupsAt: now, NodeGroupsOmitted: 500, UnschedulablePods: 100000,
		UnneededOmitted: 4700, DrainsOmitted: 900, ActionsOmitted: 950}
	later := now.Add(time.Hour)
	for i := range 300 {
		st.NodeGroups = append(st.NodeGroups, evaluate.GroupSummary{Name: long("group", i), Provider: "kamatera", MinSize: 1 << 30, MaxSize: 1 << 30,
			BoundsFrom: "schedule " + strings.Repeat("s", 200), TargetSize: 1 << 30, Registered: 1 << 30, Ready: 1 << 30,
			Health:       []string{evaluate.HealthBackedOff, evaluate.HealthScaleUpFailed, evaluate.HealthAtMax, evaluate.HealthProvisioning, evaluate.HealthNodesNotReady},
			BackoffUntil: &later, LastScaleUp: &now, LastScaleDown: &now, CPUUtilization: 1, MemoryUtilization: 1,
			Headroom: &evaluate.GroupHeadroom{Rule: "9223372036854775807m cpu, 9223372036854775807 memory spare",
				Free: "9223372036854775807m cpu, 9223372036854775807 memory free", Need: 2147483647, Adding: 1000, Blocked: msg}})
		st.Unneeded = append(st.Unneeded, evaluate.UnneededNode{Node: long("node", i), NodeGroup: long("group", i), Since: now})
	}
	for i := range 100 {
		st.Drains = append(st.Drains, evaluate.DrainSummary{Node: long("node", i), NodeGroup: long("group", i), ID: long("drain", i), Phase: "evicting", StartedAt: now, Deadline: later})
	}
	for i := range 50 {
		st.Actions = append(st.Actions, evaluate.Action{Kind: "scaleUp", NodeGroup: long("group", i), Node: long("node", i), Delta: 1, Error: msg})
	}
	for i := range 10 {
		st.Kept = append(st.Kept, planner.Kept{Node: long("node", i), NodeGroup: long("group", i), Code: planner.KeptNotUnneededLongEnough, Reason: msg})
	}
	st.KeptOmitted = 4990
	for i := range 300 {
		st.KeptCounts = append(st.KeptCounts, planner.KeptCount{NodeGroup: long("group", i), Code: planner.KeptNotUnneededLongEnough, Nodes: 5000})
	}
	// Replacements and reasons none was started, each of ten nodes.
	for i := range 20 {
		r := planner.Replace{ID: long("replace", i), Phase: planner.ReplaceWaiting, NodeGroup: long("group", i), Delta: 100, Reason: msg, Currency: "USD", Saving: 1e9 / 3}
		for n := range 10 {
			r.Nodes = append(r.Nodes, long("node", i*10+n))
		}
		st.Replacing = append(st.Replacing, r)
	}
	st.ReplacingOmitted = 980
	for i := range 10 {
		r := planner.ReplaceNotTaken{NodeGroup: long("group", i), With: long("group", i+1), Code: planner.ReasonInsufficient, Reason: msg,
			Option: &planner.ReplaceOption{NewNodes: 100, Before: 1e9 / 3, After: 1e9 / 7, Saving: 1e9 / 11, Currency: "USD"}}
		for n := range 10 {
			r.Nodes = append(r.Nodes, long("node", i*10+n))
		}
		st.ReplaceNotTaken = append(st.ReplaceNotTaken, r)
	}
	st.ReplaceNotTakenOmitted = 990
	for i := range 20 {
		st.Problems = append(st.Problems, evaluate.Problem{Kind: fmt.Sprintf("Kind%d", i), Count: 5000, Detail: msg})
	}
	return st
}

// TestDataFitsAt5000Nodes: the worst case stays under MaxData, far under the
// API's 1 MiB: the document's longest lists are halved, counted as
// omitted, and the text of what is left fits whole.
func TestDataFitsAt5000Nodes(t *testing.T) {
	worst := worstStatus()
	data, err := Data("prod", worst)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	t.Logf("worst case: status.json %d bytes, status %d bytes", len(data[KeyJSON]), len(data[KeyText]))
	if size > MaxData || MaxData > 800*1024 {
		t.Errorf("data is %d bytes, MaxData %d: want both far under 1 MiB", size, MaxData)
	}
	var st evaluate.Status
	if err := json.Unmarshal([]byte(data[KeyJSON]), &st); err != nil {
		t.Fatal(err)
	}
	if len(data[KeyJSON]) > MaxJSON || len(st.NodeGroups) >= len(worst.NodeGroups) ||
		st.NodeGroupsOmitted != worst.NodeGroupsOmitted+len(worst.NodeGroups)-len(st.NodeGroups) {
		t.Errorf("status.json: %d bytes, %d groups (+%d omitted), want under %d with the groups cut and counted",
			len(data[KeyJSON]), len(st.NodeGroups), st.NodeGroupsOmitted, MaxJSON)
	}
	if more := fmt.Sprintf("... and %d more node groups, not shown", st.NodeGroupsOmitted); !strings.Contains(data[KeyText], more) ||
		strings.Contains(data[KeyText], CutMarker) {
		t.Errorf("the text does not say %q, or was cut", more)
	}

	// A status of an ordinary size is whole.
	small := worst
	small.NodeGroups, small.Unneeded, small.Drains = small.NodeGroups[:10], small.Unneeded[:10], small.Drains[:10]
	data, err = Data("prod", small)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(data[KeyJSON]), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.NodeGroups) != 10 || st.NodeGroupsOmitted != worst.NodeGroupsOmitted || strings.Contains(data[KeyText], CutMarker) {
		t.Errorf("a small status was cut: %d groups, text cut %v", len(st.NodeGroups), strings.Contains(data[KeyText], CutMarker))
	}
}

// TestDataFitsWithComparison: the worst status with a shadow comparison at
// its caps (every group, long names, the most problems) still fits: the
// comparison's groups are halved like the other lists, and counted.
func TestDataFitsWithComparison(t *testing.T) {
	worst := worstStatus()
	long := strings.Repeat("n", 253)
	target := 1 << 30
	c := &shadowcompare.Comparison{Since: worst.CycleAt, StatusAt: worst.CycleAt,
		Unattributed: []string{long, long, long}, UnattributedOmitted: 5000}
	for i := range 300 {
		side := shadowcompare.Side{Target: &target, Direction: shadowcompare.DirDown, Size: 1 << 30, Removals: []string{long, long, long}, RemovalsOmitted: 1 << 30}
		c.Groups = append(c.Groups, shadowcompare.Group{NodeGroup: fmt.Sprintf("group-%05d-%s", i, strings.Repeat("x", 240)),
			Nodetide: side, CA: side, Why: "target: nodetide 1073741824, cluster-autoscaler 1073741824"})
	}
	for range 3 {
		c.Problems = append(c.Problems, strings.Repeat("é", 150))
	}
	worst.ShadowCompare = c
	data, err := Data("prod", worst)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	var st evaluate.Status
	if err := json.Unmarshal([]byte(data[KeyJSON]), &st); err != nil {
		t.Fatal(err)
	}
	got := st.ShadowCompare
	if size > MaxData || len(data[KeyJSON]) > MaxJSON || got == nil || len(got.Groups)+got.GroupsOmitted != 300 || len(got.Groups) == 300 {
		t.Fatalf("data %d bytes (json %d): comparison groups %d + %d omitted", size, len(data[KeyJSON]), len(got.Groups), got.GroupsOmitted)
	}
	if len(c.Groups) != 300 {
		t.Errorf("the caller's comparison was cut to %d groups", len(c.Groups))
	}
}

// TestCut: a text over its bound is cut at a line and says so.
func TestCut(t *testing.T) {
	text := strings.Repeat("0123456789\n", 100)
	for _, limit := range []int{len(text), len(text) + 1} {
		if got := cut(text, limit); got != text {
			t.Errorf("limit %d: cut a text that fits", limit)
		}
	}
	limit := len(CutMarker) + 25
	got := cut(text, limit)
	if len(got) > limit || !strings.HasSuffix(got, CutMarker) || got != "0123456789\n0123456789\n"+CutMarker {
		t.Errorf("cut to %d: %q", limit, got)
	}
}

// TestDigestIgnoresCycleTimes: a status whose only change is its cycle's
// time, duration and groups' read time has the same digest; any other
// change a new one.
func TestDigestIgnoresCycleTimes(t *testing.T) {
	a := worstStatus()
	b := a
	b.CycleAt, b.Duration, b.GroupsAt = a.CycleAt.Add(time.Minute), "3s", a.GroupsAt.Add(time.Minute)
	c := a
	c.UnschedulablePods++
	da, _ := Digest(a)
	db, _ := Digest(b)
	dc, _ := Digest(c)
	if da != db || da == dc {
		t.Errorf("digests: %s, times only %s, a pod more %s", da, db, dc)
	}
	var back evaluate.Status
	data, _ := Data("prod", a)
	if err := json.Unmarshal([]byte(data[KeyJSON]), &back); err != nil || !back.CycleAt.Equal(a.CycleAt) {
		t.Errorf("status.json: %v", err)
	}
}
