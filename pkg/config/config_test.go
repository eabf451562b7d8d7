package config

import (
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/planner"
)

const full = `
cluster:
  name: prod
  kubernetes: {eks: {name: prod}}
state: {dynamodb: {table: nodetide}}
nodeGroups:
  - {name: workers, provider: aws, aws: {autoScalingGroup: prod-workers}}
  - {provider: aws, aws: {autoDiscovery: ["k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/prod"]}}
  - {name: gpu, provider: scaleway, scaleway: {pool: gpu-pool}}
  - {provider: kamatera, kamatera: {cloudConfig: kamatera.ini}}
  - name: local
    provider: kwok
    minSize: 1
    maxSize: 5
    kwok: {template: {allocatable: {cpu: "4", memory: 16Gi}, labels: {pool: local}, taints: [{key: dedicated, value: x, effect: NoSchedule}]}}
scaleUp: {pendingPodMinAge: 10s, maxNodesPerStep: 10}
scaleDown: {utilizationThreshold: 0.5, unneededTime: 10m, delayAfterAdd: 10m, maxConcurrentDrains: 1}
drain: {timeout: 10m, onTimeout: abort, surge: true}
`

func TestParseDesignExample(t *testing.T) {
	cfg, err := Parse([]byte(full), "nodetide.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := len(cfg.NodeGroups); got != 5 {
		t.Fatalf("node groups = %d, want 5", got)
	}
	s := cfg.Settings()
	want := planner.DefaultSettings()
	if s.ScaleUp.PendingPodMinAge != want.ScaleUp.PendingPodMinAge || s.ScaleDown.UnneededTime != want.ScaleDown.UnneededTime ||
		s.ScaleUp.MaxNodesPerStep != 10 || s.ScaleDown.UtilizationThreshold != 0.5 {
		t.Errorf("settings = %+v", s)
	}
	tpl, err := cfg.NodeGroups[4].Kwok.Template.Planner()
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Allocatable.Cpu().MilliValue() != 4000 || tpl.Allocatable.Pods().Value() != 110 || len(tpl.Taints) != 1 {
		t.Errorf("template = %+v", tpl)
	}
	if d := cfg.DrainSettings(); d.Timeout != 10*time.Minute || d.OnTimeout != OnTimeoutAbort || !d.Surge {
		t.Errorf("drain = %+v", d)
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte(`
cluster: {name: c}
state: {memory: {}}
nodeGroups: [{name: g, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}]
`), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Settings(), planner.DefaultSettings(); got.ScaleUp.Backoff != want.ScaleUp.Backoff ||
		got.ScaleUp.Expander != want.ScaleUp.Expander || got.ScaleDown.MaxConcurrentDrains != 1 || !got.ScaleDown.Enabled {
		t.Errorf("defaults = %+v", got)
	}
}

func TestParseErrors(t *testing.T) {
	base := "cluster: {name: c}\nstate: {memory: {}}\n"
	kwok := "nodeGroups: [{name: g, provider: kwok, minSize: 1, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\n"
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"unknown top-level key", base + kwok + "scaleUpp: {}\n", []string{"x.yaml:4: scaleUpp: unknown field"}},
		{"unknown nested key", base + kwok + "scaleUp: {pendingPodMinAg: 10s}\n", []string{"scaleUp.pendingPodMinAg: unknown field"}},
		{"unknown key in a group", base + "nodeGroups: [{name: g, provider: aws, aws: {autoScalingGrup: x}}]\n", []string{"nodeGroups[0].aws.autoScalingGrup: unknown field"}},
		{"bad duration", base + kwok + "scaleDown: {unneededTime: 10 minutes}\n", []string{`invalid duration "10 minutes"`}},
		{"negative duration", base + kwok + "scaleDown: {unneededTime: -1m}\n", []string{`negative`}},
		{"min above max", base + "nodeGroups: [{name: g, provider: kwok, minSize: 4, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\n", []string{"nodeGroups[0]: minSize 4 is greater than maxSize 3"}},
		{"negative size", base + "nodeGroups: [{name: g, provider: kwok, minSize: -1, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\n", []string{"nodeGroups[0].minSize: must not be negative"}},
		{"unknown provider", base + "nodeGroups: [{name: g, provider: gcp}]\n", []string{`nodeGroups[0].provider: unknown provider "gcp"`}},
		{"duplicate names", base + "nodeGroups: [{name: g, provider: aws, aws: {autoScalingGroup: a}}, {name: g, provider: aws, aws: {autoScalingGroup: b}}]\n", []string{`nodeGroups[1].name: duplicate node group name "g"`}},
		{"bad quantity", base + "nodeGroups: [{name: g, provider: kwok, minSize: 1, maxSize: 3, kwok: {template: {allocatable: {cpu: lots, memory: 4Gi}}}}]\n", []string{`allocatable.cpu: bad quantity "lots"`}},
		{"bad taint effect", base + "nodeGroups: [{name: g, provider: kwok, minSize: 1, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}, taints: [{key: a, effect: Never}]}}}]\n", []string{`unknown effect "Never"`}},
		{"no cluster name", "state: {memory: {}}\n" + kwok, []string{"cluster.name: is required"}},
		{"no state", "cluster: {name: c}\n" + kwok, []string{"state: is required"}},
		{"two state stores", "cluster: {name: c}\nstate: {memory: {}, dynamodb: {table: t}}\n" + kwok, []string{"state: set only one"}},
		{"aws with both", base + "nodeGroups: [{name: g, provider: aws, aws: {autoScalingGroup: a, autoDiscovery: [x]}}]\n", []string{"set exactly one of autoScalingGroup, autoDiscovery"}},
		{"wrong provider block", base + "nodeGroups: [{name: g, provider: aws, aws: {autoScalingGroup: a}, kwok: {}}]\n", []string{`nodeGroups[0].kwok: does not match provider "aws"`}},
		{"bad threshold", base + kwok + "scaleDown: {utilizationThreshold: 1.5}\n", []string{"scaleDown.utilizationThreshold: must be in (0, 1]"}},
		{"bad expander", base + kwok + "scaleUp: {expander: random}\n", []string{`unknown expander "random"`}},
		{"bad drain policy", base + kwok + "drain: {onTimeout: wait}\n", []string{`drain.onTimeout: unknown policy "wait"`}},
		{"wrong type", base + kwok + "scaleUp: {maxNodesPerStep: many}\n", []string{"maxNodesPerStep"}},
		{"watch too long", base + kwok + "evaluate: {interval: 1m, watchFor: 2m}\n", []string{"evaluate.watchFor: must be shorter than evaluate.interval (1m0s)"}},
		{"list expected", base + "nodeGroups: {name: g}\n", []string{"nodeGroups: must be a list"}},
		{"kamatera without INI", base + "nodeGroups: [{provider: kamatera, kamatera: {}}]\n", []string{"nodeGroups[0].kamatera.cloudConfig: is required for provider kamatera (or cloudConfigSecret)"}},
		{"kamatera INI twice", base + "nodeGroups: [{provider: kamatera, kamatera: {cloudConfig: k.ini, cloudConfigSecret: arn:aws:secretsmanager:eu-west-1:1:secret:k}}]\n", []string{"nodeGroups[0].kamatera: set cloudConfig (a file) or cloudConfigSecret"}},
		{"kamatera INI secret not an ARN", base + "nodeGroups: [{provider: kamatera, kamatera: {cloudConfigSecret: kamatera-ini}}]\n", []string{"nodeGroups[0].kamatera.cloudConfigSecret: must be a Secrets Manager ARN"}},
		{"several problems at once", "cluster: {}\nstate: {memory: {}}\nnodeGroups: [{name: g, provider: kwok, minSize: 5, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\n",
			[]string{"cluster.name: is required", "minSize 5 is greater than maxSize 3"}},
		{"not YAML", "cluster: [", []string{"x.yaml: yaml:"}},
		{"empty", "", []string{"empty config"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "x.yaml")
			if err == nil {
				t.Fatal("Parse accepted a bad config")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
