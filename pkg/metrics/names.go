package metrics

// The metric names, stable: dashboards and alarms refer to them, and the
// docs/operations.md documents each with its unit and dimensions. Counters of failures
// are published only when they happen (an alarm treats no data as none),
// so a quiet cluster pays for the levels alone.
const (
	// Evaluate, per cycle, by Cluster.
	CycleCompleted      = "CycleCompleted"      // Count: 1 per cycle that read, decided and saved its state
	CycleDuration       = "CycleDuration"       // Seconds: one cycle, lease to saved state
	SnapshotNodes       = "SnapshotNodes"       // Count: nodes the cycle read
	SnapshotPods        = "SnapshotPods"        // Count: pods the cycle read
	LeaseSkips          = "LeaseSkips"          // Count: runs that found another holding the lease
	PendingPods         = "PendingPods"         // Count: pods the scheduler marked Unschedulable
	UnschedulablePods   = "UnschedulablePods"   // Count: pending pods the plan leaves pending (no group can host them now)
	OldestPendingPodAge = "OldestPendingPodAge" // Seconds: since the oldest pending pod was marked Unschedulable
	ScaleUpFailures     = "ScaleUpFailures"     // Count: by Cluster, and by Cluster and Reason
	DrainStartFailures  = "DrainStartFailures"  // Count: removals whose drain execution could not be started
	// Cost, by Cluster and Currency, and by Cluster, Currency and
	// NodeGroup; only for groups with a price.
	CostPerHour        = "CostPerHour"        // None: what the priced groups cost per hour at their targets now
	PlannedCostPerHour = "PlannedCostPerHour" // None: what they cost once the cycle's plan is carried out
	// Problems is LevelEssential's one metric (see ProblemCounter),
	// published only above 0.
	Problems = "Problems" // Count: things a person must look at (nodetide status names them)

	// Evaluate, per cycle, by Cluster and NodeGroup.
	TargetSize      = "TargetSize"      // Count: the provider's target
	RegisteredNodes = "RegisteredNodes" // Count: nodes registered for the group's machines
	ReadyNodes      = "ReadyNodes"      // Count: of those, Ready
	UnneededNodes   = "UnneededNodes"   // Count: nodes the plan counts as unneeded
	ScaleUpNodes    = "ScaleUpNodes"    // Count: nodes asked of the provider (adds included)
	// Shadow mode (evaluate.shadow), by Cluster (each shadow cycle, 0
	// included) and by Cluster and NodeGroup.
	ShadowScaleUps   = "ShadowScaleUps"   // Count: nodes a shadow cycle would have asked of the provider
	ShadowScaleDowns = "ShadowScaleDowns" // Count: drains a shadow cycle would have started
	// ShadowAgreement, by Cluster and by Cluster and NodeGroup, each shadow
	// cycle that compared with cluster-autoscaler (evaluate.shadowCompare).
	ShadowAgreement = "ShadowAgreement" // Count: 1 when the cycle (or group) agreed with cluster-autoscaler, else 0

	// Drain, by Cluster.
	DrainsStarted         = "DrainsStarted"         // Count: Prepare claimed a node
	DrainsSucceeded       = "DrainsSucceeded"       // Count: Finish ended a drain with its node removed
	DrainsRolledBack      = "DrainsRolledBack"      // Count: Rollback undid a drain
	DrainsRejected        = "DrainsRejected"        // Count: Prepare refused a drain before changing anything
	DrainDuration         = "DrainDuration"         // Seconds: start to success or rollback
	NodesRemoved          = "NodesRemoved"          // Count: nodes a drain (or recovery) removed
	DrainsRecovered       = "DrainsRecovered"       // Count: drains whose execution ended without finishing them (RollbackFailed, stopped, timed out)
	StrayCordonsRecovered = "StrayCordonsRecovered" // Count: nodes found with the draining taint and no drain

	// Schedule, by Cluster.
	ScheduleFires    = "ScheduleFires"    // Count: schedules applied (fired or run by hand)
	ScheduleFailures = "ScheduleFailures" // Count: schedule fires or runs with a failed effect, and ticks that failed
)
