package providers_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// A kwok group over zones places each new Node as an Auto Scaling Group
// does: in the zone with the fewest of the group's Nodes.
func TestKwokZonesBalance(t *testing.T) {
	cp := testbed.Cluster(t)
	name := "zn-" + randomHex(6)
	tpl := snapshot.Template{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
	}}
	zones := []string{"zone-c", "zone-a", "zone-b"}
	g := kwok.New(cp.Client, name, 0, 10, tpl).WithZones(zones)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cp.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + name}); err != nil {
			t.Errorf("delete the group's nodes: %v", err)
		}
	})
	if got := providers.Zones(g, tpl); !slices.Equal(got, []string{"zone-a", "zone-b", "zone-c"}) {
		t.Fatalf("zones = %v", got)
	}
	perZone := func() map[string]int {
		list, err := cp.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + name})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, n := range list.Items {
			out[n.Labels[corev1.LabelTopologyZone]]++
		}
		return out
	}
	// Two nodes: two different zones. Four more: two in each.
	if err := g.IncreaseSize(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	if got := perZone(); len(got) != 2 {
		t.Fatalf("after 2 nodes: per zone %v, want two zones with one each", got)
	}
	if err := g.IncreaseSize(t.Context(), 4); err != nil {
		t.Fatal(err)
	}
	if got := perZone(); got["zone-a"] != 2 || got["zone-b"] != 2 || got["zone-c"] != 2 {
		t.Fatalf("after 6 nodes: per zone %v, want 2 in each", got)
	}
}

// plain is a group that does not report zones itself (Scaleway, Kamatera).
type plain struct{ providers.NodeGroup }

// Without a provider answer, a group's zone is its template's zone label;
// a narrowed group still answers with its provider's zones.
func TestZonesFallBackToTheTemplate(t *testing.T) {
	tpl := snapshot.Template{Labels: map[string]string{corev1.LabelTopologyZone: "fr-par-2"}}
	if got := providers.Zones(plain{}, tpl); !slices.Equal(got, []string{"fr-par-2"}) {
		t.Errorf("zones from the template label = %v", got)
	}
	if got := providers.Zones(plain{}, snapshot.Template{}); got != nil {
		t.Errorf("zones without a label = %v, want none", got)
	}
	g, err := providers.Narrow(kwok.New(nil, "g", 0, 5, snapshot.Template{}).WithZones([]string{"b", "a", "b"}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := providers.Zones(g, snapshot.Template{}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("zones through a narrowing = %v, want [a b]", got)
	}
}
