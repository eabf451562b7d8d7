package evaluate

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/shadowcompare"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
)

// TestStatusFitsOneItemAt5000Nodes: every list at its longest, names at the
// longest Kubernetes allows, and the document still fits one DynamoDB item.
func TestStatusFitsOneItemAt5000Nodes(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	long := func(prefix string, i int) string {
		return fmt.Sprintf("%s-%05d-%s", prefix, i, strings.Repeat("x", 253-len(prefix)-7))
	}
	const nodes, groups = 5000, 800
	var snap snapshot.Snapshot
	snap.CapturedAt = now
	plan := planner.Plan{State: snapshot.State{UnneededSince: map[string]time.Time{}, LastScaleUp: map[string]time.Time{}, BackoffUntil: map[string]time.Time{}}}
	for g := range groups {
		name := long("group", g)
		snap.NodeGroups = append(snap.NodeGroups, snapshot.NodeGroup{Name: name, Provider: "kamatera", MaxSize: 10, TargetSize: 9,
			BoundsFrom: "schedule " + strings.Repeat("s", 200),
			Price:      &snapshot.Price{PerHour: 1.0 / 3, Currency: "USD", Source: snapshot.PriceConfig}})
		plan.State.LastScaleUp[name] = now
		plan.State.BackoffUntil[name] = now.Add(time.Hour)
		// The longest headroom status the planner writes.
		plan.NodeGroups = append(plan.NodeGroups, planner.GroupStatus{Name: name, Headroom: &planner.HeadroomStatus{
			Rule: "9223372036854775807m cpu, 9223372036854775807 memory spare", Free: "9223372036854775807m cpu, 9223372036854775807 memory free",
			Need: 2147483647, Adding: 1000, Blocked: "out of reach: a new node's DaemonSets take what it would add"}})
	}
	// Headroom for many groups the cycle does not find, at the longest name.
	headroom := map[string]snapshot.Headroom{}
	for i := range 1000 {
		headroom[fmt.Sprintf("%05d-%s", i, strings.Repeat("h", 249))] = snapshot.Headroom{Nodes: 1}
	}
	for n := range nodes {
		id := fmt.Sprintf("kamatera://%s", long("node", n))
		g := &snap.NodeGroups[n%groups]
		g.Instances = append(g.Instances, id)
		snap.Nodes = append(snap.Nodes, corev1.Node{})
		snap.Nodes[n].Name, snap.Nodes[n].Spec.ProviderID = long("node", n), id
		plan.State.UnneededSince[long("node", n)] = now.Add(-time.Duration(n) * time.Second)
	}
	// Every node kept, each group for every code.
	for n := range planner.MaxKept {
		plan.Kept = append(plan.Kept, planner.Kept{Node: long("node", n), NodeGroup: long("group", n), Code: planner.KeptNotUnneededLongEnough, Reason: strings.Repeat("r", 2000)})
	}
	plan.KeptOmitted = nodes - planner.MaxKept
	for g := range groups {
		for range 16 {
			plan.KeptCounts = append(plan.KeptCounts, planner.KeptCount{NodeGroup: long("group", g), Code: planner.KeptNotUnneededLongEnough, Nodes: nodes})
		}
	}
	// Replacements at their widest, and a cost in many currencies.
	for r := range 1000 {
		rep := planner.Replace{ID: long("replace", r), Phase: planner.ReplaceWaiting, NodeGroup: long("group", r), Delta: 10, Reason: strings.Repeat("r", 2000), Currency: "USD", Saving: 1.0 / 3}
		for n := range 10 {
			rep.Nodes = append(rep.Nodes, long("node", r*10+n))
		}
		plan.Replace = append(plan.Replace, rep)
	}
	// Why no replacement was started, at the plan's widest and beyond.
	for r := range 1000 {
		row := planner.ReplaceNotTaken{NodeGroup: long("group", r), With: long("group", r+1), Code: planner.ReasonInsufficient, Reason: strings.Repeat("r", 2000),
			Option: &planner.ReplaceOption{NewNodes: 100, Before: 1e9 / 3, After: 1e9 / 7, Saving: 1e9 / 11, Currency: "USD"}}
		for n := range 10 {
			row.Nodes = append(row.Nodes, long("node", r*10+n))
		}
		plan.ReplaceNotTaken = append(plan.ReplaceNotTaken, row)
	}
	plan.ReplaceNotTakenOmitted = 7
	plan.Cost = &planner.Cost{}
	for c := range 50 {
		total := planner.CostTotal{Currency: fmt.Sprintf("C%02d", c), PerHour: 1e9 / 3, PerMonth: 1e12 / 3}
		plan.Cost.Totals, plan.Cost.Now, plan.Cost.Change = append(plan.Cost.Totals, total), append(plan.Cost.Now, total), append(plan.Cost.Change, total)
	}
	var actions []Action
	for i := range 1000 {
		actions = append(actions, Action{Kind: "scaleUp", NodeGroup: long("group", i), Delta: 1, Error: strings.Repeat("é", 2000)})
	}
	e := &Evaluator{Now: func() time.Time { return now }, Holder: "evaluate-0123456789ab", Headroom: headroom}
	cmp := maxComparison(snap, long, now)
	st := e.buildStatus(Status{}, now, snap, Result{Plan: &plan, Actions: actions, ShadowCompare: cmp}, nil)
	doc, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	if _, err := zw.Write(doc); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("status of %d nodes, %d groups: %d bytes, %d gzipped", nodes, groups, len(doc), z.Len())
	if len(doc) > state.MaxStatusDocument || z.Len() > state.MaxStatusSize {
		t.Fatalf("status is %d bytes (%d gzipped), over the %d stored (%d gzipped)", len(doc), z.Len(), state.MaxStatusDocument, state.MaxStatusSize)
	}
	if len(st.Replacing) != maxStatusReplace || st.ReplacingOmitted != 1000-maxStatusReplace || st.Cost == nil || len(st.Cost.AfterPlan) != 50 {
		t.Errorf("replacing %d, omitted %d, cost %+v", len(st.Replacing), st.ReplacingOmitted, st.Cost)
	}
	if len(st.ReplaceNotTaken) != maxStatusNotTaken || st.ReplaceNotTakenOmitted != 1000-maxStatusNotTaken+7 || len(st.ReplaceNotTaken[0].Reason) > maxStatusMessage {
		t.Errorf("replaceNotTaken %d, omitted %d, first reason %d bytes", len(st.ReplaceNotTaken), st.ReplaceNotTakenOmitted, len(st.ReplaceNotTaken[0].Reason))
	}
	if len(st.Kept) != maxStatusKept || st.KeptOmitted != nodes-maxStatusKept || len(st.KeptCounts) != maxStatusCounts {
		t.Errorf("kept %d, omitted %d, counts %d", len(st.Kept), st.KeptOmitted, len(st.KeptCounts))
	}
	if st.NodeGroupsOmitted != groups-maxStatusGroups || st.UnneededOmitted != nodes-maxStatusUnneeded || st.ActionsOmitted != 1000-maxStatusActions {
		t.Errorf("omitted: groups %d, unneeded %d, actions %d", st.NodeGroupsOmitted, st.UnneededOmitted, st.ActionsOmitted)
	}
	if st.NodeGroups[0].Headroom == nil {
		t.Errorf("group headroom %+v: want one", st.NodeGroups[0].Headroom)
	}
	if st.Unneeded[0].Node != long("node", nodes-1) {
		t.Errorf("first unneeded = %s, want the longest unneeded", st.Unneeded[0].Node)
	}
	if c := st.ShadowCompare; c == nil || c.GroupsOmitted != groups-maxCompareGroups || c.Groups[0].CA.RemovalsOmitted == 0 {
		t.Errorf("comparison: %+v", c)
	}
}

// maxComparison is a shadow comparison of every group, each side removing
// many long-named nodes, every problem and unattributed node there can be,
// bounded as the status keeps it.
func maxComparison(snap snapshot.Snapshot, long func(string, int) string, now time.Time) *shadowcompare.Comparison {
	var planned []shadowcompare.Planned
	obs := shadowcompare.Observed{Status: &shadowcompare.Status{At: now, Targets: map[string]int{}}, ScaleDowns: map[string]time.Time{}}
	groupOf := map[string]string{}
	for i, g := range snap.NodeGroups {
		p := shadowcompare.Planned{NodeGroup: g.Name, CAName: long("asg", i), Target: 9, NewTarget: 10}
		for n := range 20 {
			node := long(fmt.Sprintf("g%d-n", i), n)
			groupOf[node] = g.Name
			p.Drains = append(p.Drains, node)
			obs.ScaleDowns[node] = now
		}
		obs.Status.Targets[p.CAName] = 2147483647
		planned = append(planned, p)
	}
	for n := range 1000 {
		obs.ScaleDowns[long("gone", n)] = now
	}
	for range 3 {
		obs.Problems = append(obs.Problems, strings.Repeat("é", 2000))
	}
	c := shadowcompare.Compare(planned, obs, groupOf, now)
	bound(&c)
	return &c
}
