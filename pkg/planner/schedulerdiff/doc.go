// Package schedulerdiff holds the planner's differential test against the
// real kube-scheduler on the local test bed: seeded random workloads using
// topology spread, inter-pod affinity and host ports are planned, the
// plan's nodes are created as kwok nodes, and the scheduler must place
// every pod the plan said would fit and none it declared unschedulable.
// TestPromisesFollowQueue gives pending pods of random priorities and ages
// fewer new nodes than they need: the scheduler must place exactly the
// pods the plan promised the nodes, in its queue's order.
// TestZoneSpreadRoundsMatchScheduler plans zone spread over one group per
// zone, each grown in as many rounds as the skew needs.
package schedulerdiff
