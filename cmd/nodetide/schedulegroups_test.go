package main

import (
	"strings"
	"testing"
)

// TestSchedulesCheckGroups: with a config, a schedule naming a group the
// config does not define is refused, naming the schedule, the path and
// the groups there are; where the config discovers groups at run time the
// name can't be checked offline, which is said, not refused.
func TestSchedulesCheckGroups(t *testing.T) {
	const kwokGroups = "nodeGroups:\n  - {name: workers, provider: kwok, minSize: 0, maxSize: 4, kwok: {template: {allocatable: {cpu: 2, memory: 1Gi}}}}\n  - {name: gpu, provider: kwok, minSize: 0, maxSize: 2, kwok: {template: {allocatable: {cpu: 8, memory: 8Gi}}}}\n"
	named := writeFile(t, "named.yaml", "cluster: {name: c}\nstate: {memory: {}}\n"+kwokGroups)
	discovering := writeFile(t, "discover.yaml", "cluster: {name: c}\nstate: {memory: {}}\nnodeGroups:\n  - {name: workers, provider: kwok, minSize: 0, maxSize: 4, kwok: {template: {allocatable: {cpu: 2, memory: 1Gi}}}}\n  - {provider: aws, aws: {autoDiscovery: [\"k8s.io/cluster-autoscaler/enabled\"]}}\n")
	inSecret := writeFile(t, "kamatera.yaml", "cluster: {name: c}\nstate: {memory: {}}\nnodeGroups: [{provider: kamatera, kamatera: {cloudConfigSecret: \"arn:aws:secretsmanager:eu-west-1:123456789012:secret:kamatera-AbCdEf\"}}]\n")
	stored := writeFile(t, "dynamo.yaml", "cluster: {name: c}\nstate: {dynamodb: {table: t, endpoint: \"http://127.0.0.1:1\"}}\n"+kwokGroups)
	good := writeFile(t, "good.json", `{"name": "night", "cron": "0 20 * * *", "nodeGroups": [{"name": "workers", "max": 1}, {"name": "gpu", "max": 0}]}`)
	typo := writeFile(t, "typo.json", `[{"name": "day", "cron": "0 8 * * *", "desiredCapacity": 2}, {"name": "night", "cron": "0 20 * * *", "nodeGroups": [{"name": "workers", "max": 1}, {"name": "wokers", "max": 0}]}]`)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr []string
	}{
		{"known groups", []string{"schedules", "validate", good, "--config", named}, 0, "1 schedule(s), valid", nil},
		{"unknown group", []string{"schedules", "validate", typo, "--config", named}, 1, "",
			[]string{`schedule "night": [1].nodeGroups[1].name: unknown node group "wokers" (` + named + ` defines workers, gpu)`, "1 problem(s)"}},
		{"discovered groups", []string{"schedules", "validate", typo, "--config", discovering}, 0, "2 schedule(s), valid",
			[]string{`note: schedule "night": [1].nodeGroups[1].name: "wokers" is not a group`, "(discovered by tags [k8s.io/cluster-autoscaler/enabled]) are found at run time and can't be checked offline"}},
		{"a Kamatera INI in Secrets Manager", []string{"schedules", "validate", good, "--config", inSecret}, 0, "1 schedule(s), valid",
			[]string{`note: schedule "night": [0].nodeGroups[0].name: "workers" is not a group`, "can't be checked offline"}},
		{"no config", []string{"schedules", "validate", typo}, 0, "2 schedule(s), valid", nil},
		{"config named but missing", []string{"schedules", "validate", good, "--config", "/nonexistent/nodetide.yaml"}, 1, "", []string{"/nonexistent/nodetide.yaml"}},
		// Refused before the store is contacted (its endpoint answers nothing).
		{"create refuses", []string{"schedules", "create", typo, "--config", stored}, 1, "",
			[]string{`unknown node group "wokers"`, "1 problem(s), nothing stored"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := nodetide(t, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q", code, out, errOut, tc.code, tc.stdout)
			}
			for _, w := range tc.stderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if tc.stderr == nil && errOut != "" {
				t.Errorf("stderr %q, want nothing", errOut)
			}
		})
	}
}
