package setup

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/config"
)

// secretsDouble answers Secrets Manager's GetSecretValue (JSON 1.1) from a map.
func secretsDouble(t *testing.T, secrets map[string]string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256") {
			http.Error(w, `{"__type":"AccessDeniedException","message":"denied"}`, http.StatusBadRequest)
			return
		}
		var in struct{ SecretId string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		v, ok := secrets[in.SecretId]
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ARN": in.SecretId, "Name": "n", "SecretString": v})
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("SCW_SECRET_KEY", "")
	t.Setenv("KAMATERA_API_CLIENT_ID", "")
	t.Setenv("KAMATERA_API_SECRET", "")
}

const (
	scwKey    = "11111111-2222-4333-8444-555555555555"
	kamSecret = "9ii88h7g6f55555ee4444444dd33eee2"
	scwArn    = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:scw"
	kamArn    = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kam"
	badArn    = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:bad"
	iniArn    = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kam-ini"
	badINIArn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kam-ini-bad"
	kamINI    = "[global]\ncluster-name = c1\ndefault-datacenter = EU\ndefault-image = ubuntu\ndefault-cpu = 2A\ndefault-ram = 4096\ndefault-disk = \"size=100\"\ndefault-network = \"name=wan,ip=auto\"\n[nodegroup \"ng1\"]\n"
)

// TestProviderKeysFromSecretsManager: in Lambda the Scaleway key and the
// Kamatera credentials come from Secrets Manager; a missing or malformed
// secret is an error that names the field and the secret, never the value.
func TestProviderKeysFromSecretsManager(t *testing.T) {
	secretsDouble(t, map[string]string{
		scwArn: scwKey,
		kamArn: `{"clientId":"id-1","secret":"` + kamSecret + `"}`,
		badArn: kamSecret, // not JSON: its value must not be echoed
		iniArn: kamINI,
		// A bad INI line holding a secret value: the error names the line, not the value.
		badINIArn: "[global]\nkamatera-api-secret " + kamSecret + "\n",
	})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kamatera.ini"), []byte(kamINI), 0o600); err != nil {
		t.Fatal(err)
	}
	build := func(doc string) error {
		cfg, err := config.Parse([]byte(doc), "nodetide.yaml")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Dir = dir
		_, err = buildProviders(context.Background(), cfg, nil, &AWS{})
		return err
	}
	head := "cluster: {name: c1}\nstate: {memory: {}}\nnodeGroups:\n"
	t.Setenv("CLUSTER_ID", "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee")
	t.Setenv("SCW_REGION", "fr-par")
	if err := build(head + "  - {provider: scaleway, scaleway: {secretKeySecret: " + scwArn + "}}\n"); err != nil {
		t.Errorf("scaleway with its key from Secrets Manager: %v", err)
	}
	// Without the secret the same config lacks its key.
	if err := build(head + "  - {provider: scaleway}\n"); err == nil {
		t.Error("scaleway without any key was accepted")
	}
	if err := build(head + "  - {provider: kamatera, kamatera: {cloudConfig: kamatera.ini, credentialsSecret: " + kamArn + "}}\n"); err != nil {
		t.Errorf("kamatera with credentials from Secrets Manager: %v", err)
	}
	// In Lambda the INI itself comes from a secret (its join script is one).
	if err := build(head + "  - {provider: kamatera, kamatera: {cloudConfigSecret: " + iniArn + ", credentialsSecret: " + kamArn + "}}\n"); err != nil {
		t.Errorf("kamatera with its INI from Secrets Manager: %v", err)
	}
	for _, tc := range []struct{ doc, want string }{
		{"  - {provider: kamatera, kamatera: {cloudConfigSecret: " + badINIArn + ", credentialsSecret: " + kamArn + "}}\n", "kamatera.cloudConfigSecret: secret " + badINIArn + ":2: "},
		{"  - {provider: kamatera, kamatera: {cloudConfig: kamatera.ini, credentialsSecret: " + badArn + "}}\n", "kamatera.credentialsSecret: secret " + badArn + " is not the JSON expected"},
		{"  - {provider: kamatera, kamatera: {cloudConfig: kamatera.ini, credentialsSecret: arn:aws:secretsmanager:eu-west-1:1:secret:none}}\n", "ResourceNotFoundException"},
		{"  - {provider: scaleway, scaleway: {secretKeySecret: arn:aws:secretsmanager:eu-west-1:1:secret:none}}\n", "scaleway.secretKeySecret: read secret"},
	} {
		err := build(head + tc.doc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), kamSecret) || strings.Contains(err.Error(), scwKey)) {
			t.Errorf("error shows a secret: %v", err)
		}
	}
}
