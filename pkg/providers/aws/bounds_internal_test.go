package aws

import (
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestBoundsFrom: a group's bound is the config's when its minSize or
// maxSize narrowed the ASG's, else the ASG's own.
func TestBoundsFrom(t *testing.T) {
	asg := astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String("asg"), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(5)}
	size := func(n int) *int { return &n }
	for _, tc := range []struct {
		name     string
		min, max *int
		want     providers.Bounds
	}{
		{"the ASG's", nil, nil, providers.Bounds{Min: 1, Max: 5}},
		{"config equal to the ASG's", size(1), size(5), providers.Bounds{Min: 1, Max: 5}},
		{"config lowers the max", nil, size(3), providers.Bounds{Min: 1, Max: 3, MaxFrom: snapshot.BoundConfig}},
		{"config raises the min", size(2), nil, providers.Bounds{Min: 2, Max: 5, MinFrom: snapshot.BoundConfig}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := (&Provider{opts: Options{MinSize: tc.min, MaxSize: tc.max}}).newGroup(asg)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Bounds(); got != tc.want {
				t.Errorf("Bounds = %+v, want %+v", got, tc.want)
			}
		})
	}
}
