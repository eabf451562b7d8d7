package setup

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// TestEvaluatorGroupsCarryConfigPrice: the groups evaluate lists carry
// their config entry's price, and a group whose entry sets none has none.
func TestEvaluatorGroupsCarryConfigPrice(t *testing.T) {
	t.Setenv(EnvDrainStateMachine, "")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	// Listing kwok groups reaches no server, so the address need not answer.
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
cluster: {name: c}
state: {memory: {}}
nodeGroups:
  - {name: a, provider: kwok, minSize: 0, maxSize: 3, price: {perHour: 0.192, currency: EUR}, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}
  - {name: b, provider: kwok, minSize: 0, maxSize: 3, kwok: {template: {allocatable: {cpu: 2, memory: 4Gi}}}}
`), "nodetide.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := Evaluator(context.Background(), cfg, kubeconfig, &AWS{}, slog.New(slog.DiscardHandler), "test")
	if err != nil {
		t.Fatal(err)
	}
	groups, err := ev.Groups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := snapshot.Price{PerHour: 0.192, Currency: "EUR", Source: snapshot.PriceConfig}
	for _, g := range groups {
		p := g.Bounds().Price
		switch g.Name() {
		case "a":
			if p == nil || *p != want {
				t.Errorf("group a: price %+v, want %+v", p, want)
			}
			if g.Bounds().Max != 3 {
				t.Errorf("group a: max %d, want 3", g.Bounds().Max)
			}
		case "b":
			if p != nil {
				t.Errorf("group b: price %+v, want none", p)
			}
		}
	}
}
