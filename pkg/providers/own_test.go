package providers_test

import (
	"testing"

	"github.com/nodetide/nodetide/pkg/providers"
)

// TestOwn: beneath a config narrowing and a schedule's, Own finds the
// provider's group and its own minimum.
func TestOwn(t *testing.T) {
	f := &fixedGroup{target: 3}
	if providers.Own(f) != providers.NodeGroup(f) {
		t.Error("Own of a provider group is not itself")
	}
	config, err := providers.Narrow(f, ptr(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := (&providers.Narrowing{Min: ptr(3), From: "schedule day"}).Narrow(config)
	if err != nil {
		t.Fatal(err)
	}
	if sched.Bounds().Min != 3 {
		t.Fatalf("narrowed min = %d, want 3", sched.Bounds().Min)
	}
	if own := providers.Own(sched); own != providers.NodeGroup(f) || own.Bounds().Min != 0 {
		t.Errorf("Own = %#v (min %d), want the provider's group, min 0", own, own.Bounds().Min)
	}
}
