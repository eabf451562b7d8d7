// Package k8s is nodetide's access to Kubernetes: building a client
// configuration for the cluster (kubeconfig file, kubeconfig held in Secrets
// Manager, or EKS with a refreshed IAM token), reading the live objects a
// snapshot is made of, and the node operations the drain performs.
//
// Kubeconfigs and tokens are credentials: no error or log line produced here
// quotes them.
package k8s

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrInvalidKubeconfig is wrapped by the errors returned when a kubeconfig
// cannot be parsed.
var ErrInvalidKubeconfig = errors.New("not a valid kubeconfig")

// FromKubeconfigFile builds a client configuration from the kubeconfig at
// path, using contextName (empty: the file's current context). An empty path
// follows kubectl's loading rules: $KUBECONFIG (a list of files, merged), else
// ~/.kube/config, else the in-cluster service account.
func FromKubeconfigFile(path, contextName string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	// clientcmd's own parse errors may echo parts of the file; check each file
	// first so a broken one is reported without its content.
	for _, f := range rules.GetLoadingPrecedence() {
		data, err := os.ReadFile(f)
		if err != nil {
			if path == "" && errors.Is(err, os.ErrNotExist) {
				continue // absent files in the search list are skipped, as kubectl does
			}
			return nil, fmt.Errorf("read kubeconfig %s: %w", f, err)
		}
		if _, err := clientcmd.Load(data); err != nil {
			return nil, parseError("kubeconfig "+f, err)
		}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: contextName})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", describeSource(path, contextName), err)
	}
	return cfg, nil
}

func describeSource(path, contextName string) string {
	s := path
	if s == "" {
		s = "(default loading rules)"
	}
	if contextName != "" {
		s += " context " + contextName
	}
	return s
}

// SecretGetter is the Secrets Manager call FromKubeconfigSecret makes;
// *secretsmanager.Client satisfies it.
type SecretGetter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput,
		optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// FromKubeconfigSecret builds a client configuration from a kubeconfig (YAML
// or JSON) stored as the SecretString of a Secrets Manager secret; secretID is
// its ARN or name. The kubeconfig's current context is used.
func FromKubeconfigSecret(ctx context.Context, api SecretGetter, secretID string) (*rest.Config, error) {
	if secretID == "" {
		return nil, errors.New("kubeconfig secret: no secret id given")
	}
	out, err := api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &secretID})
	if err != nil {
		var nf *smtypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("kubeconfig secret %s: not found in Secrets Manager (check the ARN, region and that the secret has a current version): %w", secretID, err)
		}
		return nil, fmt.Errorf("kubeconfig secret %s: get secret value: %w", secretID, err)
	}
	var data []byte
	switch {
	case out.SecretString != nil:
		data = []byte(*out.SecretString)
	case len(out.SecretBinary) > 0:
		// Accept a kubeconfig stored as a binary secret too: the content is the
		// same, only the console shows it differently.
		data = out.SecretBinary
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, fmt.Errorf("kubeconfig secret %s: secret value is empty", secretID)
	}
	return restConfigFromBytes("kubeconfig secret "+secretID, data)
}

// restConfigFromBytes is clientcmd.RESTConfigFromKubeConfig with errors that
// name source and quote nothing of data.
func restConfigFromBytes(source string, data []byte) (*rest.Config, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, parseError(source, err)
	}
	if raw.CurrentContext == "" {
		// clientcmd would suggest setting KUBERNETES_MASTER, which is no help
		// for a stored kubeconfig.
		return nil, fmt.Errorf("%s: kubeconfig has no current-context", source)
	}
	// Validation errors name contexts, clusters and users, never credentials.
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return cfg, nil
}

// parseError reports that source is not a kubeconfig without the decoder's
// message: YAML and JSON decoders can echo fragments of their input, and a
// kubeconfig holds keys and tokens. The line number, when there is one, is
// kept because it is what a person fixing the file needs.
func parseError(source string, err error) error {
	if line := lineOf(err.Error()); line != "" {
		return fmt.Errorf("%s: %w (syntax or type error at line %s)", source, ErrInvalidKubeconfig, line)
	}
	return fmt.Errorf("%s: %w", source, ErrInvalidKubeconfig)
}

// lineOf returns the digits following the first "line " in msg, or "".
func lineOf(msg string) string {
	i := strings.Index(msg, "line ")
	if i < 0 {
		return ""
	}
	rest := msg[i+len("line "):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	return rest[:n]
}
