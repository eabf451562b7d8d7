package config

import (
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/planner"
)

// headroomDoc is kwokDoc with the group's headroom on line 8.
func headroomDoc(headroom string) string {
	return strings.Replace(kwokDoc(okTemplate, ""), "    kwok:\n", "    headroom: "+headroom+"\n    kwok:\n", 1)
}

func TestHeadroom(t *testing.T) {
	for _, tc := range []struct {
		headroom string
		want     planner.Headroom
	}{
		{"{nodes: 2}", planner.Headroom{Nodes: 2}},
		{"{cpu: 1500m, memory: 2Gi}", planner.Headroom{CPUMillis: 1500, MemoryBytes: 2 << 30}},
		{"{cpu: 4}", planner.Headroom{CPUMillis: 4000}},
		{"{utilization: 0.8}", planner.Headroom{Utilization: 0.8}},
		{"{utilization: 1}", planner.Headroom{Utilization: 1}},
	} {
		t.Run(tc.headroom, func(t *testing.T) {
			cfg, err := Parse([]byte(headroomDoc(tc.headroom)), "x.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Headroom(); len(got) != 1 || got["g"] != tc.want {
				t.Errorf("headroom = %+v, want g: %+v", got, tc.want)
			}
		})
	}
}

func TestHeadroomErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"two forms", headroomDoc("{nodes: 1, utilization: 0.5}"), "x.yaml:8: nodeGroups[0].headroom: set exactly one form: nodes, cpu/memory, or utilization"},
		{"no form", headroomDoc("{}"), "x.yaml:8: nodeGroups[0].headroom: set exactly one form"},
		{"zero nodes", headroomDoc("{nodes: 0}"), "x.yaml:8: nodeGroups[0].headroom.nodes: must be at least 1, got 0"},
		{"fractional nodes", headroomDoc("{nodes: 1.5}"), `x.yaml:8: nodeGroups[0].headroom.nodes: must be a whole number, got "1.5"`},
		{"bad cpu", headroomDoc("{cpu: lots}"), `x.yaml:8: nodeGroups[0].headroom.cpu: bad quantity "lots"`},
		{"negative memory", headroomDoc("{memory: -1Gi}"), `x.yaml:8: nodeGroups[0].headroom.memory: "-1Gi": must not be negative`},
		{"zero cpu", headroomDoc("{cpu: 0}"), `x.yaml:8: nodeGroups[0].headroom.cpu: must be more than 0, got "0"`},
		{"huge cpu", headroomDoc(`{cpu: "1e309"}`), `x.yaml:8: nodeGroups[0].headroom.cpu: "1e309": is too large`},
		{"utilization 0", headroomDoc("{utilization: 0}"), "x.yaml:8: nodeGroups[0].headroom.utilization: must be in (0, 1], got 0"},
		{"utilization above 1", headroomDoc("{utilization: 1.2}"), "x.yaml:8: nodeGroups[0].headroom.utilization: must be in (0, 1], got 1.2"},
		{"utilization NaN", headroomDoc("{utilization: .nan}"), "x.yaml:8: nodeGroups[0].headroom.utilization: must be a finite number"},
		{"unknown key", headroomDoc("{spareNodes: 2}"), "x.yaml:8: nodeGroups[0].headroom.spareNodes: unknown field"},
		{"discovered groups", "cluster: {name: c}\nstate: {memory: {}}\nnodeGroups:\n  - provider: aws\n    aws: {autoDiscovery: [k8s.io/cluster-autoscaler/enabled]}\n    headroom: {nodes: 1}\n",
			"x.yaml:6: nodeGroups[0].headroom: needs the group's name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
