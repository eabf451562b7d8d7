package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodetide/nodetide/pkg/trigger"
)

func newWebhookCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "webhook",
		Short:   "The webhook trigger: the ValidatingWebhookConfiguration " + trigger.WebhookConfigName + " that calls evaluate on pods the scheduler cannot place",
		Example: "  nodetide webhook install --url https://abc.lambda-url.eu-west-1.on.aws/\n  nodetide webhook uninstall",
	}
	var url, caFile string
	flags := func(c *cobra.Command) {
		c.Flags().StringVar(&url, "url", "", "the evaluate function's URL (the stack output TriggerUrl)")
		c.Flags().StringVar(&caFile, "ca-bundle", "", "PEM file of the CA that signed the endpoint's certificate (not needed for a function URL)")
	}
	build := func() (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
		var ca []byte
		if caFile != "" {
			var err error
			if ca, err = os.ReadFile(caFile); err != nil {
				return nil, fmt.Errorf("--ca-bundle: %w", err)
			}
		}
		return trigger.Webhook(url, ca)
	}
	manifest := &cobra.Command{
		Use:   "manifest --url URL",
		Short: "Print the ValidatingWebhookConfiguration (for kubectl apply or GitOps); changes nothing",
		Example: `  nodetide webhook manifest --url https://abc.lambda-url.eu-west-1.on.aws/ > webhook.yaml
  nodetide webhook manifest --url URL -o json`,
		Long: `Print the ValidatingWebhookConfiguration (for kubectl apply or GitOps); changes nothing.

-o is yaml (the default) or json: a manifest is a document to apply, so it has no table form.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			w, err := build()
			if err != nil {
				return err
			}
			return g.printDoc(w)
		},
	}
	flags(manifest)
	addOutputFlag(manifest, g, "yaml", "yaml", "json")
	install := &cobra.Command{
		Use:     "install --url URL",
		Short:   "Create (or update) the ValidatingWebhookConfiguration " + trigger.WebhookConfigName + " in the cluster",
		Example: `  nodetide webhook install --url https://abc.lambda-url.eu-west-1.on.aws/`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := build()
			if err != nil {
				return err
			}
			client, err := g.adminClient()
			if err != nil {
				return err
			}
			if err := trigger.Install(cmd.Context(), client, w); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "validatingwebhookconfiguration/%s: installed (FailedScheduling Events go to %s)\n", trigger.WebhookConfigName, url)
			return nil
		},
	}
	flags(install)
	uninstall := &cobra.Command{
		Use:     "uninstall",
		Short:   "Delete the ValidatingWebhookConfiguration " + trigger.WebhookConfigName + " (scale-up then waits for the scheduled tick)",
		Example: `  nodetide webhook uninstall --kubeconfig ~/.kube/config`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := g.adminClient()
			if err != nil {
				return err
			}
			found, err := trigger.Uninstall(cmd.Context(), client)
			if err != nil {
				return err
			}
			if !found {
				fmt.Fprintf(g.stdout, "validatingwebhookconfiguration/%s: not installed, nothing to delete\n", trigger.WebhookConfigName)
				return nil
			}
			fmt.Fprintf(g.stdout, "validatingwebhookconfiguration/%s: deleted\n", trigger.WebhookConfigName)
			return nil
		},
	}
	cmd.AddCommand(manifest, install, uninstall)
	return cmd
}

// adminClient is a client for a person's own cluster access (--kubeconfig,
// else KUBECONFIG or ~/.kube/config, as kubectl): installing a webhook is
// an administrator's change, which the functions' RBAC does not allow.
func (g *globals) adminClient() (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(rc)
}
