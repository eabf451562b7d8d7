package config

import (
	"regexp"
	"strings"
	"testing"
)

func TestLifecycleHookName(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9\-_/]{1,255}$`)
	long := strings.Repeat("c", 300)
	tests := []struct{ cluster, want string }{
		{"prod", "nodetide-drain-prod"},
		{"team_a/prod-2", "nodetide-drain-team_a/prod-2"},
		{"prod.eu", "nodetide-drain-prod-eu-"}, // a hash follows
		{long, "nodetide-drain-ccc"},
	}
	for _, tt := range tests {
		got := LifecycleHookName(tt.cluster)
		if !strings.HasPrefix(got, tt.want) || !valid.MatchString(got) {
			t.Errorf("LifecycleHookName(%.20q) = %q, want a valid hook name starting %q", tt.cluster, got, tt.want)
		}
		if again := LifecycleHookName(tt.cluster); again != got {
			t.Errorf("LifecycleHookName(%.20q) not deterministic: %q, %q", tt.cluster, got, again)
		}
	}
	// Names that differ only where AWS allows no character keep apart.
	if a, b := LifecycleHookName("prod.eu"), LifecycleHookName("prod-eu"); a == b {
		t.Errorf("prod.eu and prod-eu share hook %q", a)
	}
	if a, b := LifecycleHookName(long), LifecycleHookName(long+"d"); a == b {
		t.Errorf("two long names share hook %q", a)
	}
}
