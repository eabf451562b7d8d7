package planner

import "github.com/nodetide/nodetide/pkg/snapshot/snapshottest"

// The table tests' short names for the snapshot builders.
type (
	nodeOpt = snapshottest.NodeOpt
	podOpt  = snapshottest.PodOpt
)

var (
	t0                 = snapshottest.T0
	providerID         = snapshottest.ProviderID
	rl                 = snapshottest.Resources
	group              = snapshottest.Group
	withTemplateTaint  = snapshottest.WithTemplateTaint
	withTemplateLabels = snapshottest.WithTemplateLabels
	node               = snapshottest.Node
	notReady           = snapshottest.NotReady
	nodeTaint          = snapshottest.NodeTaint
	cordoned           = snapshottest.Cordoned
	draining           = snapshottest.Draining
	deleting           = snapshottest.Deleting
	nodeAnnotation     = snapshottest.NodeAnnotation
	pod                = snapshottest.Pod
	controllerRef      = snapshottest.ControllerRef
	on                 = snapshottest.On
	pending            = snapshottest.Pending
	created            = snapshottest.Created
	phase              = snapshottest.Phase
	podDeleting        = snapshottest.PodDeleting
	ownedBy            = snapshottest.OwnedBy
	bare               = snapshottest.Bare
	daemon             = snapshottest.Daemon
	mirror             = snapshottest.Mirror
	annotate           = snapshottest.Annotate
	podLabels          = snapshottest.PodLabels
	selector           = snapshottest.Selector
	tolerate           = snapshottest.Tolerate
	affinity           = snapshottest.Affinity
	req                = snapshottest.Req
	volume             = snapshottest.Volume
	hostPath           = snapshottest.HostPath
	emptyDir           = snapshottest.EmptyDir
	pdb                = snapshottest.PDB
	deepCopySnapshot   = snapshottest.DeepCopy
	equalSnapshots     = snapshottest.Equal
	clusterOf          = snapshottest.Cluster
	syntheticCluster   = snapshottest.Synthetic
)
