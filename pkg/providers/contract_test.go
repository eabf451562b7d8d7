package providers_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/fake/fakekamatera"
	"github.com/nodetide/nodetide/internal/fake/fakescaleway"
	"github.com/nodetide/nodetide/internal/providertest"
	"github.com/nodetide/nodetide/internal/testbed"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// The same contract, run against every provider.

func TestContractKwok(t *testing.T) {
	providertest.Run(t, kwokFactory)
}
func TestContractAWS(t *testing.T)      { providertest.Run(t, awsFactory) }
func TestContractScaleway(t *testing.T) { providertest.Run(t, scalewayFactory) }
func TestContractKamatera(t *testing.T) { providertest.Run(t, kamateraFactory) }

// kwokFactory: a kwok group of its own on the shared control plane; kwok
// makes its Nodes Ready by itself.
func kwokFactory(t *testing.T, spec providertest.Spec) *providertest.Bed {
	cp := testbed.Cluster(t)
	name := "ct-" + randomHex(8)
	tpl := snapshot.Template{
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		},
		Labels: spec.Labels,
	}
	g := kwok.New(cp.Client, name, spec.MinSize, spec.MaxSize, tpl)
	other := kwok.NodeObject(name+"-other", name+"-other-0", tpl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, group := range []string{name, name + "-other"} {
			err := cp.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + group})
			if err != nil {
				t.Errorf("delete the nodes of group %s: %v", group, err)
			}
		}
	})
	if _, err := cp.Client.CoreV1().Nodes().Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a node of another group: %v", err)
	}
	if spec.Size > 0 {
		if err := g.IncreaseSize(t.Context(), spec.Size); err != nil {
			t.Fatalf("start the group with %d nodes: %v", spec.Size, err)
		}
	}
	return &providertest.Bed{
		Provider:     providers.Static{g},
		Group:        name,
		StartsAtOnce: true,
		UnknownID:    kwok.ProviderIDPrefix + name + "-missing",
		OtherGroupID: other.Spec.ProviderID,
		IDPrefix:     kwok.ProviderIDPrefix,
		Timeout:      time.Minute,
	}
}

// awsFactory: an ASG of the double (machines launch Pending; Boot makes them
// InService), next to another ASG.
func awsFactory(t *testing.T, spec providertest.Spec) *providertest.Bed {
	d := fakeaws.New()
	t.Cleanup(d.Close)
	const asg = "nodes-contract"
	d.AddGroup(awsGroup(d, asg, spec.MinSize, spec.MaxSize, spec.Size, spec.Labels))
	d.AddGroup(fakeaws.Group{Name: "nodes-other", MaxSize: 3, DesiredCapacity: 1})
	other, _ := d.Group("nodes-other")
	return &providertest.Bed{
		Provider: awsProvider(t, d, asg, newAWSCreds()),
		Group:    asg,
		Boot:     func(testing.TB) { d.Boot(asg) },
		// Capacity AWS has started no machine for: launches that fail.
		Unstarted: func(t testing.TB, g providers.NodeGroup, n int) {
			t.Helper()
			if err := d.FailLaunches(asg, "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a)."); err != nil {
				t.Fatal(err)
			}
			if err := g.IncreaseSize(t.Context(), n); err != nil {
				t.Fatalf("IncreaseSize(%d) with failing launches: %v", n, err)
			}
		},
		StartsAtOnce: true,
		UnknownID:    "aws:///us-east-1a/i-0123456789abcdef0",
		OtherGroupID: other.Instances[0].ProviderID(),
		IDPrefix:     "aws:///",
		Mutations: func() int {
			return d.Calls("SetDesiredCapacity") + d.Calls("TerminateInstanceInAutoScalingGroup")
		},
	}
}

// scalewayFactory: a Kapsule pool of the double (nodes start "creating";
// Boot makes them ready), next to another pool.
func scalewayFactory(t *testing.T, spec providertest.Spec) *providertest.Bed {
	key := newUUID()
	d := fakescaleway.New(fakescaleway.Options{SecretKey: key})
	t.Cleanup(d.Close)
	pool := d.AddPool(fakescaleway.PoolSpec{Name: "contract", Size: spec.Size, MinSize: spec.MinSize, MaxSize: spec.MaxSize, Labels: spec.Labels})
	other := d.AddPool(fakescaleway.PoolSpec{Name: "other", Size: 1, MaxSize: 3})
	return &providertest.Bed{
		Provider: scwProvider(t, d, pool.Name, key),
		Group:    pool.Name,
		Boot:     func(testing.TB) { d.Boot(pool.ID) },
		Unstarted: func(t testing.TB, g providers.NodeGroup, n int) {
			t.Helper()
			if err := g.IncreaseSize(t.Context(), n); err != nil {
				t.Fatalf("IncreaseSize(%d): %v", n, err)
			}
		},
		UnknownID:    "scaleway://instance/" + pool.Zone.String() + "/" + newUUID(),
		OtherGroupID: d.Nodes(other.ID)[0].ProviderID,
		IDPrefix:     "scaleway://",
		Mutations: func() int {
			return d.Count(fakescaleway.OpUpdatePool) + d.Count(fakescaleway.OpDeleteNode)
		},
	}
}

// kamateraFactory: a node group of the double (creates stay queued until
// Complete, which is Boot), next to a server of another group.
func kamateraFactory(t *testing.T, spec providertest.Spec) *providertest.Bed {
	clientID, secret := randomHex(32), randomHex(32)
	d := newKamateraDouble(t, clientID, secret)
	cfg := kamateraConfig{url: d.URL(), cluster: "contract", group: "workers", namePrefix: "ct",
		minSize: spec.MinSize, maxSize: spec.MaxSize, labels: spec.Labels}
	for i := range spec.Size {
		d.AddServer(fakekamatera.Server{Name: "ct-start" + string(rune('a'+i)), Datacenter: "EU", CPU: "2A", RAM: "4096", Power: true, Tags: cfg.tags()})
	}
	d.AddServer(fakekamatera.Server{Name: "ot-1", Datacenter: "EU", CPU: "2A", RAM: "4096", Power: true,
		Tags: kamateraConfig{cluster: cfg.cluster, group: "other"}.tags()})
	return &providertest.Bed{
		Provider: kamateraProvider(t, cfg, clientID, secret, nil),
		Group:    cfg.group,
		Boot:     func(testing.TB) { d.CompleteAll() },
		Unstarted: func(t testing.TB, g providers.NodeGroup, n int) {
			t.Helper()
			if err := g.IncreaseSize(t.Context(), n); err != nil {
				t.Fatalf("IncreaseSize(%d): %v", n, err)
			}
		},
		UnknownID:    "kamatera://ct-missing",
		OtherGroupID: "kamatera://ot-1",
		IDPrefix:     "kamatera://",
		Mutations: func() int {
			return d.RequestCount("POST", "/service/server") + d.RequestCount("POST", "/service/server/terminate")
		},
	}
}

// TestContractNarrowed: config bounds narrower than the cloud's, applied
// with providers.Narrow as pkg/setup does for Kamatera, keep the contract.
func TestContractNarrowed(t *testing.T) {
	providertest.Run(t, func(t *testing.T, spec providertest.Spec) *providertest.Bed {
		wide := spec
		wide.MinSize, wide.MaxSize = 0, spec.MaxSize+5
		bed := kamateraFactory(t, wide)
		bed.Provider = narrowing{bed.Provider, providers.NewNarrowing(&spec.MinSize, &spec.MaxSize)}
		return bed
	})
}

// narrowing narrows every group of a provider, as setup.NodeGroups does.
type narrowing struct {
	providers.Provider
	bounds *providers.Narrowing
}

func (n narrowing) NodeGroups(ctx context.Context) ([]providers.NodeGroup, error) {
	groups, err := n.Provider.NodeGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]providers.NodeGroup, 0, len(groups))
	for _, g := range groups {
		ng, err := n.bounds.Narrow(g)
		if err != nil {
			return nil, err
		}
		out = append(out, ng)
	}
	return out, nil
}
