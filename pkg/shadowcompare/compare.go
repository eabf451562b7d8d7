package shadowcompare

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Planned is nodetide's shadow plan for one of its node groups.
type Planned struct {
	NodeGroup string
	// CAName is cluster-autoscaler's name of the group (an ASG's name, a
	// Kapsule pool's ID); empty: NodeGroup.
	CAName string
	// Target is the group's target as the cycle read it; NewTarget what the
	// shadow plan would have set (Target plus its scale-up, minus its
	// decrease of capacity that never came).
	Target, NewTarget int
	// Drains are the group's nodes the shadow plan would have drained.
	Drains []string
}

// Observed is what cluster-autoscaler was seen doing in the window.
type Observed struct {
	// Status is its status ConfigMap; nil when it could not be read.
	Status *Status
	// ScaleUps are the scale-ups it triggered in the window, one per group
	// and size change however many pods' Events repeat it.
	ScaleUps []ScaleUp
	// ScaleDowns are the nodes it started removing in the window (its
	// ScaleDown Events on nodes), by node name, with when.
	ScaleDowns map[string]time.Time
	// Problems are what could not be read (the ConfigMap, Events); any
	// makes the cycle disagree.
	Problems []string
}

// Comparison is one cycle's comparison, per node group.
type Comparison struct {
	// Agree is true only when every group agrees and nothing failed to read.
	Agree bool `json:"agree"`
	// Since is the start of the window whose Events were read.
	Since    time.Time `json:"since"`
	StatusAt time.Time `json:"statusAt,omitzero"`
	Groups   []Group   `json:"nodeGroups"`
	// GroupsOmitted, RemovalsOmitted and UnattributedOmitted count what a
	// bounded copy (the status's) left out of the lists.
	GroupsOmitted int `json:"nodeGroupsOmitted,omitempty"`
	// Unattributed are nodes cluster-autoscaler started removing that the
	// cycle did not read (already gone); counted apart, not compared.
	Unattributed        []string `json:"unattributed,omitempty"`
	UnattributedOmitted int      `json:"unattributedOmitted,omitempty"`
	Problems            []string `json:"problems,omitempty"`
}

// Group is one node group's comparison.
type Group struct {
	NodeGroup string `json:"nodeGroup"`
	Agree     bool   `json:"agree"`
	// Nodetide is what the shadow plan would have done; CA what
	// cluster-autoscaler did.
	Nodetide Side `json:"nodetide"`
	CA       Side `json:"clusterAutoscaler"`
	// Why says what differs; empty when the group agrees.
	Why string `json:"why,omitempty"`
}

// Side is one scaler's view of a group: its target, the change from the
// target the cycle read (up, down or none, and by how many), and the nodes
// it removes. Target is nil when cluster-autoscaler does not report the
// group.
type Side struct {
	Target    *int     `json:"target"`
	Direction string   `json:"direction"`
	Size      int      `json:"size"`
	Removals  []string `json:"removals"`
	// RemovalsOmitted counts the removals a bounded copy left unnamed.
	RemovalsOmitted int `json:"removalsOmitted,omitempty"`
}

// The directions of a Side.
const (
	DirUp   = "up"
	DirDown = "down"
	DirNone = "none"
)

// Compare compares nodetide's shadow plan with cluster-autoscaler's
// observed actions. groupOfNode maps every node the cycle read to its
// nodetide group ("" for a node of none); since is the window's start.
//
// A group agrees when cluster-autoscaler's target equals the target the
// shadow plan would have set, and it started removing as many of the
// group's nodes in the window as the plan would have drained. Its target
// is that of the newer of its status and its last scale-up of the group in
// the window. A group it does not report disagrees.
func Compare(planned []Planned, obs Observed, groupOfNode map[string]string, since time.Time) Comparison {
	c := Comparison{Since: since.UTC(), Groups: []Group{}, Problems: obs.Problems}
	if obs.Status != nil {
		c.StatusAt = obs.Status.At
	}
	caRemovals := map[string][]string{}
	for node := range obs.ScaleDowns {
		switch g, read := groupOfNode[node]; {
		case !read:
			c.Unattributed = append(c.Unattributed, node)
		case g != "":
			caRemovals[g] = append(caRemovals[g], node)
		}
	}
	slices.Sort(c.Unattributed)
	c.Agree = len(c.Problems) == 0
	for _, p := range planned {
		g := compareGroup(p, obs, caRemovals[p.NodeGroup])
		c.Agree = c.Agree && g.Agree
		c.Groups = append(c.Groups, g)
	}
	slices.SortFunc(c.Groups, func(a, b Group) int { return cmp.Compare(a.NodeGroup, b.NodeGroup) })
	return c
}

func compareGroup(p Planned, obs Observed, caRemovals []string) Group {
	drains := slices.Clone(p.Drains)
	slices.Sort(drains)
	slices.Sort(caRemovals)
	g := Group{NodeGroup: p.NodeGroup, Nodetide: side(p.Target, &p.NewTarget, drains), CA: side(p.Target, caTarget(p, obs), caRemovals)}
	switch {
	case g.CA.Target == nil:
		g.Why = "cluster-autoscaler does not report this group"
		if obs.Status == nil {
			g.Why = "cluster-autoscaler's status could not be read"
		}
	case *g.CA.Target != p.NewTarget:
		g.Why = fmt.Sprintf("target: nodetide %d, cluster-autoscaler %d", p.NewTarget, *g.CA.Target)
	case len(drains) != len(caRemovals):
		g.Why = fmt.Sprintf("removals: nodetide %d, cluster-autoscaler %d", len(drains), len(caRemovals))
	default:
		g.Agree = true
	}
	return g
}

// caTarget is cluster-autoscaler's target for the group: from the newer of
// its status and its last scale-up of the group; nil when neither names it.
func caTarget(p Planned, obs Observed) *int {
	name := cmp.Or(p.CAName, p.NodeGroup)
	var target *int
	var at time.Time
	if obs.Status != nil {
		if t, ok := obs.Status.Targets[name]; ok {
			target, at = &t, obs.Status.At
		}
	}
	for _, up := range obs.ScaleUps {
		// Event times are whole seconds; in the status's second the
		// scale-up wins: cluster-autoscaler writes the status at the end of
		// the loop that scaled up, with the target it read at its start.
		if up.Group == name && (target == nil || !up.At.Before(at.Truncate(time.Second))) {
			to := up.To
			target, at = &to, up.At
		}
	}
	return target
}

func side(read int, target *int, removals []string) Side {
	s := Side{Target: target, Direction: DirNone, Removals: removals}
	if s.Removals == nil {
		s.Removals = []string{}
	}
	switch {
	case target != nil && *target > read:
		s.Direction, s.Size = DirUp, *target-read
	case target != nil && *target < read:
		s.Direction, s.Size = DirDown, read-*target
	case len(removals) > 0:
		s.Direction, s.Size = DirDown, len(removals)
	}
	return s
}

// ScaleUps keeps, of the scale-ups read, one per group and size change: CA
// writes the same message on every pod a scale-up is for.
func ScaleUps(all []ScaleUp) []ScaleUp {
	type key struct {
		group    string
		from, to int
	}
	latest := map[key]int{}
	var out []ScaleUp
	for _, up := range all {
		k := key{up.Group, up.From, up.To}
		if i, ok := latest[k]; ok {
			if up.At.After(out[i].At) {
				out[i].At = up.At
			}
			continue
		}
		latest[k] = len(out)
		out = append(out, up)
	}
	slices.SortStableFunc(out, func(a, b ScaleUp) int { return a.At.Compare(b.At) })
	return out
}
