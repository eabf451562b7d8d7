package evaluate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/pkg/providers"
	ngaws "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// awsGroup is an empty ASG of the AWS double named after the fixture's
// pool, whose nodes would carry the pool label, reached through the real
// SDK.
func awsGroup(t *testing.T, f *fixture) (*fakeaws.Server, providers.NodeGroup) {
	t.Helper()
	d := fakeaws.New()
	t.Cleanup(d.Close)
	d.AddLaunchTemplate(fakeaws.LaunchTemplate{ID: "lt-0123456789abcdef0", Name: f.pool, InstanceTypes: []string{"m5.xlarge"}})
	d.AddGroup(fakeaws.Group{Name: f.pool, MinSize: 0, MaxSize: 3,
		LaunchTemplate: &fakeaws.LaunchTemplateRef{Name: f.pool, Version: "$Latest"},
		Tags:           map[string]string{"k8s.io/cluster-autoscaler/node-template/label/pool": f.pool}})
	as, ec2c := ngaws.NewClients(awssdk.Config{
		Region:       d.Region(),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", ""),
		BaseEndpoint: awssdk.String(d.URL()),
	})
	p, err := ngaws.New(as, ec2c, ngaws.Options{AutoScalingGroup: f.pool})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := p.NodeGroups(t.Context())
	if err != nil || len(gs) != 1 {
		t.Fatalf("node groups: %v, %v", gs, err)
	}
	return d, gs[0]
}

// TestFailedScaleUpBacksOff: when the provider refuses a scale-up, the
// group is backed off from the cycle's time and its last scale-up is what it
// was before (the clock of a scale-up that did not happen must not start),
// so the next cycle does not try again at once.
func TestFailedScaleUpBacksOff(t *testing.T) {
	tests := []struct {
		name     string
		lastUp   time.Duration // before the cycle; 0: none on record
		wantLast bool
	}{
		{"a scale-up on record is kept", time.Hour, true},
		{"no scale-up on record stays none", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 0, 3, nil)
			ctx := t.Context()
			d, group := awsGroup(t, f)
			f.deploy(t, "web", 2, "3")
			f.waitUnschedulable(t, 2)

			now := time.Now().UTC().Truncate(time.Second)
			prev := snapshot.State{LastScaleUp: map[string]time.Time{}}
			if tt.lastUp > 0 {
				prev.LastScaleUp[f.pool] = now.Add(-tt.lastUp)
				if err := f.store.SaveState(ctx, snapshot.State{}, prev); err != nil {
					t.Fatal(err)
				}
			}
			ev := f.evaluator("backoff")
			ev.Now = func() time.Time { return now }
			ev.Groups = func(context.Context) ([]providers.NodeGroup, error) { return []providers.NodeGroup{group}, nil }
			d.FailNext("SetDesiredCapacity", 1, fakeaws.ValidationError("desired capacity refused by the test"))

			res, err := ev.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Actions) != 1 || res.Actions[0].Kind != "scaleUp" || !strings.Contains(res.Actions[0].Error, "refused by the test") {
				t.Fatalf("actions %+v, want one failed scale-up", res.Actions)
			}
			st, err := f.store.LoadState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			last, ok := st.LastScaleUp[f.pool]
			if ok != tt.wantLast || (ok && !last.Equal(prev.LastScaleUp[f.pool])) {
				t.Errorf("lastScaleUp %v, want %v", st.LastScaleUp, prev.LastScaleUp)
			}
			want := now.Add(ev.Settings.ScaleUp.Backoff)
			if got, ok := st.BackoffUntil[f.pool]; !ok || !got.Equal(want) {
				t.Errorf("backoffUntil %v, want %s=%s", st.BackoffUntil, f.pool, want)
			}
			if g, _ := d.Group(f.pool); g.DesiredCapacity != 0 {
				t.Errorf("desired capacity %d after the refusal", g.DesiredCapacity)
			}

			// The next cycle, within the backoff, does not ask again.
			calls := d.Calls("SetDesiredCapacity")
			res, err = ev.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Actions) != 0 || d.Calls("SetDesiredCapacity") != calls {
				t.Errorf("backed-off group asked again: actions %+v", res.Actions)
			}
		})
	}
}
