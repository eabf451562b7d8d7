package drain_test

import (
	"context"
	"slices"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/state"
)

const terminateAction = "TerminateInstanceInAutoScalingGroup"

// newAWSBed is a bed whose group is an Auto Scaling Group on the AWS double:
// each of its machines has a kwok Node with the machine's provider ID, so
// the drain's Terminate goes through the aws provider to the double.
func newAWSBed(t *testing.T, nodes int) (*bed, *fakeaws.Server) {
	t.Helper()
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	d := fakeaws.New(fakeaws.WithAutoBoot())
	t.Cleanup(d.Close)
	d.AddGroup(fakeaws.Group{Name: ns, MaxSize: 5, DesiredCapacity: nodes, InstanceType: "m5.xlarge"})
	g, _ := d.Group(ns)
	for _, in := range g.Instances {
		// The namespace's random tail keeps the name unique and within
		// the 63 bytes of the hostname label.
		cp.AddNode(t, testbed.Node{Name: "aws-" + ns[len(ns)-5:] + "-" + in.ID, CPU: "4", Memory: "16Gi",
			Labels: map[string]string{"pool": ns, kwok.GroupLabel: ns}, ProviderID: in.ProviderID()})
	}
	cfg := awssdk.Config{
		Region:       d.Region(),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", ""),
		BaseEndpoint: awssdk.String(d.URL()),
	}
	// The SDK's own retries (5 attempts) stay in, with short backoffs.
	as, ec2c := aws.NewClients(cfg, func(o *retry.StandardOptions) { o.MaxBackoff = time.Millisecond })
	p, err := aws.New(as, ec2c, aws.Options{AutoScalingGroup: ns})
	if err != nil {
		t.Fatal(err)
	}
	store := state.NewMemory(ns)
	b := &bed{cp: cp, ns: ns, pool: ns, store: store,
		steps: &drain.Steps{Client: cp.Client, Store: store, Groups: p.NodeGroups, StepWait: -1}}
	return b, d
}

// driveWithin is driveSteps for a drain Prepare must accept.
func (b *bed) driveWithin(t *testing.T, s drain.State, perStep time.Duration) (removed bool, names []string) {
	t.Helper()
	removed, rejected, names := b.driveSteps(t, s, perStep)
	if rejected != nil {
		t.Fatalf("prepare: %v", rejected)
	}
	return removed, names
}

// The cloud failing the drain's terminate call: throttled, failing (5xx) or
// answering too late. A failure that clears within the step's retries lets
// the drain remove the node and lower the group's target by exactly one; one
// that persists rolls the drain back with the target as it was. Either way
// nothing is left holding the node.
func TestProviderFaultOnTerminate(t *testing.T) {
	tests := []struct {
		name   string
		inject func(d *fakeaws.Server)
		// removed: the drain ends with the node gone; else rolled back.
		removed bool
	}{
		// 7 failures: more than one step try's 5 SDK attempts, fewer than two.
		{"5xx that clears", func(d *fakeaws.Server) { d.FailNext(terminateAction, 7, fakeaws.InternalFailure()) }, true},
		{"throttling that clears", func(d *fakeaws.Server) { d.FailNext(terminateAction, 7, fakeaws.Throttling()) }, true},
		{"5xx that persists", func(d *fakeaws.Server) { d.FailNext(terminateAction, 1000, fakeaws.ServiceUnavailable()) }, false},
		{"throttling that persists", func(d *fakeaws.Server) { d.FailNext(terminateAction, 1000, fakeaws.Throttling()) }, false},
		// The terminate lands but its answer comes after the step's
		// deadline: the retried step must find the machine terminating and
		// not terminate (or lower the target) a second time.
		{"answer after the deadline, once", func(d *fakeaws.Server) { d.DelayNext(terminateAction, 1, time.Minute) }, true},
		{"answer after the deadline, every time", func(d *fakeaws.Server) { d.DelayNext(terminateAction, 1000, time.Minute) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, d := newAWSBed(t, 2)
			b.deploy(t, "solo", 1, "")
			victim := b.podNode(t, "solo")
			providerID := b.node(t, victim).Spec.ProviderID
			before, _ := d.Group(b.pool)
			tt.inject(d)

			removed, names := b.driveWithin(t, b.start(victim, time.Minute, drain.PolicyAbort), 5*time.Second)
			t.Logf("failed step tries: %v; terminate calls: %d", names, d.Calls(terminateAction))
			if removed != tt.removed {
				t.Fatalf("removed = %t, want %t", removed, tt.removed)
			}
			for _, n := range names {
				// Throttling, 5xx and a deadline are all worth a retry.
				if n != "Terminate:"+drain.ErrNameTransient && n != "Rollback:"+drain.ErrNameTransient {
					t.Errorf("a step failed as %s, want Terminate:%s", n, drain.ErrNameTransient)
				}
			}
			if len(names) == 0 {
				t.Error("no step failed: the fault was not injected")
			}
			after, _ := d.Group(b.pool)
			inService := slices.ContainsFunc(after.Instances, func(in fakeaws.Instance) bool {
				return in.ProviderID() == providerID && in.LifecycleState == fakeaws.StateInService
			})
			ctx := context.Background()
			rec, err := b.store.GetDrain(ctx, victim, "test-"+victim)
			if err != nil {
				t.Fatal(err)
			}
			if tt.removed {
				if after.DesiredCapacity != before.DesiredCapacity-1 {
					t.Errorf("desired capacity %d → %d, want lowered by exactly one", before.DesiredCapacity, after.DesiredCapacity)
				}
				if inService {
					t.Errorf("machine %s still in service", providerID)
				}
				if _, err := b.cp.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{}); err == nil {
					t.Errorf("node %s still there", victim)
				}
				if got := b.replicas(t, "solo"); got != 1 {
					t.Errorf("solo replicas = %d, want 1", got)
				}
				if active, _, err := b.store.NodeDrain(ctx, victim); err != nil || active != "" {
					t.Errorf("node %s still held by drain %q (%v)", victim, active, err)
				}
				if rec.Status != state.DrainSucceeded {
					t.Errorf("drain record %s, want %s", rec.Status, state.DrainSucceeded)
				}
				return
			}
			if after.DesiredCapacity != before.DesiredCapacity {
				t.Errorf("desired capacity %d → %d, want unchanged", before.DesiredCapacity, after.DesiredCapacity)
			}
			if !inService {
				t.Errorf("machine %s not in service after the rollback", providerID)
			}
			b.assertRestored(t, b.store, victim, "solo", 1)
			if rec.Status != state.DrainRolledBack {
				t.Errorf("drain record %s, want %s", rec.Status, state.DrainRolledBack)
			}
		})
	}
}
