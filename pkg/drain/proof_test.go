package drain_test

import (
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/drain"
)

// An EventBridge replay (its envelope's replay-name) is kept on every
// interruption the event names, so the handler can tell it from a live one.
func TestParseEventKeepsTheReplay(t *testing.T) {
	for _, file := range []string{"drain-spot-interruption.json", "drain-rebalance.json", "drain-scheduled-maintenance.json"} {
		live := sample(t, file)
		replayed := strings.Replace(live, `"version": "0",`, `"version": "0", "replay-name": "nightly",`, 1)
		for _, tt := range []struct {
			payload string
			replay  bool
		}{{live, false}, {replayed, true}} {
			ev, err := drain.ParseEvent([]byte(tt.payload))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			ins := ev.Interruptions()
			if len(ins) == 0 {
				t.Fatalf("%s: no interruption", file)
			}
			for _, in := range ins {
				if in.Replay != tt.replay {
					t.Errorf("%s (replay %t): interruption %+v", file, tt.replay, in)
				}
			}
		}
	}
}
