package trigger

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// WebhookConfigName is the ValidatingWebhookConfiguration nodetide
	// installs; the only object it puts in the cluster for the trigger.
	WebhookConfigName = "nodetide-trigger"
	// WebhookName names the one webhook in it.
	WebhookName = "failedscheduling.trigger.nodetide.io"
	// TimeoutSeconds bounds the API server's wait for the endpoint: a
	// hanging endpoint holds each FailedScheduling Event write that long
	// (then the write goes ahead: failurePolicy Ignore). The scheduler
	// writes Events from goroutines apart from its scheduling loop, so
	// scheduling does not wait.
	TimeoutSeconds = 2
	managedByLabel = "app.kubernetes.io/managed-by"
)

// Webhook returns the ValidatingWebhookConfiguration that sends the
// scheduler's FailedScheduling Events to endpoint. caPEM may be empty (a
// function URL has a public certificate); otherwise it must hold PEM
// certificates.
func Webhook(endpoint string, caPEM []byte) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	if err := checkURL(endpoint); err != nil {
		return nil, err
	}
	if len(caPEM) > 0 {
		if err := checkCA(caPEM); err != nil {
			return nil, err
		}
	}
	ignore := admissionregistrationv1.Ignore
	equivalent := admissionregistrationv1.Equivalent
	// A dry-run write reaches the hook; Serve ignores it, so it has no side
	// effect then (None would stop dry-run writes from being sent; Some
	// would make the API server refuse them).
	sideEffects := admissionregistrationv1.SideEffectClassNoneOnDryRun
	scope := admissionregistrationv1.NamespacedScope
	timeout := int32(TimeoutSeconds)
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   WebhookConfigName,
			Labels: map[string]string{managedByLabel: "nodetide"},
		},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    WebhookName,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &endpoint, CABundle: caPEM},
			FailurePolicy:           &ignore,
			MatchPolicy:             &equivalent,
			SideEffects:             &sideEffects,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{"", "events.k8s.io"},
					APIVersions: []string{"v1"},
					Resources:   []string{"events"},
					Scope:       &scope,
				},
			}},
			// has() first: CEL reading an absent field fails at run time,
			// and the API server then skips the webhook without a word.
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "failed-scheduling", Expression: "has(object.reason) && object.reason == 'FailedScheduling'"},
				{Name: "by-the-scheduler", Expression: "request.userInfo.username == '" + SchedulerUser + "'"},
			},
		}},
	}, nil
}

func checkURL(endpoint string) error {
	u, err := url.Parse(endpoint)
	switch {
	case endpoint == "":
		return errors.New("--url: missing (the stack output TriggerUrl)")
	case err != nil:
		return fmt.Errorf("--url: %w", err)
	case u.Scheme != "https":
		return fmt.Errorf("--url: scheme %q, the API server calls webhooks over https only", u.Scheme)
	case u.Host == "":
		return errors.New("--url: no host")
	case u.User != nil:
		return errors.New("--url: user information is not allowed in a webhook URL")
	case u.RawQuery != "" || u.Fragment != "":
		return errors.New("--url: a webhook URL takes no query or fragment")
	}
	return nil
}

func checkCA(caPEM []byte) error {
	rest, n := caPEM, 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("--ca-bundle: a %s block, only CERTIFICATE blocks are allowed", b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("--ca-bundle: certificate %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return errors.New("--ca-bundle: no PEM certificate in it")
	}
	return nil
}

// Install creates the configuration, or replaces the one nodetide made
// before. One of the same name not made by nodetide is left alone.
func Install(ctx context.Context, client kubernetes.Interface, w *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	api := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	old, err := api.Get(ctx, w.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := api.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", w.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", w.Name, err)
	}
	if old.Labels[managedByLabel] != "nodetide" {
		return fmt.Errorf("ValidatingWebhookConfiguration %s exists and was not made by nodetide (no label %s=nodetide): left alone", w.Name, managedByLabel)
	}
	w.ResourceVersion = old.ResourceVersion
	if _, err := api.Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update ValidatingWebhookConfiguration %s: %w", w.Name, err)
	}
	return nil
}

// Uninstall deletes the configuration nodetide made; it reports whether
// there was one.
func Uninstall(ctx context.Context, client kubernetes.Interface) (bool, error) {
	api := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	old, err := api.Get(ctx, WebhookConfigName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", WebhookConfigName, err)
	}
	if old.Labels[managedByLabel] != "nodetide" {
		return false, fmt.Errorf("ValidatingWebhookConfiguration %s was not made by nodetide (no label %s=nodetide): left alone", WebhookConfigName, managedByLabel)
	}
	uid := old.UID
	err = api.Delete(ctx, WebhookConfigName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete ValidatingWebhookConfiguration %s: %w", WebhookConfigName, err)
	}
	return true, nil
}
