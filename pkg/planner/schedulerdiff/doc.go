// Package schedulerdiff holds the planner's differential test against the
// real kube-scheduler on the local test bed: seeded random workloads using
// topology spread, inter-pod affinity and host ports are planned, the
// plan's nodes are created as kwok nodes, and the scheduler must place
// every pod the plan said would fit and none it declared unschedulable.
package schedulerdiff
