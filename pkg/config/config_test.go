package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/planner"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
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
	tpl, err := kwok.BlockOf(cfg.NodeGroups[4].Entry()).Template.Planner()
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
		!slices.Equal(got.ScaleUp.Expanders, want.ScaleUp.Expanders) || got.ScaleDown.MaxConcurrentDrains != 1 || !got.ScaleDown.Enabled ||
		got.ScaleUp.BalanceSimilarNodeGroups {
		t.Errorf("defaults = %+v", got)
	}
}

// TestStatusConfigMap: on by default in kube-system/nodetide-status; false
// turns it off; a mapping names it.
func TestStatusConfigMap(t *testing.T) {
	base := "cluster: {name: c}\nstate: {memory: {}}\nnodeGroups: [{name: g, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\n"
	cases := []struct {
		name, doc, ns, cm string
		on                bool
	}{
		{"default", "", "kube-system", "nodetide-status", true},
		{"off", "status: {configMap: false}\n", "", "", false},
		{"true", "status: {configMap: true}\n", "kube-system", "nodetide-status", true},
		{"named", "status: {configMap: {namespace: nodetide, name: status}}\n", "nodetide", "status", true},
		{"name only", "status: {configMap: {name: status}}\n", "kube-system", "status", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(base+tc.doc), "x.yaml")
			if err != nil {
				t.Fatal(err)
			}
			ns, name, on := cfg.StatusConfigMapRef()
			if ns != tc.ns || name != tc.cm || on != tc.on {
				t.Errorf("got %q %q %v, want %q %q %v", ns, name, on, tc.ns, tc.cm, tc.on)
			}
		})
	}
}

// evaluate.shadow is off unless set true, and only a bool is taken, refused
// with its path and line.
func TestEvaluateShadow(t *testing.T) {
	cases := []struct {
		name, extra string
		want        bool
		err         string
	}{
		{"default off", "", false, ""},
		{"on", "evaluate: {shadow: true}\n", true, ""},
		{"off", "evaluate: {shadow: false}\n", false, ""},
		{"with interval", "evaluate:\n  interval: 2m\n  shadow: true\n", true, ""},
		{"not a bool", "evaluate: {shadow: sometimes}\n", false, `x.yaml:10: evaluate.shadow: must be true or false, got "sometimes"`},
		{"a number", "evaluate:\n  shadow: 1\n", false, `x.yaml:11: evaluate.shadow: must be true or false, got "1"`},
		{"misspelt", "evaluate: {shadowMode: true}\n", false, "x.yaml:10: evaluate.shadowMode: unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(kwokDoc(okTemplate, tc.extra)), "x.yaml")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.EvaluateSettings().Shadow; got != tc.want {
				t.Errorf("shadow %v, want %v", got, tc.want)
			}
		})
	}
}

// evaluate.shadowCompare compares in shadow mode by default, with
// cluster-autoscaler's usual status ConfigMap; a ConfigMap given is
// namespace/name, refused with its path and line otherwise.
func TestEvaluateShadowCompare(t *testing.T) {
	cases := []struct {
		name, extra string
		on          bool
		ns, cm      string
		err         string
	}{
		{"not in shadow mode", "", false, "kube-system", "cluster-autoscaler-status", ""},
		{"shadow: on by default", "evaluate: {shadow: true}\n", true, "kube-system", "cluster-autoscaler-status", ""},
		{"off", "evaluate: {shadow: true, shadowCompare: {enabled: false}}\n", false, "kube-system", "cluster-autoscaler-status", ""},
		{"another ConfigMap", "evaluate: {shadow: true, shadowCompare: {configMap: autoscaler/ca-status}}\n", true, "autoscaler", "ca-status", ""},
		{"no namespace", "evaluate: {shadow: true, shadowCompare: {configMap: ca-status}}\n", false, "", "",
			`x.yaml:10: evaluate.shadowCompare.configMap: "ca-status" is not namespace/name`},
		{"bad namespace", "evaluate:\n  shadowCompare: {configMap: Kube_System/ca}\n", false, "", "",
			`x.yaml:11: evaluate.shadowCompare.configMap: "Kube_System" is not a namespace name`},
		{"bad name", "evaluate:\n  shadowCompare: {configMap: kube-system/CA Status}\n", false, "", "",
			`evaluate.shadowCompare.configMap: "CA Status" is not a ConfigMap name`},
		{"misspelt", "evaluate: {shadowCompare: {configmap: a/b}}\n", false, "", "", "evaluate.shadowCompare.configmap: unknown field"},
		{"enabled not a bool", "evaluate: {shadowCompare: {enabled: yes please}}\n", false, "", "", "evaluate.shadowCompare.enabled: must be true or false"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(kwokDoc(okTemplate, tc.extra)), "x.yaml")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e := cfg.EvaluateSettings()
			if e.Compare != tc.on || e.CompareNamespace != tc.ns || e.CompareName != tc.cm {
				t.Errorf("compare %v %s/%s, want %v %s/%s", e.Compare, e.CompareNamespace, e.CompareName, tc.on, tc.ns, tc.cm)
			}
		})
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
		{"kwok zone twice", base + "nodeGroups: [{name: g, provider: kwok, minSize: 1, maxSize: 3, kwok: {zones: [a, a], template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\n", []string{`nodeGroups[0].kwok.zones[1]: zone "a" listed twice`}},
		{"kwok zone empty", base + "nodeGroups: [{name: g, provider: kwok, minSize: 1, maxSize: 3, kwok: {zones: [''], template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\n", []string{`nodeGroups[0].kwok.zones[0]: must not be empty`}},
		{"kwok zone not a label value", base + "nodeGroups: [{name: g, provider: kwok, minSize: 1, maxSize: 3, kwok: {zones: [eu west], template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\n", []string{`nodeGroups[0].kwok.zones[0]: "eu west"`}},
		{"kwok zones and zone label", base + "nodeGroups: [{name: g, provider: kwok, minSize: 1, maxSize: 3, kwok: {zones: [a, b], template: {allocatable: {cpu: 2, memory: 4Gi}, labels: {topology.kubernetes.io/zone: a}}}}]\n", []string{`nodeGroups[0].kwok.zones: the template's labels already fix`}},
		{"balance not a bool", base + kwok + "scaleUp: {balanceSimilarNodeGroups: sometimes}\n", []string{"scaleUp.balanceSimilarNodeGroups"}},
		{"no cluster name", "state: {memory: {}}\n" + kwok, []string{"cluster.name: is required"}},
		{"no state", "cluster: {name: c}\n" + kwok, []string{"state: is required"}},
		{"two state stores", "cluster: {name: c}\nstate: {memory: {}, dynamodb: {table: t}}\n" + kwok, []string{"state: set only one"}},
		{"aws with both", base + "nodeGroups: [{name: g, provider: aws, aws: {autoScalingGroup: a, autoDiscovery: [x]}}]\n", []string{"set exactly one of autoScalingGroup, autoDiscovery"}},
		{"wrong provider block", base + "nodeGroups: [{name: g, provider: aws, aws: {autoScalingGroup: a}, kwok: {}}]\n", []string{`nodeGroups[0].kwok: does not match provider "aws"`}},
		{"bad threshold", base + kwok + "scaleDown: {utilizationThreshold: 1.5}\n", []string{"scaleDown.utilizationThreshold: must be in (0, 1]"}},
		{"bad expander", base + kwok + "scaleUp: {expander: random}\n", []string{`unknown expander "random"`}},
		{"bad drain policy", base + kwok + "drain: {onTimeout: wait}\n", []string{`drain.onTimeout: unknown policy "wait"`}},
		{"bad rebalance", base + kwok + "drain: {rebalance: cordon}\n", []string{`drain.rebalance: unknown value "cordon" (use ignore or drain)`}},
		{"wrong type", base + kwok + "scaleUp: {maxNodesPerStep: many}\n", []string{"maxNodesPerStep"}},
		{"watch too long", base + kwok + "evaluate: {interval: 1m, watchFor: 2m}\n", []string{"evaluate.watchFor: must be shorter than evaluate.interval (1m0s)"}},
		{"no pod events", base + kwok + "events: {maxPodEventsPerCycle: 0}\n", []string{"events.maxPodEventsPerCycle: must be from 1 to 10000, got 0"}},
		{"event interval too short", base + kwok + "events: {notTriggerScaleUpInterval: 10ms}\n", []string{"events.notTriggerScaleUpInterval: must be at least 1s"}},
		{"unknown events key", base + kwok + "events: {maxPodEvents: 5}\n", []string{"events.maxPodEvents: unknown field"}},
		{"status ConfigMap not a bool or mapping", base + kwok + "status: {configMap: off}\n", []string{"x.yaml:4: status.configMap: must be a mapping"}},
		{"status ConfigMap unknown key", base + kwok + "status: {configMap: {namespce: x}}\n", []string{"x.yaml:4: status.configMap.namespce: unknown field"}},
		{"status ConfigMap bad name", base + kwok + "status: {configMap: {name: Not_A_Name}}\n", []string{`x.yaml:4: status.configMap.name: "Not_A_Name" is not a ConfigMap name`}},
		{"status ConfigMap bad namespace", base + kwok + "status:\n  configMap:\n    namespace: kube.system\n", []string{`x.yaml:6: status.configMap.namespace: "kube.system" is not a namespace name`}},
		{"list expected", base + "nodeGroups: {name: g}\n", []string{"nodeGroups: must be a list"}},
		{"kamatera without INI", base + "nodeGroups: [{provider: kamatera, kamatera: {}}]\n", []string{"nodeGroups[0].kamatera.cloudConfig: is required for provider kamatera (or cloudConfigSecret)"}},
		{"kamatera INI twice", base + "nodeGroups: [{provider: kamatera, kamatera: {cloudConfig: k.ini, cloudConfigSecret: arn:aws:secretsmanager:eu-west-1:1:secret:k}}]\n", []string{"nodeGroups[0].kamatera: set cloudConfig (a file) or cloudConfigSecret"}},
		{"kamatera INI secret not an ARN", base + "nodeGroups: [{provider: kamatera, kamatera: {cloudConfigSecret: kamatera-ini}}]\n", []string{"nodeGroups[0].kamatera.cloudConfigSecret: must be a Secrets Manager ARN"}},
		{"several problems at once", "cluster: {}\nstate: {memory: {}}\nnodeGroups: [{name: g, provider: kwok, minSize: 5, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\n",
			[]string{"cluster.name: is required", "minSize 5 is greater than maxSize 3"}},
		// A typo or a bad duration does not hide the problems found after
		// decoding: every one is reported in one run, with its line.
		{"typo and min above max", base + "nodeGroups: [{name: g, provider: kwok, minSize: 5, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\nscaleDown: {unneededTme: 5m}\n",
			[]string{"x.yaml:3: nodeGroups[0]: minSize 5 is greater than maxSize 3", "x.yaml:4: scaleDown.unneededTme: unknown field"}},
		{"bad durations and a bad threshold", base + kwok + "scaleUp: {pendingPodMinAge: 10sec}\nscaleDown: {unneededTime: -5m, utilizationThreshold: 1.5}\ndrain: {timeout: 1x}\n",
			[]string{`x.yaml:4: scaleUp.pendingPodMinAge: invalid duration "10sec"`, `x.yaml:5: scaleDown.unneededTime: duration "-5m" is negative`,
				"x.yaml:5: scaleDown.utilizationThreshold: must be in (0, 1]", `x.yaml:6: drain.timeout: invalid duration "1x"`}},
		{"wrong type and no cluster name", "cluster: {}\nstate: {memory: {}}\n" + kwok + "scaleUp: {maxNodesPerStep: many}\n",
			[]string{"x.yaml:1: cluster.name: is required", "x.yaml:4: scaleUp.maxNodesPerStep: must be a whole number"}},
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

// TestParseReportsEachProblemOnce: a value refused before decoding is set
// aside, not reported again by the checks after decoding (a group whose
// maxSize is not a number is not also "min above max").
func TestParseReportsEachProblemOnce(t *testing.T) {
	doc := "cluster: {name: c}\nstate: {memory: {}}\nnodeGroups: [{name: g, provider: kwok, minSize: 1, maxSize: 2.5, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}]\ndrain: {timeout: soon}\n"
	_, err := Parse([]byte(doc), "x.yaml")
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("err = %v, want *Error", err)
	}
	want := []string{
		`x.yaml:3: nodeGroups[0].maxSize: must be a whole number, got "2.5"`,
		`x.yaml:4: drain.timeout: invalid duration "soon" (use e.g. 10s, 15m, 1h30m)`,
	}
	if !slices.Equal(cerr.Problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(cerr.Problems, "\n"), strings.Join(want, "\n"))
	}
}

// kwokDoc is a valid config whose one kwok group has the given template
// (a YAML flow mapping) and whose last lines are extra.
func kwokDoc(template, extra string) string {
	return "cluster: {name: c}\nstate: {memory: {}}\nnodeGroups:\n  - name: g\n    provider: kwok\n    minSize: 1\n    maxSize: 3\n    kwok:\n      template: " + template + "\n" + extra
}

const okTemplate = "{allocatable: {cpu: 2, memory: 4Gi}}"

// TestParseRefusesValuesThatWouldAct: each of these once parsed into a
// config that behaved differently from what it says (NaN turned scale-down
// off, 5.9 became 5, 1e309 CPUs became 0, ...). Each must be refused with its
// path and line.
func TestParseRefusesValuesThatWouldAct(t *testing.T) {
	long := strings.Repeat("a", 64)
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"threshold NaN", kwokDoc(okTemplate, "scaleDown: {utilizationThreshold: .nan}\n"), []string{"x.yaml:10: scaleDown.utilizationThreshold: must be a finite number"}},
		{"threshold Inf", kwokDoc(okTemplate, "scaleDown: {utilizationThreshold: .inf}\n"), []string{"scaleDown.utilizationThreshold: must be a finite number"}},
		{"threshold -Inf", kwokDoc(okTemplate, "scaleDown: {utilizationThreshold: -.inf}\n"), []string{"scaleDown.utilizationThreshold: must be a finite number"}},
		{"threshold 0", kwokDoc(okTemplate, "scaleDown: {utilizationThreshold: 0}\n"), []string{"x.yaml:10: scaleDown.utilizationThreshold: must be in (0, 1], got 0 (to turn scale-down off, set scaleDown.enabled: false)"}},
		{"threshold just above 1", kwokDoc(okTemplate, "scaleDown: {utilizationThreshold: 1.0000001}\n"), []string{"scaleDown.utilizationThreshold: must be in (0, 1]"}},
		{"fractional maxSize", strings.Replace(kwokDoc(okTemplate, ""), "maxSize: 3", "maxSize: 5.9", 1), []string{`x.yaml:7: nodeGroups[0].maxSize: must be a whole number, got "5.9"`}},
		{"fractional minSize", strings.Replace(kwokDoc(okTemplate, ""), "minSize: 1", "minSize: 0.9", 1), []string{`x.yaml:6: nodeGroups[0].minSize: must be a whole number, got "0.9"`}},
		{"exponent maxSize", strings.Replace(kwokDoc(okTemplate, ""), "maxSize: 3", "maxSize: 1e1", 1), []string{`nodeGroups[0].maxSize: must be a whole number, got "1e1"`}},
		{"fractional maxNodesPerStep", kwokDoc(okTemplate, "scaleUp: {maxNodesPerStep: 2.5}\n"), []string{`x.yaml:10: scaleUp.maxNodesPerStep: must be a whole number, got "2.5"`}},
		{"fractional maxConcurrentDrains", kwokDoc(okTemplate, "scaleDown: {maxConcurrentDrains: 1.5}\n"), []string{`scaleDown.maxConcurrentDrains: must be a whole number, got "1.5"`}},
		{"fractional priority", kwokDoc(okTemplate, "scaleUp: {expander: priority, priorities: {g: 1.5}}\n"), []string{`scaleUp.priorities.g: must be a whole number, got "1.5"`}},
		{"maxNodesPerStep 0", kwokDoc(okTemplate, "scaleUp: {maxNodesPerStep: 0}\n"), []string{"x.yaml:10: scaleUp.maxNodesPerStep: must be at least 1"}},
		{"fractional expendable cutoff", kwokDoc(okTemplate, "scaleUp: {expendablePodsPriorityCutoff: -9.5}\n"), []string{`x.yaml:10: scaleUp.expendablePodsPriorityCutoff: must be a whole number, got "-9.5"`}},
		{"expendable cutoff not a number", kwokDoc(okTemplate, "scaleUp: {expendablePodsPriorityCutoff: low}\n"), []string{"x.yaml:10: scaleUp.expendablePodsPriorityCutoff: must be a whole number"}},
		{"expendable cutoff past int32", kwokDoc(okTemplate, "scaleUp: {expendablePodsPriorityCutoff: 3000000000}\n"), []string{"x.yaml:10: scaleUp.expendablePodsPriorityCutoff: must be a pod priority (-2147483648 to 2147483647), got 3000000000"}},
		{"empty startup taint", kwokDoc(okTemplate, "scaleUp: {startupTaints: [\"\"]}\n"), []string{"x.yaml:10: scaleUp.startupTaints[0]: must not be empty"}},
		{"bad startup taint key", kwokDoc(okTemplate, "scaleUp: {startupTaints: [ok, \"a b\"]}\n"), []string{`x.yaml:10: scaleUp.startupTaints[1]: "a b": name part must consist of`}},
		{"startup taint twice", kwokDoc(okTemplate, "scaleUp: {startupTaints: [cni, cni]}\n"), []string{`x.yaml:10: scaleUp.startupTaints[1]: "cni" is also scaleUp.startupTaints[0]`}},
		{"taint in both lists", kwokDoc(okTemplate, "scaleUp: {startupTaints: [cni], statusTaints: [cni]}\n"), []string{`x.yaml:10: scaleUp.statusTaints[0]: "cni" is also scaleUp.startupTaints[0]`}},
		{"draining taint ignored", kwokDoc(okTemplate, "scaleUp: {statusTaints: [nodetide.io/draining]}\n"), []string{`x.yaml:10: scaleUp.statusTaints[0]: "nodetide.io/draining" is nodetide's draining taint`}},
		{"status taints not a list", kwokDoc(okTemplate, "scaleUp: {statusTaints: cni}\n"), []string{"x.yaml:10: scaleUp.statusTaints"}},
		{"maxConcurrentDrains 0", kwokDoc(okTemplate, "scaleDown: {maxConcurrentDrains: 0}\n"), []string{"x.yaml:10: scaleDown.maxConcurrentDrains: must be at least 1"}},
		{"drain timeout under 30s", kwokDoc(okTemplate, "drain: {timeout: 29s}\n"), []string{"x.yaml:10: drain.timeout: must be at least 30s"}},
		{"cpu 1e309", kwokDoc(`{allocatable: {cpu: "1e309", memory: 4Gi}}`, ""), []string{`x.yaml:9: nodeGroups[0].kwok.template.allocatable.cpu: "1e309": is too large`}},
		{"memory past int64 milli-units", kwokDoc(`{allocatable: {cpu: 2, memory: 100Ei}}`, ""), []string{`nodeGroups[0].kwok.template.allocatable.memory: "100Ei": is too large`}},
		{"negative memory", kwokDoc(`{allocatable: {cpu: 2, memory: -4Gi}}`, ""), []string{`allocatable.memory: "-4Gi": must not be negative`}},
		{"zero cpu", kwokDoc(`{allocatable: {cpu: 0, memory: 4Gi}}`, ""), []string{`nodeGroups[0].kwok.template.allocatable.cpu: must be more than 0, got "0"`}},
		{"zero memory", kwokDoc(`{allocatable: {cpu: 2, memory: "0"}}`, ""), []string{`allocatable.memory: must be more than 0`}},
		{"zero pods", kwokDoc(`{allocatable: {cpu: 2, memory: 4Gi, pods: 0}}`, ""), []string{`allocatable.pods: must be more than 0`}},
		{"no memory", kwokDoc(`{allocatable: {cpu: 2}}`, ""), []string{`allocatable.memory: is required`}},
		{"bad label key", kwokDoc(`{allocatable: {cpu: 2, memory: 4Gi}, labels: {"a b": x}}`, ""), []string{`x.yaml:9: nodeGroups[0].kwok.template.labels.a b: label key "a b"`}},
		{"bad label value", kwokDoc(`{allocatable: {cpu: 2, memory: 4Gi}, labels: {a: "x y"}}`, ""), []string{`nodeGroups[0].kwok.template.labels.a: label value "x y"`}},
		{"label value over 63", kwokDoc(`{allocatable: {cpu: 2, memory: 4Gi}, labels: {a: `+long+`}}`, ""), []string{`nodeGroups[0].kwok.template.labels.a: label value`, "must be no more than 63 bytes"}},
		{"duplicate label", kwokDoc("\n        allocatable: {cpu: 2, memory: 4Gi}\n        labels:\n          a: x\n          a: y", ""), []string{`x.yaml:13: nodeGroups[0].kwok.template.labels.a: duplicate key (also line 12)`}},
		{"bad taint key", kwokDoc(`{allocatable: {cpu: 2, memory: 4Gi}, taints: [{key: "a b", effect: NoSchedule}]}`, ""), []string{`nodeGroups[0].kwok.template.taints[0].key: "a b"`}},
		{"bad taint value", kwokDoc(`{allocatable: {cpu: 2, memory: 4Gi}, taints: [{key: a, value: "x/y", effect: NoSchedule}]}`, ""), []string{`nodeGroups[0].kwok.template.taints[0].value: "x/y"`}},
		{"taint value over 63", kwokDoc(`{allocatable: {cpu: 2, memory: 4Gi}, taints: [{key: a, value: `+long+`, effect: NoExecute}]}`, ""), []string{`taints[0].value:`, "must be no more than 63 bytes"}},
		{"empty taint effect", kwokDoc(`{allocatable: {cpu: 2, memory: 4Gi}, taints: [{key: a}]}`, ""), []string{`taints[0].effect: unknown effect ""`}},
		{"group name not a label value", strings.Replace(kwokDoc(okTemplate, ""), "name: g", "name: g/h", 1), []string{`x.yaml:4: nodeGroups[0].name: "g/h" is not a valid label value`}},
		{"group name over 63", "cluster: {name: c}\nstate: {memory: {}}\nnodeGroups: [{name: " + long + ", provider: aws, aws: {autoScalingGroup: a}}]\n", []string{`nodeGroups[0].name: "` + long + `" is not a valid label value`}},
		{"second document", kwokDoc(okTemplate, "---\nscaleDown: {enabled: false}\n"), []string{"x.yaml:10: a second YAML document"}},
		{"all problems at once", kwokDoc(`{allocatable: {cpu: "1e309", memory: "0"}, labels: {"a b": x}}`, "scaleDown: {utilizationThreshold: 2}\n"),
			[]string{"allocatable.cpu", "allocatable.memory", "labels.a b", "scaleDown.utilizationThreshold"}},
		{"bad durations with path and line, with a typo", kwokDoc(okTemplate, "scaleUp: {pendingPodMinAge: 10x, backoff: -1m}\nscaleDown: {unneededTim: 10m}\n"),
			[]string{`x.yaml:10: scaleUp.pendingPodMinAge: invalid duration "10x"`, `x.yaml:10: scaleUp.backoff: duration "-1m" is negative`, "x.yaml:11: scaleDown.unneededTim: unknown field"}},
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

// TestParseAcceptsBounds: the values at each bound are valid.
func TestParseAcceptsBounds(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	cases := []struct {
		name, doc string
		check     func(t *testing.T, c *Config)
	}{
		{"threshold 1", kwokDoc(okTemplate, "scaleDown: {utilizationThreshold: 1}\n"), func(t *testing.T, c *Config) {
			if got := c.Settings().ScaleDown.UtilizationThreshold; got != 1 {
				t.Errorf("threshold = %v", got)
			}
		}},
		{"expendable cutoff by default", kwokDoc(okTemplate, ""), func(t *testing.T, c *Config) {
			if got := c.Settings().ScaleUp.ExpendablePodsPriorityCutoff; got != -10 {
				t.Errorf("expendablePodsPriorityCutoff = %d, want -10", got)
			}
		}},
		{"expendable cutoff 0", kwokDoc(okTemplate, "scaleUp: {expendablePodsPriorityCutoff: 0}\n"), func(t *testing.T, c *Config) {
			if got := c.Settings().ScaleUp.ExpendablePodsPriorityCutoff; got != 0 {
				t.Errorf("expendablePodsPriorityCutoff = %d, want 0", got)
			}
		}},
		{"startup and status taints", kwokDoc(okTemplate, "scaleUp: {startupTaints: [node.cilium.io/agent-not-ready, cni], statusTaints: [example.com/degraded]}\n"), func(t *testing.T, c *Config) {
			got := c.Settings().ScaleUp.IgnoredTaints
			if !slices.Equal(got.Startup, []string{"node.cilium.io/agent-not-ready", "cni"}) || !slices.Equal(got.Status, []string{"example.com/degraded"}) {
				t.Errorf("ignored taints = %+v", got)
			}
		}},
		{"maxNodesPerStep 1", kwokDoc(okTemplate, "scaleUp: {maxNodesPerStep: 1}\n"), func(t *testing.T, c *Config) {
			if got := c.Settings().ScaleUp.MaxNodesPerStep; got != 1 {
				t.Errorf("maxNodesPerStep = %d", got)
			}
		}},
		{"maxConcurrentDrains 3", kwokDoc(okTemplate, "scaleDown: {maxConcurrentDrains: 3}\n"), func(t *testing.T, c *Config) {
			if got := c.Settings().ScaleDown.MaxConcurrentDrains; got != 3 {
				t.Errorf("maxConcurrentDrains = %d", got)
			}
		}},
		{"drain timeout 30s", kwokDoc(okTemplate, "drain: {timeout: 30s}\n"), func(t *testing.T, c *Config) {
			if got := c.DrainSettings().Timeout; got != 30*time.Second {
				t.Errorf("timeout = %v", got)
			}
		}},
		{"min equals max", strings.Replace(kwokDoc(okTemplate, ""), "maxSize: 3", "maxSize: 1", 1), func(t *testing.T, c *Config) {
			if *c.NodeGroups[0].MinSize != 1 || *c.NodeGroups[0].MaxSize != 1 {
				t.Errorf("sizes = %d..%d", *c.NodeGroups[0].MinSize, *c.NodeGroups[0].MaxSize)
			}
		}},
		{"label value of 63 characters", kwokDoc(`{allocatable: {cpu: 2, memory: 4Gi}, labels: {example.com/a: `+label63+`}}`, ""), func(t *testing.T, c *Config) {
			tpl, err := kwok.BlockOf(c.NodeGroups[0].Entry()).Template.Planner()
			if err != nil || tpl.Labels["example.com/a"] != label63 {
				t.Errorf("template = %+v, %v", tpl, err)
			}
		}},
		{"largest cpu", kwokDoc(`{allocatable: {cpu: "9223372036854775807m", memory: 4Gi, pods: 1}}`, ""), func(t *testing.T, c *Config) {
			tpl, err := kwok.BlockOf(c.NodeGroups[0].Entry()).Template.Planner()
			if err != nil || tpl.Allocatable.Cpu().MilliValue() != 9223372036854775807 || tpl.Allocatable.Pods().Value() != 1 {
				t.Errorf("template = %+v, %v", tpl, err)
			}
		}},
		{"empty size means unset", kwokDoc(okTemplate, "scaleUp: {maxNodesPerStep: }\n"), func(t *testing.T, c *Config) {
			if got := c.Settings().ScaleUp.MaxNodesPerStep; got != planner.DefaultSettings().ScaleUp.MaxNodesPerStep {
				t.Errorf("maxNodesPerStep = %d", got)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.doc), "x.yaml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tc.check(t, c)
		})
	}
}

// TestParseSecretsMustBeARNs: a secret field holds the ARN of a Secrets
// Manager secret; anything else (the secret itself, pasted by mistake, or
// another service's ARN) is refused without being repeated.
func TestParseSecretsMustBeARNs(t *testing.T) {
	const pasted = "s3cr3t-Value-0f-the-key"
	base := "cluster: {name: c, kubernetes: {kubeconfigSecret: %s}}\nstate: {memory: {}}\nnodeGroups:\n  - {name: g, provider: aws, aws: {autoScalingGroup: a}}\n"
	kwok := "  - {name: k, provider: kwok, minSize: 0, maxSize: 1, kwok: {template: " + okTemplate + "}}\n"
	good := "arn:aws:secretsmanager:eu-west-1:123456789012:secret:nodetide/kc-AbC123"
	cases := []struct {
		name, doc, path string
	}{
		{"kubeconfigSecret", fmt.Sprintf(base, pasted) + kwok, "x.yaml:1: cluster.kubernetes.kubeconfigSecret"},
		{"kubeconfigSecret of another service", fmt.Sprintf(base, "arn:aws:s3:::"+pasted) + kwok, "cluster.kubernetes.kubeconfigSecret"},
		{"scaleway secretKeySecret", fmt.Sprintf(base, good) + "  - {name: p, provider: scaleway, scaleway: {pool: p, secretKeySecret: " + pasted + "}}\n", "x.yaml:5: nodeGroups[1].scaleway.secretKeySecret"},
		{"kamatera credentialsSecret", fmt.Sprintf(base, good) + "  - {provider: kamatera, kamatera: {cloudConfig: k.ini, credentialsSecret: " + pasted + "}}\n", "nodeGroups[1].kamatera.credentialsSecret"},
		{"kamatera cloudConfigSecret", fmt.Sprintf(base, good) + "  - {provider: kamatera, kamatera: {cloudConfigSecret: arn:aws:secretsmanager:eu-west-1:1:" + pasted + "}}\n", "nodeGroups[1].kamatera.cloudConfigSecret"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "x.yaml")
			if err == nil {
				t.Fatal("Parse accepted a secret field that is not a Secrets Manager ARN")
			}
			if !strings.Contains(err.Error(), tc.path+": must be a Secrets Manager ARN") {
				t.Errorf("error %q does not name %s", err, tc.path)
			}
			if strings.Contains(err.Error(), pasted) {
				t.Errorf("error %q repeats the value", err)
			}
		})
	}
	if _, err := Parse([]byte(fmt.Sprintf(base, good)+kwok), "x.yaml"); err != nil {
		t.Errorf("a Secrets Manager ARN is refused: %v", err)
	}
}

func TestBalanceSimilarNodeGroups(t *testing.T) {
	cfg, err := Parse([]byte(`
cluster: {name: c}
state: {memory: {}}
nodeGroups: [{name: g, provider: kwok, minSize: 0, maxSize: 3, kwok: {zones: [a, b], template: {allocatable: {cpu: 2, memory: 4Gi}}}}]
scaleUp: {balanceSimilarNodeGroups: true}
`), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Settings().ScaleUp.BalanceSimilarNodeGroups {
		t.Error("balanceSimilarNodeGroups: true not passed to the planner")
	}
	if z := kwok.BlockOf(cfg.NodeGroups[0].Entry()).Zones; len(z) != 2 {
		t.Errorf("kwok zones = %v", z)
	}
}

// TestMigrationGuideFlagTable: every nodetide.yaml snippet in the guide's
// table of cluster-autoscaler flags parses: its keys are known and its values
// valid, beside a minimal config (groups discovered by cluster-autoscaler's
// tags, as the guide's, unless the snippet gives the groups).
func TestMigrationGuideFlagTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/migrating-from-cluster-autoscaler.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `--[^|]*\\| `([^`]+)` \\|")
	rows := row.FindAllStringSubmatch(string(b), -1)
	if len(rows) < 15 {
		t.Fatalf("the guide's flag table has %d rows with a snippet; want every flag's", len(rows))
	}
	for _, m := range rows {
		snippet := m[1]
		parts := map[string]string{
			"cluster":    "cluster: {name: prod}",
			"state":      "state: {memory: {}}",
			"nodeGroups": `nodeGroups: [{provider: aws, aws: {autoDiscovery: ["asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod"]}}]`,
		}
		doc := snippet + "\n"
		for key, part := range parts {
			if !strings.HasPrefix(snippet, key+":") {
				doc += part + "\n"
			}
		}
		if _, err := Parse([]byte(doc), "guide"); err != nil {
			t.Errorf("guide's %q: %v", snippet, err)
		}
	}
}
