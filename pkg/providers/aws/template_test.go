package aws_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	ngaws "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

func TestEKSReserved(t *testing.T) {
	tests := []struct {
		vcpus, pods int
		cpu, mem    string
	}{
		{1, 110, "60m", "1565Mi"}, // 255 + 1210 + 100
		{2, 29, "70m", "674Mi"},
		{4, 58, "80m", "993Mi"},
		{5, 58, "83m", "993Mi"}, // 82.5m rounds up
		{8, 58, "90m", "993Mi"},
		{96, 737, "310m", "8462Mi"},
	}
	for _, tt := range tests {
		r := ngaws.EKSReserved(tt.vcpus, tt.pods)
		if c := r[corev1.ResourceCPU]; c.Cmp(q(tt.cpu)) != 0 {
			t.Errorf("EKSReserved(%d, %d) cpu = %s, want %s", tt.vcpus, tt.pods, c.String(), tt.cpu)
		}
		if m := r[corev1.ResourceMemory]; m.Cmp(q(tt.mem)) != 0 {
			t.Errorf("EKSReserved(%d, %d) memory = %s, want %s", tt.vcpus, tt.pods, m.String(), tt.mem)
		}
	}
}

func TestMaxPods(t *testing.T) {
	tests := []struct{ enis, ips, want int }{
		{3, 10, 29}, // m5.large
		{4, 15, 58}, // m5.xlarge
		{3, 6, 17},  // t3.medium
		{15, 50, 737},
		{0, 10, 0},
		{3, 1, 0},
	}
	for _, tt := range tests {
		if got := ngaws.MaxPods(tt.enis, tt.ips); got != tt.want {
			t.Errorf("MaxPods(%d, %d) = %d, want %d", tt.enis, tt.ips, got, tt.want)
		}
	}
}

func TestTemplate(t *testing.T) {
	hookTemplate := &snapshot.Template{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: q("3"), corev1.ResourceMemory: q("12Gi")},
		Labels:      map[string]string{"from": "node"},
	}
	tests := []struct {
		name     string
		group    fakeaws.Group
		opts     func(*ngaws.Options)
		want     corev1.ResourceList
		labels   map[string]string // must be present
		noLabels []string
		taints   []corev1.Taint
		wantErr  string
		noEC2    bool
	}{
		{
			name: "CA tags only",
			group: fakeaws.Group{MixedInstanceTypes: []string{"m5.large"}, Tags: map[string]string{
				"k8s.io/cluster-autoscaler/node-template/resources/cpu":            "4",
				"k8s.io/cluster-autoscaler/node-template/resources/memory":         "16Gi",
				"k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu": "1",
				"k8s.io/cluster-autoscaler/node-template/label/workload":           "gpu",
				"k8s.io/cluster-autoscaler/node-template/taint/dedicated":          "gpu:NoSchedule",
				"k8s.io/cluster-autoscaler/node-template/taint/spot":               "PreferNoSchedule",
			}},
			want:   corev1.ResourceList{"cpu": q("4"), "memory": q("16Gi"), "nvidia.com/gpu": q("1"), "pods": q("110")},
			labels: map[string]string{"workload": "gpu", "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/region": "us-east-1"},
			taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}},
			noEC2:  true,
		},
		{
			name:  "mixed instances policy, EKS reserve",
			group: fakeaws.Group{MixedInstanceTypes: []string{"m5.large", "m5.xlarge"}, AvailabilityZones: []string{"us-east-1a"}},
			want:  corev1.ResourceList{"cpu": q("1930m"), "memory": q("7518Mi"), "pods": q("29")},
			labels: map[string]string{"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m5.large",
				"topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": "us-east-1a"},
		},
		{
			name:     "launch template $Latest, arm64, multi-zone",
			group:    fakeaws.Group{LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: "lt-0abc", Version: "$Latest"}, AvailabilityZones: []string{"us-east-1a", "us-east-1b"}},
			want:     corev1.ResourceList{"cpu": q("1930m"), "memory": q("7518Mi"), "pods": q("29")},
			labels:   map[string]string{"kubernetes.io/arch": "arm64", "node.kubernetes.io/instance-type": "m6g.large"},
			noLabels: []string{"topology.kubernetes.io/zone"},
		},
		{
			name:   "launch template by name, default version",
			group:  fakeaws.Group{LaunchTemplate: &fakeaws.LaunchTemplateRef{Name: "workers"}},
			want:   corev1.ResourceList{"cpu": q("1930m"), "memory": q("7518Mi"), "pods": q("29")},
			labels: map[string]string{"node.kubernetes.io/instance-type": "m5.large"},
		},
		{
			name:   "launch configuration, GPU type",
			group:  fakeaws.Group{LaunchConfigurationName: "gpu-lc"},
			want:   corev1.ResourceList{"cpu": q("3920m"), "memory": q("15710Mi"), "pods": q("29"), "nvidia.com/gpu": q("1")},
			labels: map[string]string{"node.kubernetes.io/instance-type": "g4dn.xlarge"},
		},
		{
			name: "instance type plus a resource tag and labels",
			group: fakeaws.Group{MixedInstanceTypes: []string{"t3.medium"}, Tags: map[string]string{
				"k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage": "20Gi",
				"k8s.io/cluster-autoscaler/node-template/label/kubernetes.io/os":      "linux",
				"k8s.io/cluster-autoscaler/node-template/label/pool":                  "small",
			}},
			want:   corev1.ResourceList{"cpu": q("1930m"), "memory": q("3554Mi"), "pods": q("17"), "ephemeral-storage": q("20Gi")},
			labels: map[string]string{"pool": "small", "node.kubernetes.io/instance-type": "t3.medium"},
		},
		{
			name:  "custom system reserve",
			group: fakeaws.Group{MixedInstanceTypes: []string{"m5.large"}},
			opts: func(o *ngaws.Options) {
				o.SystemReserved = corev1.ResourceList{"cpu": q("100m"), "memory": q("500Mi")}
			},
			want: corev1.ResourceList{"cpu": q("1900m"), "memory": q("7692Mi"), "pods": q("29")},
		},
		{
			name:  "no launch source: from a registered node",
			group: fakeaws.Group{},
			opts: func(o *ngaws.Options) {
				o.NodeTemplate = func(_ context.Context, group string) (*snapshot.Template, error) {
					if group != "asg" {
						return nil, errors.New("wrong group " + group)
					}
					return hookTemplate, nil
				}
			},
			want:   hookTemplate.Allocatable,
			labels: map[string]string{"from": "node"},
		},
		{
			name:  "missing launch template falls back to a registered node",
			group: fakeaws.Group{LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: "lt-gone"}},
			opts: func(o *ngaws.Options) {
				o.NodeTemplate = func(context.Context, string) (*snapshot.Template, error) { return hookTemplate, nil }
			},
			want:   hookTemplate.Allocatable,
			labels: map[string]string{"from": "node"},
		},
		{
			name:  "no source at all",
			group: fakeaws.Group{},
			opts: func(o *ngaws.Options) {
				o.NodeTemplate = func(context.Context, string) (*snapshot.Template, error) { return nil, nil }
			},
			wantErr: "aws group asg: no template",
		},
		{
			name: "attribute-based selection: the smallest match, no GPU",
			group: fakeaws.Group{LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: "lt-0def"},
				InstanceRequirements: &fakeaws.InstanceRequirements{VCPUMin: 4, MemoryMiBMin: 16000}},
			want:   corev1.ResourceList{corev1.ResourceCPU: q("3920m"), corev1.ResourceMemory: q("15391Mi"), corev1.ResourcePods: q("58")},
			labels: map[string]string{"node.kubernetes.io/instance-type": "m5.xlarge", "kubernetes.io/arch": "amd64"},
		},
		{
			name: "attribute-based selection on arm64",
			group: fakeaws.Group{LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: "lt-0def"},
				InstanceRequirements: &fakeaws.InstanceRequirements{VCPUMin: 2, VCPUMax: 2, MemoryMiBMin: 8000},
				Tags:                 map[string]string{"k8s.io/cluster-autoscaler/node-template/label/kubernetes.io/arch": "arm64"}},
			want:   corev1.ResourceList{corev1.ResourceCPU: q("1930m"), corev1.ResourceMemory: q("7518Mi"), corev1.ResourcePods: q("29")},
			labels: map[string]string{"node.kubernetes.io/instance-type": "m6g.large", "kubernetes.io/arch": "arm64"},
		},
		{
			name: "attribute-based selection matching nothing",
			group: fakeaws.Group{LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: "lt-0def"},
				InstanceRequirements: &fakeaws.InstanceRequirements{VCPUMin: 64, MemoryMiBMin: 1}},
			wantErr: "no x86_64 instance type meets the instance requirements",
		},
		{
			name:    "missing launch template",
			group:   fakeaws.Group{LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: "lt-gone"}},
			wantErr: "InvalidLaunchTemplateId.NotFound",
		},
		{
			name:    "unknown instance type",
			group:   fakeaws.Group{MixedInstanceTypes: []string{"m99.huge"}},
			wantErr: "do not exist: [m99.huge]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, as, ec2c := newDouble(t)
			d.AddLaunchTemplate(fakeaws.LaunchTemplate{ID: "lt-0abc", Name: "arm", InstanceTypes: []string{"m5.large", "m6g.large"}})
			d.AddLaunchTemplate(fakeaws.LaunchTemplate{ID: "lt-0def", Name: "workers", InstanceTypes: []string{"m5.large", "c5.large"}})
			d.AddLaunchConfiguration("gpu-lc", "g4dn.xlarge")
			grp := tt.group
			grp.Name, grp.MaxSize = "asg", 5
			d.AddGroup(grp)
			opts := ngaws.Options{AutoScalingGroup: "asg"}
			if tt.opts != nil {
				tt.opts(&opts)
			}
			g := oneGroup(t, as, ec2c, opts)
			got, err := g.Template(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Allocatable) != len(tt.want) {
				t.Fatalf("allocatable = %v, want %v", got.Allocatable, tt.want)
			}
			for name, want := range tt.want {
				if have := got.Allocatable[name]; have.Cmp(want) != 0 {
					t.Errorf("%s = %s, want %s", name, have.String(), want.String())
				}
			}
			for k, v := range tt.labels {
				if got.Labels[k] != v {
					t.Errorf("label %s = %q, want %q (labels %v)", k, got.Labels[k], v, got.Labels)
				}
			}
			for _, k := range tt.noLabels {
				if _, ok := got.Labels[k]; ok {
					t.Errorf("label %s should be absent", k)
				}
			}
			if !slices.Equal(got.Taints, tt.taints) {
				t.Errorf("taints = %v, want %v", got.Taints, tt.taints)
			}
			if tt.noEC2 && d.Calls("DescribeInstanceTypes")+d.Calls("DescribeLaunchTemplateVersions") != 0 {
				t.Errorf("complete tags still called EC2")
			}
		})
	}
}

func TestTemplateRequestsAndCaching(t *testing.T) {
	d, as, ec2c := newDouble(t)
	d.AddLaunchTemplate(fakeaws.LaunchTemplate{ID: "lt-0abc", Name: "arm", InstanceTypes: []string{"m5.large", "m6g.large"}, DefaultVersion: 1})
	d.AddGroup(fakeaws.Group{Name: "a", MaxSize: 3, LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: "lt-0abc", Version: "2"}, Tags: discoveryTags("c")})
	d.AddGroup(fakeaws.Group{Name: "b", MaxSize: 3, LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: "lt-0abc", Version: "2"}, Tags: discoveryTags("c")})
	p := newProvider(t, as, ec2c, ngaws.Options{ClusterName: "c"})
	ctx := context.Background()
	for range 2 {
		for _, g := range groups(t, p) {
			tpl, err := g.Template(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// A caller changing its copy must not change the next one.
			tpl.Labels["mutated"] = "yes"
			again, _ := g.Template(ctx)
			if _, ok := again.Labels["mutated"]; ok || again.Labels["node.kubernetes.io/instance-type"] != "m6g.large" {
				t.Fatalf("template labels = %v", again.Labels)
			}
		}
	}
	if c := d.Calls("DescribeInstanceTypes"); c != 1 {
		t.Fatalf("DescribeInstanceTypes calls = %d, want 1 (cached per provider)", c)
	}
	form := d.LastRequest("DescribeLaunchTemplateVersions")
	want := map[string][]string{"LaunchTemplateId": {"lt-0abc"}, "LaunchTemplateVersion.1": {"2"}}
	for k, v := range want {
		if !slices.Equal(form[k], v) {
			t.Fatalf("DescribeLaunchTemplateVersions %s = %v, want %v (form %v)", k, form[k], v, maps.Collect(maps.All(form)))
		}
	}
	if _, ok := form["LaunchTemplateName"]; ok {
		t.Fatalf("sent both the launch template ID and name")
	}
}

// TestMalformedTemplateTagsAreSkipped: as cluster-autoscaler does, a bad
// node-template tag is skipped with a warning naming it; the rest of the
// template stands.
func TestMalformedTemplateTagsAreSkipped(t *testing.T) {
	d, as, ec2c := newDouble(t)
	d.AddGroup(fakeaws.Group{Name: "asg", MaxSize: 5, MixedInstanceTypes: []string{"m5.large"}, Tags: map[string]string{
		"k8s.io/cluster-autoscaler/node-template/taint/bad":        "y:Sometimes",
		"k8s.io/cluster-autoscaler/node-template/taint/good":       "yes:NoSchedule",
		"k8s.io/cluster-autoscaler/node-template/resources/memory": "lots",
		"k8s.io/cluster-autoscaler/node-template/resources/pods":   "50",
		"k8s.io/cluster-autoscaler/node-template/label/bad key":    "x",
		"k8s.io/cluster-autoscaler/node-template/label/disk":       "not a value",
		"k8s.io/cluster-autoscaler/node-template/label/team":       "data",
	}})
	var logs bytes.Buffer
	g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "asg", Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	tpl, err := g.Template(context.Background())
	if err != nil {
		t.Fatalf("Template: %v", err)
	}
	if want := []corev1.Taint{{Key: "good", Value: "yes", Effect: corev1.TaintEffectNoSchedule}}; !slices.Equal(tpl.Taints, want) {
		t.Errorf("taints %v, want %v", tpl.Taints, want)
	}
	// memory from the instance type (m5.large: 8 GiB less the reserve), pods
	// from the good tag
	if m := tpl.Allocatable[corev1.ResourceMemory]; m.Cmp(q("6Gi")) < 0 || m.Cmp(q("8Gi")) >= 0 {
		t.Errorf("memory %s, want the instance type's", m.String())
	}
	if p := tpl.Allocatable[corev1.ResourcePods]; p.Cmp(q("50")) != 0 {
		t.Errorf("pods %s, want 50", p.String())
	}
	if tpl.Labels["team"] != "data" {
		t.Errorf("labels %v lack team=data", tpl.Labels)
	}
	for _, k := range []string{"bad key", "disk"} {
		if _, ok := tpl.Labels[k]; ok {
			t.Errorf("malformed label %q kept", k)
		}
	}
	for _, tag := range []string{"taint/bad", "resources/memory", "label/bad key", "label/disk"} {
		if !strings.Contains(logs.String(), "node-template/"+tag) {
			t.Errorf("no warning names tag %s:\n%s", tag, logs.String())
		}
	}
	if strings.Count(logs.String(), `"level":"WARN"`) != 4 {
		t.Errorf("want 4 warnings:\n%s", logs.String())
	}
}

// TestManagedNodegroupTemplate: an ASG behind an EKS managed node group gets
// the node group's labels and taints (eks:DescribeNodegroup, through the real
// EKS client), under the ASG's own node-template tags; a failed call leaves
// a template from the rest, with a warning.
func TestManagedNodegroupTemplate(t *testing.T) {
	tests := []struct {
		name   string
		fail   bool
		labels map[string]string
		absent []string
		taints []corev1.Taint
	}{
		{
			name: "labels and taints from EKS, the ASG's tags win",
			labels: map[string]string{
				"team": "data", "tier": "from-tag", "eks.amazonaws.com/nodegroup": "ng-1",
				"eks.amazonaws.com/capacityType": "SPOT",
			},
			taints: []corev1.Taint{
				{Key: "dedicated", Value: "tag", Effect: corev1.TaintEffectNoSchedule},
				{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoExecute},
				{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule},
			},
		},
		{
			name:   "DescribeNodegroup refused",
			fail:   true,
			labels: map[string]string{"tier": "from-tag"},
			absent: []string{"team", "eks.amazonaws.com/nodegroup"},
			taints: []corev1.Taint{{Key: "dedicated", Value: "tag", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, as, ec2c := newDouble(t)
			d.AddGroup(fakeaws.Group{Name: "eks-ng-1-abc", MaxSize: 5, MixedInstanceTypes: []string{"m5.large"}, Tags: map[string]string{
				"eks:cluster-name":   "prod",
				"eks:nodegroup-name": "ng-1",
				"k8s.io/cluster-autoscaler/node-template/label/tier":      "from-tag",
				"k8s.io/cluster-autoscaler/node-template/taint/dedicated": "tag:NoSchedule",
			}})
			d.AddNodegroup(fakeaws.Nodegroup{Cluster: "prod", Name: "ng-1", CapacityType: "SPOT",
				Labels: map[string]string{"team": "data", "tier": "from-eks"},
				Taints: []fakeaws.NodegroupTaint{
					{Key: "spot", Effect: "PREFER_NO_SCHEDULE"},
					{Key: "gpu", Value: "true", Effect: "NO_EXECUTE"},
					{Key: "dedicated", Value: "eks", Effect: "NO_SCHEDULE"},
				}})
			if tt.fail {
				d.FailNext("DescribeNodegroup", 1, fakeaws.Fault{Status: 403, Code: "AccessDeniedException", Message: "not authorized to perform: eks:DescribeNodegroup"})
			}
			eksc := ngaws.NewEKSClient(awssdk.Config{
				Region:       d.Region(),
				Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-secret", ""),
				BaseEndpoint: awssdk.String(d.URL()),
			}, func(o *retry.StandardOptions) { o.MaxBackoff = time.Millisecond })
			var logs bytes.Buffer
			g := oneGroup(t, as, ec2c, ngaws.Options{AutoScalingGroup: "eks-ng-1-abc", EKS: eksc, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			tpl, err := g.Template(context.Background())
			if err != nil {
				t.Fatalf("Template: %v", err)
			}
			for k, v := range tt.labels {
				if tpl.Labels[k] != v {
					t.Errorf("label %s = %q, want %q (labels %v)", k, tpl.Labels[k], v, tpl.Labels)
				}
			}
			for _, k := range tt.absent {
				if _, ok := tpl.Labels[k]; ok {
					t.Errorf("label %s present", k)
				}
			}
			if !slices.Equal(tpl.Taints, tt.taints) {
				t.Errorf("taints %v, want %v", tpl.Taints, tt.taints)
			}
			if got := d.LastRequest("DescribeNodegroup"); got["clusterName"][0] != "prod" || got["nodegroupName"][0] != "ng-1" {
				t.Errorf("DescribeNodegroup %v", got)
			}
			if tt.fail != strings.Contains(logs.String(), "AccessDeniedException") {
				t.Errorf("warning for the refused call: %v\n%s", tt.fail, logs.String())
			}
		})
	}
}
