package kamatera

import (
	"os"
	"strings"
	"testing"
)

// FuzzParseCloudConfig: the INI parser never panics; a config it accepts
// holds only values the Kamatera API takes (CPU, RAM, sizes, unique group
// names), and its summary never shows a secret.
func FuzzParseCloudConfig(f *testing.F) {
	if data, err := os.ReadFile("testdata/kamatera.ini"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("[global]\ncluster-name = c\nkamatera-api-secret = s3cr3t-v4lue\ndefault-cpu = 2A\ndefault-ram = 4096\n[nodegroup \"w\"]\ncpu = 2Z\npassword = p4ssw0rd-v4lue\n[nodegroup \"w\"]\n"))
	f.Add([]byte("[nodegroup \"a\"]\nmin-size = +1\nmax-size = 3\nram = 1024\ndisk = \"size=10\"\ndisk = \"size=20\"\ntemplate-label = \"k=v\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseCloudConfig(strings.NewReader(string(data)), "fuzz.ini")
		if err != nil {
			return
		}
		if cfg.DefaultMinSize < 0 || cfg.DefaultMinSize > cfg.DefaultMaxSize {
			t.Fatalf("accepted default sizes %d..%d", cfg.DefaultMinSize, cfg.DefaultMaxSize)
		}
		seen := map[string]bool{}
		for _, g := range cfg.NodeGroups {
			if seen[g.Name] {
				t.Fatalf("accepted group %q twice", g.Name)
			}
			seen[g.Name] = true
			if g.MinSize < 0 || g.MinSize > g.MaxSize {
				t.Fatalf("group %q: accepted sizes %d..%d", g.Name, g.MinSize, g.MaxSize)
			}
			if g.Server.CPU != "" {
				if n, err := cpuCount(g.Server.CPU); err != nil || n < 1 {
					t.Fatalf("group %q: accepted cpu %q", g.Name, g.Server.CPU)
				}
			}
			if g.Server.RAM < 0 {
				t.Fatalf("group %q: accepted ram %d", g.Name, g.Server.RAM)
			}
		}
		summary := cfg.String() + cfg.GoString()
		for _, g := range cfg.NodeGroups {
			for _, s := range []Secret{cfg.APISecret, g.Server.Password, g.Server.ScriptBase64} {
				// Short values may occur by chance in the summary's other text.
				if len(s) >= 8 && strings.Contains(summary, s.Reveal()) {
					t.Fatalf("summary shows a secret: %s", summary)
				}
			}
		}
	})
}
