package kamatera

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestTemplate(t *testing.T) {
	tests := []struct {
		name   string
		group  string
		opts   []Option
		cpu    string
		memory string
		eph    string
		labels map[string]string
	}{
		{
			name: "2A 4096", group: "cpu = 2A\nram = 4096\n",
			cpu: "1930m", memory: "2972Mi", eph: "45G",
			labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", GroupLabel: "g"},
		},
		{
			name: "1A 1024, the smallest", group: "cpu = 1A\nram = 1024\ndisk = \"id=0,size=20\"\n",
			cpu: "940m", memory: "668Mi", eph: "18G",
		},
		{
			name: "8D 32768", group: "cpu = 8D\nram = 32768\n",
			// cpu 60+10+10+10 = 90m; memory 25% of 4Gi + 20% of 4Gi + 10% of 8Gi + 6% of 16Gi + 100Mi
			cpu: "7910m", memory: "30432359875",
		},
		{
			name: "template labels override", group: "cpu = 2B\nram = 2048\ntemplate-label = \"disktype=ssd\"\ntemplate-label = \"nodetide.io/node-group=custom\"\n",
			labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", GroupLabel: "custom", "disktype": "ssd"},
		},
		{
			name: "fixed reserve", group: "cpu = 4B\nram = 8192\n", opts: []Option{WithSystemReserve(resource.MustParse("500m"), resource.MustParse("1Gi"))},
			cpu: "3500m", memory: "7068Mi",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBed(t, "[nodegroup \"g\"]\n"+tt.group, nil, tt.opts...)
			tmpl, err := b.group("g").Template(context.Background())
			if err != nil {
				t.Fatalf("Template: %v", err)
			}
			check := func(r corev1.ResourceName, want string) {
				if want == "" {
					return
				}
				got := tmpl.Allocatable[r]
				if w := resource.MustParse(want); got.Cmp(w) != 0 {
					t.Errorf("%s = %s, want %s", r, got.String(), w.String())
				}
			}
			check(corev1.ResourceCPU, tt.cpu)
			check(corev1.ResourceMemory, tt.memory)
			check(corev1.ResourceEphemeralStorage, tt.eph)
			check(corev1.ResourcePods, "110")
			for k, v := range tt.labels {
				if tmpl.Labels[k] != v {
					t.Errorf("label %s = %q, want %q (all: %v)", k, tmpl.Labels[k], v, tmpl.Labels)
				}
			}
			if len(tmpl.Taints) != 0 {
				t.Errorf("taints %v", tmpl.Taints)
			}
		})
	}
}

func TestTemplateErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  NodeGroupConfig
		want string
	}{
		{"no cpu", NodeGroupConfig{Name: "g", Server: ServerConfig{RAM: 1024}}, "not a Kamatera CPU"},
		{"no ram", NodeGroupConfig{Name: "g", Server: ServerConfig{CPU: "1A"}}, "no ram"},
		{"reserve eats all", NodeGroupConfig{Name: "g", Server: ServerConfig{CPU: "1A", RAM: 100}}, "leaves nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := buildTemplate(&tt.cfg, defaultReserve)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}
