package schedule

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"
)

// FuzzParse feeds documents through Parse, Validate and the cron search.
// Whatever the input: nothing panics; a parsed document encodes and parses
// back to itself; a valid schedule's cron parses and fires; Next is
// strictly increasing, every time it finds is a fire time by the documented
// rules, and Prev and Due agree with it (no fire time in between is
// skipped).
//
// Run it longer with: go test -run '^$' -fuzz FuzzParse ./pkg/schedule/
func FuzzParse(f *testing.F) {
	daytime, err := os.ReadFile("testdata/daytime.json")
	if err != nil {
		f.Fatal(err)
	}
	springAms := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC).Unix()
	fallAms := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC).Unix()
	fallNYC := time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC).Unix()
	for _, seed := range []struct {
		doc   string
		start int64
	}{
		{string(daytime), 0},
		{designExample, springAms},
		{`{"name": "a", "cron": "30 2 * * *", "timezone": "Europe/Amsterdam", "desiredCapacity": 1}`, springAms},
		{`{"name": "a", "cron": "0 30 2 * * *", "timezone": "Europe/Amsterdam", "desiredCapacity": 1}`, fallAms},
		{`{"name": "a", "cron": "* * * * *", "timezone": "Europe/Amsterdam", "desiredCapacity": 1}`, fallAms},
		{`{"name": "a", "cron": "*/15 1 * * *", "timezone": "America/New_York", "desiredCapacity": 1}`, fallNYC},
		{`{"name": "a", "cron": "15 2 * * *", "timezone": "Australia/Lord_Howe", "desiredCapacity": 1}`, 1790000000},
		{`{"name": "a", "cron": "0 0 29 2 *", "desiredCapacity": 1}`, 4000000000},
		{`{"name": "a", "cron": "0 0 1 2 1", "desiredCapacity": 1}`, 1},
		{`{"name": "a", "cron": "0 0 */31 2 MON", "desiredCapacity": 1}`, 1},
		{`{"name": "a", "cron": "@weekly", "timezone": "Pacific/Apia", "desiredCapacity": 1}`, 1325239200},
		{`{"name": "a", "cron": "0 0 0 31 2 ?", "desiredCapacity": 1}`, 0},
		{`{"name": "a", "cron": "*/7 */5 */3 */11 */2 */3", "desiredCapacity": 1}`, -86400},
		{`[{"name": "a"}]`, 0},
		{`{"name": "a", "nodeGroups": [{"name": "g", "min": 5, "max": 1}], "cron": "x"}`, 0},
		{`{"name": "a", "name": "b"}`, 0},
		{`{"Cron": "* * * * *"}`, 0},
	} {
		f.Add([]byte(seed.doc), seed.start)
	}
	f.Fuzz(func(t *testing.T, data []byte, start int64) {
		if len(data) > 4096 {
			return
		}
		s, err := Parse(data)
		if err != nil {
			return
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", s, err)
		}
		again, err := Parse(enc)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip: %s parsed as %+v, %v; want %+v", enc, again, err, s)
		}
		validErr := Validate(s, []string{"workers"})
		var ve *ValidationError
		if validErr != nil && !errors.As(validErr, &ve) {
			t.Fatalf("Validate returned %T, want *ValidationError", validErr)
		}
		c, cronErr := s.ParseCron()
		if validErr == nil && cronErr != nil {
			t.Fatalf("valid schedule, but its cron doesn't parse: %v", cronErr)
		}
		if cronErr != nil {
			return
		}
		checkFireTimes(t, c, start)
	})
}

// checkFireTimes follows Next from start (brought into 1900-2200) and checks
// each fire time.
func checkFireTimes(t *testing.T, c Cron, start int64) {
	const lo, hi = -2208988800, 7258118400 // 1900 and 2200
	span := int64(hi - lo)
	start = lo + ((start-lo)%span+span)%span
	prev := time.Unix(start, 0)
	for range 12 {
		next := c.Next(prev)
		if next.IsZero() {
			t.Fatalf("%q in %s: no fire time after %s", c, c.Location(), prev)
		}
		if !next.After(prev) {
			t.Fatalf("%q in %s: Next(%s) = %s, not after it", c, c.Location(), prev, next)
		}
		if !isFireTime(c, next) {
			t.Fatalf("%q in %s: Next(%s) = %s does not match", c, c.Location(), prev, next)
		}
		if p := c.Prev(next); p.After(prev) {
			t.Fatalf("%q in %s: Prev(%s) = %s, after %s: Next skipped it", c, c.Location(), next, p, prev)
		}
		if d, ok := c.Due(prev, next); !ok || !d.Equal(next) {
			t.Fatalf("%q in %s: Due(%s, %s) = %s, %v; want the end", c, c.Location(), prev, next, d, ok)
		}
		if d, ok := c.Due(prev, next.Add(-time.Nanosecond)); ok {
			t.Fatalf("%q in %s: Due(%s, just before %s) = %s, but Next found nothing there", c, c.Location(), prev, next, d)
		}
		prev = next
	}
}

// isFireTime applies the documented rules to one instant, by brute force:
// its wall time matches (and, for fixed times, the clock did not show it
// before), or it ends a gap holding a matching wall time.
func isFireTime(c Cron, at time.Time) bool {
	if at.Nanosecond() != 0 {
		return false
	}
	if c.matchesWall(at) {
		return !c.fixed || !shownBefore(at)
	}
	_, o := at.Zone()
	_, p := at.Add(-time.Second).Zone()
	for w := at.Unix() + int64(p); w < at.Unix()+int64(o); w++ {
		if c.matchesWall(time.Unix(w, 0).UTC()) {
			return true
		}
	}
	return false
}

// FuzzCron is FuzzParse's cron half on its own, so the fuzzer mutates
// expressions directly: any expression that parses fires, in order, by the
// rules, in zones with every kind of transition.
func FuzzCron(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "30 2 * * *", "0 30 2 * * *", "*/15 1-3 * * *", "0 0 29 2 *",
		"0 0 1 2 1", "0 0 */31 2 MON", "@weekly", "0 0 0 31 2 ?", "5/20 */7 1,15 jan-mar sat,sun",
		"59 59 23 31 12 *", "0 0 13 * 5", "* * * * * *",
	} {
		f.Add(seed, uint8(0), int64(1774745400))
		f.Add(seed, uint8(1), int64(1792880000))
	}
	zones := []string{"Europe/Amsterdam", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Kathmandu", "UTC"}
	f.Fuzz(func(t *testing.T, expr string, zone uint8, start int64) {
		if len(expr) > 256 {
			return
		}
		c, err := ParseCron(expr, mustZone(t, zones[int(zone)%len(zones)]))
		if err != nil {
			var ce *CronError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseCron(%q) error %v is not a *CronError", expr, err)
			}
			return
		}
		checkFireTimes(t, c, start)
	})
}
