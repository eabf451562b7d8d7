package kamatera

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The two examples of cluster-autoscaler's Kamatera documentation, verbatim.
const (
	seedDiskExample = `[global]
; default for all node groups: single 100gb disk
default-disk = "size=100"
[nodegroup "ng1"]
; this node group will use the default
[nodegroup "ng2"]
; override the default and use 2 disks
disk = "size=100"
disk = "size=200"
`
	seedNetworkExample = `[global]
; default for all node groups: single public network with auto-assigned ip
default-network = "name=wan,ip=auto"
[nodegroup "ng1"]
; this node group will use the default
[nodegroup "ng2"]
; override the default and attach 2 networks - 1 public and 1 private
network = "name=wan,ip=auto"
network = "name=lan-12345-abcde,ip=auto"
`
)

func mustParse(t *testing.T, src string) *CloudConfig {
	t.Helper()
	cfg, err := ParseCloudConfig(strings.NewReader(src), "test.ini")
	if err != nil {
		t.Fatalf("ParseCloudConfig: %v", err)
	}
	return cfg
}

func TestSeedExamplesParseUnchanged(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		list     func(*NodeGroupConfig) []string
		ng1, ng2 []string
	}{
		{"disks", seedDiskExample, func(g *NodeGroupConfig) []string { return g.Server.Disks },
			[]string{"size=100"}, []string{"size=100", "size=200"}},
		{"networks", seedNetworkExample, func(g *NodeGroupConfig) []string { return g.Server.Networks },
			[]string{"name=wan,ip=auto"}, []string{"name=wan,ip=auto", "name=lan-12345-abcde,ip=auto"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.src)
			if got := cfg.NodeGroupNames(); !reflect.DeepEqual(got, []string{"ng1", "ng2"}) {
				t.Fatalf("groups %v", got)
			}
			ng1, _ := cfg.NodeGroup("ng1")
			ng2, _ := cfg.NodeGroup("ng2")
			if got := tt.list(ng1); !reflect.DeepEqual(got, tt.ng1) {
				t.Errorf("ng1 inherits %v, want %v", got, tt.ng1)
			}
			if got := tt.list(ng2); !reflect.DeepEqual(got, tt.ng2) {
				t.Errorf("ng2 has %v, want its own list %v", got, tt.ng2)
			}
			for _, g := range cfg.NodeGroups {
				if g.MinSize != DefaultMinSize || g.MaxSize != DefaultMaxSize {
					t.Errorf("%s sizes %d..%d, want the defaults", g.Name, g.MinSize, g.MaxSize)
				}
			}
			// A fragment: Validate lists what a full config still needs.
			err := cfg.Validate()
			var ce ConfigErrors
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "cluster-name: is required") {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestLoadFullConfig(t *testing.T) {
	cfg, err := LoadCloudConfig(filepath.Join("testdata", "kamatera.ini"))
	if err != nil {
		t.Fatalf("LoadCloudConfig: %v", err)
	}
	if cfg.ClusterName != "prod-eu.1" || cfg.FilterNamePrefix != "prod" || cfg.APIURL != DefaultAPIURL ||
		cfg.ProviderIDPrefix != DefaultProviderIDPrefix || cfg.APIClientID != "1a222bbb3ccc44d5555e6ff77g88hh9i" ||
		cfg.APISecret.Reveal() != "9ii88h7g6f55555ee4444444dd33eee2" || cfg.DefaultMinSize != 1 || cfg.DefaultMaxSize != 10 {
		t.Errorf("global: %+v", *cfg)
	}
	if got := cfg.NodeGroupNames(); !reflect.DeepEqual(got, []string{"workers", "highcpu", "monthly"}) {
		t.Fatalf("groups %v", got)
	}
	workers, _ := cfg.NodeGroup("workers")
	wantWorkers := ServerConfig{
		NamePrefix: "prod-worker", Password: "Aa123456789!#x",
		SSHKey:     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG2fW8Qm ops@example.com",
		Datacenter: "EU", Image: "ubuntu_server_22.04_64-bit", CPU: "2A", RAM: 4096,
		Disks:        []string{"size=100"},
		Networks:     []string{"name=wan,ip=auto", "name=lan-12345-abcde,ip=auto"},
		BillingCycle: BillingHourly,
		ScriptBase64: Secret("IyEvYmluL2Jhc2gKc2V0IC1lCmt1YmVhZG0gam9pbiAxMC4wLjAuMTo2NDQzIC0tdG9rZW4gYWJjZGVmLjAxMjM0NTY3ODlhYmNkZWYgLS1kaXNjb3ZlcnktdG9rZW4tY2EtY2VydC1oYXNoIHNoYTI1NjowMAo="),
	}
	if !reflect.DeepEqual(workers.Server, wantWorkers) || workers.MinSize != 1 || workers.MaxSize != 10 {
		t.Errorf("workers:\n got %+v\nwant %+v", workers.Server, wantWorkers)
	}
	script, err := workers.Server.Script()
	if err != nil || !strings.HasPrefix(script, "#!/bin/bash\n") {
		t.Errorf("script %q, %v", script, err)
	}
	highcpu, _ := cfg.NodeGroup("highcpu")
	if highcpu.MinSize != 0 || highcpu.MaxSize != 20 || highcpu.Server.CPU != "8D" || highcpu.Server.RAM != 16384 ||
		highcpu.Server.NamePrefix != "prod-cpu" || !reflect.DeepEqual(highcpu.Server.Disks, []string{"size=100", "size=500"}) ||
		!reflect.DeepEqual(highcpu.TemplateLabels, map[string]string{"workload": "batch", "kubernetes.io/os": "linux"}) {
		t.Errorf("highcpu: %+v", *highcpu)
	}
	monthly, _ := cfg.NodeGroup("monthly")
	if monthly.MinSize != 2 || monthly.Server.BillingCycle != BillingMonthly || monthly.Server.MonthlyPackage != "t5000" ||
		!monthly.Server.DailyBackup || !monthly.Server.Managed || !reflect.DeepEqual(monthly.Server.Networks, []string{"name=wan,ip=auto"}) {
		t.Errorf("monthly: %+v", *monthly)
	}
}

func TestInheritanceRules(t *testing.T) {
	base := "[global]\ncluster-name = c\ndefault-min-size = 0\ndefault-dailybackup = yes\ndefault-image = img\ndefault-disk = \"size=10\"\ndefault-cpu = 1A\n"
	tests := []struct {
		name  string
		group string
		check func(*NodeGroupConfig) bool
	}{
		{"empty string value falls back to the default", "image =\n", func(g *NodeGroupConfig) bool { return g.Server.Image == "img" }},
		{"own string value wins", "image = other\n", func(g *NodeGroupConfig) bool { return g.Server.Image == "other" }},
		{"explicit false beats a true default", "dailybackup = no\n", func(g *NodeGroupConfig) bool { return !g.Server.DailyBackup }},
		{"bare boolean is true", "managed\n", func(g *NodeGroupConfig) bool { return g.Server.Managed }},
		{"default boolean applies", "", func(g *NodeGroupConfig) bool { return g.Server.DailyBackup && !g.Server.Managed }},
		{"own list replaces the default", "disk = \"size=20\"\n", func(g *NodeGroupConfig) bool { return reflect.DeepEqual(g.Server.Disks, []string{"size=20"}) }},
		{"bare list key clears back to the default", "disk = \"size=20\"\ndisk\n", func(g *NodeGroupConfig) bool { return reflect.DeepEqual(g.Server.Disks, []string{"size=10"}) }},
		{"zero min size accepted", "", func(g *NodeGroupConfig) bool { return g.MinSize == 0 && g.MaxSize == 254 }},
		{"empty min size means the default", "min-size =\n", func(g *NodeGroupConfig) bool { return g.MinSize == 0 }},
		{"billing defaults to hourly", "", func(g *NodeGroupConfig) bool { return g.Server.BillingCycle == BillingHourly }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, base+"[nodegroup \"g\"]\n"+tt.group)
			if g, _ := cfg.NodeGroup("g"); !tt.check(g) {
				t.Errorf("group: %+v", *g)
			}
		})
	}
}

// TestRepeatedSectionsAndKeysRefused: gcfg merges a repeated section and
// lets a repeated key's last value win, so one of two settings silently
// doesn't apply. Both places are named; a secret's value never is.
func TestRepeatedSectionsAndKeysRefused(t *testing.T) {
	const secret = "9ii88h7g6f55555ee4444444dd33eee2"
	tests := []struct {
		name, src string
		want      string
	}{
		{"node group twice", "[nodegroup \"w\"]\ncpu = 1A\n[nodegroup \"b\"]\n[nodegroup \"w\"]\nram = 1024\n",
			`k.ini:4: [nodegroup "w"] is repeated (first at line 1): one section per node group`},
		{"global twice", "[global]\ncluster-name = c\n[nodegroup \"w\"]\n[global]\ndefault-cpu = 1A\n",
			"k.ini:4: [global] is repeated (first at line 1)"},
		{"single key twice", "[nodegroup \"w\"]\ncpu = 2A\n\ncpu = 4B\n",
			`k.ini:4: [nodegroup "w"] cpu: is set again (first at line 2)`},
		{"secret twice", "[global]\nkamatera-api-secret = " + secret + "\nkamatera-api-secret = x" + secret + "\n",
			"k.ini:3: [global] kamatera-api-secret: is set again (first at line 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCloudConfig(strings.NewReader(tt.src), "k.ini")
			if err == nil {
				t.Fatal("ParseCloudConfig accepted a repetition")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q echoes a secret", err)
			}
		})
	}
	// A multi-valued key repeats by design.
	cfg := mustParse(t, "[nodegroup \"w\"]\ndisk = \"size=10\"\ndisk = \"size=20\"\n")
	if g, _ := cfg.NodeGroup("w"); !reflect.DeepEqual(g.Server.Disks, []string{"size=10", "size=20"}) {
		t.Errorf("disks %v", g.Server.Disks)
	}
}

func TestPowerOffKeys(t *testing.T) {
	tests := []struct {
		src     string
		off, on bool
		max     int
	}{
		{"[global]\n", false, false, -1},
		{"[global]\npoweroff-on-scale-down = true\npoweron-on-scale-up = true\n", true, true, -1},
		{"[global]\npoweroff-on-scale-down = yes\npoweroff-on-scale-down-max-servers = 2\n", true, false, 2},
		{"[global]\npoweron-on-scale-up = true\n", false, true, -1},
	}
	for _, tt := range tests {
		cfg := mustParse(t, tt.src)
		if cfg.PoweroffOnScaleDown != tt.off || cfg.PoweronOnScaleUp != tt.on || cfg.PoweroffMaxServers != tt.max {
			t.Errorf("%q: off %v on %v max %d, want %v %v %d", tt.src, cfg.PoweroffOnScaleDown, cfg.PoweronOnScaleUp, cfg.PoweroffMaxServers, tt.off, tt.on, tt.max)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		line int
		key  string
		msg  string
	}{
		{"unknown key", "[global]\ncluster-name = c\nfoo = 1\n", 3, "foo", "unknown key"},
		{"CA example's default-script", "[global]\ndefault-script = abc\n", 2, "default-script", `did you mean "default-script-base64"`},
		{"global key in a group", "[nodegroup \"g\"]\ncluster-name = c\n", 2, "cluster-name", "belongs in [global]"},
		{"default- key in a group", "[nodegroup \"g\"]\ndefault-cpu = 1A\n", 2, "default-cpu", `did you mean "cpu"`},
		{"unknown section", "[nodepool \"g\"]\n", 1, "", "unknown section"},
		{"nodegroup without name", "[nodegroup]\n", 1, "", "needs a name"},
		{"global with subsection", "[global \"x\"]\n", 1, "", "no subsection"},
		{"syntax", "[global]\n\ncluster-name \"c\"\n", 3, "", "expected '='"},
		{"bad int", "[nodegroup \"g\"]\nmin-size = one\n", 2, "min-size", "not a whole number"},
		{"negative min", "[global]\ndefault-min-size = -1\n", 2, "default-min-size", "negative"},
		{"min above max", "[nodegroup \"g\"]\nmin-size = 5\nmax-size = 3\n", 2, "min-size", "above max size"},
		{"default min above default max", "[global]\ndefault-min-size = 5\ndefault-max-size = 3\n", 2, "default-min-size", "above default-max-size"},
		{"long cluster name", "[global]\ncluster-name = a-very-long-cluster\n", 2, "cluster-name", "longer than 15"},
		{"cluster name chars", "[global]\ncluster-name = prod/eu\n", 2, "cluster-name", "English letters"},
		{"empty cluster name", "[global]\ncluster-name =\n", 2, "cluster-name", "must not be empty"},
		{"long group name", "[nodegroup \"sixteen-chars-xx\"]\n", 1, "", "longer than 15"},
		{"group name chars", "[nodegroup \"gpu:a100\"]\n", 1, "", "English letters"},
		{"bad bool", "[nodegroup \"g\"]\nmanaged = maybe\n", 2, "managed", "not a boolean"},
		{"empty bool", "[global]\ndefault-dailybackup =\n", 2, "default-dailybackup", "not a boolean"},
		{"bad base64", "[nodegroup \"g\"]\nscript-base64 = not*base64\n", 2, "script-base64", "not valid base64"},
		{"empty script", "[global]\ndefault-script-base64 = ICAK\n", 2, "default-script-base64", "empty script"},
		{"bad cpu", "[nodegroup \"g\"]\ncpu = 2 cores\n", 2, "cpu", "not a Kamatera CPU"},
		{"bad default cpu, no group", "[global]\ndefault-cpu = A2\n", 2, "default-cpu", "not a Kamatera CPU"},
		{"unknown cpu type", "[nodegroup \"g\"]\ncpu = 2Z\n", 2, "cpu", `"2Z" is not a Kamatera CPU`},
		{"lower-case cpu type", "[global]\ndefault-cpu = 2a\n", 2, "default-cpu", "not a Kamatera CPU"},
		{"zero vCPUs", "[nodegroup \"g\"]\ncpu = 0A\n", 2, "cpu", "not a Kamatera CPU"},
		{"vCPU count past any server", "[nodegroup \"g\"]\ncpu = 99999999999999999999B\n", 2, "cpu", "not a Kamatera CPU"},
		{"bad ram", "[nodegroup \"g\"]\nram = 4GB\n", 2, "ram", "not a RAM size"},
		{"signed ram", "[nodegroup \"g\"]\nram = +4096\n", 2, "ram", "not a RAM size"},
		{"signed size", "[nodegroup \"g\"]\nmax-size = +5\n", 2, "max-size", "not a whole number"},
		{"disk with space", "[nodegroup \"g\"]\ndisk = \"size=10 size=20\"\n", 2, "disk", "must not contain spaces"},
		{"empty network", "[nodegroup \"g\"]\nnetwork =\n", 2, "network", "must not be empty"},
		{"billing cycle", "[nodegroup \"g\"]\nbillingcycle = weekly\n", 2, "billingcycle", "not a billing cycle"},
		{"api url", "[global]\nkamatera-api-url = cloudcli.cloudwm.com\n", 2, "kamatera-api-url", "not an http(s) URL"},
		{"string key without value", "[nodegroup \"g\"]\nimage\n", 2, "image", "needs a value"},
		{"template label form", "[nodegroup \"g\"]\ntemplate-label = ssd\n", 2, "template-label", "not key=value"},
		{"template label key", "[nodegroup \"g\"]\ntemplate-label = \"bad key=x\"\n", 2, "template-label", "label key"},
		{"power-off bool", "[global]\npoweroff-on-scale-down = sometimes\n", 2, "poweroff-on-scale-down", "not a boolean"},
		{"power-off in a group", "[nodegroup \"g\"]\npoweron-on-scale-up = true\n", 2, "poweron-on-scale-up", "belongs in [global]"},
		{"negative power-off max", "[global]\npoweroff-on-scale-down = true\npoweroff-on-scale-down-max-servers = -2\n", 3, "poweroff-on-scale-down-max-servers", "negative"},
		{"power-off max alone", "[global]\npoweroff-on-scale-down-max-servers = 2\n", 2, "poweroff-on-scale-down-max-servers", "no effect without poweroff-on-scale-down"},
		{"name prefix chars", "[nodegroup \"g\"]\nname-prefix = k8s.worker\n", 2, "name-prefix", "letters, digits, dash and underscore"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCloudConfig(strings.NewReader(tt.src), "conf/kamatera.ini")
			var ces ConfigErrors
			if !errors.As(err, &ces) || len(ces) == 0 {
				t.Fatalf("want ConfigErrors, got %v", err)
			}
			e := ces[0]
			if e.File != "conf/kamatera.ini" || e.Line != tt.line || e.Key != tt.key || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("got %q (line %d key %q), want line %d key %q containing %q", e.Error(), e.Line, e.Key, tt.line, tt.key, tt.msg)
			}
			if want := fmt.Sprintf("conf/kamatera.ini:%d: ", tt.line); !strings.HasPrefix(e.Error(), want) {
				t.Errorf("%q does not start with %q", e.Error(), want)
			}
		})
	}
}

func TestConfigErrorsAreAllReported(t *testing.T) {
	_, err := ParseCloudConfig(strings.NewReader("[global]\ndefault-cpu = x\nfoo = 1\n[nodegroup \"a\"]\nram = y\n[nodegroup \"b\"]\n"), "k.ini")
	var ces ConfigErrors
	if !errors.As(err, &ces) || len(ces) != 3 {
		t.Fatalf("want 3 errors (the bad default once), got %v", err)
	}
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Line != 2 {
		t.Errorf("errors.As *ConfigError: %v", ce)
	}
}

func TestValidateNamesMissingKeys(t *testing.T) {
	cfg := mustParse(t, "[global]\ncluster-name = c\nfilter-name-prefix = prod\ndefault-image = img\n\n[nodegroup \"g\"]\nname-prefix = dev\n")
	err := cfg.Validate()
	var ces ConfigErrors
	if !errors.As(err, &ces) {
		t.Fatalf("Validate: %v", err)
	}
	got := map[string]int{}
	for _, e := range ces {
		got[e.Key] = e.Line
		if e.File != "test.ini" || e.Section != `nodegroup "g"` {
			t.Errorf("%v", e)
		}
	}
	want := map[string]int{"datacenter": 6, "cpu": 6, "ram": 6, "disk": 6, "network": 6, "name-prefix": 7}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("missing keys %v, want %v\n%v", got, want, err)
	}
}

func TestValidateInheritedNamePrefix(t *testing.T) {
	cfg := mustParse(t, "[global]\ncluster-name = c\nfilter-name-prefix = prod\ndefault-name-prefix = dev\n[nodegroup \"g\"]\n")
	var ces ConfigErrors
	if err := cfg.Validate(); !errors.As(err, &ces) {
		t.Fatalf("Validate: %v", err)
	}
	for _, e := range ces {
		if e.Key == "default-name-prefix" && e.Line == 4 && e.Section == "global" && strings.Contains(e.Msg, "filter-name-prefix") {
			return
		}
	}
	t.Errorf("no error at the default: %v", ces)
}

func TestLoadCloudConfigErrorsNameThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kamatera.ini")
	if err := os.WriteFile(path, []byte("[global]\ncluster-name = c\nbad = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadCloudConfig(path)
	if err == nil || !strings.Contains(err.Error(), path+":3: [global] bad: unknown key") {
		t.Errorf("got %v", err)
	}
	if _, err := LoadCloudConfig(path + ".missing"); err == nil || !strings.Contains(err.Error(), "kamatera.ini.missing") {
		t.Errorf("missing file: %v", err)
	}
}

func TestSecretsNeverShown(t *testing.T) {
	const (
		secret   = "S3cretValue0042"
		password = "RootPw0042xyz"
	)
	script := "IyEvYmluL2Jhc2gKZWNobyBqb2luLXRva2VuCg=="
	src := fmt.Sprintf("[global]\ncluster-name = c\nkamatera-api-client-id = id\nkamatera-api-secret = %s\ndefault-password = %s\ndefault-script-base64 = %s\n[nodegroup \"g\"]\n", secret, password, script)
	cfg := mustParse(t, src)
	j, _ := json.Marshal(cfg)
	outputs := []string{
		cfg.String(),
		fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg),
		fmt.Sprintf("%v %+v %#v %s %q %x %d", cfg.APISecret, cfg.APISecret, cfg.APISecret, cfg.APISecret, cfg.APISecret, cfg.APISecret, cfg.APISecret),
		fmt.Sprintf("%v %+v %#v", *cfg.NodeGroups[0], cfg.NodeGroups[0].Server, cfg.NodeGroups[0].Server),
		string(j),
	}
	for _, out := range outputs {
		for _, s := range []string{secret, password, script} {
			if strings.Contains(out, s) {
				t.Errorf("%q shows a secret", out)
			}
		}
	}
	if !strings.Contains(cfg.String(), "secret set") {
		t.Errorf("String: %s", cfg)
	}

	// Broken lines that hold secrets: the errors name the key, not the value.
	broken := []string{
		"[global]\nkamatera-api-secret = \"" + secret + "\n",
		"[global]\nkamatera-api-secret = " + secret + "\\x\n",
		"[global]\ndefault-script-base64 = " + secret + "*\n",
		"[global]\ndefault-password\n",
		"[nodegroup \"g\"]\npassword = \"" + password + "\\q\"\n",
	}
	for _, src := range broken {
		_, err := ParseCloudConfig(strings.NewReader(src), "k.ini")
		if err == nil {
			t.Fatalf("%q: want an error", src)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), password) {
			t.Errorf("error shows a secret: %v", err)
		}
	}
}
