package config

import (
	"reflect"
	"testing"

	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"gopkg.in/yaml.v3"
)

// FuzzParse: Parse never panics, and a config it accepts keeps the bounds
// it validates and means the same once written back as YAML.
func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte(kwokDoc(okTemplate, "scaleDown: {utilizationThreshold: .nan, maxConcurrentDrains: 2}\n")))
	f.Add([]byte(kwokDoc(`{allocatable: {cpu: "1e309", memory: 4Gi, pods: 5}, labels: {a: b}, taints: [{key: k, value: v, effect: NoExecute}]}`, "---\n")))
	f.Add([]byte(kwokDoc(okTemplate, "scaleUp: {maxNodesPerStep: 5.9, expander: priority, priorities: {g: 3}}\ndrain: {timeout: 30s}\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err != nil {
			return
		}
		s := cfg.Settings()
		if th := s.ScaleDown.UtilizationThreshold; !(th > 0 && th <= 1) {
			t.Fatalf("accepted utilizationThreshold %v", th)
		}
		if s.ScaleUp.MaxNodesPerStep < 1 || s.ScaleDown.MaxConcurrentDrains < 1 {
			t.Fatalf("accepted settings %+v", s)
		}
		if d := cfg.DrainSettings(); d.Timeout < 30e9 {
			t.Fatalf("accepted drain timeout %v", d.Timeout)
		}
		for i, g := range cfg.NodeGroups {
			if g.MinSize != nil && g.MaxSize != nil && (*g.MinSize < 0 || *g.MinSize > *g.MaxSize) {
				t.Fatalf("group %d: accepted sizes %d..%d", i, *g.MinSize, *g.MaxSize)
			}
			if kwok.BlockOf(g.Entry()) == nil {
				continue
			}
			tpl, err := kwok.BlockOf(g.Entry()).Template.Planner()
			if err != nil {
				t.Fatalf("group %d: accepted template is refused: %v", i, err)
			}
			for name, q := range tpl.Allocatable {
				if err := snapshot.CheckQuantity(q); err != nil || q.Sign() <= 0 && (name == "cpu" || name == "memory" || name == "pods") {
					t.Fatalf("group %d: accepted allocatable %s = %s", i, name, q.String())
				}
			}
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("accepted config cannot be written: %v", err)
		}
		again, err := Parse(out, "again.yaml")
		if err != nil {
			t.Fatalf("written config is refused: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(normal(cfg), normal(again)) {
			t.Fatalf("written config means something else:\n%+v\n%+v\n%s", cfg, again, out)
		}
	})
}

// normal drops what writing cannot keep: empty maps and lists read back as
// absent.
func normal(c *Config) *Config {
	out, _ := yaml.Marshal(c)
	var n Config
	_ = yaml.Unmarshal(out, &n)
	return &n
}
