package evaluate_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/metricstest"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/metrics"
	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/state"
)

// The cloud refusing a scale-up (5xx, throttling) for longer than the SDK's
// own retries: the cycle reports the failed action, backs the group off and
// records no scale-up; the group never goes above its maximum; once the fault
// has cleared and the backoff has passed, the next cycle scales up exactly
// once.
func TestProviderFaultOnScaleUp(t *testing.T) {
	const maxSize = 2
	tests := []struct {
		name   string
		fault  fakeaws.Fault
		reason string // the ScaleUpFailures metric's
	}{
		{"5xx", fakeaws.InternalFailure(), evaluate.ReasonCloudError},
		{"service unavailable", fakeaws.ServiceUnavailable(), evaluate.ReasonCloudError},
		{"throttling", fakeaws.Throttling(), evaluate.ReasonThrottled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := testbed.Cluster(t)
			ns := cp.Namespace(t)
			d, p := fakeASG(t, ns, maxSize)
			store := state.NewMemory(ns)
			f := &fixture{cp: cp, ns: ns, pool: ns, store: store}
			// Three pods of 3 CPU: one per 4-CPU machine, one more than max.
			f.deploy(t, "web", 3, "3")
			f.waitUnschedulable(t, 3)

			now := time.Now().UTC()
			s := planner.DefaultSettings()
			s.ScaleUp.PendingPodMinAge = 0
			e := &evaluate.Evaluator{
				Client:   cp.Client,
				Groups:   func(ctx context.Context) ([]providers.NodeGroup, error) { return p.NodeGroups(ctx) },
				Store:    store,
				Settings: s,
				Holder:   "test",
				LeaseTTL: time.Minute,
				Now:      func() time.Time { return now },
			}
			ctx := context.Background()
			var published metricstest.Published
			cycle := func(at time.Time) []evaluate.Action {
				t.Helper()
				now = at
				m := metrics.New("prod", nil)
				res, err := e.Run(metrics.NewContext(ctx, m))
				var out bytes.Buffer
				if werr := m.Write(&out); werr != nil {
					t.Fatal(werr)
				}
				var perr error
				if published, perr = metricstest.Parse(out.Bytes(), "prod"); perr != nil {
					t.Fatal(perr)
				}
				if err != nil {
					t.Fatalf("cycle at %s: %v", at, err)
				}
				var ups []evaluate.Action
				for _, a := range res.Actions {
					if a.Kind == "scaleUp" {
						ups = append(ups, a)
					}
				}
				if g, _ := d.Group(ns); g.DesiredCapacity > maxSize {
					t.Fatalf("desired capacity %d above max %d", g.DesiredCapacity, maxSize)
				}
				return ups
			}
			desired := func() int { g, _ := d.Group(ns); return g.DesiredCapacity }
			start := now

			// As many failures as one call's SDK attempts: the call fails.
			d.FailNext("SetDesiredCapacity", 5, tt.fault)
			ups := cycle(start)
			if len(ups) != 1 || ups[0].Error == "" {
				t.Fatalf("scale-up actions %+v, want one that failed", ups)
			}
			// What an on-call engineer is paged on, and why.
			group := metrics.Dims{metrics.DimNodeGroup: ns}
			for _, c := range []struct {
				name string
				dims metrics.Dims
				want float64
			}{
				{metrics.ScaleUpFailures, nil, 1},
				{metrics.ScaleUpFailures, metrics.Dims{metrics.DimReason: tt.reason}, 1},
				{metrics.CycleCompleted, nil, 1},
				{metrics.PendingPods, nil, 3},
				{metrics.TargetSize, group, 0},
				{metrics.RegisteredNodes, group, 0},
				{metrics.ScaleUpNodes, group, 0}, // asked, not given
			} {
				if got := published.Sum(c.name, c.dims); got != c.want {
					t.Errorf("%s: %v, want %v (published %v)", metricstest.Key(c.name, c.dims), got, c.want, published)
				}
			}
			if !published.Has(metrics.OldestPendingPodAge, nil) || !published.Has(metrics.CycleDuration, nil) {
				t.Errorf("no pending pod age or cycle duration: %v", published)
			}
			if desired() != 0 {
				t.Errorf("desired capacity %d after the failed scale-up, want 0", desired())
			}
			st, err := store.LoadState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if at, ok := st.LastScaleUp[ns]; ok {
				t.Errorf("a failed scale-up recorded as done at %s", at)
			}
			if until := st.BackoffUntil[ns]; !until.After(start) {
				t.Errorf("group not backed off: until %s", until)
			}

			// The fault has cleared, but the group is backed off.
			if ups := cycle(start.Add(time.Minute)); len(ups) != 0 {
				t.Errorf("scaled up during the backoff: %+v", ups)
			}
			if desired() != 0 {
				t.Errorf("desired capacity %d during the backoff, want 0", desired())
			}

			// After the backoff: one scale-up, up to max.
			ups = cycle(st.BackoffUntil[ns].Add(time.Second))
			if len(ups) != 1 || ups[0].Error != "" || ups[0].Delta != maxSize {
				t.Fatalf("scale-up actions %+v after the backoff, want one of +%d", ups, maxSize)
			}
			if got := published.Sum(metrics.ScaleUpNodes, group); got != maxSize || published.Has(metrics.ScaleUpFailures, nil) {
				t.Errorf("after the backoff: %v nodes asked, failures published %v; want %d and none", got, published[metrics.ScaleUpFailures], maxSize)
			}
			if desired() != maxSize {
				t.Errorf("desired capacity %d, want %d", desired(), maxSize)
			}
			if st, _ := store.LoadState(ctx); st.LastScaleUp[ns].IsZero() {
				t.Error("the scale-up was not recorded")
			}
			// The machines are still booting: nothing more to do.
			if ups := cycle(now.Add(time.Minute)); len(ups) != 0 {
				t.Errorf("scaled up again: %+v", ups)
			}
			reqs := d.Requests("SetDesiredCapacity")
			if len(reqs) != 6 {
				t.Errorf("%d SetDesiredCapacity calls, want 5 refused and 1 carried out", len(reqs))
			}
			for _, r := range reqs {
				if n, _ := strconv.Atoi(r["DesiredCapacity"][0]); n > maxSize {
					t.Errorf("SetDesiredCapacity asked for %d, above max %d", n, maxSize)
				}
			}
		})
	}
}

// fakeASG serves one Auto Scaling group named ns (max maxSize, m5.xlarge,
// labelled pool=ns) from a fake AWS and returns it with the provider that
// reaches it through the real SDK, retrying at once.
func fakeASG(t *testing.T, ns string, maxSize int) (*fakeaws.Server, *aws.Provider) {
	t.Helper()
	d := fakeaws.New()
	t.Cleanup(d.Close)
	lt := fakeaws.LaunchTemplate{ID: "lt-0123456789abcdef0", Name: ns, InstanceTypes: []string{"m5.xlarge"}}
	d.AddLaunchTemplate(lt)
	d.AddGroup(fakeaws.Group{Name: ns, MaxSize: maxSize,
		LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: lt.ID, Version: "$Latest"},
		Tags:           map[string]string{aws.TagTemplatePrefix + "label/pool": ns}})
	cfg := awssdk.Config{
		Region:       d.Region(),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", ""),
		BaseEndpoint: awssdk.String(d.URL()),
	}
	as, ec2c := aws.NewClients(cfg, func(o *retry.StandardOptions) { o.MaxBackoff = time.Millisecond })
	p, err := aws.New(as, ec2c, aws.Options{AutoScalingGroup: ns})
	if err != nil {
		t.Fatal(err)
	}
	return d, p
}
