package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestConfigValidateHeadroom: validate shows each named group's headroom
// and the top-level list, whose groups it cannot look up.
func TestConfigValidateHeadroom(t *testing.T) {
	cfg := writeFile(t, "nodetide.yaml", `cluster: {name: prod}
state: {memory: {}}
nodeGroups:
  - provider: aws
    aws: {autoDiscovery: [k8s.io/cluster-autoscaler/enabled]}
  - {name: local, provider: kwok, minSize: 0, maxSize: 2, headroom: {cpu: 1500m}, kwok: {template: {allocatable: {cpu: 2, memory: 1Gi}}}}
headroom:
  - {nodeGroup: prod-spot, nodes: 2}
  - {nodeGroup: prod-batch, utilization: 0.8}
`)
	out, errOut, code := nodetide(t, "config", "validate", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	const want = `NAME                                                      PROVIDER  MIN  MAX  HEADROOM
(discovered by tags [k8s.io/cluster-autoscaler/enabled])  aws       -    -    -
local                                                     kwok      0    2    1500m cpu spare

HEADROOM OF GROUP  RULE
prod-spot          2 spare nodes
prod-batch         utilisation below 80%
`
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
	out, errOut, code = nodetide(t, "config", "validate", "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("-o json: exit %d: %s", code, errOut)
	}
	var doc struct{ Headroom []namedHeadroom }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if wantList := []namedHeadroom{{"prod-spot", "2 spare nodes"}, {"prod-batch", "utilisation below 80%"}}; !reflect.DeepEqual(doc.Headroom, wantList) {
		t.Errorf("headroom %+v, want %+v", doc.Headroom, wantList)
	}
}
