package setup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/providers/kwok"
	"github.com/nodetide/nodetide/pkg/setup"
)

// TestConcurrentSizeWritersKeepBounds runs every writer of a group's size
// at once, as separately wired functions would (each with its own process
// state, sharing only DynamoDB and the cluster): twenty runs of a schedule
// whose desired size is 3 must leave the group at exactly 3, however they
// interleave, and adds racing them must never take it past its max of 5.
func TestConcurrentSizeWritersKeepBounds(t *testing.T) {
	l := newLive(t, "race", 0, 5, "")
	cp, pool, cfg := l.cp, l.pool, l.cfg
	ctx := context.Background()
	log := slog.New(slog.NewJSONHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	count := func() int {
		list, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.GroupLabel + "=" + pool})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}

	// Each writer is wired on its own, as one Lambda instance each.
	const runs = 12
	handlers := make([]func(string) error, runs)
	for i := range handlers {
		sched, err := setup.Schedules(ctx, cfg, "", &setup.AWS{}, log)
		if err != nil {
			t.Fatal(err)
		}
		handlers[i] = func(payload string) error {
			_, err := sched.Handle(ctx, json.RawMessage(payload))
			return err
		}
	}
	if err := handlers[0](`{"action":"put","schedule":{"name":"grow","cron":"0 0 1 1 *","nodeGroups":[{"name":"` + pool + `","desired":3}]}}`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, h := range handlers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h(`{"action":"run","name":"grow"}`); err != nil {
				t.Errorf("run: %v", err)
			}
		}()
	}
	wg.Wait()
	if got := count(); got != 3 {
		t.Fatalf("after %d concurrent runs of a schedule with desired 3 the group has %d nodes", runs, got)
	}

	// Adds of 1 from separate processes, racing: the group reaches its max
	// and not one node more; the rest are refused as above max.
	var mu sync.Mutex
	refused := 0
	for i := range 6 {
		ev, err := setup.Evaluator(ctx, cfg, "", &setup.AWS{}, log, fmt.Sprintf("adder-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		groups, err := ev.Groups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		g := groups[0]
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The provider call evaluate's Add and scale-up make, without
			// the evaluate lease that would keep two adds of one function
			// apart anyway: the group's own lock must hold.
			err := g.IncreaseSize(ctx, 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, providers.ErrAboveMax):
				refused++
			case err != nil:
				t.Errorf("add: %v", err)
			}
		}()
	}
	wg.Wait()
	if got := count(); got != 5 || refused != 4 {
		t.Fatalf("after 6 racing adds of 1 to a group of 3 with max 5: %d nodes, %d refused; want 5 and 4", got, refused)
	}
}
