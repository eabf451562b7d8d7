package aws

import (
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestMaxFrom: a group's max is the config's when its maxSize lowered the
// ASG's, else the ASG's own.
func TestMaxFrom(t *testing.T) {
	asg := astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String("asg"), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(5)}
	size := func(n int) *int { return &n }
	for _, tc := range []struct {
		name    string
		max     *int
		wantMax int
		want    snapshot.BoundSource
	}{
		{"the ASG's", nil, 5, snapshot.BoundProvider},
		{"config equal to the ASG's", size(5), 5, snapshot.BoundProvider},
		{"config lowers it", size(3), 3, snapshot.BoundConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := (&Provider{opts: Options{MaxSize: tc.max}}).newGroup(asg)
			if err != nil {
				t.Fatal(err)
			}
			if g.MaxSize() != tc.wantMax || g.MaxFrom() != tc.want {
				t.Errorf("max %d from %q, want %d from %q", g.MaxSize(), g.MaxFrom(), tc.wantMax, tc.want)
			}
		})
	}
}
