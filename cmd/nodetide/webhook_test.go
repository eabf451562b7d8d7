package main

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/trigger"
)

func TestWebhookManifest(t *testing.T) {
	out, errOut, code := nodetide(t, "webhook", "manifest", "--url", "https://abc.lambda-url.eu-west-1.on.aws/")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var w admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict([]byte(out), &w); err != nil {
		t.Fatalf("manifest: %v\n%s", err, out)
	}
	hook := w.Webhooks[0]
	if w.Name != trigger.WebhookConfigName || *hook.ClientConfig.URL != "https://abc.lambda-url.eu-west-1.on.aws/" ||
		*hook.FailurePolicy != admissionregistrationv1.Ignore || *hook.TimeoutSeconds != 2 ||
		*hook.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun ||
		!strings.Contains(hook.MatchConditions[0].Expression, "has(object.reason)") {
		t.Errorf("manifest:\n%s", out)
	}

	ca := writeFile(t, "ca.pem", "not a certificate")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"webhook", "manifest"}, "--url: missing"},
		{[]string{"webhook", "manifest", "--url", "http://example.com/"}, `scheme "http"`},
		{[]string{"webhook", "manifest", "--url", "https://example.com/?token=x"}, "no query or fragment"},
		{[]string{"webhook", "manifest", "--url", "https://user:pw@example.com/"}, "user information"},
		{[]string{"webhook", "manifest", "--url", "https://example.com/", "--ca-bundle", ca}, "--ca-bundle: no PEM certificate"},
		{[]string{"webhook", "manifest", "--url", "https://example.com/", "--ca-bundle", ca + ".missing"}, "--ca-bundle:"},
		{[]string{"webhook", "manifest", "--url", "https://example.com/", "-o", "table"}, `--output "table"`},
		{[]string{"webhook", "install", "--url", "http://example.com/"}, `scheme "http"`},
	} {
		out, errOut, code := nodetide(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.msg) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want an error naming %q", tc.args, code, out, errOut, tc.msg)
		}
	}
}

// TestWebhookInstallUninstall on the local control plane: install creates
// the one object, a second install updates it, uninstall deletes it; an
// object of the same name nodetide did not make is left alone.
func TestWebhookInstallUninstall(t *testing.T) {
	cp := testbed.Cluster(t)
	ctx := context.Background()
	api := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	kc := "--kubeconfig=" + cp.KubeconfigPath
	for _, url := range []string{"https://127.0.0.1:1/a", "https://127.0.0.1:1/b"} {
		if _, errOut, code := nodetide(t, "webhook", "install", kc, "--url", url); code != 0 {
			t.Fatalf("install: exit %d: %s", code, errOut)
		}
		got, err := api.Get(ctx, trigger.WebhookConfigName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *got.Webhooks[0].ClientConfig.URL != url {
			t.Errorf("installed URL %s, want %s", *got.Webhooks[0].ClientConfig.URL, url)
		}
	}
	if out, errOut, code := nodetide(t, "webhook", "uninstall", kc); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("uninstall: exit %d: %s %s", code, out, errOut)
	}
	if _, err := api.Get(ctx, trigger.WebhookConfigName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after uninstall: %v, want not found", err)
	}
	if out, _, code := nodetide(t, "webhook", "uninstall", kc); code != 0 || !strings.Contains(out, "not installed") {
		t.Errorf("second uninstall: exit %d: %s", code, out)
	}

	foreign := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: trigger.WebhookConfigName}}
	if _, err := api.Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Delete(context.Background(), trigger.WebhookConfigName, metav1.DeleteOptions{}) })
	for _, args := range [][]string{{"webhook", "install", kc, "--url", "https://127.0.0.1:1/"}, {"webhook", "uninstall", kc}} {
		if _, errOut, code := nodetide(t, args...); code == 0 || !strings.Contains(errOut, "not made by nodetide") {
			t.Errorf("%v over a foreign object: exit %d: %s", args, code, errOut)
		}
	}
	if got, err := api.Get(ctx, trigger.WebhookConfigName, metav1.GetOptions{}); err != nil || len(got.Webhooks) != 0 {
		t.Errorf("the foreign object was changed: %v %v", got, err)
	}
}
