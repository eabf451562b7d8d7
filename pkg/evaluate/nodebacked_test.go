package evaluate_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
)

type countingTransport struct {
	rt    http.RoundTripper
	lists *atomic.Int32
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes" && r.URL.Query().Get("watch") != "true" {
		c.lists.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// A cycle takes a kwok group's target and instances from its own read of
// the Nodes: the group lists none of its Nodes again, and what it reports
// is what the group's own TargetSize and Instances list (a Node being
// deleted is an instance going, not part of the target). Under the bounds
// and the guard, as evaluate's groups are wrapped.
func TestSnapshotReadsKwokGroupFromTheClusterRead(t *testing.T) {
	f := newFixture(t, 0, 10, nil)
	ctx := t.Context()
	var lists atomic.Int32
	cfg := rest.CopyConfig(f.cp.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &lists} }
	counted, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := f.group.Template(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := kwok.New(counted, f.pool, 0, 10, tpl)
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	// A fourth Node, held by a finalizer while it is deleted.
	going := kwok.NodeObject(f.pool, f.pool+"-going", tpl)
	going.Finalizers = []string{"nodetide.io/test-hold"}
	if _, err := f.cp.Client.CoreV1().Nodes().Create(ctx, going, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = f.cp.Client.CoreV1().Nodes().Patch(context.Background(), going.Name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	if err := f.cp.Client.CoreV1().Nodes().Delete(ctx, going.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.cp.WaitFor(t, time.Minute, "three of the group's Nodes Ready", func(ctx context.Context) (bool, error) {
		insts, err := g.Instances(ctx)
		running := 0
		for _, in := range insts {
			if in.State == providers.StateRunning {
				running++
			}
		}
		return running == 3, err
	})
	wantTarget, err := g.TargetSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantInsts, err := g.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wantTarget != 3 || len(wantInsts) != 4 {
		t.Fatalf("the group lists target %d and %d instances, want 3 and 4", wantTarget, len(wantInsts))
	}
	wantIDs := make([]string, 0, len(wantInsts))
	for _, in := range wantInsts {
		wantIDs = append(wantIDs, in.ProviderID)
	}
	slices.Sort(wantIDs)

	eight := 8
	narrowed, err := providers.Narrow(g, nil, &eight)
	if err != nil {
		t.Fatal(err)
	}
	for _, reader := range []bool{false, true} {
		ev := f.evaluator("snap")
		ev.Groups = func(context.Context) ([]providers.NodeGroup, error) {
			return []providers.NodeGroup{narrowed}, nil
		}
		if reader {
			ev.Reader = k8s.NewReader(f.cp.Client, nil)
		}
		lists.Store(0)
		snap, _, err := ev.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := lists.Load(); n != 0 {
			t.Errorf("reader %v: the group listed Nodes %d times in a snapshot, want 0 (the cycle read them)", reader, n)
		}
		got := snap.NodeGroups[0]
		if got.TargetSize != wantTarget || !slices.Equal(got.Instances, wantIDs) || got.MaxSize != 8 {
			t.Errorf("reader %v: snapshot has target %d, instances %v, max %d; want %d, %v, 8",
				reader, got.TargetSize, got.Instances, got.MaxSize, wantTarget, wantIDs)
		}
		if !slices.ContainsFunc(got.Instances, func(id string) bool { return strings.HasSuffix(id, going.Name) }) {
			t.Errorf("reader %v: the Node being deleted is not among the instances %v", reader, got.Instances)
		}
	}
}
