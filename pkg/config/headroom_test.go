package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// headroomDoc is kwokDoc with the group's headroom on line 8.
func headroomDoc(headroom string) string {
	return strings.Replace(kwokDoc(okTemplate, ""), "    kwok:\n", "    headroom: "+headroom+"\n    kwok:\n", 1)
}

func TestHeadroom(t *testing.T) {
	for _, tc := range []struct {
		headroom string
		want     snapshot.Headroom
	}{
		{"{nodes: 2}", snapshot.Headroom{Nodes: 2}},
		{"{cpu: 1500m, memory: 2Gi}", snapshot.Headroom{CPUMillis: 1500, MemoryBytes: 2 << 30}},
		{"{cpu: 4}", snapshot.Headroom{CPUMillis: 4000}},
		{"{utilization: 0.8}", snapshot.Headroom{Utilization: 0.8}},
		{"{utilization: 1}", snapshot.Headroom{Utilization: 1}},
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
			"x.yaml:6: nodeGroups[0].headroom: needs the group's name: a group that discovery or Kamatera's INI names keeps its headroom in the top-level headroom list, by its exact name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// listDoc has a discovered AWS entry and the named group "named" (with
// its own headroom when own is set, on line 9), then the top-level
// headroom list from line 10, one entry a line.
func listDoc(own bool, entries ...string) string {
	var b strings.Builder
	b.WriteString("cluster: {name: c}\nstate: {memory: {}}\nnodeGroups:\n" +
		"  - provider: aws\n    aws: {autoDiscovery: [k8s.io/cluster-autoscaler/enabled]}\n" +
		"  - name: named\n    provider: aws\n    aws: {autoScalingGroup: prod-named}\n")
	if own {
		b.WriteString("    headroom: {nodes: 1}\n")
	} else {
		b.WriteString("    minSize: 0\n")
	}
	b.WriteString("headroom:\n")
	for _, e := range entries {
		b.WriteString("  - " + e + "\n")
	}
	return b.String()
}

func TestHeadroomList(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want map[string]snapshot.Headroom
	}{
		{"discovered groups by name", listDoc(false, "{nodeGroup: prod-spot-a, nodes: 2}", "{nodeGroup: prod-spot-b, cpu: 4, memory: 8Gi}", "{nodeGroup: prod-gpu, utilization: 0.7}"),
			map[string]snapshot.Headroom{"prod-spot-a": {Nodes: 2}, "prod-spot-b": {CPUMillis: 4000, MemoryBytes: 8 << 30}, "prod-gpu": {Utilization: 0.7}}},
		{"both lists merge", listDoc(true, "{nodeGroup: prod-spot-a, nodes: 3}"),
			map[string]snapshot.Headroom{"named": {Nodes: 1}, "prod-spot-a": {Nodes: 3}}},
		{"a named group without its own headroom", listDoc(false, "{nodeGroup: named, nodes: 2}"),
			map[string]snapshot.Headroom{"named": {Nodes: 2}}},
		{"an empty list", listDoc(false), map[string]snapshot.Headroom{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.doc), "x.yaml")
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Headroom()
			if len(got) != len(tc.want) {
				t.Fatalf("headroom = %+v, want %+v", got, tc.want)
			}
			for name, h := range tc.want {
				if got[name] != h {
					t.Errorf("headroom[%s] = %+v, want %+v", name, got[name], h)
				}
			}
		})
	}
}

func TestHeadroomListErrors(t *testing.T) {
	const kwokOnly = "cluster: {name: c}\nstate: {memory: {}}\nnodeGroups:\n" +
		"  - {name: a, provider: kwok, minSize: 0, maxSize: 2, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}\n" +
		"  - {name: b, provider: kwok, minSize: 0, maxSize: 2, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}\n" +
		"headroom:\n  - {nodeGroup: c, nodes: 1}\n"
	for _, tc := range []struct {
		name, doc string
		want      []string // every problem, in order
	}{
		{"no name", listDoc(false, "{nodes: 1}"), []string{"x.yaml:11: headroom[0].nodeGroup: is required: the group's exact name"}},
		{"no form", listDoc(false, "{nodeGroup: a}"), []string{"x.yaml:11: headroom[0]: set exactly one form: nodes, cpu/memory, or utilization"}},
		{"two forms", listDoc(false, "{nodeGroup: a, nodes: 1, cpu: 2}"), []string{"x.yaml:11: headroom[0]: set exactly one form: nodes, cpu/memory, or utilization"}},
		{"zero nodes", listDoc(false, "{nodeGroup: a, nodes: 0}"), []string{"x.yaml:11: headroom[0].nodes: must be at least 1, got 0"}},
		{"bad memory", listDoc(false, "{nodeGroup: a, memory: lots}"), []string{`x.yaml:11: headroom[0].memory: bad quantity "lots"`}},
		{"utilization out of range", listDoc(false, "{nodeGroup: a, utilization: 1.5}"), []string{"x.yaml:11: headroom[0].utilization: must be in (0, 1], got 1.5"}},
		{"fractional nodes", listDoc(false, "{nodeGroup: a, nodes: 1.5}"), []string{`x.yaml:11: headroom[0].nodes: must be a whole number, got "1.5"`}},
		{"unknown key", listDoc(false, "{nodeGroup: a, spare: 1}"), []string{"x.yaml:11: headroom[0].spare: unknown field (known: cpu, memory, nodeGroup, nodes, utilization)"}},
		{"not a list", strings.Replace(listDoc(false), "headroom:\n", "headroom: {nodeGroup: a, nodes: 1}\n", 1), []string{"x.yaml:10: headroom: must be a list, got a mapping"}},
		{"spaces around the name", listDoc(false, `{nodeGroup: " a", nodes: 1}`), []string{`x.yaml:11: headroom[0].nodeGroup: " a" has leading or trailing spaces: names are matched exactly`}},
		{"name too long", listDoc(false, "{nodeGroup: "+strings.Repeat("a", 256)+", nodes: 1}"), []string{"x.yaml:11: headroom[0].nodeGroup: is 256 characters long, more than a group name can be (255)"}},
		{"duplicate", listDoc(false, "{nodeGroup: a, nodes: 1}", "{nodeGroup: b, nodes: 1}", "{nodeGroup: a, cpu: 2}"),
			[]string{`x.yaml:13: headroom[2].nodeGroup: duplicate node group "a" (also headroom[0])`}},
		{"in both places", listDoc(true, "{nodeGroup: named, nodes: 2}"),
			[]string{`x.yaml:11: headroom[0].nodeGroup: "named" keeps a headroom at nodeGroups[1].headroom already: set it in one place`}},
		{"no such group and no discovery", kwokOnly, []string{`x.yaml:7: headroom[0].nodeGroup: "c" names no node group (known: a, b)`}},
		{"every problem at once", listDoc(true, "{nodeGroup: named, nodes: 0}", "{utilization: 2}"), []string{
			"x.yaml:11: headroom[0].nodes: must be at least 1, got 0",
			`x.yaml:11: headroom[0].nodeGroup: "named" keeps a headroom at nodeGroups[1].headroom already: set it in one place`,
			"x.yaml:12: headroom[1].utilization: must be in (0, 1], got 2",
			"x.yaml:12: headroom[1].nodeGroup: is required: the group's exact name",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.doc), "x.yaml")
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want the problems %q", err, tc.want)
			}
			if cfg != nil {
				t.Errorf("a config came back with the error: %+v", cfg)
			}
			if !slices.Equal(ce.Problems, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(ce.Problems, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestHeadroomListManyUnknown: an error naming the known groups names a
// few of them, not thousands, however many entries are wrong.
func TestHeadroomListManyUnknown(t *testing.T) {
	var b strings.Builder
	b.WriteString("cluster: {name: c}\nstate: {memory: {}}\nnodeGroups:\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "  - {name: g%04d, provider: aws, aws: {autoScalingGroup: a%04d}}\n", i, i)
	}
	b.WriteString("headroom:\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "  - {nodeGroup: x%04d, nodes: 1}\n", i)
	}
	_, err := Parse([]byte(b.String()), "x.yaml")
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1000 {
		t.Fatalf("error %v, want 1000 problems", err)
	}
	want := `x.yaml:1005: headroom[0].nodeGroup: "x0000" names no node group (known: g0000, g0001, g0002, g0003, g0004, g0005, g0006, g0007, g0008, g0009, g0010, g0011, g0012, g0013, g0014, g0015, g0016, g0017, g0018, g0019 and 980 more)`
	if ce.Problems[0] != want {
		t.Errorf("first problem\n%s\nwant\n%s", ce.Problems[0], want)
	}
}
