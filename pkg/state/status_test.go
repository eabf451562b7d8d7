package state_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/state"
)

func TestStatusRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := t.Context()
		a, b := open("a").(state.StatusStore), open("b").(state.StatusStore)
		if _, err := a.GetStatus(ctx, "evaluate"); !errors.Is(err, state.ErrNoStatus) {
			t.Fatalf("GetStatus before any write = %v, want ErrNoStatus", err)
		}
		// The largest document accepted is stored whole (dynalite enforces
		// DynamoDB's 400 KB item limit).
		big := []byte(`{"x":"` + strings.Repeat("y", state.MaxStatusSize-8) + `"}`)
		for _, doc := range [][]byte{[]byte(`{"cycle":1}`), big} {
			if err := a.PutStatus(ctx, "evaluate", doc); err != nil {
				t.Fatalf("PutStatus of %d bytes: %v", len(doc), err)
			}
			got, err := a.GetStatus(ctx, "evaluate")
			if err != nil || !bytes.Equal(got, doc) {
				t.Fatalf("GetStatus = %d bytes, %v; want the %d bytes written", len(got), err, len(doc))
			}
		}
		// Too large: refused, the stored one unchanged.
		err := a.PutStatus(ctx, "evaluate", append(big, ' '))
		if err == nil || !strings.Contains(err.Error(), "over the") {
			t.Fatalf("PutStatus over the limit = %v, want a refusal", err)
		}
		if got, _ := a.GetStatus(ctx, "evaluate"); !bytes.Equal(got, big) {
			t.Fatal("a refused PutStatus changed the stored status")
		}
		// Another cluster in the same table sees none of it.
		if _, err := b.GetStatus(ctx, "evaluate"); !errors.Is(err, state.ErrNoStatus) {
			t.Fatalf("other cluster's GetStatus = %v, want ErrNoStatus", err)
		}
	})
}
