package aws_test

import (
	"reflect"
	"testing"

	"github.com/nodetide/nodetide/pkg/providerkind"
	ngaws "github.com/nodetide/nodetide/pkg/providers/aws"
)

// TestKindPolicy: the size changes are granted on the entries' groups
// only: named groups by their ARN, one statement per region (sorted), after
// one per discovering entry limited by its tags; with no entry, nothing.
func TestKindPolicy(t *testing.T) {
	entry := func(b ngaws.Block) providerkind.Entry { return providerkind.Entry{Block: &b} }
	p := ngaws.Kind().Policy([]providerkind.Entry{
		entry(ngaws.Block{AutoScalingGroup: "a", Region: "us-east-1"}),
		entry(ngaws.Block{AutoDiscovery: []string{"k8s.io/cluster-autoscaler/enabled", "team=x"}, Region: "eu-west-2"}),
		entry(ngaws.Block{AutoScalingGroup: "b"}),
		entry(ngaws.Block{AutoScalingGroup: "c", Region: "us-east-1"}),
	})
	arn := func(region, name string) providerkind.ARN {
		return providerkind.ARN{Service: "autoscaling", Resource: "autoScalingGroup",
			ResourceName: "*:autoScalingGroupName/" + name, Colon: true, Region: region}
	}
	want := []providerkind.Statement{
		{Resources: []providerkind.ARN{arn("eu-west-2", "*")}, Conditions: map[string]map[string]string{
			"Null":         {"aws:ResourceTag/k8s.io/cluster-autoscaler/enabled": "false"},
			"StringEquals": {"aws:ResourceTag/team": "x"},
		}},
		{Resources: []providerkind.ARN{arn("", "b")}},
		{Resources: []providerkind.ARN{arn("us-east-1", "a"), arn("us-east-1", "c")}},
	}
	if !reflect.DeepEqual(p.Groups, want) {
		t.Errorf("groups %+v\nwant %+v", p.Groups, want)
	}
	if !reflect.DeepEqual(p.Resize, []string{"autoscaling:SetDesiredCapacity"}) {
		t.Errorf("resize %v", p.Resize)
	}
	if len(p.Remove) == 0 || p.Remove[0] != "autoscaling:TerminateInstanceInAutoScalingGroup" {
		t.Errorf("remove %v", p.Remove)
	}
	if len(p.Wildcard) == 0 || len(p.EKSNodegroups) == 0 || !reflect.DeepEqual(p.Endpoints, []string{"autoscaling", "ec2"}) {
		t.Errorf("policy %+v", p)
	}
	if none := ngaws.Kind().Policy(nil); !reflect.DeepEqual(none, providerkind.Policy{}) {
		t.Errorf("no entries, policy %+v", none)
	}
}
