package k8s

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// testSecretToken is a credential planted in test kubeconfigs; no error may
// contain it.
const testSecretToken = "tok-do-not-leak-4711"

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: ` + testSecretToken + `}
contexts:
- name: ctx-a
  context: {cluster: a, user: u}
- name: ctx-b
  context: {cluster: b, user: u}
current-context: ctx-a
`

// brokenKubeconfigs are not kubeconfigs, each with the credential in it.
var brokenKubeconfigs = map[string]string{
	"yaml syntax": "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: " + testSecretToken + "\n  : : :\n",
	"wrong type":  "apiVersion: v1\nkind: Config\nusers: " + testSecretToken + "\n",
	"bad base64":  "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {client-key-data: \"" + testSecretToken + "!!\"}\n",
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFromKubeconfigFile(t *testing.T) {
	good := writeFile(t, "config", twoContexts)
	tests := []struct {
		name     string
		path     string
		context  string
		env      string // KUBECONFIG, for the default loading rules
		wantHost string
		wantErr  string
	}{
		{name: "current context", path: good, wantHost: "https://a.example:6443"},
		{name: "named context", path: good, context: "ctx-b", wantHost: "https://b.example:6443"},
		{name: "KUBECONFIG", env: good, context: "ctx-b", wantHost: "https://b.example:6443"},
		{name: "unknown context", path: good, context: "nope", wantErr: "nope"},
		{name: "missing file", path: filepath.Join(t.TempDir(), "absent"), wantErr: "absent"},
	}
	for name, content := range brokenKubeconfigs {
		tests = append(tests, struct {
			name     string
			path     string
			context  string
			env      string
			wantHost string
			wantErr  string
		}{name: "broken " + name, path: writeFile(t, "broken", content), wantErr: "not a valid kubeconfig"})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			cfg, err := FromKubeconfigFile(tc.path, tc.context)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("got config for %s, want an error", cfg.Host)
				}
				t.Logf("error: %v", err)
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not mention %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), testSecretToken) {
					t.Errorf("error leaks the kubeconfig's token: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("host %q, want %q", cfg.Host, tc.wantHost)
			}
			if cfg.BearerToken != testSecretToken {
				t.Error("the user's token was not loaded")
			}
		})
	}
}

// fakeSecretsManager serves GetSecretValue over the Secrets Manager wire
// protocol (AWS JSON 1.1) from secrets, keyed by secret id.
func fakeSecretsManager(t *testing.T, secrets map[string]string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		fail := func(status int, typ, msg string) {
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "Message": msg})
		}
		switch {
		case r.Method != http.MethodPost || r.URL.Path != "/":
			fail(http.StatusBadRequest, "UnknownOperationException", r.Method+" "+r.URL.Path)
			return
		case r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue":
			fail(http.StatusBadRequest, "UnknownOperationException", r.Header.Get("X-Amz-Target"))
			return
		case !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDTEST/"):
			fail(http.StatusForbidden, "UnrecognizedClientException", "unsigned request")
			return
		}
		var in struct{ SecretId string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			fail(http.StatusBadRequest, "InvalidRequestException", err.Error())
			return
		}
		s, ok := secrets[in.SecretId]
		if !ok {
			fail(http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"ARN": in.SecretId, "Name": "kubeconfig", "SecretString": s,
			"VersionId": "v1", "VersionStages": []string{"AWSCURRENT"}, "CreatedDate": 1.7e9,
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func testAWSConfig() aws.Config {
	return aws.Config{
		Region:           "eu-west-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-key-test", ""),
		RetryMaxAttempts: 1,
	}
}

func TestFromKubeconfigSecret(t *testing.T) {
	const arnPrefix = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:"
	secrets := map[string]string{
		arnPrefix + "good":        twoContexts,
		arnPrefix + "empty":       "  \n",
		arnPrefix + "bad-context": strings.Replace(twoContexts, "current-context: ctx-a", "current-context: ctx-x", 1),
		arnPrefix + "no-context": `apiVersion: v1
kind: Config
clusters: [{name: a, cluster: {server: "https://a.example"}}]
`,
	}
	for name, content := range brokenKubeconfigs {
		secrets[arnPrefix+"broken-"+strings.ReplaceAll(name, " ", "-")] = content
	}
	srv := fakeSecretsManager(t, secrets)
	api := secretsmanager.NewFromConfig(testAWSConfig(), func(o *secretsmanager.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
	})

	tests := []struct {
		name     string
		id       string
		wantHost string
		wantErr  string
		wantIs   error
		notFound bool
	}{
		{name: "kubeconfig", id: arnPrefix + "good", wantHost: "https://a.example:6443"},
		{name: "not found", id: arnPrefix + "missing", wantErr: "not found in Secrets Manager", notFound: true},
		{name: "empty", id: arnPrefix + "empty", wantErr: "empty"},
		{name: "no context", id: arnPrefix + "no-context", wantErr: "no current-context"},
		{name: "unknown current context", id: arnPrefix + "bad-context", wantErr: "context was not found for specified context: ctx-x"},
		{name: "no id", id: "", wantErr: "no secret id"},
	}
	for name := range brokenKubeconfigs {
		id := arnPrefix + "broken-" + strings.ReplaceAll(name, " ", "-")
		tests = append(tests, struct {
			name     string
			id       string
			wantHost string
			wantErr  string
			wantIs   error
			notFound bool
		}{name: "broken " + name, id: id, wantErr: "not a valid kubeconfig", wantIs: ErrInvalidKubeconfig})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := FromKubeconfigSecret(t.Context(), api, tc.id)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("got config for %s, want an error", cfg.Host)
				}
				t.Logf("error: %v", err)
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.id) {
					t.Errorf("error %q does not mention %q and the secret id", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), testSecretToken) {
					t.Errorf("error leaks the secret: %q", err)
				}
				if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
					t.Errorf("error %q is not %v", err, tc.wantIs)
				}
				var nf *smtypes.ResourceNotFoundException
				if got := errors.As(err, &nf); got != tc.notFound {
					t.Errorf("errors.As(ResourceNotFoundException) = %v, want %v", got, tc.notFound)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost || cfg.BearerToken != testSecretToken {
				t.Errorf("host %q (want %q), token loaded %v", cfg.Host, tc.wantHost, cfg.BearerToken == testSecretToken)
			}
		})
	}
}

func TestLineOf(t *testing.T) {
	tests := []struct{ msg, want string }{
		{"yaml: line 12: mapping values are not allowed", "12"},
		{"json: cannot unmarshal", ""},
		{"line x", ""},
	}
	for _, tc := range tests {
		if got := lineOf(tc.msg); got != tc.want {
			t.Errorf("lineOf(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}
