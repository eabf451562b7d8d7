package scaleway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testKey and otherKey look like real secret keys; neither may ever appear in
// an error or in printed output.
const (
	testKey  = "6f1d3c2a-8b7e-4f90-a1b2-c3d4e5f60718"
	otherKey = "0a9b8c7d-6e5f-4a3b-9c2d-1e0f2a3b4c5d"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scaleway.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func assertNoSecret(t *testing.T, s string) {
	t.Helper()
	for _, k := range []string{testKey, otherKey, testKey[:8], otherKey[:8]} {
		if strings.Contains(s, k) {
			t.Fatalf("output shows (part of) a secret key: %s", s)
		}
	}
}

func TestLoadCloudConfig(t *testing.T) {
	full := `{"cluster_id": "11111111-1111-4111-8111-111111111111", "secret_key": "` + testKey + `",
	          "region": "fr-par", "api_url": "https://api.example.test/"}`
	tests := []struct {
		name string
		file string // "" means no file
		env  map[string]string
		want CloudConfig
	}{
		{
			name: "file as cluster-autoscaler reads it",
			file: full,
			want: CloudConfig{"11111111-1111-4111-8111-111111111111", testKey, "fr-par", "https://api.example.test"},
		},
		{
			name: "environment wins over the file",
			file: full,
			env: map[string]string{EnvClusterID: "22222222-2222-4222-8222-222222222222", EnvSecretKey: otherKey,
				EnvRegion: "nl-ams", EnvAPIURL: "http://127.0.0.1:9999"},
			want: CloudConfig{"22222222-2222-4222-8222-222222222222", otherKey, "nl-ams", "http://127.0.0.1:9999"},
		},
		{
			name: "empty variables do not override",
			file: full,
			env:  map[string]string{EnvClusterID: "", EnvRegion: "  "},
			want: CloudConfig{"11111111-1111-4111-8111-111111111111", testKey, "fr-par", "https://api.example.test"},
		},
		{
			name: "environment only, default API URL",
			env:  map[string]string{EnvClusterID: "c1", EnvSecretKey: testKey + "\n", EnvRegion: "pl-waw"},
			want: CloudConfig{"c1", testKey, "pl-waw", DefaultAPIURL},
		},
		{
			name: "key from the environment, the rest from the file; legacy region name",
			file: `{"cluster_id": "c1", "region": "par1"}`,
			env:  map[string]string{EnvSecretKey: testKey},
			want: CloudConfig{"c1", testKey, "fr-par", DefaultAPIURL},
		},
		{
			name: "unknown fields are ignored, as cluster-autoscaler does",
			file: `{"cluster_id": "c1", "secret_key": "` + testKey + `", "region": "fr-par", "UserAgent": "x", "extra": {"a": 1}}`,
			want: CloudConfig{"c1", testKey, "fr-par", DefaultAPIURL},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}
			got, err := LoadCloudConfig(path, envOf(tt.env))
			if err != nil {
				t.Fatalf("LoadCloudConfig: %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestLoadCloudConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		file string // "-" means a path that does not exist
		env  map[string]string
		want []string // substrings of the error
	}{
		{"missing file", "-", nil, []string{"scaleway cloud config", "does-not-exist.json"}},
		{"bad JSON near the key", "{\n  \"secret_key\": " + testKey + "\n}", nil, []string{"line 2, column 18: not valid JSON"}},
		{"wrong type", `{"region": 3}`, nil, []string{"field region: expected a string, got number"}},
		{"not an object", `["a"]`, nil, []string{"expected a JSON object, got array"}},
		{"everything missing", `{}`, nil, []string{
			"cluster_id: is required (or set CLUSTER_ID)",
			"secret_key: is required (or set SCW_SECRET_KEY)",
			"region: is required (or set SCW_REGION)",
		}},
		{"malformed key in the file", `{"cluster_id": "c", "region": "fr-par", "secret_key": "` + testKey + `x"}`, nil,
			[]string{"secret_key: not a Scaleway secret key (a UUID); the value is not shown"}},
		{"malformed key in the environment", `{"cluster_id": "c", "region": "fr-par"}`, map[string]string{EnvSecretKey: "SCW" + otherKey},
			[]string{"SCW_SECRET_KEY: not a Scaleway secret key"}},
		{"bad region from the environment", `{"cluster_id": "c", "secret_key": "` + testKey + `", "region": "fr-par"}`,
			map[string]string{EnvRegion: "paris"}, []string{`SCW_REGION: "paris" is not a Scaleway region`}},
		{"bad API URL", `{"cluster_id": "c", "secret_key": "` + testKey + `", "region": "fr-par", "api_url": "api.scaleway.com"}`, nil,
			[]string{`api_url: "api.scaleway.com" is not an http(s) URL`}},
		{"bad cluster ID", `{"cluster_id": "a/b", "secret_key": "` + testKey + `", "region": "fr-par"}`, nil,
			[]string{`cluster_id: "a/b" is not a Kapsule cluster ID`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "does-not-exist.json")
			if tt.file != "-" {
				path = writeFile(t, tt.file)
			}
			_, err := LoadCloudConfig(path, envOf(tt.env))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			assertNoSecret(t, msg)
			if tt.file != "-" && !strings.Contains(msg, path) {
				t.Errorf("error does not name the file %s: %s", path, msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestCloudConfigNeverShowsKey(t *testing.T) {
	cfg := CloudConfig{ClusterID: "c1", SecretKey: testKey, Region: "fr-par", APIURL: DefaultAPIURL}
	opts := Options{CloudConfig: cfg, Pools: []string{"p"}}
	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		outputs = append(outputs, fmt.Sprintf(verb, cfg), fmt.Sprintf(verb, &cfg), fmt.Sprintf(verb, opts))
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, string(b))
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", cfg)
	outputs = append(outputs, logged.String())
	for _, out := range outputs {
		assertNoSecret(t, out)
	}
	if s := cfg.String(); !strings.Contains(s, "secret_key:<redacted>") || !strings.Contains(s, "cluster_id:c1") {
		t.Errorf("String() = %s", s)
	}
	if s := (CloudConfig{}).String(); !strings.Contains(s, "secret_key:<unset>") {
		t.Errorf("String() of an empty config = %s", s)
	}
}
